#include "bootstrap/launch_env.hpp"

#include <netinet/in.h>

#include <charconv>
#include <cstring>
#include <optional>

#include "bootstrap/root_server.hpp"
#include "core/errors.hpp"

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

}  // namespace

LaunchEnv resolveLaunchEnv(const EnvLookup& lookup) {
  auto get = [&](const char* var) -> const char* {
    const char* v = lookup(var);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  LaunchEnv env;
  // Rank and size: the first launcher whose pair is complete.
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
    const char* r = get(p.rank);
    const char* s = get(p.size);
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

  if (const char* hex = get("VIGIL_ROOT_INFO")) {
    env.root = RootInfo::decode(rootInfoFromHex(hex));
    return env;
  }
  // Address-based: rank 0 hosts the root at a well-known address.
  std::string host;
  std::optional<int> port;
  if (const char* addr = get("VIGIL_ROOT_ADDR")) {
    std::string_view v(addr);
    size_t colon = v.rfind(':');
    if (colon == std::string_view::npos) {
      ErrorBuilder(Errc::BootBadLauncherEnv).op("init").cause("VIGIL_ROOT_ADDR='", addr, "' is not host:port").raise();
    }
    host = std::string(v.substr(0, colon));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    port = parseNonNegative("VIGIL_ROOT_ADDR (port)", std::string(v.substr(colon + 1)).c_str());
  } else if (const char* master = get("MASTER_ADDR")) {
    host = master;
    const char* p = get("MASTER_PORT");
    if (p == nullptr) {
      ErrorBuilder(Errc::BootBadLauncherEnv).op("init").cause("MASTER_ADDR is set but MASTER_PORT is not").raise();
    }
    port = parseNonNegative("MASTER_PORT", p);
    // torchrun's agent already serves its store on MASTER_PORT.
    if (const char* agent = get("TORCHELASTIC_USE_AGENT_STORE"); agent && std::string_view(agent) == "True") {
      ++*port;
    }
    if (const char* own = get("VIGIL_ROOT_PORT")) port = parseNonNegative("VIGIL_ROOT_PORT", own);
  } else {
    ErrorBuilder(Errc::BootBadLauncherEnv)
        .op("init")
        .cause(env.launcher, " gave rank ", env.rank, " of ", env.nranks,
               " but no root: neither VIGIL_ROOT_INFO, VIGIL_ROOT_ADDR nor MASTER_ADDR/MASTER_PORT is set")
        .remedy(
            "set VIGIL_ROOT_ADDR=host:port (rank 0's host and a free port) for every rank, or launch with vigil-run")
        .raise();
  }
  if (*port < 1 || *port > 65535) {
    ErrorBuilder(Errc::BootBadLauncherEnv).op("init").cause("root port ", *port, " is outside 1-65535").raise();
  }
  env.root.address = resolveAddress(host, static_cast<uint16_t>(*port));
  std::string seed = cat(host, ":", *port, "/", env.nranks);
  for (const char* var :
       {"VIGIL_JOB_TOKEN", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid"}) {
    if (const char* v = get(var)) seed += cat("/", var, "=", v);
  }
  env.root.token = derivedToken(seed);
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

void hostRootAt(const RootInfo& root, const EnvConfig& env) {
  // Listen on every address of the family: MASTER_ADDR may name this host by
  // a name or address that differs from the interface vigil would pick.
  SocketAddress any;
  any.storage.ss_family = static_cast<sa_family_t>(root.address.family());
  any.length = root.address.length;
  any.setPort(root.address.port());
  Listener listener = listenExact(any, "the rendezvous root");
  startRootServer(std::move(listener), root.token, env.connectTimeoutMs);
}

}  // namespace vigil
