"""The batching policy alone: snapshots in, plans out; no threads, no model."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wyoming_pocket_tts.engine.runtime.policy import (
    CPU_DEFAULTS,
    DECODE_FRAMES_PER_JOB,
    INT8_TURN_CALL_FRAMES,
    MIN_LEAD_SECONDS,
    TURN_MAX_JOBS,
    TURN_RUN_FRAMES,
    BatchingPolicy,
    JobView,
    QueuedEntry,
    WorkerView,
    default_turn_call_frames,
    default_turn_max_jobs,
)

SIDE_BY_SIDE = BatchingPolicy(turn_max_jobs=0, turn_call_frames=8, max_buffered_frames=8)
TURNS = BatchingPolicy(turn_max_jobs=3, turn_call_frames=8, max_buffered_frames=8)


def job(key: str, lead: float | None = None, backlog: int = 0, cancelled: bool = False) -> JobView:
    """A job nobody has heard (`lead` None), or one with `lead` seconds of audio in hand."""
    return JobView(key, backlog, heard=lead is not None, lead=lead or 0.0, cancelled=cancelled)


def ahead(key: str, backlog: int = 0) -> JobView:
    return job(key, 10 * MIN_LEAD_SECONDS, backlog)


def short(key: str, backlog: int = 0) -> JobView:
    return job(key, MIN_LEAD_SECONDS / 2, backlog)


def frames(view: JobView, count: int) -> list[QueuedEntry]:
    return [QueuedEntry(view) for _ in range(count)]


def taken(view: WorkerView, indices: tuple[int, ...]) -> list[tuple[Hashable, bool]]:
    return [(view.queue[i].job.key, view.queue[i].frame) for i in indices]


# -- which jobs step ----------------------------------------------------------------


def test_unheard_jobs_step_first_and_apart_and_full_backlogs_wait():
    policy = BatchingPolicy(turn_max_jobs=0, turn_call_frames=8, max_buffered_frames=4)
    view = WorkerView(jobs=(ahead("a", 1), job("new"), ahead("full", 4), short("b", 2)))
    plan = policy.plan_step(view)
    assert plan.groups == (("new",), ("a", "b"))
    assert not plan.taking_turns and not plan.idle and plan.has_work


def test_a_step_takes_at_most_max_batch_jobs_in_turn_order():
    policy = BatchingPolicy(turn_max_jobs=0, turn_call_frames=8, max_buffered_frames=8, max_batch=2)
    view = WorkerView(jobs=(ahead("a", 8), ahead("b"), ahead("c"), ahead("d")))
    assert policy.plan_step(view).groups == (("b", "c"),)


def test_with_every_backlog_full_the_generator_waits_unless_it_decodes_in_turn():
    full = ahead("a", 8)
    queued = WorkerView(jobs=(full,), queue=tuple(frames(full, 3)))
    assert not SIDE_BY_SIDE.plan_step(queued).has_work
    assert TURNS.plan_step(queued).has_work
    busy = WorkerView(jobs=(full,), queue=queued.queue, in_decoding=frozenset({"a"}))
    assert not TURNS.plan_step(busy).has_work


def test_the_generator_goes_on_to_finish_the_decoder_threads_calls():
    full = ahead("a", 8)
    queued = WorkerView(jobs=(full,), queue=tuple(frames(full, 3)), calls_to_finish=True)
    plan = SIDE_BY_SIDE.plan_step(queued)
    assert plan.has_work and plan.idle


def test_the_stages_take_turns_up_to_turn_max_jobs():
    jobs = tuple(ahead(str(i)) for i in range(4))
    assert [TURNS.taking_turns(WorkerView(jobs=jobs[:n])) for n in range(5)] == [
        True, True, True, True, False
    ]
    assert not SIDE_BY_SIDE.taking_turns(WorkerView(jobs=jobs[:1]))


def test_a_step_takes_every_core_while_taking_turns_or_with_the_decoder_idle():
    a = ahead("a", 2)
    assert SIDE_BY_SIDE.step_on_every_core(WorkerView(jobs=(a,)), taking_turns=False)
    working = WorkerView(jobs=(a,), queue=tuple(frames(a, 1)), in_decoding=frozenset({"a"}))
    assert not SIDE_BY_SIDE.step_on_every_core(working, taking_turns=False)
    assert SIDE_BY_SIDE.step_on_every_core(working, taking_turns=True)


# -- where each frame is decoded ----------------------------------------------------


def test_the_generator_decodes_frames_itself_only_for_listeners_who_need_them_now():
    """Right after its step: with the decoder idle, the first frame of each job nobody
    has heard, on every core; while it works, the frame of each listener short of
    audio, on the generator's own core; only for jobs with nothing else in the pipeline."""
    jobs = (job("unheard"), short("short"), ahead("ahead"), short("queued", backlog=1))
    made = frozenset(view.key for view in jobs)
    idle = SIDE_BY_SIDE.urgent_frames(WorkerView(jobs=jobs), made)
    assert idle.jobs == {"unheard"} and idle.every_core
    busy_view = WorkerView(jobs=jobs, in_decoding=frozenset({"other"}))
    busy = SIDE_BY_SIDE.urgent_frames(busy_view, made)
    assert busy.jobs == {"unheard", "short"} and not busy.every_core
    assert SIDE_BY_SIDE.urgent_frames(busy_view, frozenset({"ahead"})).jobs == set()


