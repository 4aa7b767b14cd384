#include "bootstrap/root_info.hpp"

#include <cstring>

#include "core/errors.hpp"

namespace vigil {
namespace {

// Layout: magic(4) wireVersion(2) reserved(2) token(16) address(19), rest zero.
constexpr size_t kTokenOffset = 8;
constexpr size_t kAddressOffset = kTokenOffset + sizeof(JobToken);
static_assert(kAddressOffset + SocketAddress::kPackedBytes <= VIGIL_ROOT_INFO_BYTES);
static_assert(sizeof(vigilRootInfo) == VIGIL_ROOT_INFO_BYTES, "the root info handle must be exactly 128 bytes");

}  // namespace

void RootInfo::encode(vigilRootInfo* out) const {
  std::memset(out->internal, 0, sizeof out->internal);
  auto* bytes = reinterpret_cast<uint8_t*>(out->internal);
  std::memcpy(bytes, &kWireMagic, 4);
  std::memcpy(bytes + 4, &kWireVersion, 2);
  std::memcpy(bytes + kTokenOffset, token.data(), token.size());
  address.pack(bytes + kAddressOffset);
}

RootInfo RootInfo::decode(const vigilRootInfo& in) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(in.internal);
  uint32_t magic;
  uint16_t version;
  std::memcpy(&magic, bytes, 4);
  std::memcpy(&version, bytes + 4, 2);
  if (magic != kWireMagic) {
    ErrorBuilder(Errc::BootBadRootInfo)
        .cause(
            "the root info does not start with vigil's magic (it was not made by vigilGetRootInfo, "
            "or it was truncated or corrupted in transit)")
        .raise();
  }
  if (version != kWireVersion) {
    ErrorBuilder(Errc::BootBadRootInfo)
        .cause("the root info has wire version ", version, " but this library speaks version ", kWireVersion)
        .remedy("use the same vigil build for the process that made the root info and for every rank")
        .raise();
  }
  RootInfo info;
  std::memcpy(info.token.data(), bytes + kTokenOffset, info.token.size());
  try {
    info.address = SocketAddress::unpack(bytes + kAddressOffset);
  } catch (const Error&) {
    ErrorBuilder(Errc::BootBadRootInfo).cause("the root info holds no valid address").raise();
  }
  return info;
}

std::string RootInfo::describe() const {
  return cat(address.toString(), " (job ", tokenTag(token), ")");
}

std::string rootInfoToHex(const vigilRootInfo& info) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * VIGIL_ROOT_INFO_BYTES);
  for (char c : info.internal) {
    auto b = static_cast<uint8_t>(c);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

vigilRootInfo rootInfoFromHex(const char* text) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  size_t length = std::strlen(text);
  if (length != 2 * VIGIL_ROOT_INFO_BYTES) {
    ErrorBuilder(Errc::BootBadRootInfo)
        .cause("the root info text has ", length, " characters; expected ", 2 * VIGIL_ROOT_INFO_BYTES, " hex digits")
        .raise();
  }
  vigilRootInfo info{};
  for (size_t i = 0; i < VIGIL_ROOT_INFO_BYTES; ++i) {
    int hi = nibble(text[2 * i]);
    int lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      ErrorBuilder(Errc::BootBadRootInfo)
          .cause("the root info text has a non-hex character at position ", hi < 0 ? 2 * i : 2 * i + 1)
          .raise();
    }
    info.internal[i] = static_cast<char>((hi << 4) | lo);
  }
  RootInfo::decode(info);  // validates magic and version now, not at init
  return info;
}

}  // namespace vigil
