// What the ucx transport gives UCX from this host and vigil's settings:
// its RDMA ports, the devices VIGIL_SOCKET_IFNAME names, whether UCX_TLS
// is shared memory only (declared in transport/ucx_transport.hpp).
#include <dirent.h>

#include <algorithm>
#include <set>

#include "transport/ucx_api.hpp"
#include "transport/ucx_transport.hpp"

namespace vigil {

bool ucxAvailable(std::string* why) {
  return ucx::load(why) != nullptr;
}

namespace {

std::vector<std::string> entriesOf(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return names;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<std::string> rdmaPorts() {
  std::vector<std::string> ports;
  for (const std::string& device : entriesOf("/sys/class/infiniband")) {
    for (const std::string& port : entriesOf("/sys/class/infiniband/" + device + "/ports")) {
      ports.push_back(device + ":" + port);
    }
  }
  return ports;
}

bool rdmaDevicePresent() {
  return !entriesOf("/sys/class/infiniband").empty();
}

bool sharedMemoryTls(const char* tls) {
  if (tls == nullptr || *tls == '\0' || *tls == '^') return false;
  static const std::set<std::string> kSharedMemory = {"sm", "shm", "posix", "sysv", "cma", "knem", "xpmem", "self"};
  std::string list = tls;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (!kSharedMemory.contains(list.substr(start, comma - start))) return false;
    start = comma + 1;
  }
  return true;
}

std::string ucxNetDevices(const std::string& ifnameSpec, const std::vector<std::string>& rdmaPorts) {
  if (ifnameSpec.empty() || ifnameSpec[0] == '^') return {};
  std::string devices = ifnameSpec;
  for (const std::string& port : rdmaPorts) devices += "," + port;
  return devices;
}

}  // namespace vigil
