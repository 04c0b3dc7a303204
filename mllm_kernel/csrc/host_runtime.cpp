// The host runtime (host_runtime.hpp): the out-of-line half of text.hpp, errors.hpp, dtype.hpp,
// dl_device.hpp, tensor.hpp and rows.hpp. The JIT compiles it once per toolchain into a shared
// library that every module links; the C++ tests link it statically.
#include <mllm_kernel/dl_device.hpp>
#include <mllm_kernel/dtype.hpp>
#include <mllm_kernel/errors.hpp>
#include <mllm_kernel/rows.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/text.hpp>

#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace mllm_kernel::host {

// ---------------------------------------------------------------------------------------------
// text.hpp

Text::~Text() { std::free(data_); }

Text& Text::append(const char* data, std::size_t size) {
  if (size == 0) return *this;
  if (size_ + size + 1 > capacity_) {
    std::size_t capacity = capacity_ < 32 ? 32 : capacity_ * 2;
    while (capacity < size_ + size + 1) capacity *= 2;
    // A new block, the old one freed only after the copy: `data` may point into it.
    char* grown = static_cast<char*>(std::malloc(capacity));
    if (grown == nullptr) throw std::bad_alloc();
    if (size_ != 0) std::memcpy(grown, data_, size_);
    std::memcpy(grown + size_, data, size);
    std::free(data_);
    data_ = grown;
    capacity_ = capacity;
  } else {
    std::memmove(data_ + size_, data, size);
  }
  size_ += size;
  data_[size_] = '\0';
  return *this;
}

Text& Text::append(const char* text) { return text == nullptr ? *this : append(text, std::strlen(text)); }

bool Text::equals(const char* data, std::size_t size) const noexcept {
  return size == size_ && (size == 0 || std::memcmp(data_, data, size) == 0);
}

bool Text::equals(const char* text) const noexcept { return std::strcmp(c_str(), text == nullptr ? "" : text) == 0; }

// ---------------------------------------------------------------------------------------------
// errors.hpp

const char* PanicError::what() const noexcept { return message_.c_str(); }

