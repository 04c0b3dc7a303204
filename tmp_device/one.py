import sys, torch
from mllm_kernel import marlin
from mllm_kernel.cuda.jit import gptq_marlin_gemm
from mllm_kernel.scalar_type import scalar_types as st
m, n, k = (int(x) for x in sys.argv[1:4])
ws = marlin.marlin_make_workspace("cuda")
x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
q4 = torch.randint(-2**31, 2**31 - 1, (k // 16, n * 2), device="cuda", dtype=torch.int32)
s = torch.rand(k // 128, n, device="cuda").to(torch.bfloat16) * 0.01
for _ in range(3):
    gptq_marlin_gemm(x, None, q4, s, None, None, None, None, ws, st.uint4b8.id, m, n, k)
torch.cuda.synchronize()
