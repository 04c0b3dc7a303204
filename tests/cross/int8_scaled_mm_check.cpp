// The CPU int8 GEMM's body (mllm_kernel/cpu/int8_scaled_mm.hpp) built for one target and run
// (Arm under qemu by tests/test_cpu_arm.py, x86 by tests/test_cpu_int8_scaled_mm.py): every
// product sum against an exact int64 one, over the shape classes of the body (register tiles of
// 1-4 rows of a and their tails, a single row's stream, N not a multiple of 4, K tails shorter
// than a vector and several vectors long). Scales of 1 and float32 output keep each sum exact
// (|sum| < 2^24). Prints the target and "ok", or the first mismatches; exits non-zero on any.
#include <hwy/highway.h>
#include <mllm_kernel/cpu/int8_scaled_mm.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

HWY_BEFORE_NAMESPACE();  // (the target's attributes, as on the kernel's own code)
namespace check::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int Run() {
  std::printf("target %s, %zu int8 lanes\n", hwy::TargetName(HWY_TARGET), hn::Lanes(hn::ScalableTag<std::int8_t>()));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(-128, 127);
  long mismatches = 0;
  for (int m : {1, 2, 3, 4, 5, 17})
    for (int n : {1, 4, 5, 20, 33})
      for (int k : {1, 7, 16, 63, 64, 100, 257, 600}) {
        std::vector<std::int8_t> a(m * k), w(n * k);
        for (auto& x : a) x = static_cast<std::int8_t>(byte(rng));
        for (auto& x : w) x = static_cast<std::int8_t>(byte(rng));
        if (k == 600) {  // the extremes, whose products the dot products must not saturate
          for (int i = 0; i < k; ++i) a[i] = -128, w[i] = (i % 2) ? -128 : 127;
        }
        std::vector<float> scales_a(m, 1.0f), scales_b(n, 1.0f), out(m * n, -1.0e30f);
        const mllm_kernel::cpu::Int8ScaledMmParams p{a.data(), k, w.data(), k, scales_a.data(), 1, scales_b.data(),
                                                     1, nullptr, out.data(), n, k};
        mllm_kernel::cpu::HWY_NAMESPACE::Int8ScaledMm<float>(p, 0, m, 0, n);
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            std::int64_t sum = 0;
            for (int t = 0; t < k; ++t) sum += std::int64_t{a[i * k + t]} * w[j * k + t];
            if (out[i * n + j] != static_cast<float>(sum) && mismatches++ < 5) {
              std::printf("M=%d N=%d K=%d: out[%d, %d] = %.1f, expected %lld\n", m, n, k, i, j, out[i * n + j],
                          static_cast<long long>(sum));
            }
          }
      }
  std::printf(mismatches ? "FAILED: %ld mismatches\n" : "ok\n", mismatches);
  return mismatches != 0;
}

}  // namespace check::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

int main() { return check::HWY_NAMESPACE::Run(); }
