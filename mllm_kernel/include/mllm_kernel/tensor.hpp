// TensorMatcher: declarative checks of a tensor's shape, strides, dtype and device.
//
//   SymbolicSize T{"num_tokens"}, D{"hidden"};
//   SymbolicDType dtype;
//   SymbolicDevice device;
//   TensorMatcher({T, D})                       // 2-D, contiguous
//       .with_dtype<float, fp16_t, bf16_t>(dtype)
//       .with_device<kDLCUDA>(device)
//       .verify(input, "input")
//       .verify(out, "out");                    // same T, D, dtype, device as input
//   TensorMatcher({D}).with_dtype(dtype).with_device(device).verify(weight, "weight");
//   TensorMatcher({T, D}).with_strides({S, 1}).verify_rows(x, "x");  // x [..., D] as rows [T, D]
//
// A symbol binds to the first value it sees and every later use must match it; `unwrap()`
// returns the bound value. A failed check throws PanicError (a Python ValueError) whose message
// names the tensor, the dimension or stride, the symbol, what was expected, where a bound value
// came from, and what was given:
//   "residual: dim 1 (hidden) must be 4096 as bound by input, got 4095"
// The kernel's entry point adds the op name in front (see ffi_export.hpp).
//
// A TensorMatcher is a temporary: build it, verify, and let it go.
#pragma once

#include <mllm_kernel/dtype.hpp>
#include <mllm_kernel/host_runtime.hpp>
#include <mllm_kernel/rows.hpp>
#include <mllm_kernel/source_location.hpp>
#include <mllm_kernel/text.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace mllm_kernel::host {

namespace detail {

/// Where a symbol got its value, for "as bound by ..." in messages. Views only, so that a
/// check that passes allocates nothing: `name` has static storage (a tensor's name, a literal);
/// a value from an unnamed tensor is told by the location of its verify call.
struct Origin {
  const char* name = "";
  const char* file = nullptr;  // set for an unnamed tensor
  std::uint_least32_t line = 0;

  MLLM_KERNEL_HOST_API Text text() const;
};

/// A named holder for a DLDataType: nvcc 13 in C++20 mode crashes (internal error in
/// std::destroy_at) on a std::vector of DLPack's anonymous typedef'd struct.
struct DTypeSlot {
  DLDataType value;
};

/// A fixed-capacity list kept inside the matcher: checking a tensor allocates nothing.
template <typename T, std::size_t N>
class InlineList {
 public:
  InlineList() = default;
  InlineList(std::initializer_list<T> items) { assign(items); }
  void assign(std::initializer_list<T> items) {
    if (items.size() > N) {
      throw_panic("ValueError", concat("TensorMatcher supports at most ", N, " entries here, got ", items.size()),
                  source_location::current());
    }
    size_ = 0;
    for (const T& item : items) items_[size_++] = item;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](std::size_t i) const { return items_[i]; }
  const T* begin() const { return items_; }
  const T* end() const { return items_ + size_; }

 private:
  T items_[N] = {};
  std::size_t size_ = 0;
};

inline constexpr std::size_t kMatcherMaxDims = 8;
inline constexpr std::size_t kMatcherMaxDTypes = 16;
inline constexpr std::size_t kMatcherMaxDeviceTypes = 8;

}  // namespace detail

/// A named size (or stride) that binds on first sight and must match afterwards. Names and
/// origins are kept as pointers: pass string literals.
class SymbolicSize {
 public:
  explicit SymbolicSize(const char* name = "") : name_(name) {}
  SymbolicSize(const SymbolicSize&) = delete;
  SymbolicSize& operator=(const SymbolicSize&) = delete;

  /// The symbol's name as given ("hidden"), used in messages.
  const char* name() const { return name_; }
  /// Whether a value has been bound.
  bool has_value() const { return bound_; }
  /// Where the value was bound ("input", "the caller").
  Text origin() const { return origin_.text(); }

  /// Binds a value before any tensor is verified (e.g. a size that comes from an argument);
  /// `origin` is a string literal.
  void bind(std::int64_t value, const char* origin = "the caller") { bind(value, detail::Origin{origin}); }
  void bind(std::int64_t value, const detail::Origin& origin) {
    value_ = value;
    bound_ = true;
    origin_ = origin;
  }

