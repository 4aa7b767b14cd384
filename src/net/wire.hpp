#pragma once
// What goes on the wire before and around the data: the connection preamble
// (magic, wire version, job token) that every connection must present first,
// and bounds-checked message encoding for bootstrap and control traffic.
// Hosts are little-endian (x86-64, AArch64); the static_assert keeps it honest.

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "net/socket.hpp"

namespace vigil {

static_assert(std::endian::native == std::endian::little, "vigil's wire format assumes little-endian hosts");

constexpr uint32_t kWireMagic = 0x4c494756;  // "VGIL"
constexpr uint16_t kWireVersion = 2;         // 2: control notices carry errors as fields

enum class ConnKind : uint16_t { Rendezvous = 1, Control = 2, Data = 3 };

using JobToken = std::array<uint8_t, 16>;

JobToken randomToken();                       // from getrandom(); throws VG-NET-003 if unavailable
std::string tokenTag(const JobToken& token);  // first 4 bytes in hex, for logs

struct Preamble {
  uint32_t magic = kWireMagic;
  uint16_t wireVersion = kWireVersion;
  uint16_t kind = 0;
  JobToken token{};
  int32_t rank = -1;
  uint32_t libVersion = 0;
};
static_assert(sizeof(Preamble) == 32);

// How long an accepted connection has to identify itself (its preamble, and
// at the rendezvous root its hello) before it is closed as a stranger.
constexpr int kPreambleTimeoutMs = 10000;

// Decoding failures of untrusted bytes. Caught where the bytes come in and
// turned into a rejected connection or a VG-PEER-004 error.
class WireFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class WireWriter {
 public:
  template <class T>
  WireWriter& put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    return putBytes(&value, sizeof(T));
  }
  WireWriter& putString(std::string_view s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    return putBytes(s.data(), s.size());
  }
  // Out of line: inlined into every caller, vector's growth path makes GCC 12 at -O3
  // report false -Wstringop-overflow / -Warray-bounds errors.
  WireWriter& putBytes(const void* data, size_t n);
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A length-prefixed message built in place: the u32 length is reserved first
// and filled in by frame(), so no caller computes it and the message goes out
// in one send. The same bytes as sendMessage's.
class FrameWriter : public WireWriter {
 public:
  FrameWriter() { put<uint32_t>(0); }
  std::vector<uint8_t>& frame();  // the whole message, length filled in
};

class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  explicit WireReader(const std::vector<uint8_t>& v) : WireReader(v.data(), v.size()) {}

  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string getString(size_t maxBytes = 4096) {
    auto n = get<uint32_t>();
    if (n > maxBytes) throw WireFormatError("string longer than allowed");
    need(n);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  const uint8_t* getBytes(size_t n) {
    need(n);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  bool done() const { return pos_ == size_; }

 private:
  void need(size_t n) const {
    if (n > size_ - pos_) throw WireFormatError("message shorter than its contents");
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// An error as its fields, for the ranks that must learn of it (control
// notices, the rendezvous root's verdict): string id, u32 result, i32 rank,
// i32 nranks, string comm, string op, i64 seq, i32 peer, string cause, string
// remedy. The receiver rebuilds the Error, text included, from the fields.
void putError(WireWriter& w, const Error& error);
// Throws WireFormatError for a malformed error or an id this build does not have.
Error getError(WireReader& r);

// Length-prefixed messages: u32 length, then the bytes. The receiver refuses
// a length above maxBytes before allocating anything.
IoStatus sendMessage(int fd, const std::vector<uint8_t>& payload, Deadline deadline, int wakeFd = -1);

struct ReceivedMessage {
  IoStatus status = IoStatus::Failed;
  bool tooLarge = false;
  std::vector<uint8_t> payload;
};
ReceivedMessage recvMessage(int fd, size_t maxBytes, Deadline deadline, int wakeFd = -1);

}  // namespace vigil
