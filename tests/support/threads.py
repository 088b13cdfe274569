"""Running work on fresh threads, for tests about per-thread torch state."""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch


def on_new_thread(fn: Callable[[], object]) -> object:
    """`fn()` on a thread that lives only for it: a fresh per-thread torch state."""
    box: dict[str, object] = {}
    thread = threading.Thread(target=lambda: box.update(result=fn()))
    thread.start()
    thread.join()
    return box["result"]


def multi_core_work() -> int:
    """Enough work for torch to start OpenMP workers; the thread count it ran with."""
    a = torch.randn(512, 512)
    (a @ a).sum()
    return torch.get_num_threads()
