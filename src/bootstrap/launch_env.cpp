#include "bootstrap/launch_env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>
#include <utility>

#include "bootstrap/root_server.hpp"
#include "core/errors.hpp"
#include "core/log.hpp"

namespace vigil {
namespace {

int parseNonNegative(const char* var, const char* text) {
  int value = -1;
  std::string_view v(text);
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (ec != std::errc() || end != v.data() + v.size() || value < 0) {
    ErrorBuilder(Errc::BootBadLauncherEnv)
        .op("init")
        .cause(var, "='", text, "' is not a non-negative decimal integer")
        .raise();
  }
  return value;
}

// A job token both sides can compute without talking: a 128-bit mix of the
// root address, the world size and the launcher's job id. It separates jobs;
// VIGIL_JOB_TOKEN makes it a shared secret.
JobToken derivedToken(const std::string& seed) {
  JobToken token{};
  uint64_t a = 0x9e3779b97f4a7c15ULL, b = 0xc2b2ae3d27d4eb4fULL;
  for (unsigned char c : seed) {
    a = (a ^ c) * 0x100000001b3ULL;
    b = (b + c + (a >> 29)) * 0xff51afd7ed558ccdULL;
  }
  for (int i = 0; i < 8; ++i) {
    token[static_cast<size_t>(i)] = static_cast<uint8_t>(a >> (8 * i));
    token[static_cast<size_t>(8 + i)] = static_cast<uint8_t>(b >> (8 * i));
  }
  return token;
}

// The value of `var`, or null when it is unset or empty.
const char* envValue(const EnvLookup& lookup, const char* var) {
  const char* v = lookup(var);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// Rank and size: the first launcher whose pair is complete. Throws when a
// pair is half set, when no launcher set one, or for a rank outside the world.
void readRankAndSize(const EnvLookup& lookup, LaunchEnv& env) {
  struct Pair {
    const char* rank;
    const char* size;
    const char* launcher;
  };
  const Pair pairs[] = {{"VIGIL_RANK", "VIGIL_WORLD_SIZE", "vigil-run"},
                        {"RANK", "WORLD_SIZE", "torchrun"},
                        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
                        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM"}};
  for (const Pair& p : pairs) {
    const char* r = envValue(lookup, p.rank);
    const char* s = envValue(lookup, p.size);
    if (r == nullptr && s == nullptr) continue;
    if (r == nullptr || s == nullptr) {
      ErrorBuilder(Errc::BootBadLauncherEnv)
          .op("init")
          .cause(r ? p.size : p.rank, " is not set but ", r ? p.rank : p.size, " is")
          .remedy("set both ", p.rank, " and ", p.size)
          .raise();
    }
    env.rank = parseNonNegative(p.rank, r);
    env.nranks = parseNonNegative(p.size, s);
    env.launcher = p.launcher;
    break;
  }
  if (env.launcher.empty()) {
    ErrorBuilder(Errc::BootNoLauncherEnv)
        .op("init")
        .cause(
            "none of VIGIL_RANK/VIGIL_WORLD_SIZE, RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE, "
            "SLURM_PROCID/SLURM_NTASKS is set")
        .raise();
  }
  if (env.nranks < 1 || env.rank >= env.nranks) {
    ErrorBuilder(Errc::BootBadLauncherEnv)
        .op("init")
        .cause("rank ", env.rank, " is not below the world size ", env.nranks, " (from ", env.launcher, ")")
        .raise();
  }
}

// The root's host as given and its port, of an address-based launch.
struct RootEndpoint {
  std::string host;
  int port = 0;
};

// VIGIL_ROOT_ADDR=host:port; an IPv6 host may come in brackets.
RootEndpoint parseRootAddr(const char* addr) {
  std::string_view v(addr);
  size_t colon = v.rfind(':');
  if (colon == std::string_view::npos) {
    ErrorBuilder(Errc::BootBadLauncherEnv).op("init").cause("VIGIL_ROOT_ADDR='", addr, "' is not host:port").raise();
  }
  std::string host(v.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {std::move(host), parseNonNegative("VIGIL_ROOT_ADDR (port)", std::string(v.substr(colon + 1)).c_str())};
}

// torchrun's MASTER_ADDR/MASTER_PORT, moved past its agent's store, or to
// VIGIL_ROOT_PORT when that is set.
RootEndpoint masterEndpoint(const EnvLookup& lookup, const char* master) {
  RootEndpoint endpoint;
  endpoint.host = master;
  const char* p = envValue(lookup, "MASTER_PORT");
  if (p == nullptr) {
    ErrorBuilder(Errc::BootBadLauncherEnv).op("init").cause("MASTER_ADDR is set but MASTER_PORT is not").raise();
  }
  endpoint.port = parseNonNegative("MASTER_PORT", p);
  // torchrun's agent already serves its store on MASTER_PORT.
  if (const char* agent = envValue(lookup, "TORCHELASTIC_USE_AGENT_STORE");
      agent && std::string_view(agent) == "True") {
    ++endpoint.port;
  }
  if (const char* own = envValue(lookup, "VIGIL_ROOT_PORT")) endpoint.port = parseNonNegative("VIGIL_ROOT_PORT", own);
  return endpoint;
}

// Address-based: rank 0 hosts the root at a well-known address, from
// VIGIL_ROOT_ADDR or else MASTER_ADDR/MASTER_PORT.
RootEndpoint addressedRoot(const EnvLookup& lookup, const LaunchEnv& env) {
  RootEndpoint endpoint;
  if (const char* addr = envValue(lookup, "VIGIL_ROOT_ADDR")) {
    endpoint = parseRootAddr(addr);
  } else if (const char* master = envValue(lookup, "MASTER_ADDR")) {
    endpoint = masterEndpoint(lookup, master);
  } else {
    ErrorBuilder(Errc::BootBadLauncherEnv)
        .op("init")
        .cause(env.launcher, " gave rank ", env.rank, " of ", env.nranks,
               " but no root: neither VIGIL_ROOT_INFO, VIGIL_ROOT_ADDR nor MASTER_ADDR/MASTER_PORT is set")
        .remedy(
            "set VIGIL_ROOT_ADDR=host:port (rank 0's host and a free port) for every rank, or launch with vigil-run")
        .raise();
  }
  if (endpoint.port < 1 || endpoint.port > 65535) {
    ErrorBuilder(Errc::BootBadLauncherEnv).op("init").cause("root port ", endpoint.port, " is outside 1-65535").raise();
  }
  return endpoint;
}

// What derivedToken mixes: the root address, the world size and whatever
// job id the launcher set.
std::string tokenSeed(const EnvLookup& lookup, const RootEndpoint& endpoint, int nranks) {
  std::string seed = cat(endpoint.host, ":", endpoint.port, "/", nranks);
  for (const char* var :
       {"VIGIL_JOB_TOKEN", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid"}) {
    if (const char* v = envValue(lookup, var)) seed += cat("/", var, "=", v);
  }
  return seed;
}

}  // namespace

LaunchEnv resolveLaunchEnv(const EnvLookup& lookup) {
  LaunchEnv env;
  readRankAndSize(lookup, env);
  if (const char* hex = envValue(lookup, "VIGIL_ROOT_INFO")) {
    env.root = RootInfo::decode(rootInfoFromHex(hex));
    env.secretToken = true;
    return env;
  }
  const RootEndpoint endpoint = addressedRoot(lookup, env);
  env.root.address = resolveAddress(endpoint.host, static_cast<uint16_t>(endpoint.port));
  env.root.token = derivedToken(tokenSeed(lookup, endpoint, env.nranks));
  env.rootHost = endpoint.host;
  env.secretToken = envValue(lookup, "VIGIL_JOB_TOKEN") != nullptr;
  env.hostsRoot = env.rank == 0;
  return env;
}

RootInfo createRoot(const EnvConfig& env) {
  RootInfo info;
  info.token = randomToken();
  Listener listener = listenInRange(selectInterfaceAddress(env.socketIfname), env.portRange, "the rendezvous root");
  info.address = listener.address;
  startRootServer(std::move(listener), info.token, env.connectTimeoutMs);
  return info;
}

namespace {

bool isLoopback(const SocketAddress& a) {
  if (a.family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in&>(a.storage).sin_addr.s_addr) >> 24) == 127;
  }
  return a.family() == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(a.storage).sin6_addr);
}

}  // namespace

void hostRootAt(const LaunchEnv& launch, const EnvConfig& env) {
  // Not every interface: a root there takes hellos from any network the host
  // is on. MASTER_ADDR names the address the ranks dial; a host name may
  // resolve to 127.0.1.1 here and to the interface's address elsewhere, so
  // the interface vigil uses is served too, unless the launch said loopback
  // outright (then no other host can be in it).
  const SocketAddress& named = launch.root.address;
  const bool loopbackOnly = isLoopback(named) && (launch.rootHost == "localhost" || launch.rootHost == named.host());
  std::vector<Listener> listeners;
  Listener listener;
  int namedErr = tryListenExact(named, listener);
  if (namedErr == 0) listeners.push_back(std::move(listener));
  // EADDRNOTAVAIL: the name is not one of this host's addresses (NAT, a VIP).
  if (namedErr != 0 && namedErr != EADDRNOTAVAIL) listenExact(named, "the rendezvous root");  // throws, naming it
  if (!loopbackOnly) {
    SocketAddress chosen = selectInterfaceAddress(env.socketIfname);
    chosen.setPort(named.port());
    if (listeners.empty() || chosen.toString() != named.toString()) {
      listeners.push_back(listenExact(chosen, "the rendezvous root"));
    }
  }
  if (listeners.empty()) listenExact(named, "the rendezvous root");  // throws with the errno
  std::string where;
  for (const Listener& l : listeners) where += cat(where.empty() ? "" : " and ", l.address.toString());
  VIGIL_LOG_AT(LogLevel::Info, -1, "rendezvous root listens on ", where,
               launch.secretToken ? " (secret job token)"
                                  : " (job token derived from the launch: claims must be confirmed; set "
                                    "VIGIL_JOB_TOKEN for a secret one)");
  startRootServer(std::move(listeners), launch.root.token, env.connectTimeoutMs,
                  launch.secretToken ? ClaimPolicy::TrustToken : ClaimPolicy::ConfirmClaims);
}

}  // namespace vigil