  /// The bound value; a ValueError when nothing bound it.
  std::int64_t unwrap(source_location loc = source_location::current()) const {
    if (!bound_) {
      detail::throw_panic("ValueError", detail::concat("symbol '", name_, "' was never bound by a verified tensor"),
                          loc);
    }
    return value_;
  }

 private:
  const char* name_;
  std::int64_t value_ = 0;
  bool bound_ = false;
  detail::Origin origin_;
};

/// A dtype that binds on first sight; an optional allowed set comes from `with_dtype<Ts...>`.
class SymbolicDType {
 public:
  SymbolicDType() = default;
  SymbolicDType(const SymbolicDType&) = delete;
  SymbolicDType& operator=(const SymbolicDType&) = delete;

  bool has_value() const { return bound_; }
  Text origin() const { return origin_.text(); }

  /// The bound dtype; a ValueError when nothing bound it.
  DLDataType unwrap(source_location loc = source_location::current()) const {
    if (!bound_) detail::throw_panic("ValueError", "dtype symbol was never bound by a verified tensor", loc);
    return value_;
  }
  /// Whether the bound dtype is that of the C++ type T.
  template <typename T>
  bool is_type() const {
    return bound_ && same_dtype(value_, dl_dtype<T>::value);
  }

  /// `origin` is a string literal.
  void bind(DLDataType value, const char* origin) { bind(value, detail::Origin{origin}); }
  void bind(DLDataType value, const detail::Origin& origin) {
    value_ = value;
    bound_ = true;
    origin_ = origin;
  }

 private:
  DLDataType value_{};
  bool bound_ = false;
  detail::Origin origin_;
};

/// A device that binds on first sight.
class SymbolicDevice {
 public:
  SymbolicDevice() = default;
  SymbolicDevice(const SymbolicDevice&) = delete;
  SymbolicDevice& operator=(const SymbolicDevice&) = delete;

  bool has_value() const { return bound_; }
  Text origin() const { return origin_.text(); }

  /// The bound device; a ValueError when nothing bound it.
  DLDevice unwrap(source_location loc = source_location::current()) const {
    if (!bound_) detail::throw_panic("ValueError", "device symbol was never bound by a verified tensor", loc);
    return value_;
  }

  /// `origin` is a string literal.
  void bind(DLDevice value, const char* origin) { bind(value, detail::Origin{origin}); }
  void bind(DLDevice value, const detail::Origin& origin) {
    value_ = value;
    bound_ = true;
    origin_ = origin;
  }

 private:
  DLDevice value_{};
  bool bound_ = false;
  detail::Origin origin_;
};

/// One expected size or stride: a symbol, a fixed value, or -1 for "anything".
class SizeSpec {
 public:
  SizeSpec() = default;
  SizeSpec(SymbolicSize& symbol) : symbol_(&symbol) {}  // NOLINT(google-explicit-constructor)
  /// A fixed value of any integer type (-1 means any size).
  template <std::integral T>
  SizeSpec(T value) : value_(static_cast<std::int64_t>(value)) {}  // NOLINT(google-explicit-constructor)

  bool is_any() const { return symbol_ == nullptr && value_ == -1; }
  SymbolicSize* symbol() const { return symbol_; }
  std::int64_t value() const { return value_; }

  /// "hidden", "4096" or "*", for the expected-shape text of messages.
  MLLM_KERNEL_HOST_API Text describe() const;

 private:
  SymbolicSize* symbol_ = nullptr;
  std::int64_t value_ = -1;
};

/// Declarative tensor check; see the file comment.
class TensorMatcher {
 public:
  TensorMatcher(std::initializer_list<SizeSpec> shape) : shape_(shape) {}
  TensorMatcher(const TensorMatcher&) = delete;
  TensorMatcher& operator=(const TensorMatcher&) = delete;

  /// Expected strides (symbols, values, -1). Without this call the tensor must be contiguous.
  TensorMatcher&& with_strides(std::initializer_list<SizeSpec> strides) && {
    strides_.assign(strides);
    has_strides_ = true;
    return std::move(*this);
  }

