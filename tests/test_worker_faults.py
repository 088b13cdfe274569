"""Faults stay with their request: one job fails, the others and the worker go on;
a worker whose thread dies says so."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from wyoming_pocket_tts.engine.errors import EngineError
from wyoming_pocket_tts.engine.model.mimi import DecoderState
from wyoming_pocket_tts.engine.model.voice import VoiceState
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.policy import BatchingPolicy
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer, Utterance
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=12)
GOOD_TEXT = "The front door is locked. The garage is closed, and the alarm is set for the night."
BAD_TEXT = "Turn on the kitchen light."
MARKER = 12345.0  # in the first key of a voice whose steps the test makes fail

both_ways = pytest.mark.parametrize("take_turns", [False, True], ids=["side-by-side", "turns"])


def alone(model, voice, text: str) -> np.ndarray:
    return np.concatenate(list(Synthesizer(model).stream(voice, text, OPTIONS)))


def audio_or_error(job) -> np.ndarray | EngineError:
    try:
        return np.concatenate(list(job.frames()))
    except EngineError as error:
        return error


def speak_together(worker: SynthesisWorker, good_voice, bad_voice) -> tuple[object, object]:
    """A good and a bad request at once, each read by its own thread: (audio, error)."""
    jobs = [
        worker.submit(good_voice, GOOD_TEXT, OPTIONS), worker.submit(bad_voice, BAD_TEXT, OPTIONS)
    ]
    results: list[object] = [None, None]

    def read(index: int) -> None:
        results[index] = audio_or_error(jobs[index])

    readers = [threading.Thread(target=read, args=(index,)) for index in range(2)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=120)
    return results[0], results[1]


def assert_still_serving(worker: SynthesisWorker, voice) -> None:
    assert sum(frame.shape[0] for frame in worker.stream(voice, "Still here.", OPTIONS)) > 0


@both_ways
def test_a_voice_state_full_of_nan_fails_its_request_alone(model, voice, take_turns):
    """Loading refuses such a state; this one goes bad in memory after the check, so the
    worker's own guard is what catches it."""
    nan_voice = VoiceState(voice.keys.clone(), voice.values)
    nan_voice.keys.fill_(float("nan"))
    expected = alone(model, voice, GOOD_TEXT)
    with SynthesisWorker(Synthesizer(model), take_turns=take_turns) as worker:
        good, bad = speak_together(worker, voice, nan_voice)
        assert_still_serving(worker, voice)
    assert isinstance(bad, EngineError) and "invalid audio" in str(bad)
    np.testing.assert_allclose(good, expected, atol=1e-4, rtol=0)


