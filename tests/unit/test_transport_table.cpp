// The transport table and the transport interface, without a communicator:
// two ranks as threads, joined by a socket pair as their mesh's data
// connection, connect through connectTransport and move framed messages
// through the Transport interface alone.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "net/event_fd.hpp"
#include "net/socket.hpp"
#include "transport/transport.hpp"
#include "transport/ucx_transport.hpp"

namespace vigil {
namespace {

// Nothing outside the sockets happens: no abort, no peer change.
class QuietWatch final : public LivenessWatch {
 public:
  int fatalFd() const override { return fatal_.fd(); }
  int peerChangeFd() const override { return -1; }
  int checkPeers(std::span<const int>) override { return -1; }

 private:
  EventFd fatal_;
};

std::vector<PeerInfo> peersOn(const std::vector<std::string>& hostIds) {
  std::vector<PeerInfo> peers(hostIds.size());
  for (size_t r = 0; r < hostIds.size(); ++r) {
    peers[r].hostname = "host-" + hostIds[r];
    peers[r].hostId = hostIds[r];
    peers[r].pid = 1000;
  }
  return peers;
}

const TransportRow& row(const char* name) {
  for (const TransportRow& r : transportTable()) {
    if (std::strcmp(r.name, name) == 0) return r;
  }
  throw std::runtime_error(std::string("no row ") + name);
}

TEST(TransportTable, EveryRowIsComplete) {
  std::set<std::string> names;
  for (const TransportRow& r : transportTable()) {
    SCOPED_TRACE(r.name);
    EXPECT_TRUE(names.insert(r.name).second) << "names are unique";
    EXPECT_STRNE(r.description, "");
    EXPECT_NE(r.unreachable, nullptr);
    EXPECT_NE(r.connect, nullptr);
    EXPECT_NE(r.autoPicks, nullptr);
    EXPECT_STREQ(toString(r.kind), r.name) << "the row's name is its VIGIL_TRANSPORT word";
  }
  // auto prefers shared memory where it reaches every rank, then UCX
  // across hosts with an RDMA device, then tcp.
  ASSERT_EQ(transportTable().size(), 3u);
  EXPECT_STREQ(transportTable()[0].name, "shm");
  EXPECT_STREQ(transportTable()[1].name, "ucx");
  EXPECT_STREQ(transportTable()[2].name, "tcp");
}

TEST(TransportTable, OneRankGetsTcpWithoutConnections) {
  const std::vector<PeerInfo> peers = peersOn({"a"});
  const JobToken token{};
  std::vector<Fd> fds(1);
  TransportSetup setup{
      .rank = 0, .nranks = 1, .peers = peers, .token = token, .dataFds = fds, .deadline = Deadline::afterMs(10000)};
  std::unique_ptr<Transport> t = connectTransport(TransportKind::Shm, setup);
  EXPECT_STREQ(t->name(), "tcp");
  EXPECT_EQ(t->capabilities(), row("tcp").capabilities);
  EXPECT_EQ(t->loadStore(), nullptr);
}

TEST(TransportTable, ForcedShmAcrossHostsNamesTheRanksElsewhere) {
  const std::vector<PeerInfo> peers = peersOn({"a", "a", "b", "c"});
  const JobToken token{};
  std::vector<Fd> fds(4);
  TransportSetup setup{
      .rank = 1, .nranks = 4, .peers = peers, .token = token, .dataFds = fds, .deadline = Deadline::afterMs(10000)};
  EXPECT_EQ(row("shm").unreachable(setup), "rank(s) 2, 3 run on another host than rank 1 (host-a)");
  EXPECT_EQ(row("tcp").unreachable(setup), "");
  try {
    connectTransport(TransportKind::Shm, setup);
    FAIL() << "VIGIL_TRANSPORT=shm across hosts must fail";
  } catch (const Error& e) {
    EXPECT_STREQ(e.id(), "VG-NET-006");
    EXPECT_EQ(e.rank(), 1);
    EXPECT_NE(e.text().find("VIGIL_TRANSPORT=shm, but rank(s) 2, 3 run on another host than rank 1 (host-a)"),
              std::string::npos)
        << e.text();
  }
}

// Two ranks connect over `kind` and rank 0 sends rank 1 one message in two
// pieces; returns what each rank's transport said about itself.
struct Connected {
  std::string name[2];
  Capabilities caps[2] = {0, 0};
  bool loadStore[2] = {false, false};
};

Connected connectPairAndSend(TransportKind kind, size_t floats = 1000) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("socketpair");
  Fd ends[2] = {Fd(sv[0]), Fd(sv[1])};
  setNonBlocking(ends[0].get());
  setNonBlocking(ends[1].get());
  const std::vector<PeerInfo> peers = peersOn({"a", "a"});
  JobToken token{};
  token[0] = 0x5a;
  Connected out;
  std::vector<float> sent(floats), received(floats, -1.0f);
  const size_t firstPiece = floats * 2 / 5;
  std::iota(sent.begin(), sent.end(), 0.5f);
  auto rank = [&](int me) {
    std::vector<Fd> fds(2);
    fds[static_cast<size_t>(1 - me)] = std::move(ends[me]);
    TransportSetup setup{
        .rank = me, .nranks = 2, .peers = peers, .token = token, .dataFds = fds, .deadline = Deadline::afterMs(20000)};
    std::unique_ptr<Transport> t = connectTransport(kind, setup);
    out.name[me] = t->name();
    out.caps[me] = t->capabilities();
    out.loadStore[me] = t->loadStore() != nullptr;
    FrameHeader header;
    header.kind = static_cast<uint8_t>(FrameKind::PointToPoint);
    header.seq = 1;
    header.count = sent.size();
    QuietWatch watch;
    // The payload in two pieces: gathered on the way out, scattered on the way in.
    IoSegment pieces[2] = {{me == 0 ? static_cast<void*>(sent.data()) : received.data(), firstPiece * sizeof(float)},
                           {me == 0 ? static_cast<void*>(sent.data() + firstPiece) : received.data() + firstPiece,
                            (floats - firstPiece) * sizeof(float)}};
    Transfer transfer = me == 0 ? Transfer::send(1, sent.data(), sizeof(float) * sent.size())
                                : Transfer::recv(0, received.data(), sizeof(float) * received.size());
    transfer.segments = pieces;
    ExchangeFault fault = t->exchange(std::span(&transfer, 1), header, true, Deadline::afterMs(20000), watch, nullptr);
    EXPECT_EQ(fault.kind, ExchangeFault::Kind::None) << "rank " << me;
    EXPECT_FALSE(t->unreceived(1 - me).has_value()) << "rank " << me;
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  EXPECT_EQ(received, sent);
  return out;
}

TEST(TransportInterface, ShmConnectsTwoRanksOnOneHostAndMovesAGatheredMessage) {
  const Connected c = connectPairAndSend(TransportKind::Auto);  // auto: one host, so shm
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(c.name[r], "shm");
    EXPECT_EQ(c.caps[r], row("shm").capabilities) << "the row says what the transport has";
    EXPECT_TRUE(has(c.caps[r], Capability::LoadStore));
    EXPECT_TRUE(c.loadStore[r]);
  }
}

TEST(TransportInterface, TcpConnectsTwoRanksAndMovesAGatheredMessage) {
  const Connected c = connectPairAndSend(TransportKind::Tcp);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(c.name[r], "tcp");
    EXPECT_EQ(c.caps[r], row("tcp").capabilities);
    EXPECT_FALSE(has(c.caps[r], Capability::LoadStore));
    EXPECT_FALSE(has(c.caps[r], Capability::Rma));
    EXPECT_FALSE(c.loadStore[r]);
  }
}

