#include "perf_options.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "perf_colls.hpp"
#include "perf_data.hpp"

namespace vigil::perf {
namespace {

constexpr int kExitUsage = 2;

constexpr const char* kUsage = R"(usage: vigil-perf [options]
Measures vigil's collectives like nccl-tests. Start it with a launcher, e.g.
  vigil-run -n 2 vigil-perf -c allreduce -b 8 -e 64M -f 2
(or torchrun, mpirun, srun: anything vigilCommInitFromEnv understands).

  -c, --coll NAME       allreduce, allgather, reducescatter, alltoall, broadcast, reduce,
                        gather, scatter, sendrecv, a comma-separated list, or all [allreduce];
                        sendrecv_tag (vigilSendRecv) and sendrecv_any (tagged, the receive from
                        any source; odd ranks receive first) when named
  -b, --minbytes SIZE   smallest size [8]; SIZE takes a K, M or G suffix (powers of 1024)
  -e, --maxbytes SIZE   largest size [64M]
  -f, --stepfactor F    multiply the size by F (an integer >= 2) from one row to the next [2]
  -n, --iters N         back-to-back calls per sample [20]
  -w, --warmup_iters N  untimed calls before the samples, per size [5]
  -s, --samples N       timed samples per size; the median is reported [10]
  -d, --datatype TYPE   int8 uint8 int32 uint32 int64 uint64 float16 float32 float64
                        bfloat16, or all [float32]
  -o, --op OP           sum prod max min avg, or all [sum]; reductions only
  -r, --root R          root of broadcast, reduce, gather, scatter [0]
      --json            one JSON object per line and size instead of the table
      --check 0|1       check the results after the timed samples [1]
  -h, --help            print this help

Two other modes take their own options:
  -c moe|moe_dispatch|moe_combine   MoE dispatch/combine against vigilAllToAllV + packing
                                    (--tokens --hidden --topk --experts --impl)
  -c symmetric                      the symmetric heap: put, get (-b -e -f), put-signal
                                    ping-pong, barrier_all, vigilAllReduceSymmetric against
                                    vigilAllReduce, the GEMM kernels (--gemm MxKxN)

Method (the nccl-tests convention):
  bytes   the larger per-rank buffer: allreduce, alltoall, broadcast, reduce, sendrecv send and
          receive `bytes`; allgather and gather receive `bytes` (send bytes/n); reducescatter
          and scatter send `bytes` (receive bytes/n). Each size is rounded down to a multiple
          of n * element size for every collective, so all rows of one run compare; sizes
          that round to 0 are skipped. sendrecv: every rank sends to rank+1 and receives from
          rank-1 in one group. Calls are out-of-place, on the blocking (NULL) stream.
  count   the op's count argument: bytes/size for allreduce, broadcast, reduce, sendrecv;
          bytes/(n*size) for allgather, reducescatter, alltoall (per peer), gather, scatter.
  time    one sample = ITERS back-to-back calls after a barrier, timed on every rank; its
          time is the maximum over ranks / ITERS. time(us) is the median of the samples,
          min and max beside it.
  algbw   bytes / time, in GB/s (1e9 bytes).
  busbw   algbw * factor, as in nccl-tests: allreduce 2(n-1)/n; allgather, reducescatter,
          alltoall, gather, scatter (n-1)/n; broadcast, reduce, sendrecv 1.
  #wrong  after the samples, one more call on freshly filled buffers; the number of output
          elements that differ from the expected values, summed over ranks (exact, except a
          relative 1e-15..8e-3 for avg on floating types). N/A (JSON: -1) with --check 0.
JSON keys, in this order: lib coll nranks bytes count dtype op time_us time_us_min
time_us_max algbw_gbs busbw_gbs wrong ("op" is "none" for collectives without reduction).
Exit status: 0 if every call succeeded and nothing was wrong, 1 otherwise, 2 for bad usage.
)";

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "vigil-perf: %s\nTry 'vigil-perf --help'.\n", message.c_str());
  std::exit(kExitUsage);
}

// A decimal integer with an optional K/M/G suffix (powers of 1024), at least 1.
size_t parseSize(const std::string& option, const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view suffix = std::string_view(text).substr(digits);
  int shift = -1;
  if (suffix.empty()) shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  if (suffix == "M" || suffix == "m") shift = 20;
  if (suffix == "G" || suffix == "g") shift = 30;
  errno = 0;
  const unsigned long long value = digits > 0 ? std::strtoull(text.substr(0, digits).c_str(), nullptr, 10) : 0;
  if (digits == 0 || shift < 0 || errno != 0 || value == 0 || value > (std::numeric_limits<size_t>::max() >> shift)) {
    usageError("bad size for " + option + ": '" + text + "' (expected e.g. 8, 256K, 64M, 1G)");
  }
  return static_cast<size_t>(value) << shift;
}

