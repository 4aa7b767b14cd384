#include "bootstrap/rendezvous.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "core/errors.hpp"
#include "core/log.hpp"

namespace vigil {

std::vector<uint8_t> Hello::encode() const {
  WireWriter w;
  w.put(nranks).put(rank).put(libVersion).put(wireVersion).put(pid);
  w.putString(hostname).putString(hostId);
  uint8_t addr[SocketAddress::kPackedBytes];
  listenAddress.pack(addr);
  w.putBytes(addr, sizeof addr);
  w.put(connectTimeoutMs).put(timeoutMs).put(fingerprint).put(nanCheck).put(bufferGuard).put(transport);
  return std::move(w.bytes());
}

Hello Hello::decode(const std::vector<uint8_t>& bytes) {
  WireReader r(bytes);
  Hello h;
  h.nranks = r.get<int32_t>();
  h.rank = r.get<int32_t>();
  h.libVersion = r.get<uint32_t>();
  h.wireVersion = r.get<uint16_t>();
  h.pid = r.get<uint32_t>();
  h.hostname = r.getString(256);
  h.hostId = r.getString(256);
  const uint8_t* addr = r.getBytes(SocketAddress::kPackedBytes);
  if (addr[0] != 4 && addr[0] != 6) throw WireFormatError("bad address family");
  h.listenAddress = SocketAddress::unpack(addr);
  h.connectTimeoutMs = r.get<int32_t>();
  h.timeoutMs = r.get<int32_t>();
  h.fingerprint = r.get<uint8_t>();
  h.nanCheck = r.get<uint8_t>();
  h.bufferGuard = r.get<uint8_t>();
  h.transport = r.get<uint8_t>();
  if (!r.done()) throw WireFormatError("trailing bytes after hello");
  return h;
}

std::string Hello::where() const {
  return cat("rank ", rank, " (host ", hostname, ", pid ", pid, ")");
}

std::vector<uint8_t> RendezvousReply::encode() const {
  WireWriter w;
  w.put<uint8_t>(ok ? 0 : 1);
  if (!ok) {
    w.put<uint32_t>(result).putString(errorText);
    if (error) putError(w, *error);
    return std::move(w.bytes());
  }
  w.put<uint32_t>(static_cast<uint32_t>(peers.size()));
  for (const PeerInfo& p : peers) {
    w.putString(p.hostname).putString(p.hostId).put(p.pid);
    uint8_t addr[SocketAddress::kPackedBytes];
    p.address.pack(addr);
    w.putBytes(addr, sizeof addr);
  }
  return std::move(w.bytes());
}

RendezvousReply RendezvousReply::decode(const std::vector<uint8_t>& bytes) {
  WireReader r(bytes);
  RendezvousReply reply;
  reply.ok = r.get<uint8_t>() == 0;
  if (!reply.ok) {
    reply.result = static_cast<vigilResult_t>(r.get<uint32_t>());
    reply.errorText = r.getString(1 << 20);
    if (!r.done()) reply.error = getError(r);
    return reply;
  }
  auto count = r.get<uint32_t>();
  if (count > (1u << 20)) throw WireFormatError("absurd rank count in reply");
  reply.peers.resize(count);
  for (PeerInfo& p : reply.peers) {
    p.hostname = r.getString(256);
    p.hostId = r.getString(256);
    p.pid = r.get<uint32_t>();
    const uint8_t* addr = r.getBytes(SocketAddress::kPackedBytes);
    if (addr[0] != 4 && addr[0] != 6) throw WireFormatError("bad address family");
    p.address = SocketAddress::unpack(addr);
  }
  return reply;
}

size_t maxReplyBytes(int nranks) {
  return 4096 + static_cast<size_t>(nranks) * 1024;
}

const std::string& localHostId() {
  static const std::string id = [] {
    std::string boot;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
    struct stat st {};
    std::string netns = stat("/proc/self/ns/net", &st) == 0 ? std::to_string(st.st_ino) : "0";
    return cat(boot.empty() ? localHostName() : boot, "/", netns);
  }();
  return id;
}

namespace {

// VG-BOOT-011: the root at `root` went away; `what` says how.
[[noreturn]] void raiseRootGone(const SocketAddress& root, const Hello& hello, const std::string& what) {
  ErrorBuilder(Errc::BootRootFailed)
      .rank(hello.rank, hello.nranks)
      .op("init")
      .cause("the rendezvous root at ", root.toString(), " ", what)
      .raise();
}

// A connection to the root. The first attempt retries until the connect
// timeout (VG-BOOT-002 if the root never accepts); a later one tries once,
// and a root that refuses it has gone (VG-BOOT-011).
Fd connectToRoot(const SocketAddress& root, const Hello& hello, Deadline deadline, int attempt) {
  std::string lastError;
  Fd fd = attempt == 0 ? connectWithRetry(root, deadline, -1, &lastError) : connectOnce(root, deadline, &lastError);
  if (!fd && attempt == 0) {
    ErrorBuilder(Errc::BootRootUnreachable)
        .rank(hello.rank, hello.nranks)
        .op("init")
        .cause("could not connect to the rendezvous root at ", root.toString(), " within ", hello.connectTimeoutMs,
               " ms (last error: ", lastError, ")")
        .raise();
  }
  if (!fd) {
    raiseRootGone(root, hello,
                  cat("closed this rank's connection before answering and refuses new ones (", lastError,
                      "): did its process exit?"));
  }
  return fd;
}

// Sends the preamble and the hello on `fd` and waits for the root's reply.
// The returned status is that of the last send or receive: Done only with
// the reply in the payload.
ReceivedMessage exchangeHello(int fd, const Preamble& preamble, const std::vector<uint8_t>& helloBytes, int nranks,
                              Deadline deadline, Deadline replyDeadline) {
  ReceivedMessage msg;
  IoStatus st = sendAll(fd, &preamble, sizeof preamble, deadline);
  if (st == IoStatus::Done) st = sendMessage(fd, helloBytes, deadline);
  while (st == IoStatus::Done) {
    msg = recvMessage(fd, maxReplyBytes(nranks), replyDeadline);
    st = msg.status;
    // A root that does not trust the token alone asks for a confirmation first.
    if (st != IoStatus::Done || !RendezvousReply::isConfirmRequest(msg.payload)) break;
    st = sendMessage(fd, msg.payload, deadline);
  }
  msg.status = st;
  return msg;
}

// What the root answered to this rank's hello, and after how many connections.
struct RootAnswer {
  ReceivedMessage msg;
  int attempts = 0;
};

// Connects to the root, sends this rank's hello and waits for the answer.
// A root at its limit of unidentified connections closes the oldest to make
// room, maybe ours before it read the hello: then this rank connects again,
// with a backoff, as long as the root still accepts connections. A root
// that refuses them has gone, and that is said at once.
RootAnswer askRoot(const SocketAddress& root, const JobToken& token, const Hello& hello, Deadline deadline) {
  Preamble preamble;
  preamble.kind = static_cast<uint16_t>(ConnKind::Rendezvous);
  preamble.wireVersion = hello.wireVersion;
  preamble.token = token;
  preamble.rank = hello.rank;
  preamble.libVersion = hello.libVersion;
  const std::vector<uint8_t> helloBytes = hello.encode();
  // The root answers at its own deadline at the latest (it starts counting at
  // the first arrival, never later than ours); the grace covers clock skew
  // between its deadline and ours.
  Deadline replyDeadline(deadline.at() + std::chrono::seconds(5));
  RootAnswer answer;
  int backoffMs = 10;
  for (int attempt = 0;; ++attempt) {
    ++answer.attempts;
    Fd fd = connectToRoot(root, hello, deadline, attempt);
    answer.msg = exchangeHello(fd.get(), preamble, helloBytes, hello.nranks, deadline, replyDeadline);
    if (answer.msg.status != IoStatus::Closed || deadline.expired()) break;
    VIGIL_LOG_AT(LogLevel::Info, hello.rank, "the rendezvous root at ", root.toString(),
                 " closed the connection before answering (attempt ", attempt + 1, "); connecting again");
    pollfd none{-1, 0, 0};
    ::poll(&none, 0, std::min(backoffMs, deadline.pollTimeoutMs()));  // backoff, not synchronisation
    backoffMs = std::min(backoffMs * 2, 500);
  }
  return answer;
}

// The root closed every connection before answering (VG-BOOT-011), or gave
// no answer before the connect timeout (VG-BOOT-003).
[[noreturn]] void raiseNoAnswer(const SocketAddress& root, const Hello& hello, const RootAnswer& answer) {
  const bool timedOut = answer.msg.status == IoStatus::TimedOut;
  if (!timedOut && answer.attempts > 1) {
    raiseRootGone(root, hello,
                  cat("closed this rank's connection before answering on each of ", answer.attempts,
                      " attempts until the connect timeout: it does not take this rank's hello (another job's "
                      "token or root info? the root's log names the reason, VG-NET-004)"));
  }
  if (!timedOut) raiseRootGone(root, hello, "closed the connection before answering (did its process exit?)");
  ErrorBuilder(Errc::BootMissingRanks)
      .rank(hello.rank, hello.nranks)
      .op("init")
      .cause("the rendezvous root at ", root.toString(),
             " gave no answer before the connect timeout; the ranks that arrived are unknown to this rank")
      .raise();
}

// The table of all ranks from the root's reply, or the error it stands for:
// a malformed reply or table (VG-PEER-004), or the root's refusal of this rank.
std::vector<PeerInfo> peersFromReply(const std::vector<uint8_t>& payload, const Hello& hello) {
  RendezvousReply reply;
  try {
    reply = RendezvousReply::decode(payload);
  } catch (const WireFormatError& e) {
    ErrorBuilder(Errc::PeerProtocol)
        .rank(hello.rank, hello.nranks)
        .op("init")
        .cause("the rendezvous root sent a malformed reply: ", e.what())
        .raise();
  }
  if (!reply.ok) {
    // The root's verdict is the same error on every rank; each rank adds who it is.
    if (reply.error) ErrorBuilder::from(*reply.error).rank(hello.rank, hello.nranks).raise();
    // A root of another version: its text is all there is.
    ErrorBuilder(Errc::BootRootFailed)
        .result(reply.result)
        .rank(hello.rank, hello.nranks)
        .op("init")
        .cause("the rendezvous root refused this rank: ", reply.errorText)
        .raise();
  }
  if (static_cast<int>(reply.peers.size()) != hello.nranks) {
    ErrorBuilder(Errc::PeerProtocol)
        .rank(hello.rank, hello.nranks)
        .op("init")
        .cause("the rendezvous root sent a table of ", reply.peers.size(), " ranks")
        .raise();
  }
  return std::move(reply.peers);
}

}  // namespace

std::vector<PeerInfo> rendezvous(const SocketAddress& root, const JobToken& token, const Hello& hello,
                                 Deadline deadline) {
  const RootAnswer answer = askRoot(root, token, hello, deadline);
  if (answer.msg.status != IoStatus::Done) raiseNoAnswer(root, hello, answer);
  return peersFromReply(answer.msg.payload, hello);
}

}  // namespace vigil
