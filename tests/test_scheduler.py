"""The synthesis worker: batched steps, pipelining, fairness, backpressure, cancellation."""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from tests.support.contention import SetContention
from tests.support.engine_calls import record_decodes, record_threads_of_steps
from tests.support.threads import on_new_thread
from tests.support.waiting import wait_until
from wyoming_pocket_tts.engine.runtime import worker as worker_module
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.policy import (
    DECODE_FRAMES_PER_JOB,
    GENERATOR_TAIL_LAYERS,
    INT8_TURN_CALL_FRAMES,
    TURN_MAX_JOBS,
    TURN_RUN_FRAMES,
    BatchingPolicy,
)
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

# These tests run on cores no other program uses (tests/test_contention.py: busy ones),
# whatever else the machine is doing.
QuietWorker = functools.partial(SynthesisWorker, contention=SetContention(busy=False))
OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=12)
TEXTS = [
    "Turn on the kitchen light.",
    "The front door is locked. The garage is closed, and the alarm is set for the night.",
    "Good morning!",
]


def turns_policy(**changes) -> BatchingPolicy:
    """The stages taking turns, as `take_turns=True` makes them, with `changes`."""
    return dataclasses.replace(BatchingPolicy.for_cpu(quantized=False, take_turns=True), **changes)


# Every behaviour below holds whether the stages run side by side or take turns.
both_ways = pytest.mark.parametrize("take_turns", [False, True], ids=["side-by-side", "turns"])


@both_ways
def test_concurrent_jobs_sound_as_if_alone(model, voice, take_turns):
    """Batching several requests in one FlowLM pass leaves each one's audio unchanged."""
    alone = [np.concatenate(list(Synthesizer(model).stream(voice, t, OPTIONS))) for t in TEXTS]
    with QuietWorker(Synthesizer(model), take_turns=take_turns) as worker:
        jobs = [worker.submit(voice, text, OPTIONS) for text in TEXTS]
        together = [np.concatenate(list(job.frames())) for job in jobs]
    for expected, actual in zip(alone, together, strict=True):
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0)


@both_ways
def test_short_request_is_not_stuck_behind_a_long_one(model, voice, take_turns):
    long_text = " ".join(["The quick brown fox jumps over the lazy dog."] * 8)
    with QuietWorker(Synthesizer(model), take_turns=take_turns) as worker:
        long_job = worker.submit(voice, long_text, OPTIONS)
        wait_until(lambda: long_job.samples > 0)
        short_job = worker.submit(voice, "Hi.", OPTIONS)
        consumer = threading.Thread(target=lambda: list(long_job.frames()))
        consumer.start()
        short_frames = list(short_job.frames())
        assert short_frames and not long_job.done, "the short job waited for the long one"
        long_job.cancel()
        consumer.join(timeout=60)


@both_ways
def test_slow_reader_bounds_buffered_audio(model, voice, take_turns):
    long_text = " ".join(["The quick brown fox jumps over the lazy dog."] * 4)
    with QuietWorker(
        Synthesizer(model), max_buffered_frames=4, take_turns=take_turns
    ) as worker:
        job = worker.submit(voice, long_text, OPTIONS)
        wait_until(lambda: job.backlog >= 4)
        time.sleep(0.5)  # the worker would run on here if it ignored the reader
        assert job.backlog == 4 and not job.done
        taken = []
        wait_until(lambda: taken.extend(job.take()) or len(taken) >= 4)
        assert len(taken) == 4
        wait_until(lambda: job.backlog >= 4 or job.done)  # room again: it goes on
        job.cancel()


@both_ways
def test_taking_frames_resumes_a_job_held_for_its_full_backlog(
    model, voice, take_turns, monkeypatch
):
    """A job skipped for its full backlog goes on as soon as its frames are taken: the
    worker's idle recheck, here a minute, never comes into it."""
    monkeypatch.setattr(worker_module, "IDLE_RECHECK_S", 60.0)
    long_text = " ".join(["The quick brown fox jumps over the lazy dog."] * 2)
    with QuietWorker(
        Synthesizer(model), max_buffered_frames=2, take_turns=take_turns
    ) as worker:
        job = worker.submit(voice, long_text, OPTIONS)
        reader = threading.Thread(target=lambda: list(job.frames()), daemon=True)
        reader.start()
        reader.join(timeout=30)
        finished = job.done
        job.cancel()
    assert finished and job.samples >= 24 * model.samples_per_frame


