// How vigil's costs grow with the number of ranks, on one host: N ranks as
// threads of this process, for each N of a list. Per N it measures
//
//   - init: each thread calls vigilCommInitRootInfoConfig with one root
//     info; the wall time from the first thread starting init to the last
//     one finishing, and the slowest rank's own init time;
//   - vigilCommSplit into 2 halves (color = rank*2/N) and into groups of 8
//     (color = rank/8; one group when N < 8): the slowest rank's call time;
//   - allreduce, float32 sum, 8 B and 1 MiB: the median over samples of
//     (the slowest rank's time for a sample / calls per sample), each sample
//     after a barrier of the communicator;
//   - what the N communicators hold, taken while they exist: open file
//     descriptors of the process (/proc/self/fd), threads, RSS (VmRSS, and
//     RssAnon / RssShmem from /proc/self/status), the space used in
//     /dev/shm (statvfs) and, in --json, TCP sockets and socket-buffer
//     pages (/proc/net/sockstat), each minus the same figure before init.
//
// The transport follows VIGIL_TRANSPORT (auto = shared memory, since all
// thread-ranks share a host); `--transport tcp` sets it before the first
// vigil call. The transport column is what the process maps: every rank of a
// communicator over shared memory maps its segment (/proc/self/maps).
//
// Each N runs in a child process of its own (forked before any vigil call),
// so every footprint starts from the same clean process.
//
// Ranks beyond the number of cores oversubscribe them: vigil's waits sleep
// (futex, poll), so it works, but latencies then measure the scheduler.
//
//   VIGIL_SOCKET_IFNAME=lo ./build/bench/vigil-bench-scale [--sizes 2,4,8,16,32,64] [--transport auto|shm|tcp]
//        [--samples 5] [--calls 200] [--calls-large 20] [--json] [N ...]

#include <dirent.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vigil/vigil.h>

#include <algorithm>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<int> sizes{2, 4, 8, 16, 32, 64};
  std::string transport;  // empty: leave VIGIL_TRANSPORT as it is
  int samples = 5;
  int calls = 200;      // per sample, 8 B
  int callsLarge = 20;  // per sample, 1 MiB
  int warmup = 20;
  int warmupLarge = 5;
  bool json = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "vigil-bench-scale: %s\n"
               "usage: vigil-bench-scale [--sizes N,N,...] [--transport auto|shm|tcp] [--samples S] [--calls C]\n"
               "                         [--calls-large C] [--json] [N ...]\n",
               why);
  std::exit(2);
}

int parsePositive(const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 100000) usage((std::string("bad number: ") + text).c_str());
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  std::vector<int> positional;
  auto value = [&](int& i) -> const char* {
    if (i + 1 >= argc) usage((std::string(argv[i]) + " needs a value").c_str());
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes") {
      std::string list = value(i);
      o.sizes.clear();
      for (size_t pos = 0; pos <= list.size();) {
        size_t end = list.find(',', pos);
        if (end == std::string::npos) end = list.size();
        o.sizes.push_back(parsePositive(list.substr(pos, end - pos).c_str()));
        pos = end + 1;
      }
    } else if (a == "--transport") {
      o.transport = value(i);
      if (o.transport != "auto" && o.transport != "shm" && o.transport != "tcp") usage("transport: auto, shm or tcp");
    } else if (a == "--samples") {
      o.samples = parsePositive(value(i));
    } else if (a == "--calls") {
      o.calls = parsePositive(value(i));
    } else if (a == "--calls-large") {
      o.callsLarge = parsePositive(value(i));
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "-h" || a == "--help") {
      usage("help");
    } else if (!a.empty() && a[0] != '-') {
      positional.push_back(parsePositive(a.c_str()));
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (!positional.empty()) o.sizes = positional;
  for (int n : o.sizes) {
    if (n < 2) usage("every rank count must be at least 2");
  }
  return o;
}

// ---- what the process holds ------------------------------------------------

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
    --n;  // the directory stream itself
  }
  return n;
}

// A "Name:   value kB" line of /proc/self/status, in KiB (or the bare count for Threads).
long statusField(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(name);
  while (std::getline(in, line)) {
    if (line.compare(0, len, name) == 0 && line.size() > len && line[len] == ':') {
      return std::strtol(line.c_str() + len + 1, nullptr, 10);
    }
  }
  return -1;
}

