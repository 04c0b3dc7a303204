"""``cache_once``: memoise a module factory per argument tuple, safely across threads."""

from __future__ import annotations

import functools
import threading
from typing import Callable, TypeVar

T = TypeVar("T")


def cache_once(factory: Callable[..., T]) -> Callable[..., T]:
    """Calls ``factory`` once per distinct arguments and returns the same result afterwards.

    Unlike ``functools.lru_cache`` the fast path is a plain dict lookup (which torch.compile
    can trace), a failed call is not cached (the next call retries), and two threads asking
    for the same new key wait for one computation instead of building twice.
    """
    results: dict = {}
    key_locks: dict = {}
    guard = threading.Lock()

    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
        try:
            return results[key]
        except KeyError:
            pass
        except TypeError as error:
            raise TypeError(f"{factory.__name__}: cache_once arguments must be hashable ({error})") from None
        with guard:
            lock = key_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in results:
                results[key] = factory(*args, **kwargs)
        return results[key]

    def cache_clear() -> None:
        with guard:
            results.clear()
            key_locks.clear()

    wrapper.cache_clear = cache_clear  # type: ignore[attr-defined]
    wrapper.cache_size = lambda: len(results)  # type: ignore[attr-defined]
    return wrapper