@both_ways
def test_cancelled_job_ends_and_worker_goes_idle(model, voice, take_turns):
    long_text = " ".join(["The quick brown fox jumps over the lazy dog."] * 8)
    with QuietWorker(Synthesizer(model), take_turns=take_turns) as worker:
        job = worker.submit(voice, long_text, OPTIONS)
        wait_until(lambda: job.samples > 0)
        job.cancel()
        wait_until(lambda: job.done)
        assert job.error is None
        wait_until(lambda: worker.active_jobs == 0)


@both_ways
def test_reused_worker_after_errors_keeps_serving(model, voice, take_turns):
    with QuietWorker(Synthesizer(model), take_turns=take_turns) as worker:
        with pytest.raises(Exception, match="empty"):
            worker.submit(voice, "   ", OPTIONS)
        job = worker.submit(voice, "Still here.", OPTIONS)
        assert sum(frame.shape[0] for frame in job.frames()) > 0


def test_a_slow_decoder_gets_runs_of_every_job_and_each_sounds_as_if_alone(
    model, voice, monkeypatch
):
    """A slow decoder: FlowLM fills the backlogs; apart from first frames and frames of
    listeners short of audio, the decoder's calls take a run of frames of each job,
    and every job sounds as if alone."""
    synthesizer = Synthesizer(model)
    decodes = record_decodes(synthesizer, monkeypatch)
    start_decoding = synthesizer.start_decoding

    def slow_decode(frames, tail_layers=0):
        time.sleep(0.02 * len(frames))
        return start_decoding(frames, tail_layers)

    monkeypatch.setattr(synthesizer, "start_decoding", slow_decode)
    options = dataclasses.replace(OPTIONS, max_frames_per_chunk=40)  # past the first lead
    alone = [np.concatenate(list(Synthesizer(model).stream(voice, t, options))) for t in TEXTS]
    with QuietWorker(
        synthesizer, max_buffered_frames=8, prompt_threads=2, threads_per_stage=1,
        take_turns=False
    ) as worker:
        jobs = [worker.submit(voice, text, options) for text in TEXTS]
        with ThreadPoolExecutor(len(jobs)) as listeners:
            together = list(listeners.map(lambda job: np.concatenate(list(job.frames())), jobs))
    for expected, actual in zip(alone, together, strict=True):
        np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0)
    calls = [frames for name, _, frames in decodes if name == "mimi"]
    assert max(calls) >= DECODE_FRAMES_PER_JOB * len(TEXTS)


def test_side_by_side_the_generator_finishes_the_decoders_calls(model, voice, monkeypatch):
    """Mimi's thread stops its calls before the decoder's last layers and the generator
    thread runs them, in order: every job still sounds as if alone, and ends after
    all its audio."""
    synthesizer = Synthesizer(model)
    finished_on = []
    finish_decoding = synthesizer.finish_decoding

    def recording_finish(part):
        finished_on.append((threading.current_thread().name, part.tail_layers))
        return finish_decoding(part)

    monkeypatch.setattr(synthesizer, "finish_decoding", recording_finish)
    options = dataclasses.replace(OPTIONS, max_frames_per_chunk=24)
    alone = [np.concatenate(list(Synthesizer(model).stream(voice, t, options))) for t in TEXTS]
    with QuietWorker(synthesizer, take_turns=False) as worker:
        jobs = [worker.submit(voice, text, options) for text in TEXTS]
        with ThreadPoolExecutor(len(jobs)) as listeners:
            together = list(listeners.map(lambda job: np.concatenate(list(job.frames())), jobs))
    for expected, actual in zip(alone, together, strict=True):
        np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0)
    tails = {name for name, layers in finished_on if layers == GENERATOR_TAIL_LAYERS}
    assert tails == {"flowlm"}


@pytest.mark.parametrize(("cores", "per_stage"), [(2, 1), (3, 1), (4, 2)])
def test_text_prompt_and_first_frame_get_every_core_on_an_idle_engine(
    model, voice, monkeypatch, cores, per_stage
):
    """What the listener waits for (the prompt pass, then decoding its first frame)
    runs on every core; later steps, and Mimi beside them, keep half the cores each,
    even when other threads set torch's count (loading a voice sets it to every core)."""
    monkeypatch.setattr(worker_module, "available_cores", lambda: cores)
    seen = record_threads_of_steps(model, monkeypatch)
    synthesizer = Synthesizer(model)
    decodes = record_decodes(synthesizer, monkeypatch)
    callers_count = torch.get_num_threads()
    try:
        with QuietWorker(synthesizer, take_turns=False) as worker:
            on_new_thread(lambda: torch.set_num_threads(5))
            assert sum(frame.shape[0] for frame in worker.stream(voice, "Hi.", OPTIONS)) > 0
    finally:
        on_new_thread(lambda: torch.set_num_threads(callers_count))
    assert torch.get_num_threads() == callers_count
    assert seen[0] == (True, cores)
    assert len(seen) > 1 and set(seen[1:]) == {(False, per_stage)}
    assert decodes[0] == ("flowlm", cores, 1)
    assert len(decodes) > 1
    assert {(name, threads) for name, threads, _ in decodes[1:]} == {("mimi", per_stage)}