// Mappings of vigil shared-memory segments in this process (one per rank of
// a communicator over shared memory; the name is unlinked, so "(deleted)").
int vigilSegmentMappings() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find("/dev/shm/vigil-") != std::string::npos;
  return n;
}

// Bytes in use in /dev/shm.
long long shmUsedBytes() {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) != 0) return -1;
  return static_cast<long long>(s.f_blocks - s.f_bfree) * static_cast<long long>(s.f_frsize);
}

// /proc/net/sockstat "TCP: inuse I orphan O tw T alloc A mem M": sockets in
// use and pages of socket buffers, for this network namespace (not only
// this process).
void tcpSockstat(long& inuse, long& memPages) {
  std::ifstream in("/proc/net/sockstat");
  std::string word;
  inuse = memPages = -1;
  while (in >> word) {
    if (word == "TCP:") {
      std::string key;
      long value = 0;
      for (int i = 0; i < 5 && (in >> key >> value); ++i) {
        if (key == "inuse") inuse = value;
        if (key == "mem") memPages = value;
      }
      return;
    }
  }
}

struct Footprint {
  int fds = 0;
  long threads = 0;
  long rssKiB = 0, anonKiB = 0, shmemKiB = 0;
  long long shmBytes = 0;
  long tcpInuse = 0, tcpMemPages = 0;
  int segmentMaps = 0;

  static Footprint now() {
    Footprint f;
    f.fds = openFds();
    f.threads = statusField("Threads");
    f.rssKiB = statusField("VmRSS");
    f.anonKiB = statusField("RssAnon");
    f.shmemKiB = statusField("RssShmem");
    f.shmBytes = shmUsedBytes();
    tcpSockstat(f.tcpInuse, f.tcpMemPages);
    f.segmentMaps = vigilSegmentMappings();
    return f;
  }
  Footprint minus(const Footprint& b) const {
    return {fds - b.fds,           threads - b.threads,         rssKiB - b.rssKiB,
            anonKiB - b.anonKiB,   shmemKiB - b.shmemKiB,       shmBytes - b.shmBytes,
            tcpInuse - b.tcpInuse, tcpMemPages - b.tcpMemPages, segmentMaps - b.segmentMaps};
  }
};

// ---- one rank count ----------------------------------------------------------

