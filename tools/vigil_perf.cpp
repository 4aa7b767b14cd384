// vigil-perf: bandwidth and latency of vigil's collectives, measured the nccl-tests way (see
// --help and docs/performance.md), through the public C API only, so it measures what a user
// of libvigil.so gets. Every rank runs it under a launcher; rank 0 prints.
//
// Exit codes: 0 every call succeeded and every checked output was right, 1 a call failed or
// an output was wrong, 2 bad usage.

#include <vigil/vigil.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "perf_colls.hpp"
#include "perf_data.hpp"
#include "perf_options.hpp"

namespace {

using namespace vigil::perf;
using Clock = std::chrono::steady_clock;

constexpr int kExitUsage = 2;

// A call that failed, or memory that could not be had: the run stops on this rank, and the
// launcher stops the others.
struct Failure {
  std::string what;
};

void require(vigilResult_t result, const std::string& what) {
  // The thread's last error (comm NULL) also covers group calls, which belong to no comm.
  if (result != vigilSuccess) {
    throw Failure{what + " failed: " + vigilGetErrorString(result) + ": " + vigilGetLastError(nullptr)};
  }
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

// Fresh pages cost 10-18 us each on first touch here, so buffers are allocated once at the
// largest size and written through before anything is timed.
Buffer allocateTouched(size_t bytes) {
  constexpr size_t kPage = 4096;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  Buffer buffer(std::aligned_alloc(kPage, rounded));
  if (!buffer) throw Failure{"allocating " + std::to_string(rounded) + " bytes failed"};
  std::memset(buffer.get(), 0, rounded);
  return buffer;
}

// The nccl-tests "bytes" of a row: the request rounded down to a multiple of n * element size,
// so that every collective splits it evenly and all of one run's rows have the same sizes.
size_t roundedBytes(size_t requested, int nranks, vigilDataType_t dtype) {
  const size_t unit = static_cast<size_t>(nranks) * dtypeInfo(dtype).size;
  return requested / unit * unit;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

struct Row {
  const CollInfo* coll;
  size_t bytes;
  size_t count;
  vigilDataType_t dtype;
  vigilRedOp_t op;
  int root;                                // -1 when the collective has none
  double seconds, minSeconds, maxSeconds;  // per call
  double algbw, busbw;                     // GB/s
  long long wrong;                         // -1: not checked
  const char* opText() const { return coll->reduction ? opName(op) : "none"; }
};

class Bench {
 public:
  Bench(const Options& options, vigilComm_t comm, int rank, int nranks, void* send, void* recv)
      : options_(options), comm_(comm), rank_(rank), nranks_(nranks), send_(send), recv_(recv) {}

  Row measure(Coll coll, size_t bytes, vigilDataType_t dtype, vigilRedOp_t op) {
    const CollInfo& info = collInfo(coll);
    const size_t count = countFor(coll, bytes, nranks_, dtype);
    const Call call{coll, comm_, rank_, nranks_, options_.root, dtype, op, count, send_, recv_};
    const Pattern pattern(dtype, info.reduction, op, nranks_);
    what_ = std::string(info.name) + " of " + std::to_string(bytes) + " bytes (" + dtypeInfo(dtype).name +
            (info.reduction ? std::string(", ") + opName(op) : std::string()) + ")";
    fillInputs(call, pattern);
    for (int i = 0; i < options_.warmup; ++i) require(runCall(call), what_);
    std::vector<double> samples;
    for (int s = 0; s < options_.samples; ++s) samples.push_back(sampleSeconds(call));

    Row row{&info, bytes, call.count, dtype, op, info.rooted ? options_.root : -1, median(samples), 0, 0, 0, 0, -1};
    row.minSeconds = *std::min_element(samples.begin(), samples.end());
    row.maxSeconds = *std::max_element(samples.begin(), samples.end());
    row.algbw = row.seconds > 0 ? static_cast<double>(bytes) / row.seconds / 1e9 : 0;
    row.busbw = row.algbw * busBandwidthFactor(coll, nranks_);
    if (options_.check) row.wrong = wrongOverRanks(call, pattern);
    return row;
  }

 private:
  // ITERS calls after a barrier; the slowest rank's time sets the sample, since a collective
  // is only as done as its last rank.
  double sampleSeconds(const Call& call) {
    require(vigilBarrier(comm_, nullptr), "barrier before " + what_);
    const auto start = Clock::now();
    for (int i = 0; i < options_.iters; ++i) require(runCall(call), what_);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    require(vigilAllReduce(&seconds, &seconds, 1, vigilFloat64, vigilMax, comm_, nullptr),
            "allreduce of the sample time after " + what_);
    return seconds / options_.iters;
  }

  long long wrongOverRanks(const Call& call, const Pattern& pattern) {
    prepareCheck(call, pattern);
    require(runCall(call), what_ + " (checked call)");
    uint64_t wrong = countWrongOutputs(call, pattern);
    require(vigilAllReduce(&wrong, &wrong, 1, vigilUint64, vigilSum, comm_, nullptr),
            "allreduce of the wrong-element counts after " + what_);
    return static_cast<long long>(wrong);
  }

  const Options& options_;
  vigilComm_t comm_;
  int rank_, nranks_;
  void* send_;
  void* recv_;
  std::string what_;  // the call being measured, for error messages
};

// ---- Output (rank 0) ---------------------------------------------------------------------------

void printPreamble(const Options& o, int nranks) {
  std::printf("# vigil-perf: %d ranks, %d samples of %d calls after %d warm-up calls, check %s\n", nranks, o.samples,
              o.iters, o.warmup, o.check ? "on" : "off");
  std::printf("# time: median over samples of the slowest rank's time per call; min and max of the samples\n");
}

void printHeader(const CollInfo& coll) {
  std::printf("#\n# %s\n", coll.name);
  std::printf("# %10s  %12s  %8s  %6s  %5s  %10s  %10s  %10s  %8s  %8s  %6s\n", "size", "count", "type", "redop",
              "root", "time", "min", "max", "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %5s  %10s  %10s  %10s  %8s  %8s  %6s\n", "(B)", "(elements)", "", "", "", "(us)",
              "(us)", "(us)", "(GB/s)", "(GB/s)", "");
}

void printRow(const Row& r) {
  const std::string wrong = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
  std::printf("  %10zu  %12zu  %8s  %6s  %5d  %10.2f  %10.2f  %10.2f  %8.3f  %8.3f  %6s\n", r.bytes, r.count,
              dtypeInfo(r.dtype).name, r.opText(), r.root, r.seconds * 1e6, r.minSeconds * 1e6, r.maxSeconds * 1e6,
              r.algbw, r.busbw, wrong.c_str());
}

// The key set and order are shared with the MPI and Gloo benchmark programs; keep them as is.
void printJson(const Row& r, int nranks) {
  std::printf(
      "{\"lib\":\"vigil\",\"coll\":\"%s\",\"nranks\":%d,\"bytes\":%zu,\"count\":%zu,\"dtype\":\"%s\",\"op\":\"%s\","
      "\"time_us\":%.3f,\"time_us_min\":%.3f,\"time_us_max\":%.3f,\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f,"
      "\"wrong\":%lld}\n",
      r.coll->name, nranks, r.bytes, r.count, dtypeInfo(r.dtype).name, r.opText(), r.seconds * 1e6, r.minSeconds * 1e6,
      r.maxSeconds * 1e6, r.algbw, r.busbw, r.wrong);
}

// Runs every requested row; returns the exit status (0 all right, 1 wrong outputs, 2 nothing to run).
int runAll(const Options& o, vigilComm_t comm, int rank, int nranks) {
  const std::vector<size_t> sizes = requestedSizes(o);
  size_t largest = 0;
  for (vigilDataType_t dtype : o.dtypes) {
    for (size_t size : sizes) largest = std::max(largest, roundedBytes(size, nranks, dtype));
  }
  if (largest == 0) {
    if (rank == 0) {
      std::fprintf(stderr, "vigil-perf: every size rounds down to 0 bytes (a multiple of %d ranks * element size)\n",
                   nranks);
    }
    return kExitUsage;
  }
  Buffer send = allocateTouched(largest);
  Buffer recv = allocateTouched(largest);
  Bench bench(o, comm, rank, nranks, send.get(), recv.get());

  const bool printing = rank == 0;
  if (printing && !o.json) printPreamble(o, nranks);
  bool anyWrong = false;
  for (Coll coll : o.colls) {
    const CollInfo& info = collInfo(coll);
    const bool pointToPoint = coll == Coll::SendRecv || coll == Coll::SendRecvTag || coll == Coll::SendRecvAny;
    if (pointToPoint && nranks < 2) {
      if (printing) std::fprintf(o.json ? stderr : stdout, "# %s skipped: it needs 2 or more ranks\n", info.name);
      continue;
    }
    if (printing && !o.json) printHeader(info);
    // Collectives without a reduction run once per dtype, whatever -o says.
    const std::vector<vigilRedOp_t> ops = info.reduction ? o.ops : std::vector<vigilRedOp_t>{vigilSum};
    double busbwSum = 0;
    int rows = 0;
    for (vigilDataType_t dtype : o.dtypes) {
      for (vigilRedOp_t op : ops) {
        for (size_t size : sizes) {
          const size_t bytes = roundedBytes(size, nranks, dtype);
          if (bytes == 0) continue;
          const Row row = bench.measure(coll, bytes, dtype, op);
          anyWrong |= row.wrong > 0;
          busbwSum += row.busbw;
          ++rows;
          if (printing) {
            o.json ? printJson(row, nranks) : printRow(row);
            std::fflush(stdout);  // rows appear as they are measured, also through a launcher's pipe
          }
        }
      }
    }
    if (printing && !o.json && rows > 0) std::printf("# avg busbw: %.3f GB/s over %d rows\n", busbwSum / rows, rows);
  }
  if (printing && anyWrong) std::fprintf(stderr, "vigil-perf: some outputs were wrong (see the #wrong column)\n");
  return anyWrong ? 1 : 0;
}

}  // namespace

int runMoePerf(int argc, char** argv);        // perf_moe.cpp
int runSymmetricPerf(int argc, char** argv);  // perf_symm.cpp

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "-c") == 0 && std::strncmp(argv[i + 1], "moe", 3) == 0) return runMoePerf(argc, argv);
    if (std::strcmp(argv[i], "-c") == 0 && std::strcmp(argv[i + 1], "symmetric") == 0)
      return runSymmetricPerf(argc, argv);
  }
  const Options options = parseOptions(argc, argv);
  vigilComm_t comm = nullptr;
  if (vigilCommInitFromEnv(&comm) != vigilSuccess) {
    std::fprintf(stderr, "vigil-perf: vigilCommInitFromEnv failed: %s\n", vigilGetLastError(nullptr));
    return 1;
  }
  int rank = 0, nranks = 0;
  if (vigilCommUserRank(comm, &rank) != vigilSuccess || vigilCommCount(comm, &nranks) != vigilSuccess) {
    std::fprintf(stderr, "vigil-perf: querying the communicator failed: %s\n", vigilGetLastError(nullptr));
    vigilCommDestroy(comm);
    return 1;
  }
  if (options.root >= nranks) {
    // Every rank says it: the launcher may stop the others as soon as one exits.
    std::fprintf(stderr, "vigil-perf: rank %d: root %d is outside [0, %d)\n", rank, options.root, nranks);
    vigilCommDestroy(comm);
    return kExitUsage;
  }
  int status = 0;
  try {
    status = runAll(options, comm, rank, nranks);
  } catch (const Failure& failure) {
    std::fprintf(stderr, "vigil-perf: rank %d: %s\n", rank, failure.what.c_str());
    // Abort, not destroy: peers may still wait in the collective this rank gave up on.
    vigilCommAbort(comm);
    return 1;
  }
  // A clean, collective goodbye, so no peer reports this rank as lost.
  if (vigilCommFinalize(comm) != vigilSuccess) {
    std::fprintf(stderr, "vigil-perf: rank %d: vigilCommFinalize failed: %s\n", rank, vigilGetLastError(nullptr));
    status = 1;
  }
  vigilCommDestroy(comm);
  return status;
}