def test_a_new_request_is_heard_while_the_decoder_works_and_keeps_one_core(
    model, voice, monkeypatch
):
    """With the decoder thread busy on another job, a new request's text prompt and
    first frame run at once on the generator thread, and on its core only (more
    threads would take the decoder's): its listener waits for neither the decoder's
    call nor a step of the other job."""
    seen = record_threads_of_steps(model, monkeypatch)
    synthesizer = Synthesizer(model)
    decodes = record_decodes(synthesizer, monkeypatch)
    order = []
    step = model.flow_lm.step

    def ordered_step(latents, caches, prefix=None):
        order.append("prompt" if prefix is not None else f"step of {latents.shape[0]}")
        return step(latents, caches, prefix)

    monkeypatch.setattr(model.flow_lm, "step", ordered_step)
    start_decoding = synthesizer.start_decoding
    decoding, release = threading.Event(), threading.Event()

    def held_decode(frames, tail_layers=0):
        if threading.current_thread().name == "mimi":
            decoding.set()
            release.wait(timeout=60)
        order.append(f"decode of {len(frames)} on {threading.current_thread().name}")
        return start_decoding(frames, tail_layers)

    monkeypatch.setattr(synthesizer, "start_decoding", held_decode)
    with QuietWorker(
        synthesizer, prompt_threads=3, threads_per_stage=1, take_turns=False
    ) as worker:
        first = worker.submit(voice, "Turn on the kitchen light.", OPTIONS)
        assert decoding.wait(timeout=60)
        order.clear()
        second = worker.submit(voice, "Good morning!", OPTIONS)
        try:
            wait_until(lambda: second.samples > 0, timeout=30)
        finally:
            release.set()
        for job in (first, second):
            assert sum(frame.shape[0] for frame in job.frames()) > 0
    assert order[order.index("prompt") + 1] == "decode of 1 on flowlm"
    prompts = [threads for prompt, threads in seen if prompt]
    assert prompts == [3, 1]
    # Every core for the first job's first frame only; the generator's later decoding
    # (while the decoder was held) stays on its own core.
    on_generator = [threads for name, threads, _ in decodes if name == "flowlm"]
    assert on_generator[0] == 3 and len(on_generator) > 1 and set(on_generator[1:]) == {1}


def test_a_request_beyond_the_turns_gets_every_core_before_the_queued_frames(
    model, voice, monkeypatch
):
    """The stages take turns for one job, whose frames queue up for a long run; a
    second job ends the turns. Its prompt and first frame still run on every core,
    before the decoder thread takes the first job's queued frames."""
    policy = turns_policy(
        turn_max_jobs=1,
        min_lead_seconds=-math.inf,  # never short of audio
        turn_run_frames=10**6, max_buffered_frames=10**6,  # queued until the turns end
    )
    synthesizer = Synthesizer(model)
    events = []
    step, start_decoding = model.flow_lm.step, synthesizer.start_decoding
    armed, paused, resume = threading.Event(), threading.Event(), threading.Event()

    def recording_step(latents, caches, prefix=None):
        if prefix is not None:
            events.append(("prompt", torch.get_num_threads()))
        elif armed.is_set() and not resume.is_set():  # the first job, frames queued
            paused.set()
            resume.wait(timeout=60)
        return step(latents, caches, prefix)

    def recording_decode(frames, tail_layers=0):
        events.append((threading.current_thread().name, torch.get_num_threads(), len(frames)))
        return start_decoding(frames, tail_layers)

    monkeypatch.setattr(model.flow_lm, "step", recording_step)
    monkeypatch.setattr(synthesizer, "start_decoding", recording_decode)
    long_text = " ".join(["The quick brown fox jumps over the lazy dog."] * 3)
    with QuietWorker(synthesizer, prompt_threads=3, policy=policy) as worker:
        first = worker.submit(voice, long_text, OPTIONS)
        wait_until(lambda: first.backlog >= 3)  # the first frame heard, two queued
        armed.set()
        assert paused.wait(timeout=60)
        assert first.backlog >= 3
        events.clear()
        second = worker.submit(voice, "Good morning!", OPTIONS)
        resume.set()
        for job in (first, second):
            assert sum(frame.shape[0] for frame in job.frames()) > 0
    assert events[:2] == [("prompt", 3), ("flowlm", 3, 1)]
    assert any(event[0] == "mimi" for event in events[2:])