struct Row {
  int n = 0;
  std::string transport;
  double initWallMs = 0, initSlowestMs = 0;
  double splitHalvesMs = 0, splitEightsMs = 0;
  int eightsGroups = 0;
  double ar8Us = 0, ar1MUs = 0;
  double ar8MinUs = 0, ar8MaxUs = 0, ar1MMinUs = 0, ar1MMaxUs = 0;
  double destroyMs = 0;
  Footprint atInit;  // world communicators only, minus the figures before init
  Footprint atEnd;   // world + 2 split generations, after the collectives
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

[[noreturn]] void die(const char* what, int rank, int n, vigilResult_t rc, vigilComm_t comm) {
  std::fprintf(stderr, "vigil-bench-scale: N=%d rank %d: %s failed: %s (%d)\n%s\n", n, rank, what,
               vigilGetErrorString(rc), static_cast<int>(rc), vigilGetLastError(comm));
  std::fflush(stdout);
  std::fflush(stderr);
  // The other ranks may be blocked in vigil calls: end the process at once
  // rather than run exit handlers next to them.
  std::_Exit(1);
}

#define CHECK(call, what, rank, n, comm)                    \
  do {                                                      \
    vigilResult_t rc_ = (call);                             \
    if (rc_ != vigilSuccess) die(what, rank, n, rc_, comm); \
  } while (0)

Row measure(int n, const Options& o) {
  Row row;
  row.n = n;
  vigilRootInfo root{};
  CHECK(vigilGetRootInfo(&root), "vigilGetRootInfo", -1, n, nullptr);

  const Footprint before = Footprint::now();
  std::vector<Clock::time_point> initStart(n), initEnd(n);
  std::vector<double> splitHalves(n), splitEights(n), destroy(n);
  std::vector<double> perRank(n);  // one sample's time per call, per rank
  std::vector<double> ar8, ar1M;   // per sample: the slowest rank's time per call
  std::barrier sync(n);            // the ranks among themselves
  std::barrier withMain(n + 1);    // the ranks and the main thread, which takes the footprints

  const int groups8 = n >= 8 ? n / 8 : 1;
  row.eightsGroups = groups8;

  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      vigilConfig cfg = VIGIL_CONFIG_INIT;
      vigilComm_t comm = nullptr;
      sync.arrive_and_wait();  // every thread exists before any starts init
      initStart[r] = Clock::now();
      CHECK(vigilCommInitRootInfoConfig(n, &root, r, &cfg, &comm), "vigilCommInitRootInfoConfig", r, n, nullptr);
      initEnd[r] = Clock::now();
      withMain.arrive_and_wait();  // main counts what the N communicators hold
      withMain.arrive_and_wait();

      // Splits: the slowest rank's call time, after a barrier of the parent.
      vigilComm_t half = nullptr, eight = nullptr;
      CHECK(vigilBarrier(comm, nullptr), "vigilBarrier", r, n, comm);
      auto t0 = Clock::now();
      CHECK(vigilCommSplit(comm, r * 2 / n, r, &half), "vigilCommSplit (halves)", r, n, comm);
      splitHalves[r] = msBetween(t0, Clock::now());
      CHECK(vigilBarrier(comm, nullptr), "vigilBarrier", r, n, comm);
      t0 = Clock::now();
      CHECK(vigilCommSplit(comm, n >= 8 ? r / 8 : 0, r, &eight), "vigilCommSplit (groups of 8)", r, n, comm);
      splitEights[r] = msBetween(t0, Clock::now());
      int count = 0, expected = 0;
      for (int q = 0; q < n; ++q) expected += q * 2 / n == r * 2 / n;
      CHECK(vigilCommCount(half, &count), "vigilCommCount", r, n, half);
      if (count != expected) {
        std::fprintf(stderr, "vigil-bench-scale: N=%d rank %d: its half has %d ranks, expected %d\n", n, r, count,
                     expected);
        std::_Exit(1);
      }

      // Allreduce: calls per sample, timed on every rank after a barrier;
      // rank 0 keeps the slowest rank's time of each sample.
      auto run = [&](size_t bytes, int warmup, int calls, std::vector<double>& out) {
        // Zeros: written through before anything is timed, and a sum of zeros
        // stays finite however many calls run in place.
        std::vector<float> buf(bytes / sizeof(float), 0.0f);
        for (int i = 0; i < warmup; ++i) {
          CHECK(vigilAllReduce(buf.data(), buf.data(), buf.size(), vigilFloat32, vigilSum, comm, nullptr),
                "vigilAllReduce (warm-up)", r, n, comm);
        }
        for (int s = 0; s < o.samples; ++s) {
          CHECK(vigilBarrier(comm, nullptr), "vigilBarrier", r, n, comm);
          auto start = Clock::now();
          for (int c = 0; c < calls; ++c) {
            CHECK(vigilAllReduce(buf.data(), buf.data(), buf.size(), vigilFloat32, vigilSum, comm, nullptr),
                  "vigilAllReduce", r, n, comm);
          }
          perRank[r] = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / calls;
          sync.arrive_and_wait();
          // perRank is written again only after the next vigilBarrier, which
          // rank 0 enters after reading it.
          if (r == 0) out.push_back(*std::max_element(perRank.begin(), perRank.end()));
        }
        if (buf[0] != 0.0f || buf.back() != 0.0f) {
          std::fprintf(stderr, "vigil-bench-scale: N=%d rank %d: allreduce of %zu B gave %g\n", n, r, bytes,
                       static_cast<double>(buf[0]));
          std::_Exit(1);
        }
      };
      {
        // A separate check of the result: one allreduce of the rank numbers.
        float v = static_cast<float>(r), sum = -1;
        CHECK(vigilAllReduce(&v, &sum, 1, vigilFloat32, vigilSum, comm, nullptr), "vigilAllReduce (check)", r, n, comm);
        if (sum != static_cast<float>(n) * static_cast<float>(n - 1) / 2) {
          std::fprintf(stderr, "vigil-bench-scale: N=%d rank %d: allreduce of ranks gave %g, expected %d\n", n, r,
                       static_cast<double>(sum), n * (n - 1) / 2);
          std::_Exit(1);
        }
      }
      run(8, o.warmup, o.calls, ar8);
      run(1u << 20, o.warmupLarge, o.callsLarge, ar1M);

      withMain.arrive_and_wait();  // main counts again: world + both splits
      withMain.arrive_and_wait();
      CHECK(vigilBarrier(comm, nullptr), "vigilBarrier", r, n, comm);
      t0 = Clock::now();
      CHECK(vigilCommDestroy(eight), "vigilCommDestroy (groups of 8)", r, n, eight);
      CHECK(vigilCommDestroy(half), "vigilCommDestroy (halves)", r, n, half);
      CHECK(vigilCommDestroy(comm), "vigilCommDestroy", r, n, comm);
      destroy[r] = msBetween(t0, Clock::now());
    });
  }
  withMain.arrive_and_wait();
  row.atInit = Footprint::now().minus(before);
  withMain.arrive_and_wait();
  withMain.arrive_and_wait();
  row.atEnd = Footprint::now().minus(before);
  withMain.arrive_and_wait();
  for (auto& t : threads) t.join();

  const auto first = *std::min_element(initStart.begin(), initStart.end());
  const auto last = *std::max_element(initEnd.begin(), initEnd.end());
  row.initWallMs = msBetween(first, last);
  for (int r = 0; r < n; ++r) row.initSlowestMs = std::max(row.initSlowestMs, msBetween(initStart[r], initEnd[r]));
  row.splitHalvesMs = *std::max_element(splitHalves.begin(), splitHalves.end());
  row.splitEightsMs = *std::max_element(splitEights.begin(), splitEights.end());
  row.destroyMs = *std::max_element(destroy.begin(), destroy.end());
  row.ar8Us = median(ar8);
  row.ar8MinUs = *std::min_element(ar8.begin(), ar8.end());
  row.ar8MaxUs = *std::max_element(ar8.begin(), ar8.end());
  row.ar1MUs = median(ar1M);
  row.ar1MMinUs = *std::min_element(ar1M.begin(), ar1M.end());
  row.ar1MMaxUs = *std::max_element(ar1M.begin(), ar1M.end());
  // Every rank of a communicator over shared memory maps its segment.
  row.transport = row.atInit.segmentMaps >= n ? "shm" : row.atInit.segmentMaps == 0 ? "tcp" : "mixed";
  return row;
}

