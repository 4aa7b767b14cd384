// Root info encoding, port ranges, interface choice, and the mesh's
// handling of strangers at a rank's listener.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>

#include "bootstrap/mesh.hpp"
#include "bootstrap/root_info.hpp"
#include "core/errors.hpp"
#include "vigil/vigil.h"

namespace vigil {
namespace {

std::string errorText(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.text();
  }
  return "";
}

TEST(RootInfo, RoundTripsThroughHex) {
  RootInfo info;
  info.token = randomToken();
  info.address = resolveAddress("127.0.0.1", 29500);
  vigilRootInfo raw{};
  info.encode(&raw);
  char text[2 * VIGIL_ROOT_INFO_BYTES + 1];
  ASSERT_EQ(vigilRootInfoToString(&raw, text, sizeof text), vigilSuccess);
  EXPECT_EQ(std::string(text).size(), 256u);
  vigilRootInfo back{};
  ASSERT_EQ(vigilRootInfoFromString(text, &back), vigilSuccess) << vigilGetLastError(nullptr);
  RootInfo decoded = RootInfo::decode(back);
  EXPECT_EQ(decoded.token, info.token);
  EXPECT_EQ(decoded.address.toString(), "127.0.0.1:29500");
}

TEST(RootInfo, BadTextIsRefusedWithAnId) {
  vigilRootInfo out{};
  EXPECT_EQ(vigilRootInfoFromString("abc", &out), vigilInvalidArgument);
  EXPECT_NE(std::string(vigilGetLastError(nullptr)).find("VG-BOOT-001"), std::string::npos);
  EXPECT_NE(std::string(vigilGetLastError(nullptr)).find("has 3 characters; expected 256"), std::string::npos);
  std::string zeros(256, '0');
  EXPECT_EQ(vigilRootInfoFromString(zeros.c_str(), &out), vigilInvalidArgument);
  EXPECT_NE(std::string(vigilGetLastError(nullptr)).find("magic"), std::string::npos);
  std::string notHex(256, 'z');
  EXPECT_EQ(vigilRootInfoFromString(notHex.c_str(), &out), vigilInvalidArgument);
  EXPECT_NE(std::string(vigilGetLastError(nullptr)).find("non-hex character at position 0"), std::string::npos);
  char small[10];
  vigilRootInfo any{};
  EXPECT_EQ(vigilRootInfoToString(&any, small, sizeof small), vigilInvalidArgument);
  EXPECT_NE(std::string(vigilGetLastError(nullptr)).find("VG-API-011"), std::string::npos);
}

TEST(PortRange, TakesTheNextFreePortAndNamesTheRangeWhenFull) {
  SocketAddress lo = resolveAddress("127.0.0.1", 0);
  // Find three consecutive free ports, then hold them all.
  Listener first = listenInRange(lo, {}, "probe");
  uint16_t base = first.address.port();
  first.fd.reset();
  if (base > 65000) base = 40000;
  std::vector<Listener> held;
  PortRange range{base, static_cast<uint16_t>(base + 2)};
  for (int i = 0; i < 3; ++i) {
    held.push_back(listenInRange(lo, range, "test"));
    EXPECT_EQ(held.back().address.port(), base + i) << "the next free port is taken";
  }
  std::string text = errorText([&] { listenInRange(lo, range, "peer connections"); });
  EXPECT_EQ(text.rfind("VG-NET-001: ", 0), 0u) << text;
  EXPECT_NE(text.find("VIGIL_PORT_RANGE=" + range.describe()), std::string::npos) << text;
  EXPECT_NE(text.find("tried ports " + range.describe()), std::string::npos) << text;
  EXPECT_NE(text.find("Address already in use"), std::string::npos) << text;
  // A port frees up: it is taken again.
  held[1].fd.reset();
  EXPECT_EQ(listenInRange(lo, range, "test").address.port(), base + 1);
}

TEST(Interfaces, UnknownNameListsTheInterfacesThatExist) {
  std::string text = errorText([] { selectInterfaceAddress("nosuchif0"); });
  EXPECT_EQ(text.rfind("VG-NET-002: ", 0), 0u) << text;
  EXPECT_NE(text.find("'nosuchif0'"), std::string::npos) << text;
  EXPECT_NE(text.find("lo (127.0.0.1)"), std::string::npos) << text;
  EXPECT_EQ(selectInterfaceAddress("lo").host(), "127.0.0.1");
  EXPECT_NE(selectInterfaceAddress("^lo").host(), "127.0.0.1");
}

TEST(Mesh, StrangersAtARankListenerAreClosedAndTheMeshCompletes) {
  const SocketAddress lo = resolveAddress("127.0.0.1", 0);
  const JobToken token = randomToken();
  std::vector<Listener> listeners;
  std::vector<PeerInfo> peers;
  for (int r = 0; r < 3; ++r) {
    listeners.push_back(listenInRange(lo, {}, "test"));
    peers.push_back({"vm", "host", 1, listeners.back().address});
  }
  // Strangers at rank 0's listener: silent, garbage, wrong token, a valid
  // token claiming an impossible rank.
  auto dial = [&](int r) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const SocketAddress& a = listeners[static_cast<size_t>(r)].address;
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a.storage), a.length), 0);
    return fd;
  };
  std::vector<Fd> strangers;
  strangers.push_back(dial(0));
  strangers.push_back(dial(0));
  ::send(strangers.back().get(), "garbage garbage garbage garbage!!", 33, MSG_NOSIGNAL);
  Preamble wrong;
  wrong.kind = static_cast<uint16_t>(ConnKind::Data);
  wrong.token = randomToken();
  wrong.rank = 1;
  strangers.push_back(dial(0));
  ::send(strangers.back().get(), &wrong, sizeof wrong, MSG_NOSIGNAL);
  Preamble impossible = wrong;
  impossible.token = token;
  impossible.rank = 7;
  strangers.push_back(dial(0));
  ::send(strangers.back().get(), &impossible, sizeof impossible, MSG_NOSIGNAL);

  std::vector<Mesh> meshes(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      try {
        meshes[static_cast<size_t>(r)] =
            connectMesh(listeners[static_cast<size_t>(r)], peers, r, token, VIGIL_VERSION_CODE, Deadline::afterMs(20000));
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.text();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "");
    for (int p = 0; p < 3; ++p) {
      EXPECT_EQ(meshes[static_cast<size_t>(r)].control[static_cast<size_t>(p)].valid(), p != r);
      EXPECT_EQ(meshes[static_cast<size_t>(r)].data[static_cast<size_t>(p)].valid(), p != r);
    }
  }
}

TEST(Mesh, APeerThatNeverConnectsIsNamed) {
  const SocketAddress lo = resolveAddress("127.0.0.1", 0);
  std::vector<Listener> listeners;
  std::vector<PeerInfo> peers;
  for (int r = 0; r < 2; ++r) {
    listeners.push_back(listenInRange(lo, {}, "test"));
    peers.push_back({"vm", "host", 1, listeners.back().address});
  }
  std::string text = errorText(
      [&] { connectMesh(listeners[0], peers, 0, randomToken(), VIGIL_VERSION_CODE, Deadline::afterMs(300)); });
  EXPECT_EQ(text.rfind("VG-BOOT-008: rank 0/2: init: connections to rank(s) 1 did not complete", 0), 0u) << text;
}

}  // namespace
}  // namespace vigil
