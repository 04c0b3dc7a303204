// Every member of tvm::ffi::TensorView and ShapeView, read into one line: tests/test_standin.py
// builds it against the stand-in for tvm-ffi's tensor header (jit_utils/standin.py) and against
// tvm-ffi's own, and compares the two on the same tensors.
#include <tvm/ffi/container/tensor.h>

#include <cstdint>
#include <string>

namespace {

std::string text(tvm::ffi::ShapeView values) {
  std::string out = "[";
  for (std::int64_t v : values) out += std::to_string(v) + ",";
  out += "] size " + std::to_string(values.size()) + " empty " + std::to_string(values.empty());
  out += " product " + std::to_string(values.Product());
  for (std::size_t i = 0; i < values.size(); ++i) out += " " + std::to_string(values[i]) + "/" + std::to_string(values.at(i));
  if (!values.empty()) out += " front " + std::to_string(values.front()) + " back " + std::to_string(values.back());
  return out;
}

std::string describe(tvm::ffi::TensorView x) {
  const tvm::ffi::TensorView copy = x;
  const DLDataType dtype = copy.dtype();
  const DLDevice device = copy.device();
  std::string out = "data " + std::to_string(reinterpret_cast<std::uintptr_t>(copy.data_ptr()));
  out += " device " + std::to_string(device.device_type) + ":" + std::to_string(device.device_id);
  out += " dtype " + std::to_string(dtype.code) + "/" + std::to_string(dtype.bits) + "/" + std::to_string(dtype.lanes);
  out += " ndim " + std::to_string(copy.ndim()) + " dim " + std::to_string(copy.dim());
  out += " numel " + std::to_string(copy.numel()) + " byte_offset " + std::to_string(copy.byte_offset());
  out += " contiguous " + std::to_string(copy.IsContiguous()) + std::to_string(copy.is_contiguous());
  out += " shape " + text(copy.shape()) + " sizes " + text(copy.sizes()) + " strides " + text(copy.strides());
  for (std::int64_t i = -copy.ndim(); i < copy.ndim(); ++i) {
    out += " " + std::to_string(copy.size(i)) + "/" + std::to_string(copy.stride(i));
  }
  return out;
}

std::int64_t size_at(tvm::ffi::TensorView x, std::int64_t i) { return x.size(i); }
std::int64_t stride_at(tvm::ffi::TensorView x, std::int64_t i) { return x.stride(i); }
std::int64_t shape_at(tvm::ffi::TensorView x, std::int64_t i) { return x.shape().at(static_cast<std::size_t>(i)); }
std::int64_t shape_back(tvm::ffi::TensorView x) { return x.shape().back(); }

}  // namespace
