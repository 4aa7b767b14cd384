#include "run_env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string_view>
#include <utility>

extern char** environ;

namespace vigil::run {
namespace {

// A free TCP port on loopback, as torchrun --standalone picks one: the kernel chooses, the
// socket closes, rank 0's store binds it a moment later. 0 if none.
int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace

std::vector<std::string> rankEnv(const std::string& rootHex, int rank, int n, int notifyFd) {
  const std::string r = std::to_string(rank), size = std::to_string(n), notify = std::to_string(notifyFd);
  const std::pair<std::string_view, std::string_view> ours[] = {{"VIGIL_ROOT_INFO=", rootHex},
                                                                {"VIGIL_RANK=", r},
                                                                {"VIGIL_WORLD_SIZE=", size},
                                                                {"VIGIL_LOCAL_RANK=", r},
                                                                {"VIGIL_LOCAL_SIZE=", size},
                                                                {"VIGIL_DUMP_NOTIFY_FD=", notify},
                                                                {"RANK=", r},
                                                                {"WORLD_SIZE=", size},
                                                                {"LOCAL_RANK=", r},
                                                                {"LOCAL_WORLD_SIZE=", size}};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::none_of(std::begin(ours), std::end(ours),
                     [e](auto& kv) { return std::string_view(*e).starts_with(kv.first); }))
      env.emplace_back(*e);
  for (auto& [key, value] : ours) env.push_back(std::string(key).append(value));
  return env;
}

void setTorchRendezvous() {
  ::setenv("MASTER_ADDR", "127.0.0.1", /*overwrite=*/0);
  if (std::getenv("MASTER_PORT") != nullptr) return;
  if (const int port = freeLoopbackPort(); port > 0)
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  else
    std::fprintf(stderr, "vigil-run: no free loopback port for MASTER_PORT (%s); set it to run torch scripts\n",
                 std::strerror(errno));
}

}  // namespace vigil::run
