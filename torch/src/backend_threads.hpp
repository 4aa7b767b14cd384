#pragma once
// Every thread of the backend starts here: a queue's worker and watcher, a
// group's point-to-point thread, the completion threads. They run future
// callbacks and free tensors of Python's, both under the GIL, and a thread
// that takes the GIL once the interpreter finalizes is ended by Python,
// which a C++ thread does not survive (std::terminate). So they are counted
// until they end, and the exit handler waits for the count to reach zero,
// whichever group (alive, being destroyed, or gone) they belong to.

#include <chrono>
#include <cstddef>
#include <functional>
#include <thread>

namespace vigil::torchpg {

std::thread startBackendThread(std::function<void()> body);

// The backend's threads still running.
size_t runningBackendThreads();

// Waits up to `timeout` for every backend thread to end; true when none runs.
bool waitForBackendThreads(std::chrono::milliseconds timeout);

}  // namespace vigil::torchpg
