#pragma once
// Floats compared as integers (internal to src/reduce): the portable max/min
// kernels and the (value, index) pairs order floats by these keys, which a
// DAZ/FTZ floating-point environment cannot change.

#include <bit>
#include <cstdint>
#include <type_traits>

namespace vigil::reduce {

template <typename T>
using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// A signed integer ordered like the float (sign-magnitude to two's
// complement); +0 and -0 map to the same key. Meaningless for NaN.
template <typename T>
std::make_signed_t<Bits<T>> orderKey(T v) {
  using U = Bits<T>;
  const U bits = std::bit_cast<U>(v);
  const U negative = U{0} - (bits >> (8 * sizeof(U) - 1));  // all ones or zero
  const U magnitude = bits & (~U{0} >> 1);
  return static_cast<std::make_signed_t<U>>((magnitude ^ negative) - negative);
}

}  // namespace vigil::reduce
