// Shared by the comparison programs (MPI, Gloo, the baselines): the command
// line, the size sweep, the timing loop, the result check and the JSON line of
// vigil-perf. Everything a reader could suspect of favouring one library lives
// here once, so every library is measured and reported by the same code.
//
// Method (shared/perf.md, after nccl-tests): "bytes" is the larger per-rank
// buffer; one sample is `iters` back-to-back calls after a barrier, timed on
// every rank, and its time is the maximum over ranks divided by `iters`; the
// figure is the median over `samples` samples after `warmup` calls.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace perf {

enum class Coll {
  kAllreduce,
  kAllgather,
  kReduceScatter,
  kAlltoall,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kSendrecv
};

inline constexpr std::array<Coll, 9> kAllColls = {Coll::kAllreduce, Coll::kAllgather, Coll::kReduceScatter,
                                                  Coll::kAlltoall,  Coll::kBroadcast, Coll::kReduce,
                                                  Coll::kGather,    Coll::kScatter,   Coll::kSendrecv};

inline const char* CollName(Coll c) {
  switch (c) {
    case Coll::kAllreduce: return "allreduce";
    case Coll::kAllgather: return "allgather";
    case Coll::kReduceScatter: return "reducescatter";
    case Coll::kAlltoall: return "alltoall";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kReduce: return "reduce";
    case Coll::kGather: return "gather";
    case Coll::kScatter: return "scatter";
    case Coll::kSendrecv: return "sendrecv";
  }
  return "?";
}

enum class Dtype { kFloat32, kFloat64, kInt32 };
enum class Op { kSum, kMax };

inline const char* DtypeName(Dtype d) {
  switch (d) {
    case Dtype::kFloat32: return "float32";
    case Dtype::kFloat64: return "float64";
    case Dtype::kInt32: return "int32";
  }
  return "?";
}

inline size_t DtypeSize(Dtype d) {
  return d == Dtype::kFloat64 ? 8 : 4;
}
inline const char* OpName(Op o) {
  return o == Op::kSum ? "sum" : "max";
}

// busbw = algbw * factor: the fraction of the data that must cross links, so
// that a library at the hardware limit shows the same busbw for every
// collective and every rank count (nccl-tests' PERFORMANCE.md).
inline double BusFactor(Coll c, int n) {
  const double nd = n;
  switch (c) {
    case Coll::kAllreduce: return 2.0 * (nd - 1) / nd;
    case Coll::kAllgather:
    case Coll::kReduceScatter:
    case Coll::kAlltoall:
    case Coll::kGather:
    case Coll::kScatter: return (nd - 1) / nd;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendrecv: return 1.0;
  }
  return 1.0;
}

struct Options {
  std::vector<Coll> colls = {Coll::kAllreduce};
  size_t min_bytes = 8;
  size_t max_bytes = size_t{64} << 20;
  double factor = 2.0;
  int iters = 20;
  int warmup = 5;
  int samples = 10;
  Dtype dtype = Dtype::kFloat32;
  Op op = Op::kSum;
  bool json = false;
  int np = 0;  // Ranks to fork, for programs without a launcher (0: from the environment or 2).
};

[[noreturn]] inline void Die(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::exit(2);
}

// Accepts "64M", "1K", "8", "1G" (binary multiples, as nccl-tests does).
inline size_t ParseSize(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) Die("bad size '" + s + "'");
  double mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1024.0;
      ++end;
      break;
    case 'm':
    case 'M':
      mult = 1024.0 * 1024;
      ++end;
      break;
    case 'g':
    case 'G':
      mult = 1024.0 * 1024 * 1024;
      ++end;
      break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') Die("bad size '" + s + "'");
  return static_cast<size_t>(v * mult);
}

inline int ParseInt(const std::string& s, const char* what, int lo) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v < lo || v > 1000000000) Die(std::string("bad ") + what + " '" + s + "'");
  return static_cast<int>(v);
}

inline void Usage(const char* prog, bool collectives, bool fork_ranks) {
  std::fprintf(stderr, "usage: %s", prog);
  if (collectives) {
    std::fprintf(stderr,
                 " [-c allreduce|allgather|reducescatter|alltoall|broadcast|reduce|gather|scatter|sendrecv[,...]|all]");
  }
  std::fprintf(stderr, " [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-s SAMPLES]");
  if (collectives) std::fprintf(stderr, " [-d float32|float64|int32] [-o sum|max]");
  if (fork_ranks) std::fprintf(stderr, " [--np N]");
  std::fprintf(stderr,
               " [--json]\n"
               "  sizes are per-rank bytes of the larger buffer (K/M/G suffixes), from MIN to MAX, times FACTOR\n"
               "  each sample is ITERS calls; the median, min and max of SAMPLES samples are reported\n");
}

