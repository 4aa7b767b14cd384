// vigil C++ API: RAII handles and exceptions over the C API (vigil.h).
//
//   vigil::Communicator comm = vigil::Communicator::fromEnv();
//   comm.allReduce(grad.data(), grad.data(), grad.size());   // float: sum
//
// Every failure throws vigil::Error, whose what() is the C API's error text
// ("VG-PEER-001: rank 0/4 ..."), with result() and id() for programs.
#ifndef VIGIL_VIGIL_HPP
#define VIGIL_VIGIL_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "vigil/vigil.h"

namespace vigil {

class Error : public std::runtime_error {
 public:
  Error(vigilResult_t result, const std::string& text) : std::runtime_error(text), result_(result) {}
  vigilResult_t result() const noexcept { return result_; }
  // "VG-BOOT-003", or "" if the text carries no id.
  std::string id() const {
    std::string text = what();
    size_t colon = text.find(':');
    return text.rfind("VG-", 0) == 0 && colon != std::string::npos ? text.substr(0, colon) : std::string();
  }

 private:
  vigilResult_t result_;
};

inline void check(vigilResult_t result, vigilComm_t comm = nullptr) {
  if (result != vigilSuccess) throw Error(result, vigilGetLastError(comm));
}

// The vigil data type of a C++ element type.
template <class T>
struct DataType;
template <>
struct DataType<int8_t> {
  static constexpr vigilDataType_t value = vigilInt8;
};
template <>
struct DataType<uint8_t> {
  static constexpr vigilDataType_t value = vigilUint8;
};
template <>
struct DataType<int32_t> {
  static constexpr vigilDataType_t value = vigilInt32;
};
template <>
struct DataType<uint32_t> {
  static constexpr vigilDataType_t value = vigilUint32;
};
template <>
struct DataType<int64_t> {
  static constexpr vigilDataType_t value = vigilInt64;
};
template <>
struct DataType<uint64_t> {
  static constexpr vigilDataType_t value = vigilUint64;
};
template <>
struct DataType<float> {
  static constexpr vigilDataType_t value = vigilFloat32;
};
template <>
struct DataType<double> {
  static constexpr vigilDataType_t value = vigilFloat64;
};

class RootInfo {
 public:
  // Starts the rendezvous root in this process.
  static RootInfo create() {
    RootInfo info;
    check(vigilGetRootInfo(&info.raw_));
    return info;
  }
  static RootInfo fromString(const std::string& text) {
    RootInfo info;
    check(vigilRootInfoFromString(text.c_str(), &info.raw_));
    return info;
  }
  std::string toString() const {
    char text[2 * VIGIL_ROOT_INFO_BYTES + 1];
    check(vigilRootInfoToString(&raw_, text, sizeof text));
    return text;
  }
  const vigilRootInfo* get() const { return &raw_; }

 private:
  vigilRootInfo raw_{};
};

class Communicator {
 public:
  Communicator(int nranks, const RootInfo& root, int rank, const vigilConfig* config = nullptr) {
    check(vigilCommInitRootInfoConfig(nranks, root.get(), rank, config, &comm_));
  }
  static Communicator fromEnv() {
    vigilComm_t comm = nullptr;
    check(vigilCommInitFromEnv(&comm));
    return Communicator(comm);
  }
  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() { reset(); }

  vigilComm_t get() const { return comm_; }
  int rank() const {
    int r = -1;
    check(vigilCommUserRank(comm_, &r), comm_);
    return r;
  }
  int size() const {
    int n = 0;
    check(vigilCommCount(comm_, &n), comm_);
    return n;
  }
  // The sticky error of an earlier failed operation, or vigilSuccess.
  vigilResult_t asyncError() const {
    vigilResult_t e = vigilSuccess;
    check(vigilCommGetAsyncError(comm_, &e), comm_);
    return e;
  }

  template <class T>
  void allReduce(const T* send, T* recv, size_t count, vigilRedOp_t op = vigilSum, vigilStream_t s = nullptr) {
    check(vigilAllReduce(send, recv, count, DataType<T>::value, op, comm_, s), comm_);
  }
  template <class T>
  void broadcast(const T* send, T* recv, size_t count, int root, vigilStream_t s = nullptr) {
    check(vigilBroadcast(send, recv, count, DataType<T>::value, root, comm_, s), comm_);
  }
  template <class T>
  void reduce(const T* send, T* recv, size_t count, vigilRedOp_t op, int root, vigilStream_t s = nullptr) {
    check(vigilReduce(send, recv, count, DataType<T>::value, op, root, comm_, s), comm_);
  }
  template <class T>
  void allGather(const T* send, T* recv, size_t sendcount, vigilStream_t s = nullptr) {
    check(vigilAllGather(send, recv, sendcount, DataType<T>::value, comm_, s), comm_);
  }
  template <class T>
  void reduceScatter(const T* send, T* recv, size_t recvcount, vigilRedOp_t op = vigilSum, vigilStream_t s = nullptr) {
    check(vigilReduceScatter(send, recv, recvcount, DataType<T>::value, op, comm_, s), comm_);
  }
  template <class T>
  void allToAll(const T* send, T* recv, size_t count, vigilStream_t s = nullptr) {
    check(vigilAllToAll(send, recv, count, DataType<T>::value, comm_, s), comm_);
  }
  template <class T>
  void gather(const T* send, T* recv, size_t sendcount, int root, vigilStream_t s = nullptr) {
    check(vigilGather(send, recv, sendcount, DataType<T>::value, root, comm_, s), comm_);
  }
  template <class T>
  void scatter(const T* send, T* recv, size_t recvcount, int root, vigilStream_t s = nullptr) {
    check(vigilScatter(send, recv, recvcount, DataType<T>::value, root, comm_, s), comm_);
  }
  template <class T>
  void send(const T* data, size_t count, int peer, vigilStream_t s = nullptr) {
    check(vigilSend(data, count, DataType<T>::value, peer, comm_, s), comm_);
  }
  template <class T>
  void recv(T* data, size_t count, int peer, vigilStream_t s = nullptr) {
    check(vigilRecv(data, count, DataType<T>::value, peer, comm_, s), comm_);
  }
  void barrier(vigilStream_t s = nullptr) { check(vigilBarrier(comm_, s), comm_); }

  void finalize() { check(vigilCommFinalize(comm_), comm_); }
  // Cancels in-flight work (blocked operations in other threads throw
  // vigilAborted) and frees the communicator.
  void abort() { check(vigilCommAbort(std::exchange(comm_, nullptr))); }

 private:
  explicit Communicator(vigilComm_t comm) : comm_(comm) {}
  void reset() noexcept {
    if (comm_ != nullptr) vigilCommDestroy(std::exchange(comm_, nullptr));
  }
  vigilComm_t comm_ = nullptr;
};

// Operations issued while a Group is open run as one batch when end() is
// called (or, without an exception in flight, when the Group is destroyed).
class Group {
 public:
  Group() { check(vigilGroupStart()); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  void end() {
    if (open_) {
      open_ = false;
      check(vigilGroupEnd());
    }
  }
  ~Group() noexcept(false) {
    if (!open_) return;
    open_ = false;
    vigilResult_t rc = vigilGroupEnd();
    if (rc != vigilSuccess && std::uncaught_exceptions() == 0) throw Error(rc, vigilGetLastError(nullptr));
  }

 private:
  bool open_ = true;
};

}  // namespace vigil

#endif  // VIGIL_VIGIL_HPP