#if VIGIL_TEST_UCX
// Small (with its header in one send) and large (header, then the payload
// straight into the pieces) messages over UCX.
TEST(TransportInterface, UcxConnectsTwoRanksAndMovesSmallAndLargeGatheredMessages) {
  for (size_t floats : {size_t{1000}, size_t{1} << 20}) {
    SCOPED_TRACE(floats);
    const Connected c = connectPairAndSend(TransportKind::Ucx, floats);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(c.name[r], "ucx");
      EXPECT_EQ(c.caps[r], row("ucx").capabilities);
      EXPECT_TRUE(has(c.caps[r], Capability::Rma));
      EXPECT_FALSE(c.loadStore[r]);
    }
  }
}

// VIGIL_SOCKET_IFNAME picks UCX's interfaces for tcp, and never hides an
// RDMA device from it; an exclusion or no setting leaves UCX to choose.
TEST(TransportInterface, SocketIfnameMapsOntoUcxNetDevices) {
  EXPECT_EQ(ucxNetDevices("eth0", {}), "eth0");
  EXPECT_EQ(ucxNetDevices("eth0,ib0", {"mlx5_0:1", "mlx5_1:1"}), "eth0,ib0,mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(ucxNetDevices("^docker0", {"mlx5_0:1"}), "");
  EXPECT_EQ(ucxNetDevices("", {"mlx5_0:1"}), "");
}

// A device UCX does not have: init fails on both ranks with VG-NET-007,
// naming the step and quoting UCX, instead of hanging or crashing.
TEST(TransportInterface, UcxOnADeviceThatDoesNotExistFailsInitQuotingUcx) {
  ::setenv("UCX_NET_DEVICES", "vigil_no_such_device:1", 1);  // before any thread of this test
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Fd ends[2] = {Fd(sv[0]), Fd(sv[1])};
  const std::vector<PeerInfo> peers = peersOn({"a", "a"});
  const JobToken token{};
  std::string texts[2];
  auto rank = [&](int me) {
    std::vector<Fd> fds(2);
    fds[static_cast<size_t>(1 - me)] = std::move(ends[me]);
    TransportSetup setup{
        .rank = me, .nranks = 2, .peers = peers, .token = token, .dataFds = fds, .deadline = Deadline::afterMs(20000)};
    try {
      connectTransport(TransportKind::Ucx, setup);
    } catch (const Error& e) {
      texts[me] = e.text();
    }
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  ::unsetenv("UCX_NET_DEVICES");
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(texts[r]);
    EXPECT_TRUE(texts[r].starts_with("VG-NET-007: rank " + std::to_string(r) + "/2: init: "));
    EXPECT_NE(texts[r].find("creating the UCX endpoint to rank " + std::to_string(1 - r)), std::string::npos);
    EXPECT_NE(texts[r].find("UCX says \"Destination is unreachable\""), std::string::npos);
    EXPECT_NE(texts[r].find("UCX_NET_DEVICES"), std::string::npos) << "the remedy names the setting";
  }
}
#elif !VIGIL_HAVE_UCX
TEST(TransportTable, UcxWithoutUcxSaysWhatIsMissing) {
  const std::vector<PeerInfo> peers = peersOn({"a", "b"});
  const JobToken token{};
  std::vector<Fd> fds(2);
  TransportSetup setup{
      .rank = 0, .nranks = 2, .peers = peers, .token = token, .dataFds = fds, .deadline = Deadline::afterMs(10000)};
  try {
    connectTransport(TransportKind::Ucx, setup);
    FAIL() << "a build without UCX must refuse VIGIL_TRANSPORT=ucx";
  } catch (const Error& e) {
    EXPECT_STREQ(e.id(), "VG-NET-007");
    EXPECT_NE(e.text().find("built without the ucx transport"), std::string::npos) << e.text();
  }
}
#endif

}  // namespace
}  // namespace vigil