namespace detail {

namespace {

// snprintf rather than <charconv>: this file is compiled beside a first call's module, and
// <charconv> was a tenth of its compile.
template <typename T>
void append_printf(Text& out, const char* format, T value) {
  char buffer[32];
  const int n = std::snprintf(buffer, sizeof(buffer), format, value);
  out.append(buffer, static_cast<std::size_t>(n));
}

}  // namespace

void append_signed(Text& out, long long value) { append_printf(out, "%lld", value); }
void append_unsigned(Text& out, unsigned long long value) { append_printf(out, "%llu", value); }
void append_floating(Text& out, double value) { append_printf(out, "%g", value); }
void append_pointer(Text& out, const void* value) { append_printf(out, "%p", value); }

Text list_text(const std::int64_t* values, int n) {
  Text out("[");
  for (int i = 0; i < n; ++i) {
    if (i) out.append(", ");
    append(out, values[i]);
  }
  out += ']';
  return out;
}

void throw_panic_at(const char* kind, Text message, const char* file, std::uint_least32_t line) {
  message.append(" [at ");
  message.append(short_file_name(file));
  message += ':';
  append(message, line);
  message += ']';
  throw PanicError(kind, std::move(message));
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// dtype.hpp, dl_device.hpp

Text dtype_name(DLDataType dtype) {
  using detail::concat;
  const int bits = dtype.bits;
  Text base;
  switch (dtype.code) {
    case kDLFloat: base = concat("float", bits); break;
    case kDLInt: base = concat("int", bits); break;
    case kDLUInt: base = concat("uint", bits); break;
    case kDLBfloat: base = concat("bfloat", bits); break;
    case kDLBool: base = "bool"; break;
    case kDLFloat8_e4m3fn: base = "float8_e4m3fn"; break;
    case kDLFloat8_e4m3fnuz: base = "float8_e4m3fnuz"; break;
    case kDLFloat8_e5m2: base = "float8_e5m2"; break;
    case kDLFloat8_e5m2fnuz: base = "float8_e5m2fnuz"; break;
    case kDLFloat8_e8m0fnu: base = "float8_e8m0fnu"; break;
    case kDLComplex: base = concat("complex", bits); break;
    default: base = concat("dtype(code=", static_cast<int>(dtype.code), ", bits=", bits, ")");
  }
  if (dtype.lanes != 1) base.append(concat("x", static_cast<int>(dtype.lanes)));
  return base;
}

Text device_type_name(int device_type) {
  switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLROCM: return "rocm";
    case kDLROCMHost: return "rocm_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLOneAPI: return "oneapi";
    default: return detail::concat("device_type(", device_type, ")");
  }
}

/// "cpu" for the host, "cuda:1" for an accelerator.
Text device_name(DLDevice device) {
  if (device.device_type == kDLCPU) return "cpu";
  return detail::concat(device_type_name(device.device_type), ":", device.device_id);
}

// ---------------------------------------------------------------------------------------------
// rows.hpp

RowsView::RowsView(mllm_kernel::TensorView tensor, const char* name, source_location loc)
    : tensor_{tensor.data_ptr(), tensor.device(), 2, tensor.dtype(), shape_, strides_, tensor.byte_offset()} {
  const int ndim = tensor.ndim();
  if (ndim == 0) {
    detail::throw_panic("ValueError", detail::concat(name, ": must have at least 1 dim, got a 0-dim tensor"), loc);
  }
  const std::int64_t* shape = tensor.shape().data();
  const std::int64_t* strides = tensor.strides().data();
  shape_[1] = shape[ndim - 1];
  strides_[1] = strides[ndim - 1];
  // Like PyTorch's unsqueeze(0) (1-D) and view(-1, last): the stride of a row made of size-1
  // dims is the length of a dense row.
  shape_[0] = 1;
  strides_[0] = shape_[1] * strides_[1];
  bool mergeable = true;
  bool strided = false;  // a leading dim of size > 1 has set the row stride
  std::int64_t next = 0;  // the stride the next outer dim of size > 1 must have
  for (int i = ndim - 2; i >= 0; --i) {
    shape_[0] *= shape[i];
    if (shape[i] == 1) continue;
    if (!strided) {
      strides_[0] = strides[i];
      strided = true;
    } else if (strides[i] != next) {
      mergeable = false;
    }
    next = strides[i] * shape[i];
  }
  // An empty tensor has no rows to misplace (the row ops reject it as empty): any strides.
  if (shape_[0] == 0) {
    strides_[0] = shape_[1] * strides_[1];
  } else if (!mergeable) {
    detail::throw_panic("ValueError",
                        detail::concat(name, ": leading dims of shape ", detail::list_text(shape, ndim), " with strides ",
                                       detail::list_text(strides, ndim),
                                       " cannot be flattened into rows without a copy"),
                        loc);
  }
}

// ---------------------------------------------------------------------------------------------
// tensor.hpp

namespace {

Text spec_text(const detail::InlineList<SizeSpec, detail::kMatcherMaxDims>& specs) {
  Text out("[");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (i) out.append(", ");
    out.append(specs[i].describe());
  }
  out += ']';
  return out;
}

Text join_dtypes(const detail::InlineList<detail::DTypeSlot, detail::kMatcherMaxDTypes>& dtypes) {
  Text out;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (i) out.append(", ");
    out.append(dtype_name(dtypes[i].value));
  }
  return out;
}

Text join_device_types(const detail::InlineList<int, detail::kMatcherMaxDeviceTypes>& types) {
  Text out;
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (i) out.append(" or ");
    out.append(device_type_name(types[i]));
  }
  return out;
}

}  // namespace

Text detail::Origin::text() const {
  return file ? concat("tensor verified at ", short_file_name(file), ":", line) : Text(name);
}

Text SizeSpec::describe() const {
  if (symbol_) return *symbol_->name() == '\0' ? Text("?") : Text(symbol_->name());
  return is_any() ? Text("*") : detail::concat(value_);
}

void TensorMatcher::match_value(const SizeSpec& spec, std::int64_t actual, const char* tensor,
                                const detail::Origin& origin, const char* what, int index,
                                const source_location& loc) {
  if (spec.is_any()) return;
  if (SymbolicSize* sym = spec.symbol()) {
    if (!sym->has_value()) {
      sym->bind(actual, origin);
      return;
    }
    if (sym->unwrap() != actual) [[unlikely]] {
      const Text label = *sym->name() == '\0' ? Text() : detail::concat(" (", sym->name(), ")");
      detail::throw_panic("ValueError",
                          detail::concat(tensor, ": ", what, " ", index, label, " must be ", sym->unwrap(),
                                         " as bound by ", sym->origin(), ", got ", actual),
                          loc);
    }
    return;
  }
  if (spec.value() != actual) [[unlikely]] {
    detail::throw_panic("ValueError",
                        detail::concat(tensor, ": ", what, " ", index, " must be ", spec.value(), ", got ", actual),
                        loc);
  }
}