int parseInt(const std::string& option, const std::string& text, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < lo || value > hi) {
    usageError("bad value for " + option + ": '" + text + "' (expected an integer " + std::to_string(lo) + ".." +
               std::to_string(hi) + ")");
  }
  return static_cast<int>(value);
}

std::vector<Coll> parseColls(const std::string& text) {
  size_t howMany = 0;
  const CollInfo* colls = allColls(&howMany);
  std::vector<Coll> result;
  if (text == "all") {
    for (size_t i = 0; i < howMany; ++i)
      if (colls[i].coll != Coll::SendRecvTag && colls[i].coll != Coll::SendRecvAny) result.push_back(colls[i].coll);
    return result;
  }
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    bool found = false;
    for (size_t i = 0; i < howMany && !found; ++i) {
      if (name == colls[i].name) {
        result.push_back(colls[i].coll);
        found = true;
      }
    }
    if (!found) usageError("unknown collective '" + name + "' (see --help)");
    start = comma + 1;
  }
  return result;
}

std::vector<vigilDataType_t> parseDtypes(const std::string& text) {
  constexpr vigilDataType_t kAll[] = {vigilInt8,   vigilUint8,   vigilInt32,   vigilUint32,  vigilInt64,
                                      vigilUint64, vigilFloat16, vigilFloat32, vigilFloat64, vigilBfloat16};
  if (text == "all") return {std::begin(kAll), std::end(kAll)};
  // nccl-tests' spellings are accepted too, so its command lines carry over.
  const std::string name = text == "float"    ? "float32"
                           : text == "half"   ? "float16"
                           : text == "double" ? "float64"
                           : text == "int"    ? "int32"
                                              : text;
  for (vigilDataType_t type : kAll) {
    if (name == dtypeInfo(type).name) return {type};
  }
  usageError("unknown data type '" + text + "' (see --help)");
}

std::vector<vigilRedOp_t> parseOps(const std::string& text) {
  constexpr vigilRedOp_t kAll[] = {vigilSum, vigilProd, vigilMax, vigilMin, vigilAvg};
  if (text == "all") return {std::begin(kAll), std::end(kAll)};
  for (vigilRedOp_t op : kAll) {
    if (text == opName(op)) return {op};
  }
  usageError("unknown reduction '" + text + "' (expected sum, prod, max, min, avg or all)");
}

}  // namespace

Options parseOptions(int argc, char** argv) {
  Options o;
  o.colls = {Coll::AllReduce};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg == "--json") {
      o.json = true;
      continue;
    }
    // Long options also take their value as --name=VALUE.
    const size_t eq = arg.starts_with("--") ? arg.find('=') : std::string::npos;
    const std::string name = arg.substr(0, eq);
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usageError(arg.starts_with("-") ? "option " + arg + " needs a value" : "unexpected argument '" + arg + "'");
    }
    constexpr int kMaxInt = std::numeric_limits<int>::max();
    if (name == "-c" || name == "--coll") {
      o.colls = parseColls(value);
    } else if (name == "-b" || name == "--minbytes") {
      o.minBytes = parseSize(name, value);
    } else if (name == "-e" || name == "--maxbytes") {
      o.maxBytes = parseSize(name, value);
    } else if (name == "-f" || name == "--stepfactor") {
      o.stepFactor = static_cast<size_t>(parseInt(name, value, 2, 1 << 20));
    } else if (name == "-n" || name == "--iters") {
      o.iters = parseInt(name, value, 1, kMaxInt);
    } else if (name == "-w" || name == "--warmup_iters") {
      o.warmup = parseInt(name, value, 0, kMaxInt);
    } else if (name == "-s" || name == "--samples") {
      o.samples = parseInt(name, value, 1, kMaxInt);
    } else if (name == "-d" || name == "--datatype") {
      o.dtypes = parseDtypes(value);
    } else if (name == "-o" || name == "--op") {
      o.ops = parseOps(value);
    } else if (name == "-r" || name == "--root") {
      o.root = parseInt(name, value, 0, kMaxInt);
    } else if (name == "--check") {
      o.check = parseInt(name, value, 0, 1) == 1;
    } else {
      usageError("unknown option '" + arg + "'");
    }
  }
  if (o.minBytes > o.maxBytes) usageError("-b (minbytes) is larger than -e (maxbytes)");
  return o;
}

std::vector<size_t> requestedSizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t size = o.minBytes; size <= o.maxBytes; size *= o.stepFactor) {
    sizes.push_back(size);
    if (size > o.maxBytes / o.stepFactor) break;  // the next step would pass maxBytes or overflow
  }
  return sizes;
}

}  // namespace vigil::perf
