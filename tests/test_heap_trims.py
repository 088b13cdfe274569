"""The worker gives the C heap's free pages back once per idle spell and every few
seconds of a long busy one, never in a busy spell's first seconds: what a busy moment
freed must not stay resident for the months a server runs, and a short answer must
not wait for a trim."""

from __future__ import annotations

import time

import pytest

from tests.support.waiting import wait_until
from wyoming_pocket_tts.engine.runtime import worker as worker_module
from wyoming_pocket_tts.engine.runtime.heap_trims import HeapTrimSchedule
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=6)


def trims_at(schedule: HeapTrimSchedule, timeline: list[tuple[float, bool]]) -> list[float]:
    """The times at which `schedule` calls for a trim, observing (time, busy) in order."""
    return [now for now, busy in timeline if schedule.due(now, busy)]


def observed(start: float, stop: float, busy: bool, every: float = 0.5) -> list[tuple[float, bool]]:
    count = round((stop - start) / every)
    return [(start + i * every, busy) for i in range(count)]


def test_nothing_is_trimmed_before_the_first_job() -> None:
    assert trims_at(HeapTrimSchedule(), observed(0, 60, busy=False)) == []


def test_one_trim_per_idle_spell_once_it_has_lasted() -> None:
    schedule = HeapTrimSchedule(idle_after=2, busy_every=5)
    timeline = [
        *observed(0, 1, busy=True), *observed(1, 10, busy=False),
        *observed(10, 11, busy=True), *observed(11, 12.5, busy=False),  # back too soon
        *observed(12.5, 13, busy=True), *observed(13, 20, busy=False),
    ]
    assert trims_at(schedule, timeline) == [3.0, 15.0]


def test_a_long_busy_spell_is_trimmed_every_few_seconds_but_not_at_its_start() -> None:
    schedule = HeapTrimSchedule(idle_after=2, busy_every=5)
    timeline = [*observed(0, 10, busy=False), *observed(10, 27, busy=True)]
    assert trims_at(schedule, timeline) == [15.0, 20.0, 25.0]


def test_a_new_busy_spell_starts_its_own_clock() -> None:
    """A request that comes while the last trim is long past is not held up by one."""
    schedule = HeapTrimSchedule(idle_after=2, busy_every=5)
    timeline = [
        *observed(0, 4.5, busy=True), *observed(4.5, 5, busy=False),
        *observed(5, 9, busy=True),
    ]
    assert trims_at(schedule, timeline) == []


@pytest.fixture
def trims(monkeypatch) -> list[float]:
    """When the worker trimmed the heap."""
    times: list[float] = []
    monkeypatch.setattr(worker_module, "return_free_heap", lambda: times.append(time.monotonic()))
    return times


def test_the_worker_trims_once_after_each_idle_spell(model, voice, trims) -> None:
    schedule = HeapTrimSchedule(idle_after=0.2, busy_every=3600)
    with SynthesisWorker(Synthesizer(model), heap_trims=schedule) as worker:
        for spell in (1, 2):
            assert sum(len(frame) for frame in worker.stream(voice, "Done.", OPTIONS)) > 0

            def trimmed(spell: int = spell) -> bool:
                return len(trims) == spell

            wait_until(trimmed)
            time.sleep(0.5)  # idle on: no second trim in the same spell
            assert len(trims) == spell
            assert worker.active_jobs == 0


def test_the_worker_trims_while_it_speaks_only_with_a_busy_period(model, voice, trims) -> None:
    long_text = " ".join(["The kitchen light is on."] * 4)
    for busy_every, trims_while_speaking in ((3600, False), (0, True)):
        trims.clear()
        schedule = HeapTrimSchedule(idle_after=3600, busy_every=busy_every)
        with SynthesisWorker(Synthesizer(model), heap_trims=schedule) as worker:
            started = time.monotonic()
            assert list(worker.stream(voice, long_text, OPTIONS))
            finished = time.monotonic()
        assert any(started < trim < finished for trim in trims) == trims_while_speaking
