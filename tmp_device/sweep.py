"""Split-K sweep for W4 g128 at small M: blocks per SM target 1..4."""
import sys, torch
sys.path.insert(0, "benchmarks")
import harness
from mllm_kernel import marlin
from mllm_kernel.cuda.jit import gptq_marlin_gemm, gptq_marlin as gm
from mllm_kernel.scalar_type import scalar_types as st

ws = marlin.marlin_make_workspace("cuda")
orig = gm.splits_for
shapes = [(4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096)]
print(f"{'shape':>11} {'M':>3} {'bf16':>6} " + " ".join(f"{'x'+str(f):>6}" for f in (1, 2, 3, 4, 6)))
for n, k in shapes:
    for m in (1, 16):
        g = torch.Generator(device="cuda").manual_seed(1)
        sets = []
        for _ in range(harness.num_sets(2 * n * k)):
            x = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16)
            q4 = torch.randint(-2**31, 2**31 - 1, (k // 16, n * 2), device="cuda", generator=g, dtype=torch.int32)
            s = torch.rand(k // 128, n, device="cuda", generator=g).to(torch.bfloat16) * 0.01
            sets.append((x, w, q4, s))
        t = lambda f: harness.time_calls(f, sets).us
        bf = t(lambda x, w, *_: torch.mm(x, w.t()))
        out = []
        for f in (1, 2, 3, 4, 6):
            gm.splits_for = lambda m_, n_, k_, sm, f=f: max(1, min(sm * f // gm.output_blocks(m_, n_), k_ // 16 // 16))
            out.append(t(lambda x, w, q4, s: gptq_marlin_gemm(x, None, q4, s, None, None, None, None, ws, st.uint4b8.id, m, n, k)))
        gm.splits_for = orig
        print(f"{n}x{k:<6} {m:>3} {bf:6.1f} " + " ".join(f"{v:6.1f}" for v in out), flush=True)
        del sets
        torch.cuda.empty_cache()
