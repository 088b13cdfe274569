"""A good neighbour on a busy host: the worker notices other programs on its cores,
runs every operator on one thread while they are there, and every core again once
they leave."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from wyoming.audio import AudioStart
from wyoming.tts import Synthesize

from tests.support.contention import SetContention
from tests.support.engine_calls import record_decodes, record_threads_of_steps
from tests.support.server import describe, launch, run
from tests.support.threads import on_new_thread
from tests.support.waiting import wait_until
from wyoming_pocket_tts.engine.cpu import threads as threads_module
from wyoming_pocket_tts.engine.cpu.contention import ContentionThresholds, CoreContention
from wyoming_pocket_tts.engine.cpu.cores import available_cores, limit_cores
from wyoming_pocket_tts.engine.cpu.threads import OwnThreadExecutor
from wyoming_pocket_tts.engine.runtime import worker as worker_module
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=12)
TEXT = "Turn on the kitchen light."
# Short intervals, so that a test sees a verdict change within a second or two.
QUICK = ContentionThresholds(interval_s=0.1, free_after_s=0.5)


class FakeHost:
    """A /proc/stat of two cores whose busy time a test advances, with its clock and
    this process's CPU time."""

    def __init__(self, path: Path) -> None:
        self.path, self.now, self.busy_ticks, self.own_s = path, 0.0, [0, 0], 0.0
        self._write()

    def run(self, seconds: float, others_cores: float, own_cores: float = 0.0) -> None:
        """`seconds` pass with others on `others_cores` cores and us on `own_cores`."""
        ticks = round((others_cores + own_cores) * seconds * 100)  # USER_HZ is 100
        self.busy_ticks[0] += ticks // 2
        self.busy_ticks[1] += ticks - ticks // 2
        self.own_s += own_cores * seconds
        self.now += seconds
        self._write()

    def _write(self) -> None:
        lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
        for core, busy in enumerate(self.busy_ticks):
            lines.append(f"cpu{core} {busy} 0 0 1000 0 0 0 0 0 0")
        self.path.write_text("\n".join([*lines, "intr 0", ""]))

    def monitor(self) -> CoreContention:
        return CoreContention(
            QUICK, cores={0, 1}, stat_path=self.path,
            own_cpu_seconds=lambda: self.own_s, clock=lambda: self.now,
        )


@pytest.mark.skipif(os.sysconf("SC_CLK_TCK") != 100, reason="the fake /proc/stat counts 1/100 s")
def test_others_on_our_cores_are_contention_and_our_own_work_is_not(tmp_path):
    host = FakeHost(tmp_path / "stat")
    monitor = host.monitor()
    host.run(0.2, others_cores=0.0, own_cores=2.0)
    assert not monitor.contended()  # every core busy, all of it ours
    host.run(0.2, others_cores=1.0, own_cores=1.0)
    assert monitor.contended()
    assert monitor.others_cores == pytest.approx(1.0)
    host.run(0.2, others_cores=0.05, own_cores=2.0)
    assert monitor.contended()  # a neighbour resting for a moment has not left
    for _ in range(3):
        host.run(0.2, others_cores=0.05, own_cores=2.0)
        monitor.contended()
    assert not monitor.contended()  # quiet for longer than free_after_s


@pytest.mark.skipif(os.sysconf("SC_CLK_TCK") != 100, reason="the fake /proc/stat counts 1/100 s")
def test_a_neighbour_that_comes_back_resets_the_wait_for_free_cores(tmp_path):
    host = FakeHost(tmp_path / "stat")
    monitor = host.monitor()
    host.run(0.2, others_cores=1.0)
    assert monitor.contended()
    for others in (0.0, 0.0, 1.0, 0.0, 0.0):  # back before free_after_s had passed
        host.run(0.2, others_cores=others)
        assert monitor.contended()