# A listener never short of audio (even on a machine slower than real time), or always;
# a job alone's runs as in float32, or as long as with int8 FlowLM.
@pytest.mark.parametrize(
    ("min_lead", "call_frames", "runs"),
    [
        (-math.inf, TURN_RUN_FRAMES, TURN_RUN_FRAMES),
        (-math.inf, INT8_TURN_CALL_FRAMES, INT8_TURN_CALL_FRAMES),
        (math.inf, TURN_RUN_FRAMES, 1),
    ],
    ids=["ahead", "ahead-int8-runs", "short"],
)
def test_taking_turns_decodes_on_every_core_in_runs_while_the_listener_has_audio(
    model, voice, monkeypatch, min_lead, call_frames, runs
):
    """One job alone: both stages on the generator thread with every core. Its first
    frame is decoded at once; later ones wait for a full run while the listener has
    audio in hand, or go one by one while it has not."""
    policy = turns_policy(
        turn_call_frames=call_frames, max_buffered_frames=call_frames, min_lead_seconds=min_lead
    )
    text = "The front door is locked, and the garage is closed. " * 3
    expected = np.concatenate(list(Synthesizer(model).stream(voice, text, OPTIONS)))
    seen = record_threads_of_steps(model, monkeypatch)
    synthesizer = Synthesizer(model)
    decodes = record_decodes(synthesizer, monkeypatch)
    with QuietWorker(synthesizer, prompt_threads=3, policy=policy) as worker:
        audio = np.concatenate(list(worker.stream(voice, text, OPTIONS)))
    np.testing.assert_allclose(audio, expected, atol=1e-4, rtol=0)
    assert {threads for _, threads in seen} == {3}
    assert {(name, threads) for name, threads, _ in decodes} == {("flowlm", 3)}
    sizes = [frames for _, _, frames in decodes]
    assert sizes[0] == 1 and len(sizes) > 2
    assert all(size == runs for size in sizes[1:-1]) and sizes[-1] <= runs


def test_a_few_jobs_take_turns_too(model, voice, monkeypatch):
    """Up to TURN_MAX_JOBS jobs, both stages stay on the generator thread with every
    core, the jobs' runs go to Mimi in one call, and each job sounds as if alone. The
    longer runs of a job alone (int8) are not given to each of several jobs."""
    assert TURN_MAX_JOBS >= 2
    runs = 2 * TURN_RUN_FRAMES
    # Frames wait for full runs.
    policy = turns_policy(
        turn_call_frames=runs, max_buffered_frames=runs, min_lead_seconds=-math.inf
    )
    texts = TEXTS[:2]
    alone = [np.concatenate(list(Synthesizer(model).stream(voice, t, OPTIONS))) for t in texts]
    seen = record_threads_of_steps(model, monkeypatch)
    synthesizer = Synthesizer(model)
    decodes = record_decodes(synthesizer, monkeypatch)
    with QuietWorker(synthesizer, prompt_threads=3, policy=policy) as worker:
        jobs = [worker.submit(voice, text, OPTIONS) for text in texts]
        together = [np.concatenate(list(job.frames())) for job in jobs]
    for expected, actual in zip(alone, together, strict=True):
        np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0)
    assert {threads for _, threads in seen} == {3}
    assert {(name, threads) for name, threads, _ in decodes} == {("flowlm", 3)}
    # Each call takes a run of every job: longer than one job's, no longer than theirs.
    assert TURN_RUN_FRAMES < max(frames for _, _, frames in decodes) <= 2 * TURN_RUN_FRAMES


def test_taking_turns_hands_over_to_the_decoder_thread_beyond_turn_max_jobs(
    model, voice, monkeypatch
):
    """With more jobs than TURN_MAX_JOBS (here: a second one) the stages go side by
    side again, frames queued during the turns included, and each job still sounds
    as if alone."""
    policy = turns_policy(turn_max_jobs=1, min_lead_seconds=-math.inf)  # full runs
    synthesizer = Synthesizer(model)
    decodes = record_decodes(synthesizer, monkeypatch)
    texts = [" ".join(["The quick brown fox jumps over the lazy dog."] * 3), "Good morning!"]
    alone = [np.concatenate(list(Synthesizer(model).stream(voice, t, OPTIONS))) for t in texts]
    with QuietWorker(synthesizer, policy=policy) as worker:
        first = worker.submit(voice, texts[0], OPTIONS)
        wait_until(lambda: first.samples > 0)
        second = worker.submit(voice, texts[1], OPTIONS)
        together = [np.concatenate(list(job.frames())) for job in (first, second)]
    for expected, actual in zip(alone, together, strict=True):
        np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0)
    threads = [name for name, _, _ in decodes]
    assert threads[0] == "flowlm" and "mimi" in threads


