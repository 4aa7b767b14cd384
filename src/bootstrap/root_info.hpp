#pragma once
// The root info: 128 opaque bytes that tell every rank where the rendezvous
// root listens and which job token to present.

#include <string>

#include "net/socket.hpp"
#include "net/wire.hpp"
#include "vigil/vigil.h"

namespace vigil {

struct RootInfo {
  JobToken token{};
  SocketAddress address;

  void encode(vigilRootInfo* out) const;
  static RootInfo decode(const vigilRootInfo& in);  // throws VG-BOOT-001
  std::string describe() const;                     // "127.0.0.1:41233 (job 3fa2c1d0)"
};

std::string rootInfoToHex(const vigilRootInfo& info);
vigilRootInfo rootInfoFromHex(const char* text);  // throws VG-BOOT-001

}  // namespace vigil
