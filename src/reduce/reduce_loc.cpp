// vigilMinLoc / vigilMaxLoc on (value, index) pairs: MPI's MINLOC/MAXLOC.
//
// The pair with the lesser (greater) value wins, and of equal values the one
// with the lesser index. A NaN value ranks beyond every number for both ops
// (a NaN propagates, as it does through vigilMin/vigilMax), and two NaN
// values are equal, so again the lesser index wins. That is a total order on
// the pairs, so the result does not depend on the order in which an
// algorithm combines the ranks' inputs: every rank gets the same pair, bit
// for bit, whatever the algorithm. Floats are compared by their integer keys
// (orderKey, float_order.hpp), so that DAZ cannot make two values equal.
//
// A winning pair is copied whole, padding included (the padding is an
// explicit member), so the bytes a rank receives are the bytes some rank
// sent.

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "reduce/float_order.hpp"
#include "reduce/kernels.hpp"

namespace vigil::reduce {
namespace {

template <typename V>
struct Pair;
template <>
struct Pair<float> {
  float value;
  int32_t index;
};
template <>
struct Pair<double> {
  double value;
  int32_t index;
  int32_t padding;
};
template <>
struct Pair<int32_t> {
  int32_t value;
  int32_t index;
};
template <>
struct Pair<int64_t> {
  int64_t value;
  int32_t index;
  int32_t padding;
};
static_assert(sizeof(Pair<float>) == 8 && sizeof(Pair<double>) == 16);
static_assert(sizeof(Pair<int32_t>) == 8 && sizeof(Pair<int64_t>) == 16);

// Whether pair a is kept over pair b.
template <bool kMax, typename V>
bool firstWins(const Pair<V>& a, const Pair<V>& b) {
  if constexpr (std::is_floating_point_v<V>) {
    const bool nanA = a.value != a.value;
    const bool nanB = b.value != b.value;
    if (nanA || nanB) return nanA && (!nanB || a.index <= b.index);
    const auto ka = orderKey(a.value);
    const auto kb = orderKey(b.value);
    if (ka != kb) return kMax ? ka > kb : ka < kb;
  } else {
    if (a.value != b.value) return kMax ? a.value > b.value : a.value < b.value;
  }
  return a.index <= b.index;
}

template <typename V, bool kMax>
void locLoop(void* dst, const void* a, const void* b, size_t count) {
  auto* d = static_cast<Pair<V>*>(dst);
  const auto* x = static_cast<const Pair<V>*>(a);
  const auto* y = static_cast<const Pair<V>*>(b);
  for (size_t i = 0; i < count; ++i) {
    const Pair<V>& winner = firstWins<kMax>(x[i], y[i]) ? x[i] : y[i];
    if (&d[i] != &winner) std::memcpy(&d[i], &winner, sizeof(Pair<V>));
  }
}

template <typename V>
bool locTyped(void* dst, const void* a, const void* b, size_t count, vigilRedOp_t op) {
  if (op == vigilMinLoc) {
    locLoop<V, false>(dst, a, b, count);
  } else if (op == vigilMaxLoc) {
    locLoop<V, true>(dst, a, b, count);
  }
  return true;
}

template <typename V>
void locIdentity(void* buf, size_t count, vigilRedOp_t op) {
  Pair<V> identity{};
  constexpr bool kInf = std::numeric_limits<V>::has_infinity;
  if (op == vigilMaxLoc) {
    identity.value = kInf ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::lowest();
  } else {
    identity.value = kInf ? std::numeric_limits<V>::infinity() : std::numeric_limits<V>::max();
  }
  identity.index = std::numeric_limits<int32_t>::max();
  auto* p = static_cast<Pair<V>*>(buf);
  for (size_t i = 0; i < count; ++i) std::memcpy(&p[i], &identity, sizeof identity);
}

template <typename V>
size_t locNonFinite(const void* buf, size_t count) {
  const auto* p = static_cast<const Pair<V>*>(buf);
  for (size_t i = 0; i < count; ++i) {
    if (!(p[i].value - p[i].value == 0)) return i;  // NaN and +-Inf give NaN
  }
  return SIZE_MAX;
}

}  // namespace

bool locReduceInto(void* dst, const void* a, const void* b, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  switch (dtype) {
    case vigilFloat32Int32: return locTyped<float>(dst, a, b, count, op);
    case vigilFloat64Int32: return locTyped<double>(dst, a, b, count, op);
    case vigilInt32Int32: return locTyped<int32_t>(dst, a, b, count, op);
    case vigilInt64Int32: return locTyped<int64_t>(dst, a, b, count, op);
    default: return false;
  }
}

bool locFillIdentity(void* buf, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  switch (dtype) {
    case vigilFloat32Int32: locIdentity<float>(buf, count, op); return true;
    case vigilFloat64Int32: locIdentity<double>(buf, count, op); return true;
    case vigilInt32Int32: locIdentity<int32_t>(buf, count, op); return true;
    case vigilInt64Int32: locIdentity<int64_t>(buf, count, op); return true;
    default: return false;
  }
}

size_t locFindNonFinite(const void* buf, size_t count, vigilDataType_t dtype) {
  switch (dtype) {
    case vigilFloat32Int32: return locNonFinite<float>(buf, count);
    case vigilFloat64Int32: return locNonFinite<double>(buf, count);
    default: return SIZE_MAX;
  }
}

}  // namespace vigil::reduce
