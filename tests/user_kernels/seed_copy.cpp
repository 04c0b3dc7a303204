// The CPU counterpart of seed_copy.cuh: a template in an anonymous namespace exported as
// `SeedCopy<T>::run` with T spelled by make_cpp_args.
#include <mllm_kernel/cpu/types.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>
#include <tvm/ffi/container/tensor.h>
#include <cstdint>
#include <cstring>

namespace {

template <typename T>
struct SeedCopy {
  static void run(tvm::ffi::TensorView input, tvm::ffi::TensorView output) {
    using namespace mllm_kernel::host;
    SymbolicSize n{"num_elements"};
    (void)TensorMatcher({n}).template with_dtype<T>().template with_device<kDLCPU>().verify(input, "input");
    (void)TensorMatcher({n}).template with_dtype<T>().template with_device<kDLCPU>().verify(output, "output");
    std::memcpy(output.data_ptr(), input.data_ptr(), static_cast<std::size_t>(n.unwrap()) * sizeof(T));
  }
};

}  // namespace