def test_decoder_takes_a_bounded_run_of_each_job_so_new_requests_get_in():
    """A long backlog of one job is decoded a few frames per call, in order; another
    job's first frame goes into the very next call instead of waiting behind it all."""
    backlog, newcomer = ahead("backlog", 11), job("newcomer", backlog=1)
    queue = [*frames(backlog, 10), QueuedEntry(backlog, frame=False), QueuedEntry(newcomer)]
    calls = []
    while queue:
        view = WorkerView(jobs=(backlog, newcomer), queue=tuple(queue))
        indices = SIDE_BY_SIDE.decode_batch(view, DECODE_FRAMES_PER_JOB)
        calls.append(taken(view, indices))
        queue = [entry for i, entry in enumerate(queue) if i not in indices]
    # The newcomer is short of audio: the first call is its frame alone.
    assert calls[0] == [("newcomer", True)]
    run = [("backlog", True)] * 4
    assert calls[1:] == [run, run, [("backlog", True)] * 2 + [("backlog", False)]]


def test_a_job_is_decoded_by_one_thread_at_a_time():
    """Two threads may decode at once, but never the same job: its later frames wait."""
    busy, other, third = ahead("busy"), ahead("other"), ahead("third")
    queue = (QueuedEntry(other), QueuedEntry(busy), QueuedEntry(third))
    view = WorkerView(queue=queue, in_decoding=frozenset({"busy"}))
    assert taken(view, SIDE_BY_SIDE.decode_batch(view, 4)) == [("other", True), ("third", True)]
    only_busy = WorkerView(queue=(QueuedEntry(busy),), in_decoding=frozenset({"busy"}))
    assert SIDE_BY_SIDE.decode_batch(only_busy, 4) == ()
    assert not SIDE_BY_SIDE.plan_call(only_busy).due