  /// Restricts the dtype to one of Ts... and binds it to `symbol` (if given).
  template <typename... Ts>
  TensorMatcher&& with_dtype(SymbolicDType& symbol) && {
    allowed_dtypes_ = {detail::DTypeSlot{dl_dtype<Ts>::value}...};
    dtype_ = &symbol;
    return std::move(*this);
  }
  /// Restricts the dtype to one of Ts... (at least one type).
  template <typename T, typename... Ts>
  TensorMatcher&& with_dtype() && {
    allowed_dtypes_ = {detail::DTypeSlot{dl_dtype<T>::value}, detail::DTypeSlot{dl_dtype<Ts>::value}...};
    return std::move(*this);
  }

  /// Restricts the device type to one of kTypes... and binds the device to `symbol`.
  template <DLDeviceType... kTypes>
  TensorMatcher&& with_device(SymbolicDevice& symbol) && {
    allowed_devices_ = {static_cast<int>(kTypes)...};
    device_ = &symbol;
    return std::move(*this);
  }
  /// Restricts the device type to one of kTypes... (at least one type).
  template <DLDeviceType kType, DLDeviceType... kTypes>
  TensorMatcher&& with_device() && {
    allowed_devices_ = {static_cast<int>(kType), static_cast<int>(kTypes)...};
    return std::move(*this);
  }

  /// Checks `tensor`, called `name` in messages, and binds unbound symbols to its values.
  /// `name` must outlive the matcher (a string literal, as in every kernel).
  TensorMatcher&& verify(mllm_kernel::TensorView tensor, const char* name,
                         source_location loc = source_location::current()) && {
    check(tensor, name, detail::Origin{name}, loc);
    return std::move(*this);
  }
  /// Checks `tensor` [..., last] as the rows [rows, last] of a 2-D matcher: leading dims
  /// merged without a copy, a 1-D tensor as one row (RowsView, rows.hpp). Symbols bind to the
  /// rows' values, e.g. the row count and row stride.
  TensorMatcher&& verify_rows(mllm_kernel::TensorView tensor, const char* name,
                              source_location loc = source_location::current()) && {
    if (shape_.size() != 2) {
      detail::throw_panic("ValueError", detail::concat("verify_rows needs a 2-D matcher, got ", shape_.size(), " dims"),
                          loc);
    }
    const RowsView rows(tensor, name, loc);
    check(rows.view(), name, detail::Origin{name}, loc);
    return std::move(*this);
  }
  /// As verify, for an unnamed tensor: messages name it by the verify call's location.
  TensorMatcher&& verify(mllm_kernel::TensorView tensor,
                         source_location loc = source_location::current()) && {
    check_unnamed(tensor, loc);
    return std::move(*this);
  }

 private:
  // The checks themselves live in the host runtime (host_runtime.hpp): compiled once, not in
  // every module. Message text is built only when a check fails.

  /// Checks one size or stride against its spec, binding a symbol on first sight.
  MLLM_KERNEL_HOST_API static void match_value(const SizeSpec& spec, std::int64_t actual, const char* tensor,
                                               const detail::Origin& origin, const char* what, int index,
                                               const source_location& loc);
  MLLM_KERNEL_HOST_API void check(mllm_kernel::TensorView tensor, const char* name,
                                  const detail::Origin& origin, const source_location& loc);
  MLLM_KERNEL_HOST_API void check_unnamed(mllm_kernel::TensorView tensor, const source_location& loc);
  MLLM_KERNEL_HOST_API void check_dtype(DLDataType actual, const char* name, const detail::Origin& origin,
                                        const source_location& loc);
  MLLM_KERNEL_HOST_API void check_device(DLDevice actual, const char* name, const detail::Origin& origin,
                                         const source_location& loc);

  detail::InlineList<SizeSpec, detail::kMatcherMaxDims> shape_;
  detail::InlineList<SizeSpec, detail::kMatcherMaxDims> strides_;
  bool has_strides_ = false;
  detail::InlineList<detail::DTypeSlot, detail::kMatcherMaxDTypes> allowed_dtypes_;
  SymbolicDType* dtype_ = nullptr;
  detail::InlineList<int, detail::kMatcherMaxDeviceTypes> allowed_devices_;
  SymbolicDevice* device_ = nullptr;
  Text unnamed_;  // the name of an unnamed tensor, built only for those
};

}  // namespace mllm_kernel::host