double mib(long long bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}
double kibToMib(long kib) {
  return static_cast<double>(kib) / 1024;
}

void printRow(const Row& r, unsigned cores, const std::string& envTransport, bool json) {
  if (json) {
    std::printf(
        "{\"lib\":\"vigil\",\"bench\":\"scale\",\"nranks\":%d,\"cores\":%u,\"transport\":\"%s\",\"env_transport\":"
        "\"%s\",\"init_wall_ms\":%.3f,\"init_slowest_ms\":%.3f,\"split_halves_ms\":%.3f,\"split_eights_ms\":%.3f,"
        "\"split_eights_groups\":%d,\"allreduce_8B_us\":%.3f,\"allreduce_8B_us_min\":%.3f,\"allreduce_8B_us_max\":"
        "%.3f,\"allreduce_1MiB_us\":%.3f,\"allreduce_1MiB_us_min\":%.3f,\"allreduce_1MiB_us_max\":%.3f,"
        "\"fds\":%d,\"threads\":%ld,\"rss_kib\":%ld,\"rss_anon_kib\":%ld,\"rss_shmem_kib\":%ld,\"shm_bytes\":%lld,"
        "\"end_fds\":%d,\"end_threads\":%ld,\"end_rss_kib\":%ld,\"end_rss_anon_kib\":%ld,\"end_rss_shmem_kib\":%ld,"
        "\"end_shm_bytes\":%lld,\"segment_maps\":%d,\"tcp_sockets\":%ld,\"tcp_mem_pages\":%ld,\"end_tcp_sockets\":%ld,"
        "\"end_tcp_mem_pages\":%ld,"
        "\"destroy_ms\":%.3f}\n",
        r.n, cores, r.transport.c_str(), envTransport.c_str(), r.initWallMs, r.initSlowestMs, r.splitHalvesMs,
        r.splitEightsMs, r.eightsGroups, r.ar8Us, r.ar8MinUs, r.ar8MaxUs, r.ar1MUs, r.ar1MMinUs, r.ar1MMaxUs,
        r.atInit.fds, r.atInit.threads, r.atInit.rssKiB, r.atInit.anonKiB, r.atInit.shmemKiB, r.atInit.shmBytes,
        r.atEnd.fds, r.atEnd.threads, r.atEnd.rssKiB, r.atEnd.anonKiB, r.atEnd.shmemKiB, r.atEnd.shmBytes,
        r.atInit.segmentMaps, r.atInit.tcpInuse, r.atInit.tcpMemPages, r.atEnd.tcpInuse, r.atEnd.tcpMemPages,
        r.destroyMs);
  } else {
    std::printf("%4d %5s %9.2f %9.2f %9.2f %9.2f %9.2f %10.1f %6d %4ld %8.2f %8.2f %8.2f %8.2f %8d %8.2f %8.2f\n", r.n,
                r.transport.c_str(), r.initWallMs, r.initSlowestMs, r.splitHalvesMs, r.splitEightsMs, r.ar8Us, r.ar1MUs,
                r.atInit.fds, r.atInit.threads, kibToMib(r.atInit.rssKiB), kibToMib(r.atInit.anonKiB),
                kibToMib(r.atInit.shmemKiB), mib(r.atInit.shmBytes), r.atEnd.fds, mib(r.atEnd.shmBytes), r.destroyMs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Before the first vigil call: the configuration is read once per process.
  if (!o.transport.empty()) setenv("VIGIL_TRANSPORT", o.transport.c_str(), 1);
  setenv("VIGIL_SOCKET_IFNAME", "lo", 0);  // all ranks are threads of this process
  const char* env = std::getenv("VIGIL_TRANSPORT");
  const std::string envTransport = env ? env : "auto (unset)";
  const unsigned cores = std::thread::hardware_concurrency();

  if (!o.json) {
    std::printf(
        "vigil-bench-scale: thread-ranks on one host, %u cores, VIGIL_TRANSPORT=%s, VIGIL_SOCKET_IFNAME=%s\n"
        "allreduce float32 sum: 8 B %d calls x %d samples (warm-up %d), 1 MiB %d calls x %d samples (warm-up %d);\n"
        "time = median over samples of the slowest rank's time per call; split and init: slowest rank.\n"
        "fds, thr(eads), rss, anon, shmem: what N ranks' world communicators add to the process; shm: /dev/shm used.\n"
        "end: the same after both splits and the collectives (world + halves + groups of 8).\n",
        cores, envTransport.c_str(), std::getenv("VIGIL_SOCKET_IFNAME"), o.calls, o.samples, o.warmup, o.callsLarge,
        o.samples, o.warmupLarge);
    std::printf("%4s %5s %9s %9s %9s %9s %9s %10s %6s %4s %8s %8s %8s %8s %8s %8s %8s\n", "N", "trans", "init_ms",
                "slow_ms", "split2_ms", "split8_ms", "ar8B_us", "ar1MiB_us", "fds", "thr", "rss_MiB", "anon_MiB",
                "shmem_MiB", "shm_MiB", "end_fds", "end_shm", "dstr_ms");
    std::fflush(stdout);
  }
  // Each rank count runs in a child process of its own, so that its
  // footprint starts from the same clean process (the heap of a previous
  // rank count would otherwise be reused) and a failure names its N.
  for (int n : o.sizes) {
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t child = fork();
    if (child < 0) {
      std::perror("vigil-bench-scale: fork");
      return 1;
    }
    if (child == 0) {
      printRow(measure(n, o), cores, envTransport, o.json);
      std::fflush(stdout);
      std::_Exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "vigil-bench-scale: the run with %d ranks failed (%s %d)\n", n,
                   WIFEXITED(status) ? "exit status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      return 1;
    }
  }
  const int most = *std::max_element(o.sizes.begin(), o.sizes.end());
  if (!o.json && most > static_cast<int>(cores)) {
    std::printf("note: up to %d ranks on %u cores oversubscribe them; beyond %u ranks, latencies include scheduling.\n",
                most, cores, cores);
  }
  return 0;
}