// The command line of vigil-perf. `collectives` and `fork_ranks` enable the
// options that only some of the programs have.
inline Options ParseArgs(int argc, char** argv, bool collectives, bool fork_ranks) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      Usage(argv[0], collectives, fork_ranks);
      std::exit(0);
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "-b" || a == "--minbytes") {
      o.min_bytes = ParseSize(value());
    } else if (a == "-e" || a == "--maxbytes") {
      o.max_bytes = ParseSize(value());
    } else if (a == "-f" || a == "--stepfactor") {
      const std::string v = value();
      o.factor = std::strtod(v.c_str(), nullptr);
      if (!(o.factor > 1.0)) Die("bad factor '" + v + "'");
    } else if (a == "-n" || a == "--iters") {
      o.iters = ParseInt(value(), "iteration count", 1);
    } else if (a == "-w" || a == "--warmup_iters") {
      o.warmup = ParseInt(value(), "warm-up count", 0);
    } else if (a == "-s" || a == "--samples") {
      o.samples = ParseInt(value(), "sample count", 1);
    } else if (collectives && (a == "-c" || a == "--coll")) {
      const std::string v = value();
      o.colls.clear();
      if (v == "all") {
        o.colls.assign(kAllColls.begin(), kAllColls.end());
      } else {
        // A comma-separated list, run in the order given.
        size_t start = 0;
        while (start <= v.size()) {
          const size_t end = std::min(v.find(',', start), v.size());
          const std::string name = v.substr(start, end - start);
          bool known = false;
          for (Coll c : kAllColls) {
            if (name == CollName(c)) {
              o.colls.push_back(c);
              known = true;
            }
          }
          if (!known) Die("unknown collective '" + name + "'");
          start = end + 1;
        }
      }
    } else if (collectives && (a == "-d" || a == "--datatype")) {
      const std::string v = value();
      if (v == "float32" || v == "float") {
        o.dtype = Dtype::kFloat32;
      } else if (v == "float64" || v == "double") {
        o.dtype = Dtype::kFloat64;
      } else if (v == "int32" || v == "int") {
        o.dtype = Dtype::kInt32;
      } else {
        Die("unsupported datatype '" + v + "' (float32, float64, int32)");
      }
    } else if (collectives && (a == "-o" || a == "--op")) {
      const std::string v = value();
      if (v == "sum") {
        o.op = Op::kSum;
      } else if (v == "max") {
        o.op = Op::kMax;
      } else {
        Die("unsupported op '" + v + "' (sum, max)");
      }
    } else if (fork_ranks && a == "--np") {
      o.np = ParseInt(value(), "rank count", 1);
    } else {
      Usage(argv[0], collectives, fork_ranks);
      Die("unknown option '" + a + "'");
    }
  }
  if (o.max_bytes < o.min_bytes) Die("MAX is below MIN");
  return o;
}

// MIN, MIN*f, MIN*f^2, ... up to MAX (nccl-tests' stepping).
inline std::vector<size_t> Sizes(const Options& o) {
  std::vector<size_t> out;
  for (double s = static_cast<double>(o.min_bytes); s <= static_cast<double>(o.max_bytes) * (1 + 1e-12);
       s *= o.factor) {
    const size_t v = static_cast<size_t>(s);
    if (out.empty() || v > out.back()) out.push_back(v);
  }
  return out;
}

// Every buffer must split evenly into n blocks of whole elements, for every
// collective, so that all rows of one run compare; 0 means the size is too
// small for that and is skipped (as vigil-perf does).
inline size_t RoundBytes(size_t bytes, int n, size_t elem) {
  const size_t unit = static_cast<size_t>(n) * elem;
  return bytes / unit * unit;
}

// "none" for the collectives that do not reduce, as vigil-perf reports them.
inline const char* OpLabel(Coll c, Op o) {
  switch (c) {
    case Coll::kAllreduce:
    case Coll::kReduceScatter:
    case Coll::kReduce: return OpName(o);
    default: return "none";
  }
}

// Buffer lengths in elements for one call. `count` is the count argument of
// the MPI call (per rank, or per peer for the rooted and all-to-all kinds).
struct Shape {
  size_t in_elems;
  size_t out_elems;
  size_t count;
};

