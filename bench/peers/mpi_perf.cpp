// vigil-perf's measurement for an MPI library: built once against Open MPI
// and once against MPICH (bench/build_peers.sh), run under that MPI's own
// launcher. The method, the check and the output are in perf_common.hpp.
#include <mpi.h>

#include "../common/perf_common.hpp"

// The label in the output is fixed when building, so that a binary cannot be
// mislabelled by how it is started.
#ifndef MPI_PERF_LIB
#if defined(OPEN_MPI)
#define MPI_PERF_LIB "openmpi"
#elif defined(MPICH_VERSION)
#define MPI_PERF_LIB "mpich"
#else
#define MPI_PERF_LIB "mpi"
#endif
#endif

namespace {

using perf::Coll;
using perf::Op;

template <typename T>
MPI_Datatype MpiType();
template <>
MPI_Datatype MpiType<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype MpiType<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype MpiType<int32_t>() {
  return MPI_INT;
}

template <typename T>
class MpiComm final : public perf::Comm<T> {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  double MaxOverRanks(double v) override {
    double r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return r;
  }

  int64_t SumOverRanks(int64_t v) override {
    long long in = v;
    long long r = 0;
    MPI_Allreduce(&in, &r, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return r;
  }

  bool Supports(Coll) const override { return true; }

  perf::Prepared<T> Prepare(Coll c, Op o, const perf::Shape& s, T* in, T* out) override {
    const MPI_Datatype t = MpiType<T>();
    const MPI_Op op = o == Op::kSum ? MPI_SUM : MPI_MAX;
    const int count = static_cast<int>(s.count);
    const int n = size_;
    const int rank = rank_;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (c) {
      case Coll::kAllreduce: return {[=] { MPI_Allreduce(in, out, count, t, op, w); }, out};
      case Coll::kAllgather: return {[=] { MPI_Allgather(in, count, t, out, count, t, w); }, out};
      case Coll::kReduceScatter: return {[=] { MPI_Reduce_scatter_block(in, out, count, t, op, w); }, out};
      case Coll::kAlltoall: return {[=] { MPI_Alltoall(in, count, t, out, count, t, w); }, out};
      case Coll::kBroadcast: {
        // In place, as MPI defines it: the root sends from its input and the
        // others receive into their output, so nobody pays an extra copy.
        T* buf = rank == 0 ? in : out;
        return {[=] { MPI_Bcast(buf, count, t, 0, w); }, buf};
      }
      case Coll::kReduce: return {[=] { MPI_Reduce(in, out, count, t, op, 0, w); }, out};
      case Coll::kGather: return {[=] { MPI_Gather(in, count, t, out, count, t, 0, w); }, out};
      case Coll::kScatter: return {[=] { MPI_Scatter(in, count, t, out, count, t, 0, w); }, out};
      case Coll::kSendrecv: {
        const int right = (rank + 1) % n;
        const int left = (rank + n - 1) % n;
        return {[=] { MPI_Sendrecv(in, count, t, right, 0, out, count, t, left, 0, w, MPI_STATUS_IGNORE); }, out};
      }
    }
    perf::Die("unknown collective");
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

template <typename T>
int64_t Run(const perf::Options& o) {
  MpiComm<T> comm;
  return perf::RunSweep<T>(comm, o, MPI_PERF_LIB);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const perf::Options o = perf::ParseArgs(argc, argv, /*collectives=*/true, /*fork_ranks=*/false);
  int64_t wrong = 0;
  switch (o.dtype) {
    case perf::Dtype::kFloat32: wrong = Run<float>(o); break;
    case perf::Dtype::kFloat64: wrong = Run<double>(o); break;
    case perf::Dtype::kInt32: wrong = Run<int32_t>(o); break;
  }
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
