#include "perf_data.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace vigil::perf {
namespace {

// Limits: unsigned types stop one short of their maximum, the all-ones poison value; 64-bit
// integers stop at 2^53, where double (the checker's arithmetic) stops being exact.
constexpr double kTwo53 = 9007199254740992.0;
const DtypeInfo kDtypes[] = {
    {vigilInt8, "int8", 1, 127, 6},
    {vigilUint8, "uint8", 1, 254, 7},
    {vigilInt32, "int32", 4, 2147483647.0, 30},
    {vigilUint32, "uint32", 4, 4294967294.0, 31},
    {vigilInt64, "int64", 8, kTwo53, 53},
    {vigilUint64, "uint64", 8, kTwo53, 53},
    {vigilFloat16, "float16", 2, 2048, 15},
    {vigilFloat32, "float32", 4, 16777216.0, 127},
    {vigilFloat64, "float64", 8, kTwo53, 1023},
    {vigilBfloat16, "bfloat16", 2, 256, 127},
};

// Spreads (rank, index) over 64 bits, so that a block landing at the wrong offset or coming
// from the wrong rank differs from the expected values almost everywhere.
uint64_t hashOf(uint64_t rank, uint64_t index) {
  uint64_t x = index * 0x9e3779b97f4a7c15ULL ^ (rank + 1) * 0xc2b2ae3d27d4eb4fULL;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Salts for the per-index parts of the avg pattern (any value that is not a rank).
constexpr uint64_t kAvgShared = 0xa5a5a5a5ULL;
constexpr uint64_t kAvgOwned = 0x5a5a5a5aULL;

}  // namespace

const DtypeInfo& dtypeInfo(vigilDataType_t type) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.type == type) return info;
  }
  return kDtypes[7];  // unreachable: options only hold valid types
}

const char* opName(vigilRedOp_t op) {
  switch (op) {
    case vigilSum: return "sum";
    case vigilProd: return "prod";
    case vigilMax: return "max";
    case vigilMin: return "min";
    case vigilAvg: return "avg";
    case vigilBand: return "band";
    case vigilBor: return "bor";
    case vigilBxor: return "bxor";
    case vigilLand: return "land";
    case vigilLor: return "lor";
    case vigilLxor: return "lxor";
    case vigilMinLoc: return "minloc";
    case vigilMaxLoc: return "maxloc";
  }
  return "?";
}

void poisonBuffer(void* buf, size_t count, vigilDataType_t type) {
  withCodec(type, [&](auto codec) {
    using Storage = typename decltype(codec)::Storage;
    auto* p = static_cast<Storage*>(buf);
    Storage poison;
    if constexpr (std::is_unsigned_v<Storage>) {
      // uint16_t storage is float16/bfloat16, where 0xffff would be a NaN.
      poison = std::is_same_v<Storage, uint16_t> ? decltype(codec)::encode(-1.0) : std::numeric_limits<Storage>::max();
    } else {
      poison = decltype(codec)::encode(-1.0);
    }
    std::fill(p, p + count, poison);
  });
}

Pattern::Pattern(vigilDataType_t type, bool reduction, vigilRedOp_t op, int nranks) : op_(op), nranks_(nranks) {
  const DtypeInfo& info = dtypeInfo(type);
  const double limit = info.exactLimit;
  const double n = nranks;
  if (!reduction) {
    kind_ = Kind::Move;
    range_ = static_cast<uint64_t>(std::min(limit, 8191.0)) + 1;
    return;
  }
  switch (op) {
    case vigilSum:
      // Each rank adds at most `limit / n`, so every partial sum stays exact.
      if (limit / n >= 1) {
        kind_ = Kind::Sum;
        range_ = static_cast<uint64_t>(std::min(7.0, std::floor(limit / n))) + 1;
      } else {
        kind_ = Kind::OneHot;  // more ranks than exact values: one rank holds a 1
      }
      break;
    case vigilProd:
      // Factors are 1 or 2; at most maxPow2 ranks hold a 2 at one index.
      kind_ = Kind::Prod;
      maxDoubles_ = static_cast<uint64_t>(std::min({nranks, info.maxPow2, 24}));
      break;
    case vigilBand:
    case vigilBor:
    case vigilBxor:
    case vigilLand:
    case vigilLor:
    case vigilLxor:  // not measured (-o takes sum, prod, max, min, avg): checked as max/min would be
    case vigilMinLoc:
    case vigilMaxLoc:
    case vigilMax:
    case vigilMin:
      kind_ = Kind::MaxMin;
      range_ = 101;  // exact in every dtype, int8 and bfloat16 included
      break;
    case vigilAvg:
      // Every rank holds a shared part c, and one rank also n*b: the sum n*(c+b) divides by n
      // exactly, for integer types too. range_ 0 marks the fallback without the shared part.
      kind_ = Kind::Avg;
      range_ = limit / (2 * n) >= 1 ? static_cast<uint64_t>(std::min(3.0, std::floor(limit / (2 * n)))) + 1 : 0;
      if (type == vigilFloat16 || type == vigilBfloat16 || type == vigilFloat32 || type == vigilFloat64) {
        tolerance_ = type == vigilFloat64 ? 1e-15 : type == vigilFloat32 ? 5e-7 : type == vigilFloat16 ? 1e-3 : 8e-3;
      }
      avgFits_ = n <= limit;
      break;
  }
}

double Pattern::input(int rank, size_t index) const {
  const auto r = static_cast<uint64_t>(rank);
  const uint64_t n = static_cast<uint64_t>(nranks_);
  switch (kind_) {
    case Kind::Move:
    case Kind::Sum:
    case Kind::MaxMin: return static_cast<double>(hashOf(r, index) % range_);
    case Kind::OneHot: return index % n == r ? 1 : 0;
    case Kind::Prod: {
      // A different number of 2s at each index, held by a different set of ranks.
      const uint64_t doubles = index % (maxDoubles_ + 1);
      return (index + r) % n < doubles ? 2 : 1;
    }
    case Kind::Avg: {
      const double owned = index % n == r ? static_cast<double>(nranks_) * avgOwned(index) : 0;
      return avgShared(index) + owned;
    }
  }
  return 0;
}

double Pattern::reduced(size_t index) const {
  if (kind_ == Kind::Avg) return avgShared(index) + avgOwned(index);
  double acc = input(0, index);
  for (int r = 1; r < nranks_; ++r) {
    const double v = input(r, index);
    switch (op_) {
      case vigilSum: acc += v; break;
      case vigilProd: acc *= v; break;
      case vigilMax: acc = std::max(acc, v); break;
      case vigilMin: acc = std::min(acc, v); break;
      case vigilAvg: break;  // handled above
      default: break;        // the bitwise and logical ones are not measured (parseOps)
    }
  }
  return acc;
}

double Pattern::avgShared(size_t index) const {
  return range_ == 0 ? 0 : static_cast<double>(hashOf(kAvgShared, index) % range_);
}

double Pattern::avgOwned(size_t index) const {
  if (range_ == 0) return avgFits_ ? 1 : 0;
  return static_cast<double>(hashOf(kAvgOwned, index) % range_);
}

}  // namespace vigil::perf