inline Shape ShapeOf(Coll c, size_t bytes, int n, size_t elem) {
  const size_t total = bytes / elem;
  const size_t block = total / static_cast<size_t>(n);
  switch (c) {
    case Coll::kAllreduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendrecv: return {total, total, total};
    case Coll::kAllgather:
    case Coll::kGather: return {block, total, block};
    case Coll::kReduceScatter:
    case Coll::kScatter: return {total, block, block};
    case Coll::kAlltoall: return {total, total, block};
  }
  return {total, total, total};
}

// Small positive integers, so that sums over thousands of ranks stay exact in
// float32 and the check is exact whatever order a library adds in; rank and
// index both enter so that a block from the wrong rank or offset is caught.
template <typename T>
T Pattern(int rank, size_t i) {
  return static_cast<T>((i * 31 + static_cast<size_t>(rank) * 17) % 29 + 1);
}

template <typename T>
T Combine(Op op, T a, T b) {
  return op == Op::kSum ? static_cast<T>(a + b) : std::max(a, b);
}

template <typename T>
T Reduced(Op op, int n, size_t i) {
  T acc = Pattern<T>(0, i);
  for (int r = 1; r < n; ++r) acc = Combine(op, acc, Pattern<T>(r, i));
  return acc;
}

// What `rank` must hold in element i of its result; nullopt where the rank
// has no result (non-roots of reduce and gather). The root is rank 0.
template <typename T>
std::optional<T> Expected(Coll c, Op op, int rank, int n, size_t block, size_t i) {
  switch (c) {
    case Coll::kAllreduce: return Reduced<T>(op, n, i);
    case Coll::kAllgather: return Pattern<T>(static_cast<int>(i / block), i % block);
    case Coll::kReduceScatter: return Reduced<T>(op, n, static_cast<size_t>(rank) * block + i);
    case Coll::kAlltoall: return Pattern<T>(static_cast<int>(i / block), static_cast<size_t>(rank) * block + i % block);
    case Coll::kBroadcast: return Pattern<T>(0, i);
    case Coll::kReduce:
      if (rank != 0) return std::nullopt;
      return Reduced<T>(op, n, i);
    case Coll::kGather:
      if (rank != 0) return std::nullopt;
      return Pattern<T>(static_cast<int>(i / block), i % block);
    case Coll::kScatter: return Pattern<T>(0, static_cast<size_t>(rank) * block + i);
    case Coll::kSendrecv: return Pattern<T>((rank + n - 1) % n, i);
  }
  return std::nullopt;
}

template <typename T>
void FillInput(T* in, size_t elems, int rank) {
  for (size_t i = 0; i < elems; ++i) in[i] = Pattern<T>(rank, i);
}

// The pattern is never negative, so -1 marks "not written".
template <typename T>
void FillSentinel(T* out, size_t elems) {
  std::fill(out, out + elems, static_cast<T>(-1));
}

template <typename T>
int64_t CountWrong(Coll c, Op op, int rank, int n, const Shape& s, const T* result) {
  int64_t wrong = 0;
  for (size_t i = 0; i < s.out_elems; ++i) {
    // For the kinds that split into blocks, count is the block length.
    const auto want = Expected<T>(c, op, rank, n, s.count, i);
    if (!want) return 0;
    if (result[i] != *want) ++wrong;
  }
  return wrong;
}

