"""How many cores torch's operators may use, on which threads, and around which work.

torch's intra-op thread count belongs to each OS thread: a thread takes the value
last set anywhere in the process when it first runs a parallel operator (or asks
for the count), and from then on only its own `torch.set_num_threads` calls change
it. Each thread that runs a parallel operator on several cores also gets OpenMP
workers of its own (libgomp keeps a pool per thread) for as long as it lives.

Those pools are why multi-core work that is not synthesis (loading the model,
encoding a voice) runs on a thread of its own that ends with it: once the pools of
a process hold more threads than it has cores, libgomp makes every idle worker
sleep at once instead of spinning, so each of the hundreds of operators in a pass
has to wake it again.

The synthesis worker keeps its two threads at half the cores each (FlowLM and
Mimi side by side; one core each on two) and raises the count only around work
that runs while the other stage has nothing to do: a new request's text prompt and
first frame while the decoder is idle or holds back for them, and every step and
decoding while the stages take turns (few jobs active).

Those two threads also keep MKL (torch's x86 BLAS) on one thread of its own
(`use_cores(..., serial_blas=True)`). Attention calls MKL once or twice a head from
inside torch's own parallel region, and MKL, which torch tells to use every thread,
would open a nested region each time: one thread again, but with its set-up and a
futex call on the way out, over a hundred times a FlowLM step. Elsewhere, encoding a
voice, MKL keeps its threads, which make it faster there.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

from .contention import Contention
from .cores import available_cores

T = TypeVar("T")

_LOGGER = logging.getLogger(__name__)
_thread_state = threading.local()  # .serial_blas: this thread keeps MKL on one thread


def use_cores(count: int, *, serial_blas: bool = False) -> None:
    """Fix this thread's intra-op thread count for good (and MKL's at one if `serial_blas`).

    Only asking torch first makes it stick: a thread's first parallel operator (or
    count query) resets the count to the last value set on any thread, unless the
    thread asked before.
    """
    torch.get_num_threads()
    _thread_state.serial_blas = serial_blas
    _set_threads(count)


@contextmanager
def intra_op_threads(count: int | None) -> Iterator[None]:
    """Let torch's operators on this thread use `count` threads inside the block (None: as is)."""
    previous = torch.get_num_threads()
    if count is None or count == previous:
        yield
        return
    _set_threads(count)
    try:
        yield
    finally:
        _set_threads(previous)


def _set_threads(count: int) -> None:
    """torch's count for this thread; torch sets MKL's to the same, so set it back if serial."""
    torch.set_num_threads(count)
    if getattr(_thread_state, "serial_blas", False) and (set_mkl_threads := _mkl_thread_setter()):
        set_mkl_threads(1)


@functools.cache
def _mkl_thread_setter() -> Callable[[int], None] | None:
    """A setter of MKL's thread count for the calling thread; None where torch has no MKL.

    torch offers none, so it is MKL's own, from torch's library, in its Fortran form
    (arguments by reference); a check on a thread of its own that it takes effect.
    """
    if not torch.backends.mkl.is_available():
        return None
    try:
        path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
        library = ctypes.CDLL(path)
        set_local = library.mkl_set_num_threads_local_
        get_max = library.mkl_get_max_threads_
    except (OSError, AttributeError) as error:
        _LOGGER.debug("MKL's thread count cannot be set here: %s", error)
        return None
    set_local.restype = get_max.restype = ctypes.c_int

    def set_mkl_threads(count: int) -> None:
        set_local(ctypes.byref(ctypes.c_int(count)))

    def takes_effect() -> bool:
        torch.set_num_threads(2)
        set_mkl_threads(1)
        return int(get_max()) == 1

    if not run_on_own_thread(takes_effect):
        _LOGGER.debug("MKL's thread count did not change: left to torch")
        return None
    return set_mkl_threads


class OwnThreadExecutor(Executor):
    """Runs each call on a new thread with every core, one call at a time.

    The thread, and the OpenMP workers it started, end with the call (see the
    module docstring); one at a time, because two such calls would share the
    cores anyway. With `cores=1` (work too small to share out, such as reading a
    file) the calls start no OpenMP workers and run side by side. A call that
    starts while `contention` says other programs use the cores runs on one, for
    the reason the synthesis worker does (cpu/contention.py).
    """

    def __init__(
        self, name: str = "torch-work", cores: int | None = None,
        contention: Contention | None = None,
    ) -> None:
        self._name = name
        self._cores = cores
        self._contention = contention
        self._serial = threading.Lock() if cores != 1 else contextlib.nullcontext()
        self._calls: dict[Future[Any], threading.Thread] = {}  # submitted, not yet finished
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._closed:
            raise RuntimeError("cannot submit after shutdown")
        future: Future[T] = Future()

        def run() -> None:
            with self._serial:
                if future.set_running_or_notify_cancel():
                    try:
                        use_cores(self._cores_now())
                        future.set_result(fn(*args, **kwargs))
                    except Exception as error:  # noqa: BLE001 - for the future's waiter
                        future.set_exception(error)
            del self._calls[future]

        thread = threading.Thread(target=run, name=self._name)
        self._calls[future] = thread
        thread.start()
        return future

    def _cores_now(self) -> int:
        if self._contention is not None and self._contention.contended():
            return 1
        return self._cores or available_cores()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """`cancel_futures`: calls still waiting for their turn never run."""
        self._closed = True
        calls = list(self._calls.items())
        if cancel_futures:
            for future, _ in calls:
                future.cancel()  # a no-op for the call that is running
        for _, thread in calls if wait else ():
            thread.join()


def run_on_own_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on a thread of its own with every core; waits for the result."""
    return OwnThreadExecutor().submit(fn, *args, **kwargs).result()
