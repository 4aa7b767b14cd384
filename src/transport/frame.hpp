#pragma once
// The header in front of every data message. It carries the operation's
// fingerprint (op, dtype, reduction, root, count) and sequence number, so a
// receiver detects ranks that run different collectives on the first message
// instead of deadlocking or reading garbage.

#include <cstdint>

namespace vigil {

// Tagged: a point-to-point message of vigilSendTag, matched by its
// receiver on (source, tag) instead of arriving in issue order; `root`
// carries its tag and `seq` the sender's count of tagged messages to the
// receiver.
enum class FrameKind : uint8_t { Collective = 1, PointToPoint = 2, Tagged = 3 };

struct FrameHeader {
  static constexpr uint16_t kMagic = 0x4656;  // "VF"
  uint16_t magic = kMagic;
  uint8_t kind = 0;   // FrameKind
  uint8_t op = 0;     // OpKind
  uint8_t dtype = 0;  // vigilDataType_t
  uint8_t redop = 0;  // vigilRedOp_t (0 where the op has none)
  uint16_t algo = 0;  // algo::Algo: ranks must run the same algorithm
  int32_t root = -1;  // -1 where the op has none
  // Point-to-point: the last collective seq the sender had entered (low 32
  // bits). A receiver that is already in a later collective knows that the
  // message was sent before that collective and never received.
  uint32_t sentAfterSeq = 0;
  uint64_t seq = 0;    // collective sequence number, or per-pair p2p number
  uint64_t count = 0;  // the op's count argument (0 for all-to-all-v)
  uint64_t bytes = 0;  // payload bytes that follow this header

  // A 64-bit digest of the fields sameOp() compares: equal digests mean the
  // same op (up to a 2^-64 chance; a differing digest is always a difference).
  uint64_t digest() const {
    auto mix = [](uint64_t h, uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
      return h * 0xff51afd7ed558ccdULL;
    };
    uint64_t h = mix(
        0, uint64_t{kind} | uint64_t{op} << 8 | uint64_t{dtype} << 16 | uint64_t{redop} << 24 | uint64_t{algo} << 32);
    h = mix(h, static_cast<uint32_t>(root));
    h = mix(h, seq);
    return mix(h, count) | 1;  // never 0: an unwritten slot holds 0
  }

  // Same shape: the fields that decide where bytes land and how many
  // (checked whatever VIGIL_FINGERPRINT says).
  bool sameShape(const FrameHeader& o) const {
    return kind == o.kind && dtype == o.dtype && root == o.root && seq == o.seq && count == o.count;
  }
  // The agreement a rank demands: the full fingerprint, or with
  // VIGIL_FINGERPRINT=0 only the shape.
  bool agrees(const FrameHeader& o, bool fullFingerprint) const { return fullFingerprint ? sameOp(o) : sameShape(o); }

  // Same operation (everything but the payload size)?
  bool sameOp(const FrameHeader& o) const {
    return kind == o.kind && op == o.op && dtype == o.dtype && redop == o.redop && root == o.root && seq == o.seq &&
           count == o.count && algo == o.algo;
  }
};
static_assert(sizeof(FrameHeader) == 40);

}  // namespace vigil