// 64-byte aligned, touched once: fresh pages cost 10-18 us each to fault in on
// these machines, which must not land inside a timed call.
template <typename T>
T* AllocTouched(size_t elems) {
  const size_t bytes = std::max<size_t>(64, (elems * sizeof(T) + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) Die("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, bytes);
  return static_cast<T*>(p);
}

struct Stats {
  double median = 0;
  double min = 0;
  double max = 0;
};

inline Stats Summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  s.median = v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

struct Record {
  std::string lib;
  std::string coll;
  int nranks = 1;
  size_t bytes = 0;
  size_t count = 0;
  std::string dtype = "float32";
  std::string op = "sum";
  Stats time_s;  // Seconds per call.
  double bus_factor = 1.0;
  int64_t wrong = 0;
};

inline void PrintHeader(bool json) {
  if (json) return;
  std::printf("%-10s %-14s %6s %12s %12s %11s %11s %11s %10s %10s %7s\n", "lib", "coll", "ranks", "bytes", "count",
              "time_us", "min_us", "max_us", "algbw", "busbw", "#wrong");
  std::fflush(stdout);
}

// One line per size. The JSON keys and their order are those of vigil-perf.
inline void PrintRecord(const Record& r, bool json) {
  const double t = r.time_s.median;
  const double algbw = t > 0 ? static_cast<double>(r.bytes) / t / 1e9 : 0.0;
  const double busbw = algbw * r.bus_factor;
  if (json) {
    std::printf(
        "{\"lib\":\"%s\",\"coll\":\"%s\",\"nranks\":%d,\"bytes\":%zu,\"count\":%zu,\"dtype\":\"%s\",\"op\":\"%s\","
        "\"time_us\":%.6g,\"time_us_min\":%.6g,\"time_us_max\":%.6g,\"algbw_gbs\":%.6g,\"busbw_gbs\":%.6g,"
        "\"wrong\":%lld}\n",
        r.lib.c_str(), r.coll.c_str(), r.nranks, r.bytes, r.count, r.dtype.c_str(), r.op.c_str(), t * 1e6,
        r.time_s.min * 1e6, r.time_s.max * 1e6, algbw, busbw, static_cast<long long>(r.wrong));
  } else {
    std::printf("%-10s %-14s %6d %12zu %12zu %11.2f %11.2f %11.2f %10.3f %10.3f %7lld\n", r.lib.c_str(), r.coll.c_str(),
                r.nranks, r.bytes, r.count, t * 1e6, r.time_s.min * 1e6, r.time_s.max * 1e6, algbw, busbw,
                static_cast<long long>(r.wrong));
  }
  std::fflush(stdout);
}

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What a communication library provides to the sweep. Prepare() does the
// per-size setup a real caller would do once (descriptors, algorithm objects)
// and returns the call to time plus where this rank's result lands.
template <typename T>
struct Prepared {
  std::function<void()> call;
  const T* result = nullptr;
};

template <typename T>
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void Barrier() = 0;
  virtual double MaxOverRanks(double v) = 0;
  virtual int64_t SumOverRanks(int64_t v) = 0;
  virtual bool Supports(Coll c) const = 0;
  virtual Prepared<T> Prepare(Coll c, Op op, const Shape& s, T* in, T* out) = 0;
};

// The whole measurement for one library: every collective, every size.
// Returns the total number of wrong elements seen.
template <typename T>
int64_t RunSweep(Comm<T>& comm, const Options& o, const std::string& lib) {
  const int n = comm.size();
  const int rank = comm.rank();
  const std::vector<size_t> sizes = Sizes(o);
  const size_t max_bytes = std::max(RoundBytes(sizes.back(), n, sizeof(T)), sizeof(T));
  const size_t max_elems = max_bytes / sizeof(T);
  T* in = AllocTouched<T>(max_elems);
  T* out = AllocTouched<T>(max_elems);
  FillInput(in, max_elems, rank);
  FillSentinel(out, max_elems);

  int64_t total_wrong = 0;
  if (rank == 0) PrintHeader(o.json);
  for (Coll c : o.colls) {
    if (!comm.Supports(c)) {
      if (rank == 0) std::fprintf(stderr, "%s: %s is not supported, skipped\n", lib.c_str(), CollName(c));
      continue;
    }
    for (size_t requested : sizes) {
      const size_t bytes = RoundBytes(requested, n, sizeof(T));
      if (bytes == 0) continue;
      const Shape shape = ShapeOf(c, bytes, n, sizeof(T));
      FillInput(in, shape.in_elems, rank);
      Prepared<T> p = comm.Prepare(c, o.op, shape, in, out);

      for (int i = 0; i < o.warmup; ++i) p.call();
      std::vector<double> times;
      times.reserve(static_cast<size_t>(o.samples));
      for (int s = 0; s < o.samples; ++s) {
        comm.Barrier();
        const double t0 = Now();
        for (int i = 0; i < o.iters; ++i) p.call();
        const double local = (Now() - t0) / o.iters;
        times.push_back(comm.MaxOverRanks(local));
      }

      // Checked after timing, on fresh inputs, so that a library that reuses
      // stale results or computes garbage fast cannot pass.
      FillInput(in, shape.in_elems, rank);
      FillSentinel(out, shape.out_elems);
      comm.Barrier();
      p.call();
      const int64_t wrong = comm.SumOverRanks(CountWrong(c, o.op, rank, n, shape, p.result));
      total_wrong += wrong;

      if (rank == 0) {
        Record r;
        r.lib = lib;
        r.coll = CollName(c);
        r.nranks = n;
        r.bytes = bytes;
        r.count = shape.count;
        r.dtype = DtypeName(o.dtype);
        r.op = OpLabel(c, o.op);
        r.time_s = Summarize(times);
        r.bus_factor = BusFactor(c, n);
        r.wrong = wrong;
        PrintRecord(r, o.json);
      }
    }
  }
  std::free(in);
  std::free(out);
  return total_wrong;
}

}  // namespace perf