def test_the_decoder_thread_is_not_woken_for_each_frame_while_the_stages_take_turns(
    model, voice, monkeypatch
):
    """Taking turns, the generator thread decodes: the decoder thread, woken, finds
    nothing to do, and each such wake took a core from the step beside it."""
    checks_on_decoder_thread = []

    class CountingPolicy(BatchingPolicy):
        def plan_call(self, view):
            if threading.current_thread().name == "mimi":
                checks_on_decoder_thread.append(1)
            return super().plan_call(view)

    policy = CountingPolicy(**dataclasses.asdict(turns_policy(min_lead_seconds=-math.inf)))
    text = "The front door is locked, and the garage is closed. " * 3
    with QuietWorker(Synthesizer(model), policy=policy) as worker:
        frames = len(list(worker.stream(voice, text, OPTIONS)))
    assert frames > 4 * TURN_RUN_FRAMES
    # Woken by the start and the end, and by frames taken while the generator waits.
    assert len(checks_on_decoder_thread) < frames / 2


def test_a_worker_that_is_not_running_refuses_a_text_instead_of_never_answering(model, voice):
    worker = QuietWorker(Synthesizer(model))
    with pytest.raises(RuntimeError, match="not running"):
        worker.submit(voice, "Hello.")
    worker.start()
    assert sum(frame.shape[0] for frame in worker.stream(voice, "Hello.")) > 0
    worker.close()
    with pytest.raises(RuntimeError, match="not running"):
        next(worker.stream(voice, "Hello."))


def count_steps(synthesizer: Synthesizer, monkeypatch) -> list[float]:
    """When each FlowLM step of `synthesizer` began."""
    started: list[float] = []
    advance = synthesizer.advance

    def counted(*args, **kwargs):
        started.append(time.monotonic())
        return advance(*args, **kwargs)

    monkeypatch.setattr(synthesizer, "advance", counted)
    return started


@both_ways
def test_after_a_first_frame_the_next_step_waits_until_it_is_passed_on(
    model, voice, monkeypatch, take_turns
):
    """The consumer passes its first frame on with Python's lock to itself."""
    monkeypatch.setattr(worker_module, "FIRST_FRAME_HANDOVER_S", 60.0)
    synthesizer = Synthesizer(model)
    steps = count_steps(synthesizer, monkeypatch)
    with QuietWorker(synthesizer, take_turns=take_turns) as worker:
        job = worker.submit(voice, "Turn on the kitchen light.", OPTIONS)
        wait_until(lambda: job.samples > 0)
        held = len(steps)
        time.sleep(0.3)
        assert job.take() and len(steps) == held  # taken, but not yet passed on
        job.passed_on()
        wait_until(lambda: len(steps) > held)
        job.cancel()


def test_a_first_frame_nobody_passes_on_holds_the_next_step_only_so_long(
    model, voice, monkeypatch
):
    monkeypatch.setattr(worker_module, "FIRST_FRAME_HANDOVER_S", 0.2)
    synthesizer = Synthesizer(model)
    steps = count_steps(synthesizer, monkeypatch)
    with QuietWorker(synthesizer) as worker:
        job = worker.submit(voice, "Turn on the kitchen light.", OPTIONS)
        wait_until(lambda: job.samples > 0)
        first_heard = job.first_audio_at
        while not job.done:  # taken, never passed on
            job.take()
            time.sleep(0.01)
    later = [started for started in steps if started > first_heard]
    assert later and later[0] - first_heard >= 0.2


def test_a_thread_reading_frames_passes_each_on_when_it_comes_back_for_more(
    model, voice, monkeypatch
):
    monkeypatch.setattr(worker_module, "FIRST_FRAME_HANDOVER_S", 60.0)
    started = time.monotonic()
    with QuietWorker(Synthesizer(model)) as worker:
        assert sum(frame.shape[0] for frame in worker.stream(voice, "Hi.", OPTIONS)) > 0
    assert time.monotonic() - started < 30
