"""Quick Marlin timing: W4 GPTQ g128 / AWQ g128 / channelwise vs bf16, M = 1, 16, 128."""
import sys, torch
sys.path.insert(0, "benchmarks")
import harness
from mllm_kernel import marlin
from mllm_kernel.cuda.jit import gptq_marlin_gemm
from mllm_kernel.scalar_type import scalar_types as st

ws = marlin.marlin_make_workspace("cuda")
ms = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [1, 16, 128]
shapes = [(4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096)]
print(f"{'shape':>11} {'M':>5} {'bf16':>7} {'w4g128':>7} {'awq':>7} {'w4ch':>7} {'x bf16':>6} {'GB/s':>6}")
for n, k in shapes:
    for m in ms:
        g = torch.Generator(device="cuda").manual_seed(1)
        sets = []
        for _ in range(harness.num_sets(2 * n * k)):
            x = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16)
            q4 = torch.randint(-2**31, 2**31 - 1, (k // 16, n * 2), device="cuda", generator=g, dtype=torch.int32)
            s = torch.rand(k // 128, n, device="cuda", generator=g).to(torch.bfloat16) * 0.01
            s1 = s[:1].clone()
            z = torch.randint(-2**31, 2**31 - 1, (k // 128, n // 8), device="cuda", generator=g, dtype=torch.int32)
            sets.append((x, w, q4, s, s1, z))
        t = lambda f: harness.time_calls(f, sets).us
        bf = t(lambda x, w, *_: torch.mm(x, w.t()))
        w4 = t(lambda x, w, q4, s, s1, z: gptq_marlin_gemm(x, None, q4, s, None, None, None, None, ws, st.uint4b8.id, m, n, k))
        aw = t(lambda x, w, q4, s, s1, z: gptq_marlin_gemm(x, None, q4, s, None, z, None, None, ws, st.uint4.id, m, n, k))
        ch = t(lambda x, w, q4, s, s1, z: gptq_marlin_gemm(x, None, q4, s1, None, None, None, None, ws, st.uint4b8.id, m, n, k))
        print(f"{n}x{k:<6} {m:>5} {bf:7.1f} {w4:7.1f} {aw:7.1f} {ch:7.1f} {bf/w4:6.2f} {n*k/2/w4/1e3:6.0f}", flush=True)
        del sets
        torch.cuda.empty_cache()
