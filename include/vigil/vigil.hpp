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
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "vigil/vigil.h"

namespace vigil {

// An error's fields (those of vigilErrorInfo, copied: they outlive the next call).
struct ErrorFields {
  std::string id{};  // "VG-BOOT-003"; "" for an error without one
  int rank = -1, nranks = -1;
  std::string commName{}, op{};
  int64_t seq = -1;
  int peer = -1;  // the peer rank the error is about
  std::string cause{}, remedy{};
};

class Error : public std::runtime_error {
 public:
  Error(vigilResult_t result, const std::string& text, ErrorFields fields = {})
      : std::runtime_error(text), result_(result), fields_(std::move(fields)) {}
  vigilResult_t result() const noexcept { return result_; }
  const std::string& id() const noexcept { return fields_.id; }
  const ErrorFields& fields() const noexcept { return fields_; }

 private:
  vigilResult_t result_;
  ErrorFields fields_;
};

// The last error of `comm` (NULL: of this thread), from its fields.
inline Error lastError(vigilResult_t result, vigilComm_t comm = nullptr) {
  vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;
  if (vigilGetLastErrorInfo(comm, &info) != vigilSuccess || *info.text == '\0') {
    return Error(result, std::string("vigil call failed: ") + vigilGetErrorString(result));
  }
  return Error(result, info.text,
               ErrorFields{info.id, info.rank, info.nranks, info.commName, info.op, info.seq, info.peer, info.cause,
                           info.remedy});
}

inline void check(vigilResult_t result, vigilComm_t comm = nullptr) {
  if (result != vigilSuccess) throw lastError(result, comm);
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
// The (value, index) pairs of vigilMinLoc / vigilMaxLoc.
template <>
struct DataType<vigilFloat32Int32_t> {
  static constexpr vigilDataType_t value = vigilFloat32Int32;
};
template <>
struct DataType<vigilFloat64Int32_t> {
  static constexpr vigilDataType_t value = vigilFloat64Int32;
};
template <>
struct DataType<vigilInt32Int32_t> {
  static constexpr vigilDataType_t value = vigilInt32Int32;
};
template <>
struct DataType<vigilInt64Int32_t> {
  static constexpr vigilDataType_t value = vigilInt64Int32;
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
  // False for the result of a split with a negative color (no communicator).
  explicit operator bool() const { return comm_ != nullptr; }
  // Collective: the ranks passing the same color >= 0 form a communicator
  // ordered by (key, rank); a negative color returns an empty Communicator.
  Communicator split(int color, int key) const {
    vigilComm_t child = nullptr;
    check(vigilCommSplit(comm_, color, key, &child), comm_);
    return Communicator(child);
  }
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
  // An operator summing scalar * input over the ranks, for T's data type
  // (vigilRedOpCreatePreMulSum; immediate: the value now, device: *scalar
  // when each op runs). Free it with destroyRedOp.
  template <class T>
  vigilRedOp_t createPreMulSum(T scalar) const {
    vigilRedOp_t op{};
    check(vigilRedOpCreatePreMulSum(&op, &scalar, DataType<T>::value, vigilScalarHostImmediate, comm_), comm_);
    return op;
  }
  template <class T>
  vigilRedOp_t createPreMulSumOf(const T* scalar) const {
    vigilRedOp_t op{};
    check(vigilRedOpCreatePreMulSum(&op, const_cast<T*>(scalar), DataType<T>::value, vigilScalarDevice, comm_), comm_);
    return op;
  }
  void destroyRedOp(vigilRedOp_t op) const { check(vigilRedOpDestroy(op, comm_), comm_); }
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
  // The v-variants: counts and displacements in elements, nranks entries each.
  template <class T>
  void allToAllV(const T* send, const size_t* sendcounts, const size_t* sdispls, T* recv, const size_t* recvcounts,
                 const size_t* rdispls, vigilStream_t s = nullptr) {
    check(vigilAllToAllV(send, sendcounts, sdispls, recv, recvcounts, rdispls, DataType<T>::value, comm_, s), comm_);
  }
  template <class T>
  void allGatherV(const T* send, size_t sendcount, T* recv, const size_t* recvcounts, const size_t* rdispls,
                  vigilStream_t s = nullptr) {
    check(vigilAllGatherV(send, sendcount, recv, recvcounts, rdispls, DataType<T>::value, comm_, s), comm_);
  }
  template <class T>
  void gatherV(const T* send, size_t sendcount, T* recv, const size_t* recvcounts, const size_t* rdispls, int root,
               vigilStream_t s = nullptr) {
    check(vigilGatherV(send, sendcount, recv, recvcounts, rdispls, DataType<T>::value, root, comm_, s), comm_);
  }
  template <class T>
  void scatterV(const T* send, const size_t* sendcounts, const size_t* sdispls, T* recv, size_t recvcount, int root,
                vigilStream_t s = nullptr) {
    check(vigilScatterV(send, sendcounts, sdispls, recv, recvcount, DataType<T>::value, root, comm_, s), comm_);
  }
  template <class T>
  void reduceScatterV(const T* send, T* recv, const size_t* recvcounts, vigilRedOp_t op = vigilSum,
                      vigilStream_t s = nullptr) {
    check(vigilReduceScatterV(send, recv, recvcounts, DataType<T>::value, op, comm_, s), comm_);
  }
  // Prefix reductions: rank r gets the reduction over ranks 0..r (scan) or 0..r-1 (exscan).
  template <class T>
  void scan(const T* send, T* recv, size_t count, vigilRedOp_t op = vigilSum, vigilStream_t s = nullptr) {
    check(vigilScan(send, recv, count, DataType<T>::value, op, comm_, s), comm_);
  }
  template <class T>
  void exscan(const T* send, T* recv, size_t count, vigilRedOp_t op = vigilSum, vigilStream_t s = nullptr) {
    check(vigilExscan(send, recv, count, DataType<T>::value, op, comm_, s), comm_);
  }
  template <class T>
  void send(const T* data, size_t count, int peer, vigilStream_t s = nullptr) {
    check(vigilSend(data, count, DataType<T>::value, peer, comm_, s), comm_);
  }
  template <class T>
  void recv(T* data, size_t count, int peer, vigilStream_t s = nullptr) {
    check(vigilRecv(data, count, DataType<T>::value, peer, comm_, s), comm_);
  }
  // Tagged point-to-point (MPI's matching): the receive returns what matched.
  template <class T>
  void sendTag(const T* data, size_t count, int peer, int tag, vigilStream_t s = nullptr) {
    check(vigilSendTag(data, count, DataType<T>::value, peer, tag, comm_, s), comm_);
  }
  template <class T>
  vigilStatus recvTag(T* data, size_t count, int peer = VIGIL_ANY_SOURCE, int tag = VIGIL_ANY_TAG) {
    vigilStatus status{};
    check(vigilRecvTag(data, count, DataType<T>::value, peer, tag, comm_, &status, nullptr), comm_);
    return status;
  }
  template <class T>
  vigilStatus sendRecv(const T* send, size_t sendcount, int dest, int sendtag, T* recv, size_t recvcount, int source,
                       int recvtag) {
    vigilStatus status{};
    check(vigilSendRecv(send, sendcount, DataType<T>::value, dest, sendtag, recv, recvcount, DataType<T>::value, source,
                        recvtag, comm_, &status, nullptr),
          comm_);
    return status;
  }
  vigilStatus probe(int peer = VIGIL_ANY_SOURCE, int tag = VIGIL_ANY_TAG) {
    vigilStatus status{};
    check(vigilProbe(peer, tag, comm_, &status), comm_);
    return status;
  }
  // The matching message's status, or nothing when none is here now.
  std::optional<vigilStatus> iprobe(int peer = VIGIL_ANY_SOURCE, int tag = VIGIL_ANY_TAG) {
    vigilStatus status{};
    int flag = 0;
    check(vigilIprobe(peer, tag, comm_, &flag, &status), comm_);
    return flag ? std::optional<vigilStatus>(status) : std::nullopt;
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

// A communicator laid out as an n-d grid with named dimensions, row-major
// (the last dimension varies fastest), as training frameworks lay out data,
// tensor and expert parallelism:
//
//   vigil::DeviceMesh mesh(comm, {2, 4}, {"dp", "tp"});
//   mesh.group("tp").allReduce(x, x, n);   // the 4 ranks that share a dp index
//
// group() builds the communicator of one or more dimensions by splitting the
// mesh's communicator on first use and caches it; the first call for a set
// of dimensions is collective (every rank asks for the same groups in the
// same order). The mesh refers to `comm`, which must outlive it.
class DeviceMesh {
 public:
  DeviceMesh(const Communicator& comm, std::vector<int> shape, std::vector<std::string> names)
      : comm_(comm), shape_(std::move(shape)), names_(std::move(names)), rank_(comm.rank()) {
    const int size = comm.size();
    long long product = 1;
    std::string why;
    if (shape_.empty()) why = "the shape has no dimension";
    if (names_.size() != shape_.size()) {
      why = std::to_string(shape_.size()) + " dimension size(s) but " + std::to_string(names_.size()) + " name(s)";
    }
    for (size_t d = 0; d < shape_.size() && why.empty(); ++d) {
      if (shape_[d] < 1) why = "dimension '" + names_[d] + "' has size " + std::to_string(shape_[d]);
      if (names_[d].empty()) why = "dimension " + std::to_string(d) + " has an empty name";
      for (size_t e = 0; e < d && why.empty(); ++e) {
        if (names_[e] == names_[d]) why = "the name '" + names_[d] + "' is used twice";
      }
      product *= shape_[d];
    }
    if (why.empty() && product != size) {
      why = "the sizes multiply to " + std::to_string(product) + ", but the communicator has " + std::to_string(size) +
            " ranks";
    }
    if (!why.empty()) {
      fail(vigilInvalidArgument, "VG-API-016", "shape " + describe() + ": " + why,
           "pass dimension sizes >= 1 whose product is the communicator size, and one distinct, non-empty name "
           "per dimension");
    }
  }
  DeviceMesh(const DeviceMesh&) = delete;
  DeviceMesh& operator=(const DeviceMesh&) = delete;

  int ndim() const { return static_cast<int>(shape_.size()); }
  const std::vector<int>& shape() const { return shape_; }
  const std::vector<std::string>& names() const { return names_; }
  int size(const std::string& dim) const { return shape_[index(dim)]; }
  // This rank's coordinate along `dim`, and all of them.
  int coordinate(const std::string& dim) const { return coordinates()[index(dim)]; }
  std::vector<int> coordinates() const { return coordinatesOf(rank_); }
  std::vector<int> coordinatesOf(int rank) const {
    std::vector<int> c(shape_.size());
    for (size_t d = shape_.size(); d-- > 0;) {
      c[d] = rank % shape_[d];
      rank /= shape_[d];
    }
    return c;
  }
  // The communicator of the ranks that differ from this one only along
  // `dims` (in that order: the first dimension varies slowest in it).
  Communicator& group(const std::string& dim) { return group(std::vector<std::string>{dim}); }
  Communicator& group(const std::vector<std::string>& dims) {
    std::vector<size_t> inside;
    for (const std::string& name : dims) {
      size_t d = index(name);
      for (size_t seen : inside) {
        if (seen == d)
          fail(vigilInvalidArgument, "VG-API-016", "dimension '" + name + "' is named twice in group()",
               "name each dimension of the group once");
      }
      inside.push_back(d);
    }
    auto found = groups_.find(inside);
    if (found != groups_.end()) return found->second;
    const std::vector<int> c = coordinates();
    std::vector<bool> isInside(shape_.size(), false);
    for (size_t d : inside) isInside[d] = true;
    int color = 0, key = 0;
    for (size_t d = 0; d < shape_.size(); ++d) {
      if (!isInside[d]) color = color * shape_[d] + c[d];
    }
    for (size_t d : inside) key = key * shape_[d] + c[d];
    return groups_.emplace(inside, comm_.split(color, key)).first->second;
  }

 private:
  size_t index(const std::string& dim) const {
    for (size_t d = 0; d < names_.size(); ++d) {
      if (names_[d] == dim) return d;
    }
    fail(vigilInvalidArgument, "VG-API-017", "the mesh " + describe() + " has no dimension '" + dim + "'",
         "use one of the dimension names the mesh was built with");
  }
  std::string describe() const {
    std::string text = "[";
    for (size_t d = 0; d < shape_.size(); ++d) {
      text += (d ? ", " : "") + (d < names_.size() ? names_[d] : std::string("?")) + "=" + std::to_string(shape_[d]);
    }
    return text + "]";
  }
  [[noreturn]] void fail(vigilResult_t result, const char* id, const std::string& cause,
                         const std::string& remedy) const {
    ErrorFields fields{.id = id, .rank = rank_, .op = "DeviceMesh", .cause = cause + ".", .remedy = remedy + "."};
    const std::string text =
        fields.id + ": rank " + std::to_string(rank_) + ": DeviceMesh: " + fields.cause + " Remedy: " + fields.remedy;
    throw Error(result, text, std::move(fields));
  }

  const Communicator& comm_;
  std::vector<int> shape_;
  std::vector<std::string> names_;
  int rank_;
  std::map<std::vector<size_t>, Communicator> groups_;
};

}  // namespace vigil

#endif  // VIGIL_VIGIL_HPP
