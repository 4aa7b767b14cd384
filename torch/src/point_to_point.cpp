#include "point_to_point.hpp"

#include <utility>

#include "backend_threads.hpp"

namespace vigil::torchpg {

PointToPoint::PointToPoint(const vigil::Communicator& groupComm) : comm_(groupComm.split(0, groupComm.rank())) {}

PointToPoint::~PointToPoint() {
  stop();
}

void PointToPoint::stop() {
  std::thread thread;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    thread.swap(thread_);
  }
  changed_.notify_all();
  if (thread.joinable()) thread.join();
}

void PointToPoint::send(const at::Tensor& dense, int peer, int tag, c10::intrusive_ptr<VigilWork> work) {
  const Elements e = movedElements(dense);
  std::unique_lock lock(mutex_);
  if (stopping_) raiseAfterStop(work->site());
  vigilRequest_t request = VIGIL_REQUEST_NULL;
  check(vigilIsendTag(dense.data_ptr(), e.count, e.type, peer, tag, comm_.get(), &request), comm_.get());
  post(request, std::move(work), [dense](const vigilStatus&) {});
}

void PointToPoint::recv(std::shared_ptr<DenseBuffer> buffer, int source, int tag, c10::intrusive_ptr<VigilWork> work) {
  const Elements e = movedElements(buffer->dense());
  std::unique_lock lock(mutex_);
  if (stopping_) raiseAfterStop(work->site());
  vigilRequest_t request = VIGIL_REQUEST_NULL;
  check(vigilIrecvTag(buffer->data(), e.count, e.type, source, tag, comm_.get(), &request), comm_.get());
  VigilWork* w = work.get();
  post(request, std::move(work), [buffer, w](const vigilStatus& status) {
    w->setSourceRank(status.source);
    buffer->writeBack();
  });
}

void PointToPoint::post(vigilRequest_t request, c10::intrusive_ptr<VigilWork> work,
                        std::function<void(const vigilStatus&)> done) {
  // Called with mutex_ held, right after the request was posted: the thread
  // sees it in pending_ before a wait could complete it.
  pending_.push_back({request, std::move(work), std::move(done)});
  if (!thread_.joinable()) thread_ = startBackendThread([this] { progress(); });
  changed_.notify_all();
}

void PointToPoint::progress() {
  std::vector<vigilRequest_t> requests;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, nothing left
      requests.clear();
      for (const Pending& p : pending_) requests.push_back(p.request);
    }
    int index = -1;
    vigilStatus status{};
    const vigilResult_t result = vigilWaitAny(static_cast<int>(requests.size()), requests.data(), &index, &status);
    if (result != vigilSuccess) {
      // The communicator failed: the requests of this wait are gone with it.
      std::exception_ptr failure;
      try {
        check(result, comm_.get());
      } catch (...) {
        failure = std::current_exception();
      }
      std::vector<Pending> failed;
      {
        std::lock_guard lock(mutex_);
        const auto waited = static_cast<std::ptrdiff_t>(requests.size());
        failed.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.begin() + waited));
        pending_.erase(pending_.begin(), pending_.begin() + waited);
      }
      for (Pending& p : failed) p.work->fail(failure);
      continue;  // later posts fail at their call; those posted meanwhile fail in the next wait
    }
    if (index < 0) continue;  // woken by a post: wait again, with it
    Pending done;
    {
      std::lock_guard lock(mutex_);
      done = std::move(pending_[static_cast<size_t>(index)]);
      pending_.erase(pending_.begin() + index);
    }
    done.work->run([&] { done.done(status); });
  }
}

}  // namespace vigil::torchpg
