"""The batching policy: which jobs step, where each frame is decoded, and who waits.

Pure functions of a snapshot: the worker (worker.py) copies its jobs and queues into
a `WorkerView` under its lock, asks `BatchingPolicy` for one plan of it, and carries
the plan out. Nothing here touches a thread, a lock or a model, so each decision can
be read, tested and changed on its own.

The plans, each of a snapshot of its own, since each follows what the one before
changed: the generator thread's round (`plan_step`: which jobs step, whether it
decodes in turn, whether it has work at all); before each step, whether it takes
every core (`step_on_every_core`); after a step side by side, the frames it decodes
at once (`urgent_frames`); taking turns, what it decodes now (`decode_in_turn`); and
the decoder thread's next call (`plan_call`), which also says whether it is worth
waking.

The decisions, in short:

* Every active job advances one frame per batched FlowLM step, except a job whose
  consumer has not taken its audio (a full backlog), so a slow reader cannot make the
  server buffer unbounded audio. Jobs nobody has heard yet step first, apart: their
  listeners wait for that step and not also for everyone else's.
* Two ways to share the cores. Taking turns (at most `turn_max_jobs` jobs): the
  generator thread runs FlowLM and Mimi one after the other on every core, and lets a
  job's frames queue up in runs while its listener has audio in hand, since a Mimi
  call costs much less per frame the more frames it takes. Side by side: FlowLM and
  Mimi on a thread and half the cores each, overlapping; the decoder thread waits
  for a run of frames of every job unless some audio is needed now, and leaves its
  calls' last layers to the generator thread, which has time to spare when Mimi is
  the bound.
* While other programs use our cores (`WorkerView.contended`), the stages run side by
  side (and the worker runs every operator on one thread): an operator shared out
  waits at each of its barriers for a thread the neighbours preempted (see
  cpu/contention.py).
* What a new request's listener waits for (its text prompt's pass, then the
  decoding of its first frame) runs on the generator thread before anything else and
  on every core, and the decoder starts no call meanwhile unless another listener
  is short of audio. A frame whose listener is short of audio is decoded at once on
  the generator thread rather than wait behind the decoder's call.
* A Mimi call takes a bounded run of each job, so a new request's first frame never
  waits behind a long backlog; while some listener is short of audio it takes only
  such listeners' frames.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property

import torch

# Frames of one job per Mimi call side by side: a run costs much less per frame than
# single frames, and a new request's first frame waits for at most one such call.
DECODE_FRAMES_PER_JOB = 4
# Taking turns, a job's frames wait for a run this long while its listener has at
# least MIN_LEAD_SECONDS of audio in hand: a run and a step take less than that.
TURN_RUN_FRAMES = 8
MIN_LEAD_SECONDS = 0.3
# With int8 FlowLM a job alone waits for longer runs (a longer call costs less per
# frame); float32 keeps TURN_RUN_FRAMES, since a longer call's peak memory is larger.
INT8_TURN_CALL_FRAMES = 16
# Side by side, the decoder thread stops its Mimi calls before the last two layers
# (the last ELU and the output convolution, over 24 kHz activations) and the
# generator thread runs them: with several streams Mimi is the bound and FlowLM's
# thread has time to spare. More layers would make the generator the bound.
GENERATOR_TAIL_LAYERS = 2
# The stages take turns for up to this many jobs where the CPU gains from it most
# (and whenever `take_turns=True` forces them to).
TURN_MAX_JOBS = 3


@dataclass(frozen=True)
class TurnDefaults:
    """Up to how many active jobs the stages take turns (0: never), and how many
    frames a call waits for while they do (a job alone's run)."""

    max_jobs: int
    call_frames: int


# By the vector kernels PyTorch runs ("AVX2", or "AVX512" for every other CPU, ARM
# included, where neither way has been measured) and by FlowLM's weights.
CPU_DEFAULTS: dict[tuple[str, str], TurnDefaults] = {
    # One FlowLM core reads float32 weights much more slowly than two: turns pay for a few jobs.
    ("AVX512", "float32"): TurnDefaults(TURN_MAX_JOBS, TURN_RUN_FRAMES),
    # An int8 step gains less from a second core, and Mimi nearly twice: turns for one job.
    ("AVX512", "int8"): TurnDefaults(1, INT8_TURN_CALL_FRAMES),
    # AVX2 kernels: side by side already wins for two float32 jobs; one still takes turns.
    ("AVX2", "float32"): TurnDefaults(1, TURN_RUN_FRAMES),
    # AVX2 kernels with int8 FlowLM: Mimi on a core of its own wins even for one job.
    ("AVX2", "int8"): TurnDefaults(0, INT8_TURN_CALL_FRAMES),
}


def cpu_defaults(quantized: bool) -> TurnDefaults:
    """This CPU's row of `CPU_DEFAULTS` for float32 or int8 (`quantized`) FlowLM."""
    kernels = "AVX2" if torch.backends.cpu.get_cpu_capability() == "AVX2" else "AVX512"
    return CPU_DEFAULTS[kernels, "int8" if quantized else "float32"]


def default_turn_max_jobs(quantized: bool) -> int:
    """Up to how many active jobs the stages take turns by default (0: never)."""
    return cpu_defaults(quantized).max_jobs


def default_turn_call_frames(quantized: bool) -> int:
    """Frames a call waits for while the stages take turns: a job alone's run."""
    return cpu_defaults(quantized).call_frames


# -- the snapshot -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobView:
    """One job as the policy sees it; `key` identifies it in a plan."""

    key: Hashable
    backlog: int  # frames made and not yet taken by the consumer (decoded or not)
    heard: bool  # some of its audio has been handed out
    lead: float  # seconds of audio its listener has in hand, if playing since the first
    cancelled: bool = False

    @property
    def awaits_first_frame(self) -> bool:
        """Nobody has heard it and none of its frames is made: its text prompt is next."""
        return not self.heard and self.backlog == 0


@dataclass(frozen=True, slots=True)
class QueuedEntry:
    """An entry waiting for Mimi: a job's frame, or (`frame` False) the job's end."""

    job: JobView
    frame: bool = True


@dataclass(frozen=True)
class WorkerView:
    """The worker's state at one moment."""

    jobs: tuple[JobView, ...] = ()  # active jobs, in turn order
    queue: tuple[QueuedEntry, ...] = ()  # waiting for Mimi, in order
    in_decoding: frozenset[Hashable] = frozenset()  # jobs a thread is decoding now
    generator_waiting: bool = False  # the generator thread can step no job
    calls_to_finish: bool = False  # decoder calls whose last layers the generator runs
    closing: bool = False
    contended: bool = False  # other programs use our cores: every operator on one thread

    @cached_property
    def decodable(self) -> dict[Hashable, JobView]:
        """Jobs with a queued entry that no thread is decoding."""
        return {
            entry.job.key: entry.job for entry in self.queue
            if entry.job.key not in self.in_decoding
        }

    @cached_property
    def queued_frames(self) -> dict[Hashable, tuple[JobView, int]] | None:
        """Frames queued of each job no thread is decoding; None when an end (or a
        cancelled job's entry) is queued, which is due at once."""
        queued: dict[Hashable, tuple[JobView, int]] = {}
        for entry in self.queue:
            job = entry.job
            if job.key in self.in_decoding:
                continue
            if not entry.frame or job.cancelled:
                return None
            queued[job.key] = (job, queued.get(job.key, (job, 0))[1] + 1)
        return queued


# -- the plans ----------------------------------------------------------------------


@dataclass(frozen=True)
class StepPlan:
    """The generator thread's next round: FlowLM steps (`groups`, in order, one
    batched pass each), then, when `taking_turns`, decoding on this thread. Without
    `has_work` it sleeps until woken instead."""

    groups: tuple[tuple[Hashable, ...], ...]
    taking_turns: bool
    has_work: bool

    @property
    def idle(self) -> bool:
        """Nothing to step."""
        return not self.groups


@dataclass(frozen=True)
class CallPlan:
    """The decoder thread's next Mimi call: the queue entries it takes (by index; none:
    it waits), or, once closing with nothing queued, `exit`."""

    entries: tuple[int, ...] = ()
    exit: bool = False

    @property
    def due(self) -> bool:
        """The decoder thread acts now (a call or its exit): worth waking it for."""
        return bool(self.entries) or self.exit


@dataclass(frozen=True)
class UrgentFrames:
    """Frames just made that the generator thread decodes itself, at once."""

    jobs: frozenset[Hashable]
    every_core: bool  # the decoder thread is idle: take its core too


# -- the policy ---------------------------------------------------------------------


@dataclass(frozen=True)
class BatchingPolicy:
    """When the worker steps, decodes and waits; see the module's docstring."""

    turn_max_jobs: int  # the stages take turns while at most this many jobs are active
    turn_call_frames: int  # taking turns, a job alone's run; several jobs share one
    max_buffered_frames: int  # frames a job may have made and not handed out
    max_batch: int = 8  # jobs per FlowLM step; the others wait for the next
    decode_frames_per_job: int = DECODE_FRAMES_PER_JOB
    turn_run_frames: int = TURN_RUN_FRAMES
    min_lead_seconds: float = MIN_LEAD_SECONDS
    one_core: bool = False  # the worker may use one core: the stages always take turns

    @classmethod
    def for_cpu(
        cls, quantized: bool, take_turns: bool | None = None,
        max_buffered_frames: int | None = None, max_batch: int = 8, one_core: bool = False,
    ) -> BatchingPolicy:
        """This CPU's defaults; `take_turns` forces either way (`one_core`: always)."""
        defaults = cpu_defaults(quantized)
        turn_max_jobs = (
            defaults.max_jobs if take_turns is None else TURN_MAX_JOBS if take_turns else 0
        )
        return cls(
            turn_max_jobs=turn_max_jobs,
            turn_call_frames=defaults.call_frames,
            # Bounds a slow reader, and holds a job alone's run waiting for Mimi.
            max_buffered_frames=max_buffered_frames or defaults.call_frames,
            max_batch=max_batch,
            one_core=one_core,
        )

    # The generator thread -----------------------------------------------------------

    def taking_turns(self, view: WorkerView) -> bool:
        """Whether the stages take turns on the generator thread's cores now. Never
        while the cores are contended, unless the worker has only one: turns gain by
        sharing out each operator, which then costs far more than it gains."""
        if self.one_core:
            return True
        return (
            not view.contended and self.turn_max_jobs > 0
            and len(view.jobs) <= self.turn_max_jobs
        )

    def plan_step(self, view: WorkerView) -> StepPlan:
        """The generator thread's round. The jobs to step: up to `max_batch` whose
        backlog has room, in turn order; those nobody has heard yet in a pass of their
        own, first. It goes on (else it sleeps until woken) with a job to step, a
        decoder call to finish, or, taking turns, frames queued that no thread is
        decoding."""
        runnable = [
            job for job in view.jobs if job.backlog < self.max_buffered_frames
        ][: self.max_batch]
        unheard = tuple(job.key for job in runnable if job.awaits_first_frame)
        heard = tuple(job.key for job in runnable if not job.awaits_first_frame)
        groups = tuple(group for group in (unheard, heard) if group)
        taking_turns = self.taking_turns(view)
        has_work = (
            bool(groups) or view.calls_to_finish
            or (taking_turns and bool(view.queue) and not view.in_decoding)
        )
        return StepPlan(groups, taking_turns, has_work)

    def step_on_every_core(self, view: WorkerView, taking_turns: bool) -> bool:
        """Whether a FlowLM step takes every core (else the generator's own share)."""
        return taking_turns or self.decoder_idle(view)

    def urgent_frames(self, view: WorkerView, made: frozenset[Hashable]) -> UrgentFrames:
        """Of the jobs that just got a frame (`made`), those whose listener cannot wait
        for the decoder thread.

        While it is idle (and stays idle until this thread queues a frame), the first
        frame of each job nobody has heard, on every core. While it works, the frame
        of each listener short of audio, on this thread's own core: the decoder's call
        over every job's run would come first. Only jobs with nothing else in the
        pipeline, so each job's frames stay in order.
        """
        idle = self.decoder_idle(view)
        urgent = frozenset(
            job.key for job in view.jobs
            if job.key in made and job.backlog == 0
            and (not job.heard if idle else self.short_of_audio(job))
        )
        return UrgentFrames(urgent, every_core=idle)

    def decode_in_turn(self, view: WorkerView, everything: bool) -> tuple[int, ...]:
        """Taking turns: the queue entries the generator thread decodes now (by index;
        none: not yet). `everything`: nothing else to do, so whatever is queued.

        A job's frames are due when nobody has heard it, when it has ended, when a run
        of them is queued, or when its listener runs short of audio; every queued job
        then goes in the same call, since batch rows cost little. Never while the
        decoder thread still works on frames queued before the turns began.
        """
        if view.in_decoding or not view.queue:
            return ()
        run = self.turn_run(view)
        if not everything:
            queued = view.queued_frames
            if queued is not None and not any(
                count >= run or self.short_of_audio(job) for job, count in queued.values()
            ):
                return ()
        return self.decode_batch(view, run)

    def turn_run(self, view: WorkerView) -> int:
        """Frames of each job a call waits for while taking turns: a job alone's run
        fills a call of its own, several jobs' runs share one."""
        run = max(self.turn_run_frames, self.turn_call_frames // max(1, len(view.jobs)))
        return min(run, self.max_buffered_frames)

    # The decoder thread -------------------------------------------------------------

    def plan_call(self, view: WorkerView) -> CallPlan:
        """The decoder thread's next call: a bounded run of each job (`decode_batch`)
        once `runs_ready`, unless the stages take turns or it holds back for a new
        job's prompt. Closing, whatever is decodable at once, and the exit once the
        queue is empty."""
        if view.closing and not view.queue:
            return CallPlan(exit=True)
        if not view.decodable:
            return CallPlan()
        if not view.closing and (
            self.taking_turns(view) or self.holding_for_a_prompt(view)
            or not self.runs_ready(view)
        ):
            return CallPlan()
        return CallPlan(self.decode_batch(view, self.decode_frames_per_job))

    def runs_ready(self, view: WorkerView) -> bool:
        """Whether the decoder thread's next call is worth making: every job it would
        take has a run of frames queued, or a listener is short of audio, a job has
        ended, or the generator thread waits, every backlog full, for this call."""
        if view.generator_waiting:
            return True
        queued = view.queued_frames
        if queued is None or any(self.short_of_audio(job) for job, _ in queued.values()):
            return True
        run = min(self.decode_frames_per_job, self.max_buffered_frames)
        return all(count >= run for _, count in queued.values())

    def decoder_idle(self, view: WorkerView) -> bool:
        """The decoder thread is not decoding, and stays so until the generator queues
        a frame: nothing is queued, or it holds back for a new job's prompt."""
        return not view.in_decoding and (not view.queue or self.holding_for_a_prompt(view))

    def holding_for_a_prompt(self, view: WorkerView) -> bool:
        """Whether the decoder thread holds back while a new job's text prompt is next:
        that pass and the first frame's decoding get every core, unless some queued
        listener is short of audio."""
        return any(job.awaits_first_frame for job in view.jobs) and not any(
            self.short_of_audio(job) for job in view.decodable.values()
        )

    def decode_batch(self, view: WorkerView, frames_per_job: int) -> tuple[int, ...]:
        """The queue entries (by index) of the next Mimi call: up to `frames_per_job`
        frames of each job, in order, the rest left for the next call.

        While some listener is short of audio, only such jobs: the call is then a
        fraction of one over every job, and the others have audio in hand. Jobs
        another thread is decoding are left alone.
        """
        urgent = {key for key, job in view.decodable.items() if self.short_of_audio(job)}
        taken: list[int] = []
        frames: dict[Hashable, int] = {}
        for index, entry in enumerate(view.queue):
            key = entry.job.key
            if (
                key in view.in_decoding
                or (urgent and key not in urgent)
                or frames.get(key, 0) >= frames_per_job
            ):
                continue
            frames[key] = frames.get(key, 0) + entry.frame  # an end counts no frame
            taken.append(index)
        return tuple(taken)

    # Shared -------------------------------------------------------------------------

    def short_of_audio(self, job: JobView) -> bool:
        """Whether the job's listener has heard nothing yet, or is about to run dry."""
        return not job.heard or job.lead < self.min_lead_seconds
