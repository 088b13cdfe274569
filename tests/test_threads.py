"""Which threads run torch on several cores, and that their OpenMP workers do not outlive them."""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import CancelledError
from pathlib import Path

import pytest
import torch

from tests.support.threads import multi_core_work, on_new_thread
from tests.support.waiting import wait_until
from wyoming_pocket_tts.engine.cpu import threads
from wyoming_pocket_tts.engine.cpu.cores import available_cores
from wyoming_pocket_tts.engine.cpu.threads import (
    OwnThreadExecutor,
    intra_op_threads,
    run_on_own_thread,
    use_cores,
)

TASKS = Path("/proc/self/task")


@pytest.fixture(autouse=True)
def keep_process_count():
    """Give back the count new threads start with, which the tests here change."""
    process_wide = on_new_thread(torch.get_num_threads)
    yield
    on_new_thread(lambda: torch.set_num_threads(process_wide))


def os_threads() -> set[str]:
    return {task.name for task in TASKS.iterdir()}


@pytest.mark.skipif(not TASKS.is_dir(), reason="lists the threads in /proc")
def test_workers_of_an_own_thread_end_with_it(monkeypatch):
    """The point of running loads on their own thread: a long-lived thread (here, the
    one below; in the server, the event loop's) never gets a pool of OpenMP workers."""
    monkeypatch.setattr(threads, "available_cores", lambda: 2)

    def long_lived() -> set[str]:
        # Whatever torch starts once per process, started on a thread that ends.
        on_new_thread(lambda: run_on_own_thread(multi_core_work))
        before = os_threads()
        assert run_on_own_thread(multi_core_work) == 2
        wait_until(lambda: not os_threads() - before)
        return os_threads() - before

    assert on_new_thread(long_lived) == set()


def test_own_thread_uses_every_core_and_returns_or_raises(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 3)
    caller = threading.current_thread()
    assert run_on_own_thread(
        lambda: (threading.current_thread() is not caller, torch.get_num_threads())
    ) == (True, 3)

    def fail() -> None:
        raise ValueError("bad voice file")

    with pytest.raises(ValueError, match="bad voice file"):
        run_on_own_thread(fail)


def test_calls_run_one_at_a_time_and_waiting_ones_can_be_cancelled():
    executor = OwnThreadExecutor()
    release, running = threading.Event(), threading.Event()
    overlapping = []

    def hold() -> str:
        running.set()
        release.wait(timeout=60)
        return "first"

    first = executor.submit(hold)
    assert running.wait(timeout=60)
    second = executor.submit(lambda: overlapping.append(True))
    executor.shutdown(wait=False, cancel_futures=True)
    release.set()
    assert first.result(timeout=60) == "first"
    with pytest.raises(CancelledError):
        second.result(timeout=60)
    assert overlapping == []
    with pytest.raises(RuntimeError, match="shutdown"):
        executor.submit(hold)


def test_a_threads_count_is_its_own_once_set():
    """torch resets a thread's count to the last one set anywhere at its first parallel
    operator, unless the thread asked first: `use_cores` must survive that (the
    synthesis worker's threads start before voices load on every core)."""

    def worker_thread() -> int:
        use_cores(1)
        on_new_thread(lambda: torch.set_num_threads(3))
        return multi_core_work()

    assert on_new_thread(worker_thread) == 1


def test_available_cores_follows_the_affinity():
    if hasattr(os, "sched_getaffinity"):
        assert available_cores() == len(os.sched_getaffinity(0))
    else:
        assert available_cores() >= 1


def test_thread_count_comes_back_after_a_failed_pass():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="failed"), intra_op_threads(before + 1):
        assert torch.get_num_threads() == before + 1
        raise RuntimeError("failed")
    assert torch.get_num_threads() == before


def mkl_threads() -> int:
    """MKL's thread count for the calling thread, read from MKL itself."""
    library = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    library.mkl_get_max_threads_.restype = ctypes.c_int
    return library.mkl_get_max_threads_()


@pytest.mark.skipif(threads._mkl_thread_setter() is None, reason="no MKL in this torch build")
def test_a_synthesis_thread_keeps_mkl_serial_through_count_changes():
    """torch gives MKL its own count at every change: a synthesis thread must get one
    back each time (attention's nested MKL calls), and other threads keep MKL's threads."""

    def synthesis_thread() -> list[int]:
        use_cores(2, serial_blas=True)
        seen = [mkl_threads()]
        with intra_op_threads(1):
            seen.append(mkl_threads())
        seen.append(mkl_threads())
        return seen

    def loading_thread() -> int:
        use_cores(2)
        return mkl_threads()

    assert on_new_thread(synthesis_thread) == [1, 1, 1]
    assert on_new_thread(loading_thread) == 2


def test_the_workers_threads_ask_for_serial_mkl(monkeypatch, tiny_model) -> None:
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime import worker as worker_module
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

    asked: list[bool] = []
    monkeypatch.setattr(
        worker_module, "use_cores", lambda count, serial_blas=False: asked.append(serial_blas)
    )
    worker = worker_module.SynthesisWorker(Synthesizer(PocketTTS.load(tiny_model.config_path)))
    worker.start()
    worker.close()
    assert asked == [True, True]
