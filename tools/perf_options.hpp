#pragma once
// vigil-perf's command line: what to run (collectives, sizes, dtypes, ops) and how (iterations,
// warm-up, samples, output form).

#include <vigil/vigil.h>

#include <cstddef>
#include <vector>

namespace vigil::perf {

// SendRecvTag and SendRecvAny (tagged point-to-point) run only when named: not part of "all".
enum class Coll {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  Reduce,
  Gather,
  Scatter,
  SendRecv,
  SendRecvTag,
  SendRecvAny
};

struct Options {
  std::vector<Coll> colls;
  size_t minBytes = 8;
  size_t maxBytes = size_t{64} << 20;
  size_t stepFactor = 2;
  int iters = 20;
  int warmup = 5;
  int samples = 10;
  int root = 0;
  std::vector<vigilDataType_t> dtypes{vigilFloat32};
  std::vector<vigilRedOp_t> ops{vigilSum};
  bool json = false;
  bool check = true;
};

// Parses argv; prints the help and exits 0 on -h/--help, prints the problem and exits 2 on bad usage.
Options parseOptions(int argc, char** argv);

// The requested sizes in bytes: minBytes, minBytes*f, ... up to maxBytes (not rounded yet).
std::vector<size_t> requestedSizes(const Options& options);

}  // namespace vigil::perf
