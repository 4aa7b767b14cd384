#include "net/wire.hpp"

#include <sys/random.h>

#include <cerrno>

#include "core/errors.hpp"

namespace vigil {

namespace {
constexpr size_t kMaxErrorField = 1 << 16;
}  // namespace

void putError(WireWriter& w, const Error& error) {
  w.putString(error.id())
      .put<uint32_t>(static_cast<uint32_t>(error.result()))
      .put<int32_t>(error.rank())
      .put<int32_t>(error.nranks())
      .putString(error.comm())
      .putString(error.op())
      .put<int64_t>(error.seq())
      .put<int32_t>(error.peer())
      .putString(std::string_view(error.cause()).substr(0, kMaxErrorField))
      .putString(std::string_view(error.remedy()).substr(0, kMaxErrorField));
}

Error getError(WireReader& r) {
  const std::string id = r.getString(32);
  const std::optional<Errc> errc = errcOfId(id);
  if (!errc) throw WireFormatError("unknown error id");
  const auto result = r.get<uint32_t>();
  if (result == vigilSuccess || result > vigilNumericError) throw WireFormatError("bad result code in an error");
  const auto rank = r.get<int32_t>();
  const auto nranks = r.get<int32_t>();
  const std::string comm = r.getString(4096);
  const std::string op = r.getString(4096);
  const auto seq = r.get<int64_t>();
  const auto peer = r.get<int32_t>();
  const std::string cause = r.getString(kMaxErrorField);
  const std::string remedy = r.getString(kMaxErrorField);
  return ErrorBuilder(*errc)
      .result(static_cast<vigilResult_t>(result))
      .rank(rank, nranks)
      .comm(comm)
      .op(op, seq)
      .peer(peer)
      .cause(cause)
      .remedy(remedy)
      .build();
}

JobToken randomToken() {
  JobToken token{};
  size_t filled = 0;
  while (filled < token.size()) {
    ssize_t n = getrandom(token.data() + filled, token.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      ErrorBuilder(Errc::NetSyscall).cause("getrandom() failed: ", errnoText(errno)).raise();
    }
    filled += static_cast<size_t>(n);
  }
  return token;
}

WireWriter& WireWriter::putBytes(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  bytes_.insert(bytes_.end(), p, p + n);
  return *this;
}

std::vector<uint8_t>& FrameWriter::frame() {
  const auto length = static_cast<uint32_t>(bytes().size() - sizeof(uint32_t));
  std::memcpy(bytes().data(), &length, sizeof length);
  return bytes();
}

std::string tokenTag(const JobToken& token) {
  static const char* const kHex = "0123456789abcdef";
  std::string tag;
  for (int i = 0; i < 4; ++i) {
    tag += kHex[token[i] >> 4];
    tag += kHex[token[i] & 15];
  }
  return tag;
}

IoStatus sendMessage(int fd, const std::vector<uint8_t>& payload, Deadline deadline, int wakeFd) {
  uint32_t length = static_cast<uint32_t>(payload.size());
  IoStatus st = sendAll(fd, &length, sizeof length, deadline, wakeFd);
  if (st != IoStatus::Done) return st;
  return sendAll(fd, payload.data(), payload.size(), deadline, wakeFd);
}

ReceivedMessage recvMessage(int fd, size_t maxBytes, Deadline deadline, int wakeFd) {
  ReceivedMessage msg;
  uint32_t length = 0;
  msg.status = recvAll(fd, &length, sizeof length, deadline, wakeFd);
  if (msg.status != IoStatus::Done) return msg;
  if (length > maxBytes) {
    msg.status = IoStatus::Failed;
    msg.tooLarge = true;
    return msg;
  }
  msg.payload.resize(length);
  msg.status = recvAll(fd, msg.payload.data(), length, deadline, wakeFd);
  return msg;
}

}  // namespace vigil
