// vigil-perf's measurement for Gloo (TCP transport on loopback). Gloo has no
// launcher, so this program forks its ranks itself (--np N) and they meet
// through a FileStore in a fresh temporary directory. One rank can also be
// started on its own with RANK, WORLD_SIZE and GLOO_PERF_STORE (a directory
// shared by all ranks) in the environment.
//
// Each collective is Gloo's own algorithm, as torch.distributed's Gloo
// backend calls it, but with the options built once per size rather than per
// call, which is the most favourable way to drive it.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "../common/perf_common.hpp"

namespace {

using perf::Coll;
using perf::Op;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Gloo's element-wise kernels are overloaded; pick the (out, a, b, n) form.
template <typename T>
ReduceFn GlooReduceFn(Op op) {
  return op == Op::kSum ? static_cast<ReduceFn>(&gloo::sum<T>) : static_cast<ReduceFn>(&gloo::max<T>);
}

// Tags keep the bookkeeping reductions apart from the collective under test.
constexpr uint32_t kTagBench = 0;
constexpr uint32_t kTagMax = 1;
constexpr uint32_t kTagWrong = 2;

template <typename T>
class GlooComm final : public perf::Comm<T> {
 public:
  explicit GlooComm(std::shared_ptr<gloo::Context> ctx) : ctx_(std::move(ctx)) {}

  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }

  void Barrier() override {
    gloo::BarrierOptions opts(ctx_);
    gloo::barrier(opts);
  }

  double MaxOverRanks(double v) override {
    double r = 0;
    gloo::AllreduceOptions opts(ctx_);
    opts.setInput(&v, 1);
    opts.setOutput(&r, 1);
    opts.setReduceFunction(GlooReduceFn<double>(Op::kMax));
    opts.setTag(kTagMax);
    gloo::allreduce(opts);
    return r;
  }

  int64_t SumOverRanks(int64_t v) override {
    int64_t r = 0;
    gloo::AllreduceOptions opts(ctx_);
    opts.setInput(&v, 1);
    opts.setOutput(&r, 1);
    opts.setReduceFunction(GlooReduceFn<int64_t>(Op::kSum));
    opts.setTag(kTagWrong);
    gloo::allreduce(opts);
    return r;
  }

  bool Supports(Coll) const override { return true; }

