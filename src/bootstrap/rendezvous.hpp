#pragma once
// The rendezvous: every rank sends a Hello to the root; the root checks that
// all ranks agree (world size, versions, config) and answers with the table
// of all ranks' addresses, or with one error that every rank reports.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/deadline.hpp"
#include "net/socket.hpp"
#include "net/wire.hpp"

namespace vigil {

// Who a rank is and what it requires of the others.
struct Hello {
  int32_t nranks = 0;
  int32_t rank = -1;
  uint32_t libVersion = 0;
  uint16_t wireVersion = kWireVersion;
  uint32_t pid = 0;
  std::string hostname;
  std::string hostId;  // boot id + network namespace: equal iff same host
  SocketAddress listenAddress;
  int32_t connectTimeoutMs = 0;
  // Config that must agree on every rank.
  int32_t timeoutMs = 0;
  uint8_t fingerprint = 1;
  uint8_t nanCheck = 0;
  uint8_t bufferGuard = 0;
  uint8_t transport = 0;

  std::vector<uint8_t> encode() const;
  static Hello decode(const std::vector<uint8_t>& bytes);  // throws WireFormatError
  std::string where() const;                               // "rank 2 (host vm, pid 4711)"
};

struct PeerInfo {
  std::string hostname;
  std::string hostId;
  uint32_t pid = 0;
  SocketAddress address;
};

// The root's answer: the table, or an error (stable format across versions:
// u8 status=1, u32 result, string text; then the error's fields, see
// putError, which a rank of another version ignores).
struct RendezvousReply {
  // A message from the root that is not a reply: "confirm your claim"
  // (u8 kConfirmRequest + 16-byte nonce). The rank sends it back unchanged.
  static constexpr uint8_t kConfirmRequest = 2;
  static bool isConfirmRequest(const std::vector<uint8_t>& bytes) {
    return bytes.size() == 1 + sizeof(JobToken) && bytes[0] == kConfirmRequest;
  }

  bool ok = false;
  vigilResult_t result = vigilSuccess;
  std::string errorText;
  std::optional<Error> error;  // the refusal's fields (absent from a root of an older version)
  std::vector<PeerInfo> peers;

  std::vector<uint8_t> encode() const;
  static RendezvousReply decode(const std::vector<uint8_t>& bytes);  // throws WireFormatError
};

// Largest hello / reply the two sides accept; anything longer is an attack or a bug.
constexpr size_t kMaxHelloBytes = 64 * 1024;
size_t maxReplyBytes(int nranks);

// This host's identity: survives containers and namespaces (boot id + netns inode).
const std::string& localHostId();

// Rank side: connect to the root, send the hello, wait for the reply.
// Throws VG-BOOT-002 (root unreachable), the root's verdict (VG-BOOT-003..007),
// or VG-BOOT-011 (root went away).
std::vector<PeerInfo> rendezvous(const SocketAddress& root, const JobToken& token, const Hello& hello,
                                 Deadline deadline);

}  // namespace vigil
