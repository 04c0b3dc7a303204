// Reports the Highway SIMD targets this CPU supports and this build compiled, for
// `python -m mllm_kernel show-env`. Built through the JIT like any kernel, so it also proves
// the CPU toolchain works.
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cstdint>
#include <string>

namespace mllm_kernel::cpu {

namespace detail {
inline std::string target_names(std::int64_t mask) {
  std::string out;
  for (std::int64_t rest = mask; rest != 0; rest &= rest - 1) {
    const std::int64_t bit = rest & -rest;
    if (!out.empty()) out += ' ';
    out += hwy::TargetName(bit);
  }
  return out;
}
}  // namespace detail

/// "supported=AVX2 SSE4 ...;compiled=AVX3 AVX2 SSE4 EMU128;best=AVX2"
inline std::string highway_targets() {
  const std::int64_t supported = hwy::SupportedTargets();
  const std::int64_t usable = supported & HWY_TARGETS;
  const std::int64_t best = usable & -usable;  // lowest bit = best target in Highway's order
  return "supported=" + detail::target_names(supported) + ";compiled=" + detail::target_names(HWY_TARGETS) +
         ";best=" + (best ? std::string(hwy::TargetName(best)) : std::string("none"));
}

}  // namespace mllm_kernel::cpu
