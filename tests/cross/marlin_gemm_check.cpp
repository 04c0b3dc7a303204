// The CPU weight-only GEMM's body (mllm_kernel/cpu/marlin_gemm.hpp) built for one Arm target and
// run (under qemu by tests/test_cpu_arm.py) against a float64 GEMM of the weights decoded by the
// format's own coordinates (mllm_kernel/marlin.hpp: weight_coord, the scale permutations): GPTQ
// 4-bit (uint4b8) and 8-bit (uint8b128) weights, channel-wise and grouped scales, 1-5 rows of a,
// the tiles computed whole and K split in two parts added after (decode). Prints the target and
// "ok", or the first mismatches; exits non-zero on any.
#include <hwy/highway.h>
#include <mllm_kernel/cpu/marlin_gemm.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

HWY_BEFORE_NAMESPACE();  // (the target's attributes, as on the kernel's own code)
namespace check::HWY_NAMESPACE {
namespace marlin = mllm_kernel::marlin;

int Run() {
  std::printf("target %s\n", hwy::TargetName(HWY_TARGET));
  std::mt19937 rng(11);
  long mismatches = 0;
  for (int bits : {4, 8})
    for (int groups : {1, 2})
      for (int m : {1, 3, 5})
        for (int n : {64, 192})
          for (bool split : {false, true}) {
            const int k = 256, per_word = 32 / bits, bias = bits == 4 ? 8 : 128;
            const std::int64_t row_words = std::int64_t{n} * marlin::kTileK * bits / 32;
            std::vector<std::int32_t> b(static_cast<std::size_t>(k / marlin::kTileK * row_words));
            for (auto& word : b) word = static_cast<std::int32_t>(rng());
            std::uniform_real_distribution<float> real(-1.0f, 1.0f);
            std::vector<float> a(m * k), scales(groups * n), c(m * n, -1.0e30f);
            for (auto& x : a) x = real(rng);
            for (auto& s : scales) s = real(rng) * 0.01f;
            // The weights as the format defines them, in float64.
            std::vector<double> w(static_cast<std::size_t>(k) * n);
            for (int block = 0; block < k / marlin::kTileK; ++block)
              for (int tile = 0; tile < n / marlin::kTileN; ++tile)
                for (int word = 0; word < marlin::tile_words(bits); ++word) {
                  const auto packed = static_cast<std::uint32_t>(
                      b[block * row_words + tile * marlin::tile_words(bits) + word]);
                  for (int slot = 0; slot < per_word; ++slot) {
                    const marlin::TileCoord at = marlin::weight_coord(bits, word, slot);
                    const int kk = block * marlin::kTileK + at.k, nn = tile * marlin::kTileN + at.n;
                    const int q = static_cast<int>(packed >> (bits * slot) & ((1u << bits) - 1));
                    const std::int64_t pos = groups == 1 ? marlin::channel_scale_pos(nn)
                                                         : kk / (k / groups) * n + marlin::grouped_scale_pos(nn);
                    w[static_cast<std::size_t>(kk) * n + nn] = (q - bias) * double{scales[pos]};
                  }
                }
            const mllm_kernel::host::MarlinGemmParams p{a.data(), c.data(), b.data(), scales.data(), nullptr, nullptr,
                                                        m, n, k, k, groups, k / groups, bits};
            const std::int64_t tiles = n / marlin::kTileN, blocks = k / marlin::kTileK;
            if (split) {
              std::vector<float> partials(2 * m * n);
              mllm_kernel::cpu::HWY_NAMESPACE::MarlinGemm<float>(p, 0, tiles, 0, blocks / 2, partials.data());
              mllm_kernel::cpu::HWY_NAMESPACE::MarlinGemm<float>(p, 0, tiles, blocks / 2, blocks, partials.data() + m * n);
              mllm_kernel::cpu::HWY_NAMESPACE::MarlinAddParts<float>(p, partials.data(), 2, 0, n);
            } else {
              mllm_kernel::cpu::HWY_NAMESPACE::MarlinGemm<float>(p, 0, tiles, 0, blocks, nullptr);
            }
            for (int i = 0; i < m; ++i)
              for (int j = 0; j < n; ++j) {
                double sum = 0.0, size = 0.0;
                for (int t = 0; t < k; ++t) {
                  sum += a[i * k + t] * w[static_cast<std::size_t>(t) * n + j];
                  size += std::fabs(a[i * k + t] * w[static_cast<std::size_t>(t) * n + j]);
                }
                // float32 sums of k products: a few ulps of float32 of the sum of their sizes.
                if (!(std::fabs(c[i * n + j] - sum) <= 1e-5 * size) && mismatches++ < 5) {
                  std::printf("%d-bit groups %d M=%d N=%d split %d: c[%d, %d] = %g, expected %g\n", bits, groups, m, n,
                              split, i, j, c[i * n + j], sum);
                }
              }
          }
  std::printf(mismatches ? "FAILED: %ld mismatches\n" : "ok\n", mismatches);
  return mismatches != 0;
}

}  // namespace check::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

int main() { return check::HWY_NAMESPACE::Run(); }