void TensorMatcher::check(mllm_kernel::TensorView tensor, const char* name, const detail::Origin& origin,
                          const source_location& loc) {
  const int ndim = tensor.ndim();
  const std::int64_t* shape = tensor.shape().data();
  const int expected_ndim = static_cast<int>(shape_.size());
  if (ndim != expected_ndim) {
    detail::throw_panic("ValueError",
                        detail::concat(name, ": must have ", expected_ndim, " dims ", spec_text(shape_),
                                       ", got ", ndim, " dims ", detail::list_text(shape, ndim)),
                        loc);
  }
  // Dtype and device first: a wrong dtype explains odd sizes better than the sizes do.
  check_dtype(tensor.dtype(), name, origin, loc);
  check_device(tensor.device(), name, origin, loc);
  if (tensor.byte_offset() != 0) {
    detail::throw_panic("ValueError", detail::concat(name, ": byte_offset must be 0, got ", tensor.byte_offset()),
                        loc);
  }
  for (int i = 0; i < ndim; ++i) match_value(shape_[i], shape[i], name, origin, "dim", i, loc);

  // tvm-ffi views always carry strides (a DLPack producer's NULL is filled in on import).
  const std::int64_t* strides = ndim == 0 ? nullptr : tensor.strides().data();
  if (has_strides_) {
    if (static_cast<int>(strides_.size()) != ndim) {
      detail::throw_panic("ValueError",
                          detail::concat(name, ": the matcher gives ", strides_.size(),
                                         " strides for ", ndim, " dims"),
                          loc);
    }
    for (int i = 0; i < ndim; ++i) match_value(strides_[i], strides[i], name, origin, "stride", i, loc);
    return;
  }
  // Contiguous in PyTorch's sense: the stride of a dimension of size 1 is never used, and a
  // tensor with no elements is contiguous whatever its strides.
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] == 0) return;
  }
  std::int64_t contiguous = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != contiguous) {
      std::int64_t want[detail::kMatcherMaxDims];  // ndim matched the matcher's dims above
      std::int64_t s = 1;
      for (int j = ndim - 1; j >= 0; --j) {
        want[j] = s;
        s *= shape[j];
      }
      detail::throw_panic("ValueError",
                          detail::concat(name, ": must be contiguous (strides ", detail::list_text(want, ndim),
                                         "), got strides ", detail::list_text(strides, ndim)),
                          loc);
    }
    contiguous *= shape[i];
  }
}

void TensorMatcher::check_unnamed(mllm_kernel::TensorView tensor, const source_location& loc) {
  unnamed_ = detail::concat("tensor verified at ", short_file_name(loc.file_name()), ":", loc.line());
  check(tensor, unnamed_.c_str(), detail::Origin{"", loc.file_name(), loc.line()}, loc);
}

void TensorMatcher::check_dtype(DLDataType actual, const char* name, const detail::Origin& origin,
                                const source_location& loc) {
  if (!allowed_dtypes_.empty()) {
    bool ok = false;
    for (const auto& d : allowed_dtypes_) ok = ok || same_dtype(d.value, actual);
    if (!ok) {
      detail::throw_panic("ValueError",
                          detail::concat(name, ": dtype must be ",
                                         allowed_dtypes_.size() == 1 ? "" : "one of ",
                                         join_dtypes(allowed_dtypes_), ", got ", dtype_name(actual)),
                          loc);
    }
  }
  if (dtype_ == nullptr) return;
  if (!dtype_->has_value()) {
    dtype_->bind(actual, origin);
  } else if (!same_dtype(dtype_->unwrap(), actual)) {
    detail::throw_panic("ValueError",
                        detail::concat(name, ": dtype must be ", dtype_name(dtype_->unwrap()), " as bound by ",
                                       dtype_->origin(), ", got ", dtype_name(actual)),
                        loc);
  }
}

void TensorMatcher::check_device(DLDevice actual, const char* name, const detail::Origin& origin,
                                 const source_location& loc) {
  if (!allowed_devices_.empty()) {
    bool ok = false;
    for (int d : allowed_devices_) ok = ok || d == actual.device_type;
    if (!ok) {
      detail::throw_panic("ValueError",
                          detail::concat(name, ": device must be ", join_device_types(allowed_devices_),
                                         ", got ", device_name(actual)),
                          loc);
    }
  }
  if (device_ == nullptr) return;
  if (!device_->has_value()) {
    device_->bind(actual, origin);
  } else if (!same_device(device_->unwrap(), actual)) {
    detail::throw_panic("ValueError",
                        detail::concat(name, ": device must be ", device_name(device_->unwrap()), " as bound by ",
                                       device_->origin(), ", got ", device_name(actual)),
                        loc);
  }
}

}  // namespace mllm_kernel::host
