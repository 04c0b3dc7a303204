// OnceTable (once_table.hpp): the per-process caches of kernels' host code.
#include <mllm_kernel/once_table.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {

using mllm_kernel::host::detail::OnceTable;

struct Key {
  int a;
  int b;
  bool operator==(const Key&) const = default;
};

TEST(OnceTable, ComputesEachKeyOnce) {
  static OnceTable<Key, int, 8> table;
  int calls = 0;
  const auto compute_sum = [&](int a, int b) {
    return [&calls, a, b](int& value) {
      ++calls;
      value = a + b;
      return true;
    };
  };
  int value = 0;
  ASSERT_TRUE(table.get(Key{1, 2}, 3, value, compute_sum(1, 2)));
  EXPECT_EQ(value, 3);
  ASSERT_TRUE(table.get(Key{1, 2}, 3, value, compute_sum(100, 200)));
  EXPECT_EQ(value, 3);  // kept from the first call
  // Another key on the same slot: probed past it, computed once too.
  ASSERT_TRUE(table.get(Key{2, 1}, 3, value, compute_sum(20, 1)));
  EXPECT_EQ(value, 21);
  ASSERT_TRUE(table.get(Key{2, 1}, 3, value, compute_sum(0, 0)));
  EXPECT_EQ(value, 21);
  EXPECT_EQ(calls, 2);
}

TEST(OnceTable, KeepsNothingWhenTheComputeFails) {
  static OnceTable<Key, int, 8> table;
  int value = -1;
  EXPECT_FALSE(table.get(Key{5, 5}, 0, value, [](int&) { return false; }));
  ASSERT_TRUE(table.get(Key{5, 5}, 0, value, [](int& v) {
    v = 7;
    return true;
  }));
  EXPECT_EQ(value, 7);
}

TEST(OnceTable, AFullTableStillAnswers) {
  static OnceTable<Key, int, 2> table;
  int calls = 0;
  const auto compute = [&calls](int& v) {
    v = ++calls * 10;
    return true;
  };
  int value = 0;
  table.get(Key{0, 0}, 0, value, compute);
  table.get(Key{0, 1}, 1, value, compute);
  ASSERT_TRUE(table.get(Key{0, 2}, 0, value, compute));  // no room: computed, not kept
  EXPECT_EQ(value, 30);
  ASSERT_TRUE(table.get(Key{0, 2}, 0, value, compute));
  EXPECT_EQ(value, 40);
  ASSERT_TRUE(table.get(Key{0, 0}, 0, value, compute));  // the kept ones stay
  EXPECT_EQ(value, 10);
}

TEST(OnceTable, ManyThreadsComputeOncePerKey) {
  static OnceTable<Key, int, 64> table;
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        for (int k = 0; k < 16; ++k) {
          int value = -1;
          table.get(Key{k, 0}, static_cast<std::size_t>(k) * 7, value, [&calls, k](int& v) {
            calls.fetch_add(1);
            v = k * k;
            return true;
          });
          if (value != k * k) wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(calls.load(), 16);
}

}  // namespace
