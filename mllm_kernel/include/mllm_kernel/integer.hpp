// Integer helpers for host code: ceiling division and integer ranges for range-for loops.
#pragma once

#include <type_traits>

namespace mllm_kernel::host {

/// Ceiling of `a / b` for non-negative integers.
template <typename A, typename B>
constexpr auto div_ceil(A a, B b) -> std::common_type_t<A, B> {
  using T = std::common_type_t<A, B>;
  // Quotient plus one for a remainder: `(a + b - 1) / b` overflows near T's maximum.
  const T quotient = static_cast<T>(a) / static_cast<T>(b);
  return static_cast<T>(quotient + (static_cast<T>(a) % static_cast<T>(b) != 0 ? 1 : 0));
}

/// The larger of two values. Kernel sources use max_of/min_of rather than std::max/std::min so
/// that they need not include <algorithm>, which C++20's ranges make one of the costliest
/// standard headers in each of nvcc's front ends.
template <typename T>
constexpr T max_of(T a, T b) {
  return a < b ? b : a;
}

/// The smaller of two values (see max_of).
template <typename T>
constexpr T min_of(T a, T b) {
  return b < a ? b : a;
}

/// A half-open integer range [begin, end) for range-for loops: `for (auto i : irange(n))`.
template <typename T>
class IntegerRange {
 public:
  class iterator {
   public:
    constexpr explicit iterator(T value) : value_(value) {}
    constexpr T operator*() const { return value_; }
    constexpr iterator& operator++() {
      ++value_;
      return *this;
    }
    constexpr bool operator!=(const iterator& other) const { return value_ != other.value_; }
    constexpr bool operator==(const iterator& other) const { return value_ == other.value_; }

   private:
    T value_;
  };
  constexpr IntegerRange(T begin, T end) : begin_(begin), end_(end < begin ? begin : end) {}
  constexpr iterator begin() const { return iterator(begin_); }
  constexpr iterator end() const { return iterator(end_); }
  constexpr T size() const { return end_ - begin_; }

 private:
  T begin_;
  T end_;
};

/// [0, end)
template <typename T>
constexpr IntegerRange<T> irange(T end) {
  return IntegerRange<T>(T{0}, end);
}

/// [begin, end); an empty range when end <= begin.
template <typename T, typename U>
constexpr IntegerRange<std::common_type_t<T, U>> irange(T begin, U end) {
  using C = std::common_type_t<T, U>;
  return IntegerRange<C>(static_cast<C>(begin), static_cast<C>(end));
}

}  // namespace mllm_kernel::host