  perf::Prepared<T> Prepare(Coll c, Op op, const perf::Shape& s, T* in, T* out) override {
    const int n = ctx_->size;
    const int rank = ctx_->rank;
    switch (c) {
      case Coll::kAllreduce: {
        auto opts = std::make_shared<gloo::AllreduceOptions>(ctx_);
        opts->setInput(in, s.in_elems);
        opts->setOutput(out, s.out_elems);
        opts->setReduceFunction(GlooReduceFn<T>(op));
        opts->setTag(kTagBench);
        return {[opts] { gloo::allreduce(*opts); }, out};
      }
      case Coll::kAllgather: {
        auto opts = std::make_shared<gloo::AllgatherOptions>(ctx_);
        opts->setInput(in, s.in_elems);
        opts->setOutput(out, s.out_elems);
        opts->setTag(kTagBench);
        return {[opts] { gloo::allgather(*opts); }, out};
      }
      case Coll::kReduceScatter: {
        // Gloo's only reduce-scatter is this older algorithm object: it works
        // in place, leaving this rank's block at the start of the input.
        const gloo::ReductionFunction<T>* fn =
            op == Op::kSum ? gloo::ReductionFunction<T>::sum : gloo::ReductionFunction<T>::max;
        auto algo = std::make_shared<gloo::ReduceScatterHalvingDoubling<T>>(
            ctx_, std::vector<T*>{in}, static_cast<int>(s.in_elems),
            std::vector<int>(static_cast<size_t>(n), static_cast<int>(s.out_elems)), fn);
        return {[algo] { algo->run(); }, in};
      }
      case Coll::kAlltoall: {
        auto opts = std::make_shared<gloo::AlltoallOptions>(ctx_);
        opts->setInput(in, s.in_elems);
        opts->setOutput(out, s.out_elems);
        opts->setTag(kTagBench);
        return {[opts] { gloo::alltoall(*opts); }, out};
      }
      case Coll::kBroadcast: {
        // In place: the root sends from its input, the others receive into
        // their output (no copy at the root).
        T* buf = rank == 0 ? in : out;
        auto opts = std::make_shared<gloo::BroadcastOptions>(ctx_);
        opts->setOutput(buf, s.out_elems);
        opts->setRoot(0);
        opts->setTag(kTagBench);
        return {[opts] { gloo::broadcast(*opts); }, buf};
      }
      case Coll::kReduce: {
        auto opts = std::make_shared<gloo::ReduceOptions>(ctx_);
        opts->setInput(in, s.in_elems);
        opts->setOutput(out, s.out_elems);
        opts->setReduceFunction(GlooReduceFn<T>(op));
        opts->setRoot(0);
        opts->setTag(kTagBench);
        return {[opts] { gloo::reduce(*opts); }, out};
      }
      case Coll::kGather: {
        auto opts = std::make_shared<gloo::GatherOptions>(ctx_);
        opts->setInput(in, s.in_elems);
        if (rank == 0) opts->setOutput(out, s.out_elems);
        opts->setRoot(0);
        opts->setTag(kTagBench);
        return {[opts] { gloo::gather(*opts); }, out};
      }
      case Coll::kScatter: {
        auto opts = std::make_shared<gloo::ScatterOptions>(ctx_);
        if (rank == 0) {
          std::vector<T*> blocks;
          for (int r = 0; r < n; ++r) blocks.push_back(in + static_cast<size_t>(r) * s.out_elems);
          opts->setInputs(blocks, s.out_elems);
        }
        opts->setOutput(out, s.out_elems);
        opts->setRoot(0);
        opts->setTag(kTagBench);
        return {[opts] { gloo::scatter(*opts); }, out};
      }
      case Coll::kSendrecv: {
        // Gloo has no sendrecv; this is the pattern torch's send/recv pair
        // produces: post the receive, send, wait for both.
        const int right = (rank + 1) % n;
        const int left = (rank + n - 1) % n;
        const uint64_t slot = static_cast<uint64_t>(ctx_->nextSlot());
        std::shared_ptr<gloo::transport::UnboundBuffer> sbuf = ctx_->createUnboundBuffer(in, s.in_elems * sizeof(T));
        std::shared_ptr<gloo::transport::UnboundBuffer> rbuf = ctx_->createUnboundBuffer(out, s.out_elems * sizeof(T));
        return {[=] {
                  rbuf->recv(left, slot);
                  sbuf->send(right, slot);
                  rbuf->waitRecv();
                  sbuf->waitSend();
                },
                out};
      }
    }
    perf::Die("unknown collective");
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
};

int RunRank(int rank, int nranks, const std::string& store_dir, const perf::Options& o) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    // Gloo's default of 30 s is short for 64 MiB calls on a loaded machine.
    ctx->setTimeout(std::chrono::seconds(600));
    ctx->connectFullMesh(store, dev);
    int64_t wrong = 0;
    switch (o.dtype) {
      case perf::Dtype::kFloat32: {
        GlooComm<float> comm(ctx);
        wrong = perf::RunSweep<float>(comm, o, "gloo");
        break;
      }
      case perf::Dtype::kFloat64: {
        GlooComm<double> comm(ctx);
        wrong = perf::RunSweep<double>(comm, o, "gloo");
        break;
      }
      case perf::Dtype::kInt32: {
        GlooComm<int32_t> comm(ctx);
        wrong = perf::RunSweep<int32_t>(comm, o, "gloo");
        break;
      }
    }
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_perf rank %d: %s\n", rank, e.what());
    return 3;
  }
}

// Forks the ranks and waits; when one fails the others would wait for it
// until Gloo's timeout, so they are stopped at once.
int ForkRanks(int nranks, const perf::Options& o) {
  char tmpl[] = "/tmp/gloo_perf.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) perf::Die("mkdtemp failed");
  const std::string dir = tmpl;
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) perf::Die("fork failed");
    if (pid == 0) {
      const int rc = RunRank(r, nranks, dir, o);
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int result = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t done = wait(&status);
    if (done < 0) break;
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (rc != 0 && result == 0) {
      result = rc;
      for (pid_t p : pids) {
        if (p != done) kill(p, SIGTERM);
      }
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const perf::Options o = perf::ParseArgs(argc, argv, /*collectives=*/true, /*fork_ranks=*/true);
  const char* env_rank = std::getenv("RANK");
  const char* env_world = std::getenv("WORLD_SIZE");
  const char* env_store = std::getenv("GLOO_PERF_STORE");
  if (o.np == 0 && env_rank != nullptr && env_world != nullptr) {
    if (env_store == nullptr) perf::Die("RANK and WORLD_SIZE need GLOO_PERF_STORE (a directory shared by all ranks)");
    return RunRank(std::atoi(env_rank), std::atoi(env_world), env_store, o);
  }
  return ForkRanks(o.np > 0 ? o.np : 2, o);
}
