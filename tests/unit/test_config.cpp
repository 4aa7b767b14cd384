// Every VIGIL_* variable is validated: a bad value is an error naming the
// variable, the value and what is accepted; never a silent default.

#include <gtest/gtest.h>

#include <cstddef>
#include <map>

#include "algo/select.hpp"
#include "core/config.hpp"
#include "core/errors.hpp"

namespace vigil {
namespace {

EnvConfig parseFrom(const std::map<std::string, std::string>& env) {
  return EnvConfig::parse([&](const char* var) -> const char* {
    auto it = env.find(var);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string errorFor(const std::map<std::string, std::string>& env) {
  try {
    parseFrom(env);
  } catch (const Error& e) {
    EXPECT_EQ(e.result(), vigilInvalidArgument);
    return e.text();
  }
  return "";
}

TEST(EnvConfig, DefaultsMatchTheApiContract) {
  EnvConfig c = parseFrom({});
  EXPECT_EQ(c.timeoutMs, 600000);
  EXPECT_EQ(c.connectTimeoutMs, 120000);
  EXPECT_TRUE(c.portRange.isAuto());
  EXPECT_EQ(c.transport, TransportKind::Auto);
  EXPECT_TRUE(c.fingerprint);
  EXPECT_FALSE(c.nanCheck);
  EXPECT_FALSE(c.bufferGuard);
  EXPECT_EQ(c.logLevel, LogLevel::Warn);
  EXPECT_EQ(c.flightRecorder, 2048);
  EXPECT_EQ(c.symmetricHeapBytes, size_t{1} << 30);
}

TEST(EnvConfig, ValidValuesAreTaken) {
  EnvConfig c = parseFrom({{"VIGIL_TIMEOUT_MS", "2500"},
                           {"VIGIL_CONNECT_TIMEOUT_MS", "700"},
                           {"VIGIL_PORT_RANGE", "29500-29599"},
                           {"VIGIL_SOCKET_IFNAME", "^docker0,virbr0"},
                           {"VIGIL_TRANSPORT", "tcp"},
                           {"VIGIL_FINGERPRINT", "0"},
                           {"VIGIL_NAN_CHECK", "1"},
                           {"VIGIL_BUFFER_GUARD", "1"},
                           {"VIGIL_LOG", "debug"},
                           {"VIGIL_LOG_FILE", "/tmp/vigil.%r.log"},
                           {"VIGIL_DUMP_DIR", "/tmp/dumps"},
                           {"VIGIL_FLIGHT_RECORDER", "16"},
                           {"VIGIL_SYMMETRIC_HEAP", "3G"}});
  EXPECT_EQ(c.timeoutMs, 2500);
  EXPECT_EQ(c.connectTimeoutMs, 700);
  EXPECT_EQ(c.portRange.lo, 29500);
  EXPECT_EQ(c.portRange.hi, 29599);
  EXPECT_EQ(c.socketIfname, "^docker0,virbr0");
  EXPECT_EQ(c.transport, TransportKind::Tcp);
  EXPECT_FALSE(c.fingerprint);
  EXPECT_TRUE(c.nanCheck);
  EXPECT_TRUE(c.bufferGuard);
  EXPECT_EQ(c.logLevel, LogLevel::Debug);
  EXPECT_EQ(c.logFile, "/tmp/vigil.%r.log");
  EXPECT_EQ(c.dumpDir, "/tmp/dumps");
  EXPECT_EQ(c.flightRecorder, 16);
  EXPECT_EQ(c.symmetricHeapBytes, size_t{3} << 30);
  for (auto [text, bytes] :
       {std::pair{"65536", size_t{65536}}, std::pair{"64k", size_t{64} << 10}, std::pair{"512M", size_t{512} << 20}}) {
    EXPECT_EQ(parseFrom({{"VIGIL_SYMMETRIC_HEAP", text}}).symmetricHeapBytes, bytes) << text;
  }
  EXPECT_NE(c.describe().find("VIGIL_PORT_RANGE=29500-29599"), std::string::npos);
}

TEST(EnvConfig, BadValuesNameVariableValueAndChoices) {
  struct Case {
    const char* var;
    const char* value;
    const char* accepted;
  };
  const Case cases[] = {
      {"VIGIL_TIMEOUT_MS", "10s", "positive number of milliseconds"},
      {"VIGIL_TIMEOUT_MS", "0", "positive number of milliseconds"},
      {"VIGIL_TIMEOUT_MS", "-1", "positive number of milliseconds"},
      {"VIGIL_CONNECT_TIMEOUT_MS", "99999999999", "positive number of milliseconds"},
      {"VIGIL_PORT_RANGE", "30000", "'auto' or 'lo-hi'"},
      {"VIGIL_PORT_RANGE", "300-200", "'auto' or 'lo-hi'"},
      {"VIGIL_PORT_RANGE", "0-100", "'auto' or 'lo-hi'"},
      {"VIGIL_PORT_RANGE", "1-70000", "'auto' or 'lo-hi'"},
      {"VIGIL_TRANSPORT", "ib", "'auto', 'shm', 'tcp' or 'ucx'"},
      {"VIGIL_FINGERPRINT", "yes", "0 or 1"},
      {"VIGIL_NAN_CHECK", "2", "0 or 1"},
      {"VIGIL_BUFFER_GUARD", "true", "0 or 1"},
      {"VIGIL_LOG", "verbose", "error, warn, info, debug, trace"},
      {"VIGIL_FLIGHT_RECORDER", "-3", "from 0 to 1000000"},
      {"VIGIL_SYMMETRIC_HEAP", "1T5", "from 4096 to 1T"},
      {"VIGIL_SYMMETRIC_HEAP", "100", "from 4096 to 1T"},
      {"VIGIL_SYMMETRIC_HEAP", "2048G", "from 4096 to 1T"},
  };
  for (const Case& c : cases) {
    std::string text = errorFor({{c.var, c.value}});
    EXPECT_EQ(text.rfind("VG-CFG-001: ", 0), 0u) << text;
    EXPECT_NE(text.find(std::string(c.var) + "='" + c.value + "' is not valid"), std::string::npos) << text;
    EXPECT_NE(text.find(c.accepted), std::string::npos) << text;
  }
}

// VIGIL_ALGO is kept as written by the configuration and parsed by the
// algorithm table (algo/ sits above core) when a communicator is created;
// a bad value is the same VG-CFG-001 as for every other variable.
TEST(EnvConfig, BadAlgoIsRefusedNamingTheVariableAndTheKnownNames) {
  struct Case {
    const char* value;
    const char* why;
  };
  const Case cases[] = {
      {"fastest",
       "unknown algorithm 'fastest' (known: ring, recursive_doubling, binomial, direct, dissemination, shm, "
       "hierarchical"},
      {"gather=ring", "gather has no 'ring' algorithm"},
      {"allreduse=ring", "unknown collective 'allreduse'"},
      {"ring,", "unknown algorithm ''"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(parseFrom({{"VIGIL_ALGO", c.value}}).algoText, c.value);
    std::string text;
    try {
      algo::AlgoOverrides::parse(c.value);
    } catch (const Error& e) {
      EXPECT_EQ(e.result(), vigilInvalidArgument);
      text = e.text();
    }
    EXPECT_EQ(text.rfind("VG-CFG-001: ", 0), 0u) << text;
    EXPECT_NE(text.find(std::string("VIGIL_ALGO='") + c.value + "' is not valid"), std::string::npos) << text;
    EXPECT_NE(text.find("'<algorithm>' or '<collective>=<algorithm>,...'"), std::string::npos) << text;
    EXPECT_NE(text.find(c.why), std::string::npos) << text;
  }
}

TEST(EnvConfig, AlgoForcesTheNamedCollectivesOrEveryOneThatHasTheAlgorithm) {
  using algo::Algo;
  const Algo ring = *algo::algoFromName("ring"), rd = *algo::algoFromName("recursive_doubling"),
             shm = *algo::algoFromName("shm"), binomial = *algo::algoFromName("binomial");
  auto forced = [](const algo::AlgoOverrides& o, OpKind k) { return o.forced[static_cast<size_t>(k)]; };
  const algo::AlgoOverrides everyRing = algo::AlgoOverrides::parse("ring");
  EXPECT_EQ(forced(everyRing, OpKind::AllReduce), ring);
  EXPECT_EQ(forced(everyRing, OpKind::AllGather), ring);
  EXPECT_EQ(forced(everyRing, OpKind::ReduceScatter), ring);
  EXPECT_EQ(forced(everyRing, OpKind::Broadcast), Algo::None);
  const algo::AlgoOverrides named = algo::AlgoOverrides::parse("allreduce=recursive_doubling,broadcast=shm");
  EXPECT_EQ(forced(named, OpKind::AllReduce), rd);
  EXPECT_EQ(forced(named, OpKind::Broadcast), shm);
  EXPECT_EQ(forced(named, OpKind::AllGather), Algo::None);
  EXPECT_NE(parseFrom({{"VIGIL_ALGO", "allreduce=recursive_doubling,broadcast=shm"}})
                .describe()
                .find("VIGIL_ALGO=allreduce=recursive_doubling,broadcast=shm"),
            std::string::npos);
  // A forced algorithm that cannot run where the ranks are gives way to the table.
  const algo::Topology tcp{4, false};
  EXPECT_EQ(algo::selectAlgo(OpKind::Broadcast, 8, tcp, named)->id, binomial);
  EXPECT_EQ(algo::selectAlgo(OpKind::AllReduce, 1 << 20, tcp, named)->id, rd);
  EXPECT_EQ(algo::selectAlgo(OpKind::AllReduce, 1 << 20, tcp, {})->id, ring);
  EXPECT_EQ(algo::selectAlgo(OpKind::AllReduce, 8, tcp, {})->id, rd);
  EXPECT_EQ(algo::selectAlgo(OpKind::AllReduce, 8, algo::Topology{.nranks = 4, .loadStore = true}, {})->id, shm);
  // Bruck's all-to-all: small messages among 8 or more ranks over sockets, or when named.
  const algo::Topology tcp8{8, false};
  EXPECT_STREQ(algo::selectAlgo(OpKind::AllToAll, 64, tcp, {})->name, "direct");
  EXPECT_STREQ(algo::selectAlgo(OpKind::AllToAll, 2048, tcp8, {})->name, "bruck");
  EXPECT_STREQ(algo::selectAlgo(OpKind::AllToAll, 2049, tcp8, {})->name, "direct");
  EXPECT_STREQ(algo::selectAlgo(OpKind::AllToAll, 64, algo::Topology{.nranks = 8, .loadStore = true}, {})->name, "shm");
  EXPECT_STREQ(algo::selectAlgo(OpKind::AllToAll, 64, tcp, algo::AlgoOverrides::parse("bruck"))->name, "bruck");
  EXPECT_STREQ(algo::selectAlgo(OpKind::AllToAllV, 64, tcp, algo::AlgoOverrides::parse("bruck"))->name, "direct");
}

TEST(CommConfig, StructOverridesEnvironmentFieldByField) {
  EnvConfig env = parseFrom({{"VIGIL_TIMEOUT_MS", "1000"}, {"VIGIL_NAN_CHECK", "1"}});
  vigilConfig user = VIGIL_CONFIG_INIT;
  user.connectTimeoutMs = 50;
  user.fingerprint = 0;
  user.commName = "tp-group";
  CommConfig c = CommConfig::resolve(&user, env);
  EXPECT_EQ(c.timeoutMs, 1000);       // from the environment
  EXPECT_EQ(c.connectTimeoutMs, 50);  // from the struct
  EXPECT_FALSE(c.fingerprint);
  EXPECT_TRUE(c.nanCheck);
  EXPECT_EQ(c.name, "tp-group");
}

TEST(CommConfig, InvalidFieldsAreRefused) {
  EnvConfig env = parseFrom({});
  auto refuse = [&](vigilConfig user, const char* field) {
    try {
      CommConfig::resolve(&user, env);
      ADD_FAILURE() << field << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.errc(), Errc::ApiBadConfig);
      EXPECT_NE(e.text().find(field), std::string::npos) << e.text();
    }
  };
  vigilConfig u = VIGIL_CONFIG_INIT;
  u.timeoutMs = 0;
  refuse(u, "vigilConfig.timeoutMs = 0");
  u = VIGIL_CONFIG_INIT;
  u.nanCheck = 3;
  refuse(u, "vigilConfig.nanCheck = 3");
  u = VIGIL_CONFIG_INIT;
  u.size = 8;
  refuse(u, "vigilConfig.size = 8");
  u = VIGIL_CONFIG_INIT;
  u.timeoutMs = 500;
  u.timeoutName = "";
  refuse(u, "vigilConfig.timeoutName (length) = 0");
  u = VIGIL_CONFIG_INIT;
  u.groupName = "torch-1";
  refuse(u, "vigilConfig.groupName is set but vigilConfig.groupRanks is NULL");
  const int ranks[2] = {3, 1};
  u = VIGIL_CONFIG_INIT;
  u.groupRanks = ranks;
  refuse(u, "vigilConfig.groupRanks is set but vigilConfig.groupName is NULL");
  u.groupName = "";
  refuse(u, "vigilConfig.groupName (length) = 0");
}

TEST(CommConfig, GroupNameAndRanksAreTakenFromCallersThatHaveThem) {
  EnvConfig env = parseFrom({});
  const int ranks[2] = {3, 1};
  vigilConfig user = VIGIL_CONFIG_INIT;
  user.groupName = "torch-1";
  user.groupRanks = ranks;
  const CommConfig cfg = CommConfig::resolve(&user, env);
  EXPECT_EQ(cfg.groupName, "torch-1");
  EXPECT_EQ(cfg.groupRanksGiven, ranks);  // copied by the init call, which knows nranks
  // A caller built against the header before them: not read, whatever lies there.
  user.size = offsetof(vigilConfig, groupName);
  EXPECT_TRUE(CommConfig::resolve(&user, env).groupName.empty());
}

TEST(CommConfig, TimeoutNameSaysWhoSetTheTimeout) {
  EnvConfig env = parseFrom({});
  vigilConfig user = VIGIL_CONFIG_INIT;
  user.timeoutMs = 500;
  EXPECT_EQ(CommConfig::resolve(&user, env).timeoutSource, "vigilConfig.timeoutMs");
  user.timeoutName = "the process group's timeout";
  EXPECT_EQ(CommConfig::resolve(&user, env).timeoutSource, "the process group's timeout");
  // A caller built against the header before timeoutName passes the smaller size: the
  // field is not read, whatever lies there.
  user.size = offsetof(vigilConfig, timeoutName);
  user.timeoutName = "";
  EXPECT_EQ(CommConfig::resolve(&user, env).timeoutSource, "vigilConfig.timeoutMs");
  // No timeout of its own: the name has nothing to name.
  vigilConfig envTimeout = VIGIL_CONFIG_INIT;
  envTimeout.timeoutName = "the process group's timeout";
  EXPECT_EQ(CommConfig::resolve(&envTimeout, parseFrom({{"VIGIL_TIMEOUT_MS", "700"}})).timeoutSource,
            "VIGIL_TIMEOUT_MS");
}

}  // namespace
}  // namespace vigil
