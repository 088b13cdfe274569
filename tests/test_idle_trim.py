"""An idle worker gives the C heap's free pages back, once per idle spell: what a busy
moment freed must not stay resident for the months a server runs."""

from __future__ import annotations

import time

from wyoming_pocket_tts.engine.runtime import worker as worker_module
from wyoming_pocket_tts.engine.runtime.synthesizer import GenerationOptions, Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=6)


def wait_until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_heap_is_trimmed_once_after_each_idle_spell(model, voice, monkeypatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(worker_module, "IDLE_TRIM_S", 0.2)
    with SynthesisWorker(Synthesizer(model)) as worker:
        monkeypatch.setattr(
            worker_module, "return_free_heap", lambda: trims.append(worker.active_jobs)
        )
        for spell in (1, 2):
            assert sum(len(frame) for frame in worker.stream(voice, "Done.", OPTIONS)) > 0
            assert wait_until(lambda: len(trims) == spell)
            time.sleep(0.5)  # idle on: no second trim in the same spell
            assert len(trims) == spell
    assert trims == [0, 0]  # never with a job active


def test_no_trim_while_a_job_is_speaking(model, voice, monkeypatch) -> None:
    trims: list[float] = []
    monkeypatch.setattr(worker_module, "IDLE_TRIM_S", 0.1)
    monkeypatch.setattr(worker_module, "return_free_heap", lambda: trims.append(time.monotonic()))
    long_text = " ".join(["The kitchen light is on."] * 4)
    with SynthesisWorker(Synthesizer(model)) as worker:
        started = time.monotonic()
        frames = list(worker.stream(voice, long_text, OPTIONS))
        finished = time.monotonic()
        assert frames
        assert wait_until(lambda: trims)
    assert all(not started < trim < finished for trim in trims)