def test_decoder_takes_the_listeners_short_of_audio_first():
    a, s, unheard = ahead("ahead"), short("short"), job("unheard", backlog=1)
    queue = (*frames(a, 2), QueuedEntry(s), QueuedEntry(unheard))
    view = WorkerView(queue=queue)
    assert taken(view, SIDE_BY_SIDE.decode_batch(view, 4)) == [("short", True), ("unheard", True)]
    rest = WorkerView(queue=queue[:2])
    assert taken(rest, SIDE_BY_SIDE.decode_batch(rest, 4)) == [("ahead", True)] * 2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=30),
    st.frozensets(st.integers(0, 3)),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.integers(1, 6),
)
def test_a_call_keeps_each_jobs_frames_in_order_and_bounded(entries, busy, shortness, per_job):
    """Whatever is queued: a call takes, of each job no thread is decoding, the first
    of its entries and at most `per_job` frames, and takes something if it can."""
    views = {k: short(k) if shortness[k] else ahead(k) for k in range(4)}
    queue = tuple(QueuedEntry(views[k], frame) for k, frame in entries)
    view = WorkerView(queue=queue, in_decoding=frozenset(busy))
    indices = SIDE_BY_SIDE.decode_batch(view, per_job)
    assert list(indices) == sorted(set(indices))
    for k in range(4):
        own = [i for i, entry in enumerate(queue) if entry.job.key == k]
        chosen = [i for i in indices if i in own]
        assert chosen == own[: len(chosen)]  # a prefix: never a later entry before an earlier
        assert sum(queue[i].frame for i in chosen) <= per_job
        assert not (chosen and k in busy)
    assert bool(indices) == any(entry.job.key not in busy for entry in queue)


# -- who waits ----------------------------------------------------------------------


def test_decoder_holds_back_while_a_new_jobs_prompt_is_next():
    """Frames of listeners with audio in hand wait while a job nobody has heard has
    its text prompt next; not when some queued listener is short of audio, nor once
    the new job has a frame."""
    a, newcomer = ahead("ahead", DECODE_FRAMES_PER_JOB), job("newcomer")
    run = tuple(frames(a, DECODE_FRAMES_PER_JOB))
    assert SIDE_BY_SIDE.plan_call(WorkerView(jobs=(a,), queue=run)).due
    holding = WorkerView(jobs=(a, newcomer), queue=run)
    assert not SIDE_BY_SIDE.plan_call(holding).due and SIDE_BY_SIDE.decoder_idle(holding)
    with_short = WorkerView(jobs=(a, newcomer), queue=(*run, QueuedEntry(short("short"))))
    assert SIDE_BY_SIDE.plan_call(with_short).due and not SIDE_BY_SIDE.decoder_idle(with_short)
    made = WorkerView(jobs=(a, job("newcomer", backlog=1)), queue=run)
    assert SIDE_BY_SIDE.plan_call(made).due and not SIDE_BY_SIDE.decoder_idle(made)


def test_decoder_thread_waits_for_a_run_of_every_job_unless_audio_is_needed_now():
    """Side by side the decoder thread holds out for runs, but not when a listener is
    short of audio, a job has ended, or the generator can step no job until it decodes."""
    a, b = ahead("a"), ahead("b")
    runs = (*frames(a, DECODE_FRAMES_PER_JOB), *frames(b, DECODE_FRAMES_PER_JOB - 1))
    one_short = WorkerView(jobs=(a, b), queue=runs)
    assert not SIDE_BY_SIDE.plan_call(one_short).due
    waiting = WorkerView(jobs=(a, b), queue=runs, generator_waiting=True)
    assert SIDE_BY_SIDE.plan_call(waiting).due
    assert SIDE_BY_SIDE.plan_call(WorkerView(jobs=(a, b), queue=(*runs, QueuedEntry(b)))).due
    ended = (*runs, QueuedEntry(b, frame=False))
    assert SIDE_BY_SIDE.plan_call(WorkerView(jobs=(a, b), queue=ended)).due
    cancelled = job("gone", 10 * MIN_LEAD_SECONDS, cancelled=True)
    gone = WorkerView(jobs=(a, b), queue=(*runs, QueuedEntry(cancelled)))
    assert SIDE_BY_SIDE.plan_call(gone).due
    listener = (*runs, QueuedEntry(short("short")))
    assert SIDE_BY_SIDE.plan_call(WorkerView(jobs=(a, b), queue=listener)).due


def test_the_decoder_thread_leaves_decoding_to_the_generator_while_the_stages_take_turns():
    a = ahead("a")
    view = WorkerView(jobs=(a,), queue=tuple(frames(a, 8)))
    assert SIDE_BY_SIDE.plan_call(view).due and not TURNS.plan_call(view).due


