"""The synthesis worker: the threads that carry out the batching policy.

Two threads form a pipeline. The generator thread advances the active jobs by one
frame per step, all in one batched FlowLM pass (the weights, which dominate the
cost, are read once for all), so a short answer is never stuck behind a long one.
The decoder thread turns those latents into audio with Mimi, the frames of each job
together and the jobs as rows of a batch. Model code never runs on the caller's
thread (for the server: never on the event loop). Which jobs step, where each frame
is decoded and who waits is decided by `BatchingPolicy` (policy.py) over a snapshot
of this worker's state; this module only takes the snapshots and carries the plans
out. "Every core" means all of them only if no other long-lived thread of the
process ran torch on several cores (load the model and voices with
`threads.run_on_own_thread`; the reason is in threads.py).

A failure stays with the request it belongs to: a batched step or Mimi call that
raises is retried one job at a time, and only the jobs that fail alone end, with an
`EngineError`; so do jobs whose audio is not finite. If one of the threads itself
dies, the worker ends every job with an error, refuses new ones and reports it
(`on_failure`), so that the process can exit and be restarted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, cast

import numpy as np

from ..cpu.allocator import return_free_heap
from ..cpu.contention import Contention, CoreContention
from ..cpu.cores import available_cores
from ..cpu.threads import intra_op_threads, use_cores
from ..cpu.time_slice import use_long_time_slices
from ..errors import EngineError
from ..model.voice import VoiceState
from .heap_trims import HeapTrimSchedule
from .job import SynthesisJob
from .options import DEFAULT_OPTIONS, GenerationOptions
from .policy import (
    GENERATOR_TAIL_LAYERS,
    BatchingPolicy,
    JobView,
    QueuedEntry,
    StepPlan,
    WorkerView,
)
from .synthesizer import (
    INVALID_AUDIO,
    LatentFrame,
    PartlyDecoded,
    Synthesizer,
    Utterance,
)

_LOGGER = logging.getLogger(__name__)

# With nothing to step, the generator thread sleeps until woken (a submission, a
# cancellation, frames taken) or this long, whichever comes first.
IDLE_RECHECK_S = 0.05
# Once a job's first frame is decoded, the generator thread waits (this long at most)
# for the consumer to pass it on (`SynthesisJob.passed_on`) before stepping on: the
# next step takes and drops Python's lock all the while, which can hold the write of
# that frame back by the lock's switch interval. The listener does not hear the wait.
FIRST_FRAME_HANDOVER_S = 0.005


class _Entry(NamedTuple):
    """A decode queue entry: a job's latent, or (`frame` None) the job's end."""

    job: SynthesisJob
    frame: LatentFrame | None
    error: Exception | None = None


_Delivery = dict[SynthesisJob, list[LatentFrame]]  # one Mimi call's frames, by job


@dataclass
class _Call:
    """A Mimi call: its parts (one a model, or one a job after a batched call failed),
    each with its model and its frames by job, and the ends queued behind them."""

    parts: list[tuple[Synthesizer, PartlyDecoded, _Delivery]] = field(default_factory=list)
    ends: list[_Entry] = field(default_factory=list)


class SynthesisWorker:
    """Batched FlowLM steps over all active jobs, and Mimi decoding their frames.

    A job is spoken by `synthesizer`'s model unless `submit` names another: jobs of
    several models step and decode in the same rounds, each model's in batches of
    their own, so a long text in one language holds back no other language's.

    `policy` decides (default: `BatchingPolicy.for_cpu`, built from `take_turns`,
    `max_buffered_frames` and `max_batch`). Side by side each stage runs on
    `threads_per_stage` cores (default: half of them, so on four no core is left
    idle); what a listener waits for first, and both stages while they take turns,
    on `prompt_threads` (default: all of them). While `contention` says that other
    programs use the cores, every operator runs on one thread instead. `heap_trims`
    says when the generator thread gives the C heap's free pages back (see heap_trims.py).
    """

    def __init__(
        self, synthesizer: Synthesizer, max_buffered_frames: int | None = None,
        threads_per_stage: int | None = None, max_batch: int = 8,
        prompt_threads: int | None = None, take_turns: bool | None = None,
        policy: BatchingPolicy | None = None,
        on_failure: Callable[[BaseException], object] | None = None,
        heap_trims: HeapTrimSchedule | None = None,
        contention: Contention | None = None,
    ):
        self.synthesizer = synthesizer
        self.policy = policy or BatchingPolicy.for_cpu(
            synthesizer.model.quantized, take_turns, max_buffered_frames, max_batch,
            one_core=available_cores() == 1,
        )
        self.threads_per_stage = threads_per_stage or max(1, available_cores() // 2)
        self.prompt_threads = prompt_threads or available_cores()
        self._on_failure = on_failure
        self._sample_rate = synthesizer.model.sample_rate
        self._jobs: deque[SynthesisJob] = deque()
        self._utterances: dict[SynthesisJob, Utterance] = {}
        # Each job's model, until its last frame is decoded.
        self._models: dict[SynthesisJob, Synthesizer] = {}
        self._decode_queue: deque[_Entry] = deque()
        self._wake = threading.Condition()
        self._closing = False
        self.failure: BaseException | None = None  # what stopped a thread, if one died
        # Jobs whose frames a thread is decoding: their later frames wait for it, in order.
        self._in_decoding: set[SynthesisJob] = set()
        self._generator_waiting = False  # no job to step: every backlog is full
        self._heap_trims = heap_trims or HeapTrimSchedule()
        self._contention = contention or CoreContention()
        self._contended = False  # the last verdict, which the policy's snapshots carry
        # The decoder thread's calls for the generator thread to finish, in order.
        self._unfinished: deque[_Call] = deque()
        self._threads = [
            threading.Thread(target=self._run, args=(self._generate,), name="flowlm", daemon=True),
            threading.Thread(target=self._run, args=(self._decode,), name="mimi", daemon=True),
        ]

    @property
    def turn_max_jobs(self) -> int:
        return self.policy.turn_max_jobs

    @property
    def max_buffered_frames(self) -> int:
        return self.policy.max_buffered_frames

    def start(self) -> None:
        # Each stage is one thread of ours, and each sets its own count (the count is
        # per thread, see cpu/threads.py).
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> SynthesisWorker:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def submit(
        self, voice: VoiceState, text: str, options: GenerationOptions = DEFAULT_OPTIONS,
        on_ready: Callable[[], None] | None = None, synthesizer: Synthesizer | None = None,
    ) -> SynthesisJob:
        """Queue a text for `synthesizer`'s model (default: the worker's); raises
        EngineError at once for a text or voice that cannot work, and RuntimeError on a
        worker that is not running (its audio would never come)."""
        synthesizer = synthesizer or self.synthesizer
        if synthesizer.model.sample_rate != self._sample_rate:
            raise EngineError("every model of one worker must have one sample rate")
        utterance = synthesizer.start(voice, text, options)
        job = SynthesisJob(on_ready, self._resume_generator)
        with self._wake:
            if self._closing or not all(thread.is_alive() for thread in self._threads):
                raise RuntimeError(
                    "the synthesis worker is not running: start() it first, and not after close()"
                )
            self._jobs.append(job)
            self._utterances[job] = utterance
            self._models[job] = synthesizer
            self._wake.notify_all()
        return job

    def stream(
        self, voice: VoiceState, text: str, options: GenerationOptions = DEFAULT_OPTIONS,
        synthesizer: Synthesizer | None = None,
    ) -> Generator[np.ndarray, None, None]:
        """Audio frames of one text as they are decoded; stops the job if abandoned."""
        job = self.submit(voice, text, options, synthesizer=synthesizer)
        try:
            yield from job.frames()
        finally:
            job.cancel()

    @property
    def active_jobs(self) -> int:
        with self._wake:
            return len(self._jobs)

    def _resume_generator(self) -> None:
        """A job's frames were taken: if the generator thread waits for room in a
        backlog, it looks again. Only then: the decoder thread, woken for nothing,
        would take a core from the step beside it."""
        with self._wake:
            if self._generator_waiting:
                self._wake.notify_all()

    def _view(self) -> WorkerView:
        """The snapshot the policy decides on (`_wake` held). Entries are immutable, so
        one `QueuedEntry` stands for every queued frame of a job."""
        now, rate = time.monotonic(), self._sample_rate
        jobs = dict.fromkeys(self._jobs)
        jobs.update(dict.fromkeys(entry.job for entry in self._decode_queue))
        views = {
            job: JobView(
                job, job.backlog, job.first_audio_at is not None, job.lead(rate, now),
                job.cancelled,
            )
            for job in jobs
        }
        frames = {job: QueuedEntry(view) for job, view in views.items()}
        return WorkerView(
            jobs=tuple([views[job] for job in self._jobs]),
            queue=tuple([
                frames[entry.job] if entry.frame is not None
                else QueuedEntry(views[entry.job], frame=False)
                for entry in self._decode_queue
            ]),
            in_decoding=frozenset(self._in_decoding),
            generator_waiting=self._generator_waiting,
            calls_to_finish=bool(self._unfinished),
            closing=self._closing,
            contended=self._contended,
        )

    def _run(self, loop: Callable[[], None]) -> None:
        """Run a thread's loop; if it dies, stop the worker and say so."""
        try:
            loop()
        except BaseException as error:
            name = threading.current_thread().name
            _LOGGER.exception("The synthesis worker's %s thread stopped", name)
            self._stop_after(error)

    def _stop_after(self, error: BaseException) -> None:
        """End every job with an error and refuse new ones: nothing would answer them."""
        failure = EngineError("the synthesis worker stopped after an internal error")
        with self._wake:
            self.failure = error
            self._closing = True
            jobs = [*self._jobs, *(entry.job for entry in self._decode_queue)]
            for call in self._unfinished:
                jobs += [job for _, _, delivery in call.parts for job in delivery]
            self._wake.notify_all()
        for job in jobs:
            job.finish(failure)
        if self._on_failure is not None:
            try:
                self._on_failure(error)
            except Exception:  # e.g. the event loop to tell has closed
                _LOGGER.debug("on_failure callback failed", exc_info=True)

    # -- generator thread (FlowLM) ------------------------------------------------

    def _generate(self) -> None:
        use_long_time_slices()  # before its OpenMP workers start: they inherit it
        use_cores(self.threads_per_stage, serial_blas=True)
        while self._generator_round():
            pass
        self._finish_decoder_calls()
        with self._wake:
            for job in self._jobs:
                self._utterances.pop(job).close()
                self._decode_queue.append(_Entry(job, None))
            self._jobs.clear()
            self._wake.notify_all()

    def _generator_round(self) -> bool:
        """Carry out the policy's next plan; False once closing. A round in a call of its
        own: the jobs its plan names go with it, and a finished request's job (its
        decoder state, voice and connection) is not kept while the thread waits."""
        plan = self._next_step()
        if plan is None:
            return False
        with intra_op_threads(self._cores_for(every_core=plan.taking_turns)):
            self._finish_decoder_calls()
            for group in plan.groups:
                self._advance(group, plan.taking_turns)
            if plan.taking_turns:
                self._decode_in_turn(everything=plan.idle)
        return True

    def _next_step(self) -> StepPlan | None:
        """The policy's next round for this thread, once it has one; None once closing.
        Cancelled jobs leave first."""
        with self._wake:
            while not self._closing:
                self._note_contention()
                cancelled = [job for job in self._jobs if job.cancelled]
                self._queue_for_decoder([self._retire(job) for job in cancelled])
                if self._heap_trims.due(time.monotonic(), busy=self._holds_work()):
                    self._wake.release()  # submissions go on meanwhile
                    try:
                        return_free_heap()
                    finally:
                        self._wake.acquire()
                plan = self.policy.plan_step(self._view())
                if plan.has_work:
                    return plan
                # Nothing to do: wait for a submission, a cancellation or a reader.
                self._generator_waiting = True
                if self._decode_queue:  # a decoder holding out for runs: its call is due
                    self._wake.notify_all()
                self._wake.wait(timeout=IDLE_RECHECK_S)
                self._generator_waiting = False
            return None

    def _note_contention(self) -> None:
        """Ask whether other programs use the cores (`_wake` held); say when that changes."""
        contended = self._contention.contended()
        if contended != self._contended:
            self._contended = contended
            _LOGGER.info(
                "Other programs are using the cores: synthesis runs each operator on one core"
                if contended else "The cores are free again: synthesis uses every core"
            )

    def _cores_for(self, every_core: bool) -> int:
        """Threads for an operator: every core, or a stage's share; one while contended."""
        if self._contended:
            return 1
        return self.prompt_threads if every_core else self.threads_per_stage

    def _holds_work(self) -> bool:
        """Some job is active or some audio is still to be decoded (`_wake` held)."""
        return bool(self._jobs or self._decode_queue or self._unfinished or self._in_decoding)

    def _advance(self, jobs: Sequence[Hashable], turns: bool) -> None:
        """One FlowLM step of `jobs`; their frames (or their ends) go to the decode queue."""
        with self._wake:
            every_core = self.policy.step_on_every_core(self._view(), turns)
        # The policy names jobs by the keys `_view()` gave it: our jobs themselves.
        stepped = self._step(cast("list[SynthesisJob]", list(jobs)), self._cores_for(every_core))
        decoded = set() if turns else self._decode_urgent_frames(stepped)
        entries = []
        with self._wake:
            for job, frame in stepped.items():
                if frame is not None and job not in decoded:
                    entries.append(_Entry(job, frame))
                elif frame is None and self._utterances[job].finished:
                    entries.append(self._retire(job))
            self._queue_for_decoder(entries)

    def _step(
        self, jobs: list[SynthesisJob], threads: int
    ) -> dict[SynthesisJob, LatentFrame | None]:
        """Each job's next frame (None: a chunk or the text ended), in a batched step a
        model."""
        stepped: dict[SynthesisJob, LatentFrame | None] = {}
        for synthesizer, model_jobs in self._by_model(jobs).items():
            stepped.update(self._step_model(synthesizer, model_jobs, threads))
        return stepped

    def _by_model(self, jobs: Iterable[SynthesisJob]) -> dict[Synthesizer, list[SynthesisJob]]:
        """Jobs grouped by the model that speaks them, in order (`_models` is only
        written under `_wake` by `submit`, for a job not yet stepped or decoded)."""
        groups: dict[Synthesizer, list[SynthesisJob]] = {}
        for job in jobs:
            groups.setdefault(self._models[job], []).append(job)
        return groups

    def _step_model(
        self, synthesizer: Synthesizer, jobs: list[SynthesisJob], threads: int
    ) -> dict[SynthesisJob, LatentFrame | None]:
        """One model's jobs' step. If the batched step raises, each job steps alone, and
        those that fail alone end with the error."""
        utterances = [self._utterances[job] for job in jobs]
        try:
            return dict(zip(jobs, synthesizer.advance(utterances, threads), strict=True))
        except Exception as error:
            if len(jobs) == 1:
                _LOGGER.exception("Synthesis failed")
                self._fail_in_step(jobs[0], error)
                return {}
            _LOGGER.warning("A batched step failed: stepping each job alone", exc_info=True)
        stepped = {}
        for job, utterance in zip(jobs, utterances, strict=True):
            try:
                (stepped[job],) = synthesizer.advance([utterance], threads)
            except Exception as error:
                _LOGGER.exception("Synthesis failed")
                self._fail_in_step(job, error)
        return stepped

    def _fail_in_step(self, job: SynthesisJob, error: Exception) -> None:
        with self._wake:
            self._queue_for_decoder([self._retire(job, _engine_error(error))])

    def _retire(self, job: SynthesisJob, error: Exception | None = None) -> _Entry:
        """Take a job out of the steps (`_wake` held); its end, to queue behind its frames."""
        self._jobs.remove(job)
        self._utterances.pop(job).close()
        return _Entry(job, None, error)

    def _queue_for_decoder(self, entries: list[_Entry]) -> None:
        """Queue entries for decoding (`_wake` held). Only the decoder thread can be
        waiting, so it is woken only when it has work: woken for nothing, it takes a
        core from the step beside it."""
        for entry in entries:
            if entry.frame is not None:
                entry.job.frame_made()
            self._decode_queue.append(entry)
        if entries and self.policy.plan_call(self._view()).due:
            self._wake.notify_all()

    def _decode_urgent_frames(
        self, stepped: dict[SynthesisJob, LatentFrame | None]
    ) -> set[SynthesisJob]:
        """Decode here, at once, the frames the policy says cannot wait for the decoder
        thread (`BatchingPolicy.urgent_frames`); returns their jobs. The next step
        waits meanwhile, which listeners with audio in hand do not hear."""
        made = {job: frame for job, frame in stepped.items() if frame is not None}
        with self._wake:
            urgent = self.policy.urgent_frames(self._view(), frozenset(made))
        if not urgent.jobs:
            return set()
        delivery = {job: [frame] for job, frame in made.items() if job in urgent.jobs}
        for job in delivery:
            job.frame_made()
        with intra_op_threads(self._cores_for(urgent.every_core)):
            first_heard = self._finish_call(self._start_call(delivery, 0))
        self._await_first_frames_passed_on(first_heard)
        return set(delivery)

    def _await_first_frames_passed_on(self, jobs: list[SynthesisJob]) -> None:
        """After `jobs` got their first audio, before the next step: let their consumers
        pass it on (`FIRST_FRAME_HANDOVER_S` at most)."""
        deadline = time.monotonic() + FIRST_FRAME_HANDOVER_S
        for job in jobs:
            job.wait_passed_on(max(0.0, deadline - time.monotonic()))

    def _decode_in_turn(self, everything: bool) -> None:
        """Taking turns: decode on this thread what the policy says is due."""
        with self._wake:
            batch = self._take_entries(self.policy.decode_in_turn(self._view(), everything))
        if batch:
            self._finish_decoder_calls()  # the decoder thread's calls first: each stream in order
            self._await_first_frames_passed_on(self._decode_batch(batch))

    def _finish_decoder_calls(self) -> None:
        """Run the last layers of the decoder thread's calls (`GENERATOR_TAIL_LAYERS`), in
        the order it made them, and hand their audio out."""
        while True:
            with self._wake:
                if not self._unfinished:
                    return
                call = self._unfinished.popleft()
            self._await_first_frames_passed_on(self._finish_call(call))

    # -- decoder thread (Mimi) ----------------------------------------------------

    def _decode(self) -> None:
        """Decode side by side; once the worker closes, finish whatever is still queued."""
        use_long_time_slices()
        use_cores(self.threads_per_stage, serial_blas=True)
        while self._decoder_round():
            pass

    def _decoder_round(self) -> bool:
        """Make the decoder thread's next call; False once closing with nothing left. A
        call of its own, for the same reason as `_generator_round`."""
        with self._wake:
            while not (plan := self.policy.plan_call(view := self._view())).due:
                del view  # its jobs may end meanwhile
                self._wake.wait()
            if plan.exit:
                return False  # closing, and nothing left to finish
            batch = self._take_entries(plan.entries)
        with intra_op_threads(1 if view.contended else None):
            self._decode_batch(batch, GENERATOR_TAIL_LAYERS)
        return True

    # -- decoding, on either thread -----------------------------------------------

    def _take_entries(self, indices: tuple[int, ...]) -> list[_Entry]:
        """Take these queue entries out for one call; their jobs wait for it (`_in_decoding`)
        until `_decode_batch` has done it, whichever thread takes their next (`_wake` held)."""
        if not indices:
            return []
        chosen = set(indices)
        batch: list[_Entry] = []
        left: deque[_Entry] = deque()
        for index, entry in enumerate(self._decode_queue):
            (batch if index in chosen else left).append(entry)
        self._decode_queue = left
        self._in_decoding.update(entry.job for entry in batch)
        return batch

    def _decode_batch(self, batch: list[_Entry], tail_layers: int = 0) -> list[SynthesisJob]:
        """Decode a batch's frames in one call; then end the jobs whose end was queued.
        Returns the jobs that got their first audio. With `tail_layers` (the decoder
        thread) the call stops before Mimi's last layers, and the generator thread
        runs them (`_finish_decoder_calls`), hands the audio out and ends the jobs."""
        try:
            delivery: _Delivery = {}
            for entry in batch:
                if entry.frame is not None:
                    delivery.setdefault(entry.job, []).append(entry.frame)
            for job in [job for job in delivery if job.cancelled]:
                job.frames_dropped(len(delivery.pop(job)))
            call = self._start_call(delivery, tail_layers)
            call.ends = [entry for entry in batch if entry.frame is None]
            if tail_layers:  # even for ends alone: they come after the audio before them
                with self._wake:
                    if not self._closing:  # a closing worker's generator thread is gone
                        self._unfinished.append(call)
                        self._wake.notify_all()
                        return []
            return self._finish_call(call)
        finally:
            with self._wake:
                self._in_decoding.difference_update(entry.job for entry in batch)
                self._wake.notify_all()

    def _start_call(self, delivery: _Delivery, tail_layers: int) -> _Call:
        """Start one Mimi call over `delivery`'s frames; if it raises, a call a job, and
        the jobs whose own call raises end with the error. (A job retried after a
        failed call goes on from the decoder state that call left.)"""
        call = _Call()
        for synthesizer, jobs in self._by_model(delivery).items():
            self._start_parts(call, synthesizer, {job: delivery[job] for job in jobs}, tail_layers)
        return call

    def _start_parts(
        self, call: _Call, synthesizer: Synthesizer, delivery: _Delivery, tail_layers: int
    ) -> None:
        """One model's part of a call, or a part a job if the batched part raises."""
        try:
            part = self._start_part(synthesizer, delivery, tail_layers)
            call.parts.append((synthesizer, part, delivery))
            return
        except Exception as error:
            if len(delivery) == 1:
                _LOGGER.exception("Decoding failed")
                self._fail_decoding(delivery, error)
                return
            _LOGGER.warning("A batched Mimi call failed: decoding each job alone", exc_info=True)
        for job, frames in delivery.items():
            try:
                part = self._start_part(synthesizer, {job: frames}, tail_layers)
                call.parts.append((synthesizer, part, {job: frames}))
            except Exception as error:
                _LOGGER.exception("Decoding failed")
                self._fail_decoding({job: frames}, error)

    @staticmethod
    def _start_part(
        synthesizer: Synthesizer, delivery: _Delivery, tail_layers: int
    ) -> PartlyDecoded:
        frames = [frame for frames in delivery.values() for frame in frames]
        return synthesizer.start_decoding(frames, tail_layers)

    def _finish_call(self, call: _Call) -> list[SynthesisJob]:
        """Finish a Mimi call, hand each job its audio (a job whose audio is not finite
        fails instead), then end the jobs whose end was queued behind it; returns the
        jobs heard for the first time."""
        first_heard: list[SynthesisJob] = []
        for synthesizer, part, delivery in call.parts:
            try:
                audio = synthesizer.finish_decoding(part)
            except Exception as error:
                _LOGGER.exception("Decoding failed")
                self._fail_decoding(delivery, error)
                continue
            start = 0
            for job, frames in delivery.items():
                pieces = audio[start : start + len(frames)]
                start += len(frames)
                if not all(np.isfinite(piece).all() for piece in pieces):
                    _LOGGER.error("Decoding failed: %s", INVALID_AUDIO)
                    self._fail_decoding({job: frames}, EngineError(INVALID_AUDIO))
                    continue
                if job.first_audio_at is None:
                    first_heard.append(job)
                job.deliver(pieces)
        for entry in call.ends:
            self._models.pop(entry.job, None)  # its last frame is decoded
            entry.job.finish(entry.error)
        return first_heard

    def _fail_decoding(self, delivery: _Delivery, error: Exception) -> None:
        """End a failed call's jobs with its error: the other jobs go on."""
        for job in delivery:
            job.cancel()
            job.finish(_engine_error(error))


def _engine_error(error: Exception) -> EngineError:
    """The error a failed job ends with: an EngineError that names the problem."""
    if isinstance(error, EngineError):
        return error
    engine_error = EngineError(f"synthesis failed: {type(error).__name__}: {error}")
    engine_error.__cause__ = error
    return engine_error
