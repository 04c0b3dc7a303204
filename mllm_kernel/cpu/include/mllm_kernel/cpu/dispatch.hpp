// Highway dynamic dispatch for function templates.
//
// HWY_EXPORT / HWY_DYNAMIC_DISPATCH take a plain function name. A kernel whose per-target body
// is a template (`AddConstant<kConstant>`) uses MLLM_KERNEL_CPU_DISPATCH instead, once per
// instantiation, from the single-compiled part of its .cpp:
//
//   MLLM_KERNEL_CPU_DISPATCH(AddConstant<kConstant>)(dst, src, n);
//
// It builds the same table HWY_EXPORT builds (one entry per compiled target, chosen on first
// call from the CPU's supported targets) as a function-local static, so it works inside
// templates. The argument may hold one template-argument list without top-level commas;
// bundle several parameters into one type or constant when needed.
#pragma once

#include <hwy/highway.h>

#if HWY_IDE || ((HWY_TARGETS & (HWY_TARGETS - 1)) == 0)
// One compiled target: nothing to choose.
#define MLLM_KERNEL_CPU_DISPATCH(FUNC) (&HWY_STATIC_DISPATCH(FUNC))
#else
#define MLLM_KERNEL_CPU_DISPATCH(FUNC)                                                          \
  ([]() {                                                                                       \
    using FunctionPtr = decltype(&HWY_STATIC_DISPATCH(FUNC));                                   \
    static FunctionPtr const table[HWY_MAX_DYNAMIC_TARGETS + 2] = {                             \
        &decltype(hwy::DeduceFunctionCache(&HWY_STATIC_DISPATCH(FUNC)))::template ChooseAndCall<table>, \
        HWY_CHOOSE_TARGET_LIST(FUNC), HWY_CHOOSE_FALLBACK(FUNC)};                              \
    return table[hwy::GetChosenTarget().GetIndex()];                                            \
  }())
#endif