def test_a_closing_decoder_finishes_the_queue_then_exits():
    a = ahead("a")
    last = TURNS.plan_call(WorkerView(jobs=(a,), queue=tuple(frames(a, 1)), closing=True))
    assert last.entries == (0,) and not last.exit
    assert TURNS.plan_call(WorkerView(closing=True)).exit  # nothing left
    busy = WorkerView(queue=tuple(frames(a, 1)), in_decoding=frozenset({"a"}), closing=True)
    assert not TURNS.plan_call(busy).due


@pytest.mark.parametrize(
    ("jobs", "run"), [(1, 16), (2, TURN_RUN_FRAMES), (3, TURN_RUN_FRAMES)]
)
def test_taking_turns_frames_wait_for_a_run_while_the_listener_has_audio(jobs, run):
    """A job alone's run fills a call of its own; several jobs' runs share one. Frames
    are due at a full run, for a listener short of audio, or at a job's end."""
    policy = BatchingPolicy(turn_max_jobs=3, turn_call_frames=16, max_buffered_frames=16)
    others = tuple(ahead(f"other {i}") for i in range(jobs - 1))
    a = ahead("a")
    almost = WorkerView(jobs=(a, *others), queue=tuple(frames(a, run - 1)))
    assert policy.turn_run(almost) == run
    assert policy.decode_in_turn(almost, everything=False) == ()
    assert len(policy.decode_in_turn(almost, everything=True)) == run - 1
    full = WorkerView(jobs=(a, *others), queue=tuple(frames(a, run)))
    assert len(policy.decode_in_turn(full, everything=False)) == run
    s = short("s")
    needed = WorkerView(jobs=(s, *others), queue=tuple(frames(s, 1)))
    assert len(policy.decode_in_turn(needed, everything=False)) == 1
    ended = WorkerView(jobs=others, queue=(QueuedEntry(a, frame=False),))
    assert len(policy.decode_in_turn(ended, everything=False)) == 1
    busy = WorkerView(jobs=(a,), queue=full.queue, in_decoding=frozenset({"other"}))
    assert policy.decode_in_turn(busy, everything=True) == ()


def test_a_turn_run_is_never_longer_than_a_backlog_may_be():
    policy = BatchingPolicy(turn_max_jobs=1, turn_call_frames=16, max_buffered_frames=5)
    assert policy.turn_run(WorkerView(jobs=(ahead("a"),))) == 5


# -- the defaults -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capability", "float32", "int8"),
    [("AVX512", TURN_MAX_JOBS, 1), ("AVX2", 1, 0), ("DEFAULT", TURN_MAX_JOBS, 1)],
)
def test_how_many_jobs_take_turns_follows_the_cpu(monkeypatch, capability, float32, int8):
    """AVX2 kernels: one float32 job takes turns, int8 never; elsewhere a few jobs do."""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    assert default_turn_max_jobs(quantized=False) == float32
    assert default_turn_max_jobs(quantized=True) == int8
    assert BatchingPolicy.for_cpu(quantized=True).turn_max_jobs == int8
    assert BatchingPolicy.for_cpu(quantized=True, take_turns=True).turn_max_jobs == TURN_MAX_JOBS
    assert BatchingPolicy.for_cpu(quantized=False, take_turns=False).turn_max_jobs == 0


def test_only_int8_has_a_job_alone_wait_for_longer_runs():
    """Float32 keeps runs of TURN_RUN_FRAMES: longer calls hold more memory at their peak."""
    assert default_turn_call_frames(quantized=False) == TURN_RUN_FRAMES
    assert default_turn_call_frames(quantized=True) == INT8_TURN_CALL_FRAMES > TURN_RUN_FRAMES
    assert {row.call_frames for (_, weights), row in CPU_DEFAULTS.items() if weights == "int8"} == {
        INT8_TURN_CALL_FRAMES
    }
    policy = BatchingPolicy.for_cpu(quantized=True)
    assert policy.max_buffered_frames == INT8_TURN_CALL_FRAMES
    assert BatchingPolicy.for_cpu(quantized=True, max_buffered_frames=3).max_buffered_frames == 3
