// Scalar math for device code over float, fp16_t and bf16_t, with fp32 internals.
//
//   using namespace mllm_kernel::device;
//   float y = math::rsqrt(x);                 // fast reciprocal square root
//   bf16_t m = math::max(a, b);               // same type in and out
//   float g = 0.5f * x * (1.f + erff(x * math::kInvSqrt2));
//
// The 16-bit overloads widen to fp32, compute, and round back once: the cost is nothing
// next to a memory-bound kernel's loads and the result is the correctly rounded one.
#pragma once

#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>

namespace mllm_kernel::device::math {

/// pi
inline constexpr float kPi = 3.14159265358979323846f;
/// log2(e), for exp via exp2.
inline constexpr float kLog2e = 1.44269504088896340736f;
/// ln(2)
inline constexpr float kLn2 = 0.69314718055994530942f;
/// sqrt(2)
inline constexpr float kSqrt2 = 1.41421356237309504880f;
/// 1 / sqrt(2), the erf argument scale of exact GELU.
inline constexpr float kInvSqrt2 = 0.70710678118654752440f;
/// sqrt(2 / pi), the tanh argument scale of approximate GELU.
inline constexpr float kSqrt2OverPi = 0.79788456080286535588f;
/// Largest finite float.
inline constexpr float kFloatMax = 3.402823466e+38f;
/// Largest finite fp8 e4m3 value.
inline constexpr float kFp8E4M3Max = 448.0f;

#define MLLM_KERNEL_MATH_UNARY(NAME, FLOAT_EXPR)                        \
  /** NAME(x) in fp32. */                                               \
  MLLM_DEVICE float NAME(float x) { return FLOAT_EXPR; }                \
  /** NAME(x) for fp16, computed in fp32 and rounded once. */           \
  MLLM_DEVICE fp16_t NAME(fp16_t x) { return cast<fp16_t>(NAME(cast<float>(x))); } \
  /** NAME(x) for bf16, computed in fp32 and rounded once. */           \
  MLLM_DEVICE bf16_t NAME(bf16_t x) { return cast<bf16_t>(NAME(cast<float>(x))); }

MLLM_KERNEL_MATH_UNARY(abs, fabsf(x))
MLLM_KERNEL_MATH_UNARY(sqrt, sqrtf(x))
MLLM_KERNEL_MATH_UNARY(rsqrt, rsqrtf(x))
MLLM_KERNEL_MATH_UNARY(exp, expf(x))
MLLM_KERNEL_MATH_UNARY(sin, sinf(x))
MLLM_KERNEL_MATH_UNARY(cos, cosf(x))
MLLM_KERNEL_MATH_UNARY(tanh, tanhf(x))
MLLM_KERNEL_MATH_UNARY(erf, erff(x))

#undef MLLM_KERNEL_MATH_UNARY

/// The larger of a and b (fmaxf semantics: a NaN operand loses to a number).
MLLM_DEVICE float max(float a, float b) { return fmaxf(a, b); }
MLLM_DEVICE fp16_t max(fp16_t a, fp16_t b) { return cast<fp16_t>(fmaxf(cast<float>(a), cast<float>(b))); }
MLLM_DEVICE bf16_t max(bf16_t a, bf16_t b) { return cast<bf16_t>(fmaxf(cast<float>(a), cast<float>(b))); }

/// The smaller of a and b (fminf semantics).
MLLM_DEVICE float min(float a, float b) { return fminf(a, b); }
MLLM_DEVICE fp16_t min(fp16_t a, fp16_t b) { return cast<fp16_t>(fminf(cast<float>(a), cast<float>(b))); }
MLLM_DEVICE bf16_t min(bf16_t a, bf16_t b) { return cast<bf16_t>(fminf(cast<float>(a), cast<float>(b))); }

/// Integer max/min, for index arithmetic in templates.
MLLM_HOST_DEVICE int max(int a, int b) { return a > b ? a : b; }
MLLM_HOST_DEVICE int min(int a, int b) { return a < b ? a : b; }

/// x / (1 + exp(-x)), the SiLU activation, in fp32.
MLLM_DEVICE float silu(float x) { return x / (1.0f + expf(-x)); }

/// Exact GELU: 0.5 x (1 + erf(x / sqrt 2)), in fp32.
MLLM_DEVICE float gelu(float x) { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }

/// Tanh-approximated GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in fp32.
MLLM_DEVICE float gelu_tanh(float x) {
  const float inner = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

}  // namespace mllm_kernel::device::math