def test_a_host_without_proc_stat_is_never_contended(tmp_path):
    monitor = CoreContention(QUICK, stat_path=tmp_path / "missing")
    time.sleep(QUICK.interval_s)
    assert not monitor.contended()


@pytest.fixture
def quiet_machine() -> None:
    """Skip a test of real neighbours on a machine that other programs already keep
    busy (another test run, say): there, what it starts is not the only neighbour."""
    monitor = CoreContention(QUICK)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(QUICK.interval_s)
        if not monitor.contended() and monitor.others_cores < QUICK.free_cores:
            return
    pytest.skip(f"other programs keep the cores busy ({monitor.others_cores:.2f} cores)")


def _busy_neighbour() -> subprocess.Popen:
    """A busy-looping process on this process's cores."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def test_a_real_busy_neighbour_is_seen_and_its_leaving_too(quiet_machine):
    monitor = CoreContention(QUICK)
    neighbour = _busy_neighbour()
    try:
        wait_until(monitor.contended, timeout=10)
    finally:
        neighbour.kill()
        neighbour.wait()
    wait_until(lambda: not monitor.contended(), timeout=10)


def test_this_process_working_on_every_core_is_not_contention(quiet_machine):
    monitor = CoreContention(QUICK)
    stop = threading.Event()

    def work() -> None:
        torch.set_num_threads(os.cpu_count() or 1)
        a = torch.randn(256, 256)
        while not stop.is_set():
            a = torch.tanh(a @ a)  # outside Python's lock, on every core

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        verdicts = []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            verdicts.append(monitor.contended())
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not any(verdicts)


@pytest.fixture
def four_cores(monkeypatch):
    """A worker that believes it has four cores: two a stage side by side."""
    monkeypatch.setattr(worker_module, "available_cores", lambda: 4)


def test_while_contended_every_operator_runs_on_one_thread_side_by_side(
    model, voice, monkeypatch, four_cores
):
    steps = record_threads_of_steps(model, monkeypatch)
    synthesizer = Synthesizer(model)
    decodes = record_decodes(synthesizer, monkeypatch)
    with SynthesisWorker(synthesizer, contention=SetContention(busy=True)) as worker:
        assert sum(frame.shape[0] for frame in worker.stream(voice, TEXT, OPTIONS)) > 0
    assert steps and {threads for _, threads in steps} == {1}
    assert decodes and {threads for _, threads, _ in decodes} == {1}
    # Side by side, not taking turns: the decoder thread decodes what is not urgent.
    assert "mimi" in {name for name, _, _ in decodes}


def test_the_worker_goes_back_to_every_core_once_the_neighbours_leave(
    model, voice, monkeypatch, four_cores, caplog
):
    steps = record_threads_of_steps(model, monkeypatch)
    contention = SetContention(busy=True)
    caplog.set_level(logging.INFO, logger=worker_module.__name__)
    with SynthesisWorker(Synthesizer(model), contention=contention) as worker:
        assert sum(frame.shape[0] for frame in worker.stream(voice, TEXT, OPTIONS)) > 0
        busy_steps = list(steps)
        contention.busy = False
        wait_until(lambda: "free again" in caplog.text, timeout=10)  # noticed while idle
        steps.clear()
        assert sum(frame.shape[0] for frame in worker.stream(voice, TEXT, OPTIONS)) > 0
    assert {threads for _, threads in busy_steps} == {1}
    assert steps[0] == (True, 4)  # the text prompt on every core again
    assert "Other programs are using the cores" in caplog.text


def test_a_worker_beside_a_real_neighbour_serves_on_one_thread_then_every_core(
    model, voice, monkeypatch, quiet_machine
):
    """End to end with the real signal: a busy process on our cores, then none."""
    steps = record_threads_of_steps(model, monkeypatch)
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: one thread whatever the neighbours")
    monitor = CoreContention(QUICK)
    with SynthesisWorker(Synthesizer(model), contention=monitor) as worker:
        neighbour = _busy_neighbour()
        try:
            wait_until(monitor.contended, timeout=10)
            time.sleep(2 * QUICK.interval_s)  # the worker's own look, while idle
            assert sum(frame.shape[0] for frame in worker.stream(voice, TEXT, OPTIONS)) > 0
        finally:
            neighbour.kill()
            neighbour.wait()
        busy_steps = list(steps)
        wait_until(lambda: not monitor.contended(), timeout=10)
        time.sleep(2 * QUICK.interval_s)
        steps.clear()
        assert sum(frame.shape[0] for frame in worker.stream(voice, TEXT, OPTIONS)) > 0
    assert {threads for _, threads in busy_steps} == {1}
    assert steps[0] == (True, cores)


def test_a_worker_held_to_one_core_makes_speech_on_one_thread_at_a_time(
    model, voice, monkeypatch
):
    """`--threads 1`: FlowLM and Mimi take turns on the generator thread, one core."""
    limit_cores(1)
    try:
        assert available_cores() == 1
        steps = record_threads_of_steps(model, monkeypatch)
        synthesizer = Synthesizer(model)
        decodes = record_decodes(synthesizer, monkeypatch)
        # More requests than the stages take turns for on a larger machine.
        texts = ["Turn on the kitchen light.", "Good morning!", "The door is locked."] * 2
        with SynthesisWorker(synthesizer, contention=SetContention(busy=False)) as worker:
            jobs = [worker.submit(voice, text, OPTIONS) for text in texts]
            assert all(sum(frame.shape[0] for frame in job.frames()) > 0 for job in jobs)
    finally:
        limit_cores(None)
    assert {threads for _, threads in steps} == {1}
    assert {(name, threads) for name, threads, _ in decodes} == {("flowlm", 1)}


def test_a_limit_below_one_core_is_refused():
    with pytest.raises(ValueError, match="at least one core"):
        limit_cores(0)


@pytest.mark.wall_clock
def test_a_server_beside_busy_neighbours_answers_describe_and_recovers(
    tmp_path, tiny_model, voice_wav, quiet_machine
):
    """Beside two busy processes, the server says it steps back, answers Describe well
    within Home Assistant's second while it speaks, and says when the cores are free."""
    server = launch(tmp_path, tiny_model, "--voice", str(voice_wav))
    neighbours = [_busy_neighbour() for _ in range(2)]
    try:
        server.wait_for_log("Other programs are using the cores", timeout=20)

        async def describe_while_speaking() -> list[float]:
            async with server.client() as speaking, server.client() as asker:
                await speaking.write_event(Synthesize(text="Good morning. " * 40).event())
                event = await speaking.read_event()
                assert event is not None and AudioStart.is_type(event.type)
                delays = []
                for _ in range(5):
                    started = time.monotonic()
                    await describe(asker)
                    delays.append(time.monotonic() - started)
                return delays

        delays = run(describe_while_speaking())
    finally:
        for neighbour in neighbours:
            neighbour.kill()
            neighbour.wait()
    try:
        assert max(delays) < 1.0, delays
        server.wait_for_log("The cores are free again", timeout=20)
    finally:
        assert server.stop() == 0, server.log()


def test_an_encoding_runs_on_one_core_while_the_cores_are_contended(monkeypatch):
    """Voice encodings (`OwnThreadExecutor`) step back as the worker does."""
    monkeypatch.setattr(threads_module, "available_cores", lambda: 3)
    contention = SetContention(busy=True)
    executor = OwnThreadExecutor("voice-encoder", contention=contention)
    process_wide = on_new_thread(torch.get_num_threads)  # what new threads start with
    try:
        assert executor.submit(torch.get_num_threads).result() == 1
        contention.busy = False
        assert executor.submit(torch.get_num_threads).result() == 3
    finally:
        executor.shutdown()
        on_new_thread(lambda: torch.set_num_threads(process_wide))
