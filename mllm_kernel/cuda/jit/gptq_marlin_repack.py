"""``gptq_marlin_repack`` at the import path serving code uses (``marlin_repack`` has it)."""

from mllm_kernel.cuda.jit.marlin_repack import gptq_marlin_repack, precompile

__all__ = ["gptq_marlin_repack", "precompile"]
