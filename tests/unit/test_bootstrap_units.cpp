// Root info encoding, port ranges, interface choice, and the mesh's
// handling of strangers at a rank's listener.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bootstrap/launch_env.hpp"
#include "bootstrap/mesh.hpp"
#include "bootstrap/root_info.hpp"
#include "bootstrap/root_server.hpp"
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
  // Three consecutive free ports below the ephemeral range (where the
  // kernel picks ports for outgoing connections of tests running alongside).
  uint16_t base = 0;
  for (uint16_t candidate = 10000; candidate < 20000 && base == 0; candidate += 7) {
    try {
      listenInRange(lo, {candidate, static_cast<uint16_t>(candidate + 2)}, "probe");
      Listener a = listenInRange(lo, {candidate, candidate}, "probe");
      Listener b =
          listenInRange(lo, {static_cast<uint16_t>(candidate + 1), static_cast<uint16_t>(candidate + 1)}, "probe");
      Listener c =
          listenInRange(lo, {static_cast<uint16_t>(candidate + 2), static_cast<uint16_t>(candidate + 2)}, "probe");
      base = candidate;
    } catch (const Error&) {
    }
  }
  ASSERT_NE(base, 0) << "no three consecutive free ports in 10000-20000";
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
        meshes[static_cast<size_t>(r)] = connectMesh(listeners[static_cast<size_t>(r)], peers, r, token,
                                                     VIGIL_VERSION_CODE, Deadline::afterMs(20000));
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

LaunchEnv launchFrom(const std::map<std::string, std::string>& env) {
  return resolveLaunchEnv([&](const char* var) -> const char* {
    auto it = env.find(var);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnv, EveryLauncherIsRecognised) {
  vigilRootInfo raw{};
  RootInfo root;
  root.token = randomToken();
  root.address = resolveAddress("127.0.0.1", 4242);
  root.encode(&raw);
  LaunchEnv a = launchFrom({{"VIGIL_ROOT_INFO", rootInfoToHex(raw)}, {"VIGIL_RANK", "2"}, {"VIGIL_WORLD_SIZE", "4"}});
  EXPECT_EQ(a.launcher, "vigil-run");
  EXPECT_EQ(a.rank, 2);
  EXPECT_EQ(a.nranks, 4);
  EXPECT_EQ(a.root.token, root.token);
  EXPECT_FALSE(a.hostsRoot);

  LaunchEnv t =
      launchFrom({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(t.launcher, "torchrun");
  EXPECT_TRUE(t.hostsRoot);
  EXPECT_EQ(t.root.address.toString(), "127.0.0.1:29500");
  LaunchEnv agent = launchFrom({{"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", "29500"},
                                {"RANK", "1"},
                                {"WORLD_SIZE", "2"},
                                {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(agent.root.address.port(), 29501) << "torchrun's agent holds MASTER_PORT";
  EXPECT_EQ(agent.root.token, launchFrom({{"MASTER_ADDR", "127.0.0.1"},
                                          {"MASTER_PORT", "29501"},
                                          {"RANK", "0"},
                                          {"WORLD_SIZE", "2"},
                                          {"VIGIL_ROOT_PORT", "29501"}})
                                  .root.token)
      << "every rank derives the same token";

  LaunchEnv m =
      launchFrom({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"VIGIL_ROOT_ADDR", "127.0.0.1:5000"}});
  EXPECT_EQ(m.launcher, "Open MPI");
  EXPECT_EQ(m.rank, 3);
  EXPECT_EQ(m.root.address.port(), 5000);
  LaunchEnv s = launchFrom({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"VIGIL_ROOT_ADDR", "[::1]:6000"}});
  EXPECT_EQ(s.launcher, "SLURM");
  EXPECT_EQ(s.root.address.toString(), "[::1]:6000");
  LaunchEnv s2 = launchFrom(
      {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "77"}, {"VIGIL_ROOT_ADDR", "[::1]:6000"}});
  EXPECT_NE(s.root.token, s2.root.token) << "another job id, another token";
}

TEST(LaunchEnv, MissingOrMalformedVariablesAreNamed) {
  auto fails = [](const std::map<std::string, std::string>& env) { return errorText([&] { launchFrom(env); }); };
  std::string none = fails({});
  EXPECT_EQ(none.rfind("VG-BOOT-009: ", 0), 0u) << none;
  std::string half = fails({{"RANK", "0"}});
  EXPECT_EQ(half.rfind("VG-BOOT-010: ", 0), 0u) << half;
  EXPECT_NE(half.find("WORLD_SIZE is not set but RANK is"), std::string::npos) << half;
  std::string text = fails({{"RANK", "zero"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(text.find("RANK='zero' is not a non-negative decimal integer"), std::string::npos) << text;
  std::string big = fails({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(big.find("rank 4 is not below the world size 4"), std::string::npos) << big;
  std::string noRoot = fails({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  EXPECT_NE(noRoot.find("no root"), std::string::npos) << noRoot;
  EXPECT_NE(noRoot.find("VIGIL_ROOT_ADDR"), std::string::npos) << noRoot;
  std::string noPort = fails({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}});
  EXPECT_NE(noPort.find("MASTER_PORT is not"), std::string::npos) << noPort;
  std::string badHost =
      fails({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "no-such-host.invalid"}, {"MASTER_PORT", "1"}});
  EXPECT_EQ(badHost.rfind("VG-NET-005: ", 0), 0u) << badHost;
}

// /proc/net/tcp{,6} entries in state LISTEN on `port`: their local addresses, as the kernel writes them.
std::vector<std::string> listenersOnPort(uint16_t port) {
  std::vector<std::string> out;
  char portHex[8];
  std::snprintf(portHex, sizeof portHex, ":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      if (state == "0A" && local.size() > 5 && local.substr(local.size() - 5) == portHex) out.push_back(local);
    }
  }
  return out;
}

TEST(LaunchEnv, TheRootOfAnAddressBasedLaunchListensOnTheNamedAddressNotEveryInterface) {
  Listener probe = listenInRange(resolveAddress("127.0.0.1", 0), PortRange{}, "a port probe");
  const uint16_t port = probe.address.port();
  probe.fd.reset();
  LaunchEnv env = launchFrom(
      {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}, {"RANK", "0"}, {"WORLD_SIZE", "2"}});
  hostRootAt(env, processConfig());
  // 127.0.0.1 as the kernel prints it; 00000000 would be every interface.
  char expected[16];
  std::snprintf(expected, sizeof expected, "0100007F:%04X", port);
  EXPECT_EQ(listenersOnPort(port), std::vector<std::string>({expected}));
  stopAllRootServers();
}

TEST(LaunchEnv, OnlyVigilJobTokenMakesTheDerivedTokenASecret) {
  std::map<std::string, std::string> vars{
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}};
  LaunchEnv open = launchFrom(vars);
  EXPECT_FALSE(open.secretToken);
  vars["VIGIL_JOB_TOKEN"] = "s3cret";
  LaunchEnv closed = launchFrom(vars);
  EXPECT_TRUE(closed.secretToken);
  EXPECT_NE(closed.root.token, open.root.token);
}

}  // namespace
}  // namespace vigil
