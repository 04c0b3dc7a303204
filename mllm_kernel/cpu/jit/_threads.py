"""The thread count the CPU kernels run with.

Every CPU kernel takes the thread count as its last argument and runs on one thread pool per
compiled module (see ``mllm_kernel/cpu/include/mllm_kernel/cpu/thread_pool.hpp``). The count is
``MLLM_KERNEL_NUM_THREADS`` when that environment variable is set (read once, at import), else
``torch.get_num_threads()`` at call time, so ``torch.set_num_threads`` applies to the next call.
Small inputs run on one thread whatever the count.
"""

from __future__ import annotations

import os

import torch

ENV_VAR = "MLLM_KERNEL_NUM_THREADS"


def _parse_env(value: str | None) -> int | None:
    if value is None or value.strip() == "":
        return None
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"{ENV_VAR} must be a positive integer, got {value!r}")
    return count


_ENV_THREADS = _parse_env(os.environ.get(ENV_VAR))


def num_threads() -> int:
    """The number of threads a CPU kernel may use for its next call."""
    return _ENV_THREADS if _ENV_THREADS is not None else torch.get_num_threads()
