// CompletionPool (torch/src/completion_pool.hpp) without torch: completions
// run on the pool's threads, a blocked completion does not hold up another,
// and the pool may be destroyed from inside one of its own completions (the
// last reference to a process group dropped with a Work's callback), which
// must neither deadlock nor terminate the process; the backend's thread
// count, which the exit handler waits on.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <thread>

#include "backend_threads.hpp"
#include "completion_pool.hpp"

namespace vigil::torchpg {
namespace {

TEST(CompletionPool, ABlockedCompletionDoesNotHoldUpAnother) {
  CompletionPool pool;
  std::promise<void> second;
  std::future<void> secondDone = second.get_future();
  std::promise<void> first;
  pool.push([&] {
    secondDone.wait();
    first.set_value();
  });  // waits for the next one
  pool.push([&] { second.set_value(); });
  first.get_future().wait();
}

// What owns the pool, like a process group; dropped by a completion.
struct Owner {
  std::unique_ptr<CompletionPool> pool = std::make_unique<CompletionPool>();
  std::promise<std::thread::id>* destroyedOn = nullptr;
  ~Owner() {
    pool.reset();
    destroyedOn->set_value(std::this_thread::get_id());
  }
};

TEST(CompletionPool, DestroyedFromItsOwnCompletion) {
  for (int round = 0; round < 20; ++round) {
    std::promise<std::thread::id> destroyedOn;
    std::future<std::thread::id> destroyed = destroyedOn.get_future();
    std::promise<void> released;
    std::shared_future<void> mainReleased = released.get_future().share();
    auto owner = std::make_shared<Owner>();
    owner->destroyedOn = &destroyedOn;
    CompletionPool* pool = owner->pool.get();
    std::atomic<bool> ran{false};
    pool->push([owner, mainReleased, &ran] {
      mainReleased.wait();  // the test let go: this completion holds the last reference
      ran = true;
    });
    owner.reset();
    released.set_value();
    // The pool's destructor runs on the pool's thread, when the completion is dropped.
    ASSERT_NE(destroyed.get(), std::this_thread::get_id());
    EXPECT_TRUE(ran);
  }
}

// stop() (the interpreter's exit): what is queued runs, the threads end, and
// a completion pushed afterwards runs at once on the pushing thread.
TEST(CompletionPool, StopRunsWhatIsQueuedThenRunsPushesInline) {
  CompletionPool pool;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  std::thread::id ranOn;
  pool.push([released, &ran] {
    released.wait();
    ++ran;
  });
  pool.push([&ran] { ++ran; });
  release.set_value();
  pool.stop();
  EXPECT_EQ(ran.load(), 2);
  pool.push([&] {
    ++ran;
    ranOn = std::this_thread::get_id();
  });
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(ranOn, std::this_thread::get_id());
  pool.stop();  // idempotent, as the destructor calls it again
}

// The exit handler waits for every backend thread, a detached one included
// (the pool's thread that destroyed its own pool, above, ends on its own).
TEST(BackendThreads, CountedUntilTheirBodyEnds) {
  ASSERT_TRUE(waitForBackendThreads(std::chrono::seconds(60)));  // those of the tests above
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::thread held = startBackendThread([released] { released.wait(); });
  held.detach();
  EXPECT_EQ(runningBackendThreads(), 1u);
  EXPECT_FALSE(waitForBackendThreads(std::chrono::milliseconds(0)));
  release.set_value();
  EXPECT_TRUE(waitForBackendThreads(std::chrono::seconds(60)));
  EXPECT_EQ(runningBackendThreads(), 0u);
}

}  // namespace
}  // namespace vigil::torchpg
