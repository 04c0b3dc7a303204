"""``awq_marlin_repack`` at the import path serving code uses (``marlin_repack`` has it)."""

from mllm_kernel.cuda.jit.marlin_repack import awq_marlin_repack, precompile

__all__ = ["awq_marlin_repack", "precompile"]