@both_ways
def test_a_step_that_raises_for_one_job_fails_only_that_job(
    model, voice, take_turns, monkeypatch
):
    """The step raises after it has written every stream's keys and values: the batch
    is stepped a job at a time from where it was, and only the culprit fails."""
    keys = voice.keys.clone()
    keys[0, 0, 0, 0] = MARKER
    marked = VoiceState(keys, voice.values)
    step = model.flow_lm.step
    failed_batches = []

    def failing_step(latents, caches, prefixes=None):
        z = step(latents, caches, prefixes)
        # After the marked job's first frame, and so beside the other job.
        if prefixes is None and any(c.keys[0, 0, 0, 0, 0].item() == MARKER for c in caches):
            failed_batches.append(len(caches))
            raise RuntimeError("injected fault")
        return z

    expected = alone(model, voice, GOOD_TEXT)
    monkeypatch.setattr(model.flow_lm, "step", failing_step)
    # No backlog ever full, so that no job is left out of a step.
    with SynthesisWorker(
        Synthesizer(model), take_turns=take_turns, max_buffered_frames=1000
    ) as worker:
        good, bad = speak_together(worker, voice, marked)
        assert_still_serving(worker, voice)
    assert isinstance(bad, EngineError) and "RuntimeError: injected fault" in str(bad)
    assert max(failed_batches) == 2
    np.testing.assert_allclose(good, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("failing_step", [0, 2], ids=["prompt", "later"])
def test_a_step_that_raises_leaves_every_utterance_as_it_was(
    model, voice, monkeypatch, failing_step
):
    """Even after the transformer wrote their keys and values: a caller can step them again."""
    synthesizer = Synthesizer(model)
    step = model.flow_lm.step

    def raising_step(latents, caches, prefixes=None):
        step(latents, caches, prefixes)
        raise RuntimeError("injected fault")

    reference = synthesizer.start(voice, GOOD_TEXT, OPTIONS)
    expected = [synthesizer.advance([reference])[0].latent for _ in range(5)]
    utterances = [synthesizer.start(voice, text, OPTIONS) for text in (GOOD_TEXT, BAD_TEXT)]
    latents = []
    for index in range(5):
        if index == failing_step:
            monkeypatch.setattr(model.flow_lm, "step", raising_step)
            with pytest.raises(RuntimeError, match="injected"):
                synthesizer.advance(utterances)
            monkeypatch.undo()
        latents.append(synthesizer.advance(utterances)[0].latent)
    for want, got in zip(expected, latents, strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-4, rtol=0)


class FaultySynthesizer(Synthesizer):
    """Marks the utterances of one voice; their Mimi calls raise, or their audio is NaN."""

    def __init__(self, model, bad_voice, fault: str):
        super().__init__(model)
        self.bad_voice, self.fault = bad_voice, fault
        self.bad_utterances: set[Utterance] = set()
        # By id, each kept alive so that no other stream gets its id.
        self.bad_streams: dict[int, DecoderState] = {}

    def start(self, voice, text, options=OPTIONS):
        utterance = super().start(voice, text, options)
        if voice is self.bad_voice:
            self.bad_utterances.add(utterance)
        return utterance

    def advance(self, utterances, prompt_threads=None):
        frames = super().advance(utterances, prompt_threads)
        for utterance, frame in zip(utterances, frames, strict=True):
            if frame is not None and utterance in self.bad_utterances:
                self.bad_streams[id(frame.decoder)] = frame.decoder
        return frames

    def _bad(self, frame) -> bool:
        return id(frame.decoder) in self.bad_streams

    def start_decoding(self, frames, tail_layers=0):
        if self.fault == "raises" and any(self._bad(frame) for frame in frames):
            raise RuntimeError("injected decoder fault")
        return super().start_decoding(frames, tail_layers)

    def finish_decoding(self, part):
        audio = super().finish_decoding(part)
        if self.fault == "nan":
            frames = part.frames
            audio = [a * np.nan if self._bad(f) else a for a, f in zip(audio, frames, strict=True)]
        return audio


@both_ways
@pytest.mark.parametrize("fault", ["raises", "nan"])
def test_a_mimi_fault_of_one_job_fails_only_that_job(model, voice, take_turns, fault):
    other_voice = VoiceState(voice.keys.clone(), voice.values.clone())
    expected = alone(model, voice, GOOD_TEXT)
    synthesizer = FaultySynthesizer(model, other_voice, fault)
    with SynthesisWorker(synthesizer, take_turns=take_turns) as worker:
        good, bad = speak_together(worker, voice, other_voice)
        assert_still_serving(worker, voice)
    assert isinstance(bad, EngineError)
    assert ("injected decoder fault" if fault == "raises" else "invalid audio") in str(bad)
    np.testing.assert_allclose(good, expected, atol=1e-4, rtol=0)


class BrokenPolicy(BatchingPolicy):
    """A bug in the policy: it raises once a job is active."""

    def plan_step(self, view):
        if view.jobs:
            raise RuntimeError("policy bug")
        return super().plan_step(view)


def test_a_worker_whose_thread_dies_ends_its_jobs_refuses_more_and_says_so(model, voice):
    failures = []
    policy = BrokenPolicy(**dataclasses.asdict(BatchingPolicy.for_cpu(quantized=False)))
    worker = SynthesisWorker(Synthesizer(model), policy=policy, on_failure=failures.append)
    worker.start()
    job = worker.submit(voice, "Hello.", OPTIONS)
    with pytest.raises(EngineError, match="stopped"):
        list(job.frames())
    assert [str(error) for error in failures] == ["policy bug"]
    assert worker.failure is failures[0]
    with pytest.raises(RuntimeError, match="not running"):
        worker.submit(voice, "Hello.", OPTIONS)
    worker.close()  # returns: both threads are gone


def test_a_worker_closed_normally_reports_no_failure(model, voice):
    failures = []
    with SynthesisWorker(Synthesizer(model), on_failure=failures.append) as worker:
        assert_still_serving(worker, voice)
    assert failures == [] and worker.failure is None
