"""Synthesis threads ask Linux for long time slices, and the threads they start inherit them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch

from tests.support.threads import multi_core_work, on_new_thread
from wyoming_pocket_tts.engine.cpu.time_slice import SYNTHESIS_TIME_SLICE_NS, use_long_time_slices

TASKS = Path("/proc/self/task")


def time_slice(thread_id: int) -> int | None:
    """The slice the scheduler gives a thread of this process (ns), where Linux says."""
    for line in (TASKS / str(thread_id) / "sched").read_text().splitlines():
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    return None


def kernel_reports_slices() -> bool:
    return TASKS.is_dir() and time_slice(threading.get_native_id()) is not None


needs_slices = pytest.mark.skipif(
    not kernel_reports_slices(), reason="the kernel shows no time slices (/proc/*/sched)"
)


@needs_slices
def test_a_thread_gets_its_long_slice_and_the_threads_it_starts_inherit_it():
    def synthesis_thread() -> tuple[bool, int | None, list[int | None]]:
        took = use_long_time_slices()
        before = set(os.listdir(TASKS))
        torch.set_num_threads(2)
        multi_core_work()  # starts this thread's OpenMP workers
        started = [time_slice(int(task)) for task in set(os.listdir(TASKS)) - before]
        child = threading.Thread(
            target=lambda: started.append(time_slice(threading.get_native_id()))
        )
        child.start()
        child.join()
        return took, time_slice(threading.get_native_id()), started

    own = threading.get_native_id()
    default = time_slice(own)
    assert default != SYNTHESIS_TIME_SLICE_NS
    took, slice_ns, started = on_new_thread(synthesis_thread)
    assert took and slice_ns == SYNTHESIS_TIME_SLICE_NS
    assert len(started) >= 2  # an OpenMP worker and the child thread
    assert started == [SYNTHESIS_TIME_SLICE_NS] * len(started)
    assert time_slice(own) == default  # the calling thread keeps its own


@needs_slices
def test_policy_and_nice_value_stay_as_they_were():
    def niced_thread() -> tuple[bool, int, int]:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 3)
        took = use_long_time_slices()
        thread_id = threading.get_native_id()
        return took, os.getpriority(os.PRIO_PROCESS, thread_id), os.sched_getscheduler(thread_id)

    assert on_new_thread(niced_thread) == (True, 3, os.SCHED_OTHER)


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling policies")
def test_an_idle_policy_thread_is_left_alone():
    def idle_thread() -> tuple[bool, int]:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return use_long_time_slices(), os.sched_getscheduler(0)

    assert on_new_thread(idle_thread) == (False, os.SCHED_IDLE)


@needs_slices
def test_the_workers_threads_run_on_long_slices(tiny_model, voice_wav):
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

    worker = SynthesisWorker(Synthesizer(PocketTTS.load(tiny_model.config_path)))
    with worker:
        voice = worker.synthesizer.model.voice_from_audio(voice_wav)
        for _ in worker.stream(voice, "Hello there."):
            pass
        slices = [time_slice(thread.native_id) for thread in worker._threads]
    assert slices == [SYNTHESIS_TIME_SLICE_NS] * 2
    assert time_slice(threading.get_native_id()) != SYNTHESIS_TIME_SLICE_NS
