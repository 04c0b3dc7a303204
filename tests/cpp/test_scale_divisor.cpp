// ScaleDivisor (the quantizers' x / scale) against IEEE float division on the host: the same
// arithmetic as on the device (explicit FMAs, no contraction in ISO C++ mode).
#include <mllm_kernel/scale_divisor.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using mllm_kernel::ScaleDivisor;

float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

/// Every bf16 value, every fp16 value (as floats) and random float bit patterns.
std::vector<float> dividends() {
  std::vector<float> xs;
  for (std::uint32_t b = 0; b < 65536; ++b) xs.push_back(from_bits(b << 16));
  for (std::uint32_t b = 0; b < 65536; ++b) {
    // fp16 -> float by hand: sign, 5-bit exponent, 10-bit mantissa.
    const std::uint32_t sign = (b >> 15) & 1, exp = (b >> 10) & 31, man = b & 1023;
    float v = exp == 0    ? std::ldexp(static_cast<float>(man), -24)
              : exp == 31 ? (man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity())
                          : std::ldexp(static_cast<float>(man | 1024), static_cast<int>(exp) - 25);
    xs.push_back(sign ? -v : v);
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 65536; ++i) xs.push_back(from_bits(static_cast<std::uint32_t>(rng())));
  return xs;
}

/// Checks d(x) for every dividend: equal to x / scale where 2^-19 <= |x / scale| < 2^19;
/// elsewhere on the same side (below 2^-18 or from 2^18) with the same sign, or NaN for NaN.
void expect_divides(float scale, const std::vector<float>& xs) {
  const ScaleDivisor divide(scale);
  int mismatches = 0;
  for (float x : xs) {
    const float got = divide(x);
    const float want = x / scale;
    bool ok;
    if (std::isnan(want)) {
      ok = std::isnan(got);
    } else if (std::fabs(want) >= 0x1p-19f && std::fabs(want) < 0x1p19f) {
      ok = std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want);
    } else {
      const bool tiny = std::fabs(want) < 0x1p-19f;
      ok = (tiny ? std::fabs(got) < 0x1p-18f : std::fabs(got) >= 0x1p18f) && std::signbit(got) == std::signbit(want);
    }
    if (!ok && ++mismatches <= 5) {
      ADD_FAILURE() << std::hexfloat << "x = " << x << ", scale = " << scale << ": got " << got << ", x / scale = " << want;
    }
  }
  EXPECT_EQ(mismatches, 0) << std::hexfloat << "scale = " << scale;
}

TEST(ScaleDivisor, MatchesIeeeDivisionForQuantizationScales) {
  const auto xs = dividends();
  // amax / 448 and amax / 127 as the quantizers form them, over many magnitudes.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int e = -40; e <= 40; e += 3) {
    const float amax = std::ldexp(mantissa(rng), e);
    expect_divides(amax / 448.0f, xs);
    expect_divides(amax / 127.0f, xs);
  }
  for (float scale : {1.0f, 0.5f, 0.05f, 1.0f / 448.0f, 1e-10f / 448.0f}) expect_divides(scale, xs);
}

TEST(ScaleDivisor, MatchesIeeeDivisionOverTheWholeFloatRange) {
  const auto xs = dividends();
  std::mt19937 rng(2);
  for (int i = 0; i < 60; ++i) {
    // Any finite non-zero magnitude, subnormals included, either sign.
    float scale;
    do {
      scale = from_bits(static_cast<std::uint32_t>(rng()));
    } while (!std::isfinite(scale) || scale == 0.0f);
    expect_divides(scale, xs);
  }
  // Significands of all ones (the reciprocal's hardest cases) near the range's edges.
  for (int e : {-149 + 23, -126, -65, -64, -63, 0, 63, 64, 65, 127}) {
    expect_divides(std::ldexp(from_bits(0x3fffffffu) / 2.0f, e), xs);
  }
  expect_divides(std::numeric_limits<float>::denorm_min(), xs);
  expect_divides(std::numeric_limits<float>::max(), xs);
  expect_divides(std::numeric_limits<float>::infinity(), xs);
  expect_divides(-std::numeric_limits<float>::infinity(), xs);
  expect_divides(std::numeric_limits<float>::quiet_NaN(), xs);
}

TEST(ScaleDivisor, MatchesIeeeDivisionForRandomPairs) {
  // A new scale for every dividend, both random bit patterns: the one correction step against
  // pairs no structured list covers (about a seventh have their quotient in the exact band).
  std::mt19937_64 rng(3);
  int mismatches = 0, in_band = 0;
  for (int i = 0; i < 20'000'000; ++i) {
    const std::uint64_t bits = rng();
    const float x = from_bits(static_cast<std::uint32_t>(bits));
    const float scale = std::fabs(from_bits(static_cast<std::uint32_t>(bits >> 32)));
    if (!std::isfinite(x) || !std::isfinite(scale) || scale == 0.0f) continue;
    const float want = x / scale;
    if (!(std::fabs(want) >= 0x1p-19f && std::fabs(want) < 0x1p19f)) continue;
    ++in_band;
    const float got = ScaleDivisor(scale)(x);
    if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want) && ++mismatches <= 5) {
      ADD_FAILURE() << std::hexfloat << "x = " << x << ", scale = " << scale << ": got " << got << ", x / scale = " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(in_band, 2'000'000);
}

TEST(ScaleDivisor, ZeroScaleGivesZero) {
  for (float scale : {0.0f, -0.0f}) {
    const ScaleDivisor divide(scale);
    for (float x : {1.0f, -3.5f, 0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(divide(x)), 0u) << "x = " << x;
    }
  }
}

}  // namespace
