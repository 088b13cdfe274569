"""The synthesis worker: all active requests advance together, frame by frame.

Two threads form a pipeline. The generator thread advances every active job by
one frame per step, all in one batched FlowLM pass (the weights, which dominate
the cost, are read once for all), so a short answer is never stuck behind a long
one. The decoder thread turns those latents into audio with Mimi: everything queued
since its last call goes in one call, the frames of each job together and the jobs
as rows of a batch, and it waits for a run of frames of every job unless a listener
needs audio now; the last layers of each such call run on the generator thread,
between its steps: with several jobs it has time to spare while Mimi's thread is
the bound (`GENERATOR_TAIL_LAYERS`). On two cores the halves overlap, and model
code never runs on the caller's thread (for the server: never on the event loop).
While at most a few jobs are active, the stages can instead take turns on the
generator thread, each on every core (`SynthesisWorker` says when that pays).
What a new request's listener waits for, its text prompt's pass and then the
decoding of its first frame, runs on the generator thread before anything else,
and on every core: the decoder thread starts no call meanwhile unless another
listener is short of audio (a call under way, or such a call, leaves the generator
its own core). Every core
means all of them only if no other long-lived thread of the process ran torch on
several cores (load the model and voices with `threads.run_on_own_thread`; the
reason is in threads.py). Until a listener has some audio in hand, its frames also
go before other jobs' in every Mimi call.

A job whose consumer has not taken its audio is skipped until it has, so a slow
reader cannot make the server buffer unbounded audio; a cancelled job is dropped
before its next frame.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np

from ..cpu.threads import available_cores, intra_op_threads, use_cores
from ..cpu.time_slice import use_long_time_slices
from ..model.voice import VoiceState
from .job import SynthesisJob
from .policy import (
    DECODE_FRAMES_PER_JOB,
    GENERATOR_TAIL_LAYERS,
    MIN_LEAD_SECONDS,
    TURN_MAX_JOBS,
    TURN_RUN_FRAMES,
    default_turn_call_frames,
    default_turn_max_jobs,
)
from .synthesizer import GenerationOptions, LatentFrame, PartlyDecoded, Synthesizer

_LOGGER = logging.getLogger(__name__)

# One Mimi call's frames, by job (each job's in order), and the ends queued behind them.
_Delivery = dict["SynthesisJob", list[LatentFrame]]
_End = tuple["SynthesisJob", Exception | None]

# With nothing to step, the generator thread sleeps until woken (a submission, a
# cancellation, frames taken) or this long, whichever comes first.
IDLE_RECHECK_S = 0.05
# Once a job's first frame is decoded, the generator thread waits (this long at most)
# for the job's consumer to pass it on (`SynthesisJob.passed_on`) before stepping on.
# The consumer (the server's event loop) needs Python's lock to take the frame and
# write it to its socket, and the next FlowLM step, hundreds of operator calls, takes
# and drops that lock all the while: now and then the consumer lost it for up to the
# lock's 5 ms switch interval. Measured on two cores (Zen 5 EPYC), two servers
# alternating, 40 short requests each, two runs: from the frame's hand-over to the
# client's receipt 0.97 and 1.02 ms (medians), 5.1 and 7.1 ms for the slowest fifth,
# against 0.97 and 0.89 ms, 1.1 and 1.0 ms with the wait (waiting only until the
# frame was taken, not written, left the write 4-6 ms late in the slowest fifth).
# The listener does not hear it: its next frame is due when the first one's 80 ms end.
FIRST_FRAME_HANDOVER_S = 0.005


class SynthesisWorker:
    """Batched FlowLM steps over all active jobs, and Mimi decoding their frames.

    Two ways to share the cores. Side by side: FlowLM and Mimi each on a thread and
    half the cores (one on two), overlapping. Taking turns (while at most `turn_max_jobs`
    jobs are active; `take_turns` forces either way): the generator thread runs both
    stages on every core, one after the other, and lets frames queue up for Mimi
    while their listeners have audio in hand (`MIN_LEAD_SECONDS`), since several
    frames in one call cost much less each.

    Measured on two cores with the standard model, one paragraph at a time, the two
    ways alternating in one process: in float32, 2.38x real time taking turns against
    2.26x side by side (where the stages slow each other through the shared cache and
    Python's lock, and one core reads FlowLM's weights more slowly than two). One
    FlowLM core reads the weights much more slowly than two, so taking turns also
    pays for two and three float32 streams; with four the two ways measured level,
    and side by side a new request does not wait for a Mimi call over every job's
    run (`TURN_MAX_JOBS`). An int8 FlowLM step gains less from a second core (10.0
    against 12.5 ms on the Xeon), but Mimi gains nearly twice: one int8 paragraph
    made 5.34x real time taking turns against 4.99x side by side on an Intel Xeon
    with AVX-512 (ahead in four rounds of four), and 4.82x against 4.11x on an AMD
    EPYC with AVX2 only (ahead in six of six). (The Xeon held to AVX2 kernels had
    said the opposite, 4.74x against 5.34x: the real AVX2 machine overruled it.)
    A request coming meanwhile is heard no later (EPYC, eight rounds: 37 against 43 ms
    median, 64 against 69 at worst). Two int8 paragraphs were level on the Xeon (7.42x
    against 7.21x) and faster taking turns on the EPYC (6.43x against 5.80x, four
    rounds of four), but a request coming meanwhile then waited 150-190 ms for its
    first audio in two rounds of six (behind a run of both jobs' frames; 51-72 ms side
    by side); three were level (7.15x against 7.24x), four faster side by side (9.19x
    against 8.33x). Those were the CPU's AVX-512 kernels. On an AMD EPYC with AVX2
    only (Zen 3, 2026-12-05; one paragraph a job, alternating in one process), side
    by side won for one int8 job (7.21x against 6.17x real time, ahead in eight rounds
    of eight; the version of 11-30, with more than twice this one's fixed costs a step, had
    measured the opposite on another AVX2 EPYC) and for two float32 jobs (8.21x
    against 7.35x, six of six); three were level (8.52x against 8.34x), and taking
    turns kept a small lead for one float32 job (5.26x against 5.14x, seven of ten).
    Hence `default_turn_max_jobs`.

    Side by side, Mimi is the slower stage when FlowLM is int8 or several jobs share
    each step, and a Mimi frame costs less the more frames go in a call (four int8
    streams on one core, frames per call: 16 took 5.9 ms a frame, 12 6.2, 8 6.9, 4
    8.9). So the decoder thread waits until every job has a run of
    `DECODE_FRAMES_PER_JOB` frames queued, unless a listener is short of audio, a
    job has ended, or the generator thread can step no job. Four paragraphs at once,
    alternating in one process with the form before it (Intel Xeon, 2 cores, four
    rounds): int8 12.94x against 11.33x real time together, float32 8.66x against
    8.25x, ahead in every round. The form before left one job out of the decoder's
    call while the generator thread waited, for the generator to decode; it had
    measured ahead on an AMD EPYC (Zen 4: 7.13x against 6.64x, four int8 streams),
    but here those one-job calls, the dearest per frame, made it the slowest: without
    them, and without waiting for runs, 12.65x.
    """

    def __init__(
        self, synthesizer: Synthesizer, max_buffered_frames: int | None = None,
        threads_per_stage: int | None = None, max_batch: int = 8,
        prompt_threads: int | None = None, take_turns: bool | None = None,
    ):
        self.synthesizer = synthesizer
        quantized = synthesizer.model.quantized
        # Taking turns, a job alone waits for runs this long; several share a call.
        self.turn_call_frames = default_turn_call_frames(quantized)
        # Frames a job may have made but not yet handed out (80 ms each): bounds a slow
        # reader, and holds a job alone's run waiting for Mimi.
        self.max_buffered_frames = max_buffered_frames or self.turn_call_frames
        self.max_batch = max_batch
        # Side by side, each stage on half the cores: one each on two cores, and on a
        # Raspberry Pi's or an N100's four, no core left idle.
        self.threads_per_stage = threads_per_stage or max(1, available_cores() // 2)
        # Threads for a text prompt's pass while the decoder is idle: all the cores.
        self.prompt_threads = prompt_threads or available_cores()
        # The stages take turns while at most this many jobs are active (0: never).
        self.turn_max_jobs = (
            default_turn_max_jobs(quantized) if take_turns is None
            else TURN_MAX_JOBS if take_turns else 0
        )
        self._jobs: deque[SynthesisJob] = deque()
        self._decode_queue: deque[tuple[SynthesisJob, LatentFrame | None, Exception | None]] = (
            deque()
        )
        self._wake = threading.Condition()
        self._closing = False
        # Jobs whose frames a thread is decoding: their later frames wait for it, in order.
        self._in_decoding: set[SynthesisJob] = set()
        self._generator_waiting = False  # no job to step: every backlog is full
        # The decoder thread's calls for the generator thread to finish, in order:
        # each with the frames' jobs and the ends queued behind them.
        self._unfinished: deque[tuple[PartlyDecoded | None, _Delivery, list[_End]]] = deque()
        self._threads = [
            threading.Thread(target=self._generate, name="flowlm", daemon=True),
            threading.Thread(target=self._decode, name="mimi", daemon=True),
        ]

    def start(self) -> None:
        # Each stage is one thread of ours, and each sets its own count (the count is
        # per thread, see cpu/threads.py): more intra-op threads per stage only pay on
        # machines with cores to spare, and hurt badly on oversubscribed ones.
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
        self, voice: VoiceState, text: str, options: GenerationOptions = GenerationOptions(),
        on_ready: Callable[[], None] | None = None,
    ) -> SynthesisJob:
        """Queue a text; raises EngineError at once for a text or voice that cannot work,
        and RuntimeError on a worker that is not running (its audio would never come)."""
        job = SynthesisJob(
            self.synthesizer.start(voice, text, options), on_ready, self._resume_generator
        )
        with self._wake:
            if self._closing or not all(thread.is_alive() for thread in self._threads):
                raise RuntimeError(
                    "the synthesis worker is not running: start() it first, and not after close()"
                )
            self._jobs.append(job)
            self._wake.notify_all()
        return job

    def stream(
        self, voice: VoiceState, text: str, options: GenerationOptions = GenerationOptions()
    ) -> Iterator[np.ndarray]:
        """Audio frames of one text as they are decoded; stops the job if abandoned."""
        job = self.submit(voice, text, options)
        try:
            yield from job.frames()
        finally:
            job.cancel()

    def _resume_generator(self) -> None:
        """A job's frames were taken (`SynthesisJob.take`): if the generator thread waits
        for room in a backlog, it looks again. Only then: the decoder thread, woken
        for nothing, would take a core from the step beside it (see `_to_decoder`)."""
        with self._wake:
            if self._generator_waiting:
                self._wake.notify_all()

    @property
    def active_jobs(self) -> int:
        with self._wake:
            return len(self._jobs)

    # -- generator thread (FlowLM) ------------------------------------------------

    def _runnable(self) -> list[SynthesisJob] | None:
        """The jobs to advance together this step: retire cancelled ones, skip lagging readers.

        None once the worker is closing. Jobs beyond `max_batch` wait for the next step
        (the queue rotates, so every job gets its turn). Taking turns, an empty list
        means that only decoding can make progress.
        """
        with self._wake:
            while not self._closing:
                runnable = []
                for _ in range(len(self._jobs)):
                    job = self._jobs.popleft()
                    if job.cancelled:
                        job._utterance.close()
                        self._to_decoder(job, None, None)
                        continue
                    self._jobs.append(job)
                    if len(runnable) < self.max_batch and job._backlog() < self.max_buffered_frames:
                        runnable.append(job)
                if runnable or self._decoding_here_due() or self._unfinished:
                    return runnable  # nothing runnable: decoding is due on this thread
                # Nothing to do: wait for a submission, a cancellation or a reader.
                self._generator_waiting = True
                if self._decode_queue:  # a decoder holding out for runs: its call is due
                    self._wake.notify_all()
                self._wake.wait(timeout=IDLE_RECHECK_S)
                self._generator_waiting = False
            return None

    def _to_decoder(
        self, job: SynthesisJob, frame: LatentFrame | None, error: Exception | None
    ) -> None:
        """Queue an entry for decoding (on this, the generator thread).

        Only the decoder thread can be waiting, so it is woken only when it has work:
        woken for each frame to find none (the stages taking turns, or a run not yet
        queued), it took a core from the step beside it, an int8 step 8.65 against
        7.94 ms with a thread woken for nothing after each (Intel Xeon, two cores).
        """
        with self._wake:
            if frame is not None:
                job._hand_over_frame()
            self._decode_queue.append((job, frame, error))
            if self._decoder_has_work():
                self._wake.notify_all()

    def _decoder_idle(self) -> bool:
        """The decoder thread is not decoding, and stays so until this (the generator)
        thread queues a frame: nothing is queued, or it holds back for a new job (until
        then, or until a listener runs short of audio)."""
        with self._wake:
            return not self._in_decoding and (
                not self._decode_queue or self._holding_for_a_prompt()
            )

    def _holding_for_a_prompt(self) -> bool:
        """Whether the decoder thread holds back while a new job's text prompt is next.

        The new job's listener waits for that pass and the decoding of its first
        frame; while no queued job's listener is short of audio, both get every core
        and the decoder's call comes after them. Its queue is fullest just when the
        stages stop taking turns (a job beyond `turn_max_jobs` arrives). A request
        arriving while paragraphs were spoken, alternating in one process (Xeon, 2
        cores): beside one int8 paragraph, first audio after 31 against 62 ms
        (medians of five rounds); beside three float32 ones 59 against 104 ms, four
        int8 57 against 64, four float32 60 against 78 (three rounds); the
        paragraphs' speed level. Called with `_wake` held.
        """
        return any(job._awaits_first_frame() for job in self._jobs) and not any(
            self._short_of_audio(job) for job in self._decodable_jobs()
        )

    def _decoding_here_due(self) -> bool:
        """Taking turns, with no job to step: whether the generator thread has frames to
        decode (queued, and the decoder thread done with its last call). Side by side
        the decoder thread decodes them. Called with `_wake` held."""
        return self._taking_turns() and bool(self._decode_queue) and not self._in_decoding

    def _decodable(self) -> bool:
        """Whether some queued entry belongs to a job no thread is decoding (`_wake` held)."""
        return bool(self._decodable_jobs())

    def _decodable_jobs(self) -> set[SynthesisJob]:
        return {job for job, _, _ in self._decode_queue if job not in self._in_decoding}

    def _taking_turns(self) -> bool:
        """Whether the stages take turns on every core now (called with `_wake` held)."""
        return self.turn_max_jobs > 0 and len(self._jobs) <= self.turn_max_jobs

    def _generate(self) -> None:
        use_long_time_slices()  # before its OpenMP workers start: they inherit it
        use_cores(self.threads_per_stage, serial_blas=True)
        while (jobs := self._runnable()) is not None:
            with self._wake:
                turns = self._taking_turns()
            with intra_op_threads(self.prompt_threads if turns else None):
                self._finish_decoder_calls()
                if jobs:
                    self._step(jobs, turns)
                if turns:
                    self._decode_in_turn(everything=not jobs)
        self._finish_decoder_calls()
        with self._wake:
            for job in self._jobs:
                job._utterance.close()
                self._decode_queue.append((job, None, None))
            self._jobs.clear()
            self._wake.notify_all()

    def _step(self, jobs: list[SynthesisJob], turns: bool) -> None:
        """One FlowLM step of `jobs`; their frames (or their ends) go to the decode queue.

        Jobs nobody has heard yet go first: their listeners wait for this step (their
        text prompts' pass, one for all of them, apart from the other jobs' step anyway)
        and the decoding of its frames, and not also for the step of every other job.
        """
        unheard = [job for job in jobs if job._awaits_first_frame()]
        for group in (unheard, [job for job in jobs if job not in unheard]):
            if group:
                self._advance(group, turns)

    def _advance(self, jobs: list[SynthesisJob], turns: bool) -> None:
        threads = self.prompt_threads if turns or self._decoder_idle() else self.threads_per_stage
        try:
            frames = self.synthesizer.advance([job._utterance for job in jobs], threads)
        except Exception as error:  # report to these requests; keep serving the others
            _LOGGER.exception("synthesis failed")
            for job in jobs:
                job._utterance.close()
                self._retire(job)
                self._to_decoder(job, None, error)
            return
        decoded = set() if turns else self._decode_urgent_frames(jobs, frames)
        for job, frame in zip(jobs, frames, strict=True):
            if frame is not None and job not in decoded:
                self._to_decoder(job, frame, None)
            elif frame is None and job._utterance.finished:
                self._retire(job)
                self._to_decoder(job, None, None)

    def _decode_urgent_frames(
        self, jobs: list[SynthesisJob], frames: list[LatentFrame | None]
    ) -> set[SynthesisJob]:
        """Decode here, at once, the frames of listeners who cannot wait for the decoder.

        While the decoder is idle, the first frame of each job nobody has heard yet,
        on every core (the decoder stays idle until this thread queues a frame):
        measured on two cores, requests alternating, first audio 71-80 ms against
        80-92 ms with the decoder on one core beside the next step. While the decoder
        works, the frame of each job whose listener is short of audio, on this
        thread's own core: the decoder's call, a few frames of every other job, would
        come first. A new request while four int8 paragraphs were spoken: first
        audio 73-87 ms (338 ms before, in a run minutes apart), and its audio late by
        11 ms at worst against 123 ms with only first frames decoded here (medians of
        six rounds, the two alternating in one process). The next FlowLM step waits
        meanwhile, which the other listeners, with audio in hand, do not hear. Only
        jobs with nothing queued, so that each job's frames stay in order. Returns
        the jobs whose frame this took.
        """
        idle = self._decoder_idle()
        urgent = {
            job: [frame] for job, frame in zip(jobs, frames, strict=True)
            if frame is not None and job._backlog() == 0 and self._decode_here(job, idle)
        }
        if not urgent:
            return set()
        for job in urgent:
            job._hand_over_frame()
        with intra_op_threads(self.prompt_threads if idle else None):
            first_heard = self._decode_and_deliver(urgent)
        self._await_first_frames_passed_on(first_heard)
        return set(urgent)

    def _await_first_frames_passed_on(self, jobs: list[SynthesisJob]) -> None:
        """On the generator thread, after `jobs` got their first frames: before the next
        step, let their consumers pass them on (`FIRST_FRAME_HANDOVER_S` at most)."""
        deadline = time.monotonic() + FIRST_FRAME_HANDOVER_S
        for job in jobs:
            job._passed_on.wait(max(0.0, deadline - time.monotonic()))

    def _decode_here(self, job: SynthesisJob, decoder_idle: bool) -> bool:
        """An idle decoder takes any other frame beside the next step, in a batch."""
        return job.first_audio_at is None if decoder_idle else self._short_of_audio(job)

    def _retire(self, job: SynthesisJob) -> None:
        with self._wake:
            if job in self._jobs:
                self._jobs.remove(job)

    def _decode_in_turn(self, everything: bool) -> None:
        """Taking turns: decode on this thread once any job's frames are due (or `everything`).

        A job's frames are due when nobody has heard it yet (first audio), when it
        has ended, when a run of them is queued (or its backlog is full), or when
        its listener's audio in hand falls below `MIN_LEAD_SECONDS`. Every queued job
        then goes in the same call: batch rows cost little. Never while the decoder
        thread still works on frames queued before the turns began.
        """
        with self._wake:
            if self._in_decoding or not self._decode_queue:
                return
            if not (everything or self._decoding_due()):
                return
            batch = self._next_decode_batch(self._turn_run())
        self._finish_decoder_calls()  # the decoder thread's calls first: each stream in order
        self._await_first_frames_passed_on(self._decode_batch(batch))

    def _finish_decoder_calls(self) -> None:
        """Run the last layers of the decoder thread's calls (`GENERATOR_TAIL_LAYERS`), in
        the order it made them, and hand their audio out."""
        while True:
            with self._wake:
                if not self._unfinished:
                    return
                part, delivery, ends = self._unfinished.popleft()
            self._await_first_frames_passed_on(self._finish_call(part, delivery, ends))

    def _decoding_due(self) -> bool:
        queued = self._queued_frames()
        if queued is None:
            return True
        full_run = self._turn_run()
        return any(
            count >= full_run or self._short_of_audio(job) for job, count in queued.items()
        )

    def _turn_run(self) -> int:
        """Frames of each job a call waits for while the stages take turns (`_wake` held):
        a job alone's run fills a call of its own, several jobs' runs share one."""
        run = max(TURN_RUN_FRAMES, self.turn_call_frames // max(1, len(self._jobs)))
        return min(run, self.max_buffered_frames)

    def _queued_frames(self) -> dict[SynthesisJob, int] | None:
        """Frames queued of each job no thread is decoding; None when an end (or a
        cancelled job's entry) is queued, which is due at once. `_wake` held."""
        queued: dict[SynthesisJob, int] = {}
        for job, frame, _ in self._decode_queue:
            if job in self._in_decoding:
                continue
            if frame is None or job.cancelled:
                return None
            queued[job] = queued.get(job, 0) + 1
        return queued

    def _short_of_audio(self, job: SynthesisJob) -> bool:
        """Whether the job's listener has heard nothing yet, or is about to run dry."""
        return (
            job.first_audio_at is None
            or job._lead(self.synthesizer.model.sample_rate) < MIN_LEAD_SECONDS
        )

    # -- decoder thread (Mimi) ----------------------------------------------------

    def _decode(self) -> None:
        """Decode side by side; while the stages take turns, the generator decodes instead.

        Once the worker closes, this thread finishes whatever is still queued.
        """
        use_long_time_slices()
        use_cores(self.threads_per_stage, serial_blas=True)
        while True:
            with self._wake:
                self._wake.wait_for(self._decoder_has_work)
                if not self._decode_queue:
                    return  # closing, and nothing left to finish
                batch = self._next_decode_batch()
            self._decode_batch(batch, GENERATOR_TAIL_LAYERS)

    def _decoder_has_work(self) -> bool:
        if self._closing:
            return not self._decode_queue or self._decodable()
        return (
            self._decodable()
            and not (self._taking_turns() or self._holding_for_a_prompt())
            and self._runs_ready()
        )

    def _runs_ready(self) -> bool:
        """Whether the decoder thread's next call is worth making now (`_wake` held):
        every job it would take has a run of frames queued (see `SynthesisWorker`),
        or a listener is short of audio, a job has ended, or the generator thread
        waits, every backlog full, for this call."""
        if self._generator_waiting:
            return True
        queued = self._queued_frames()
        if queued is None or any(self._short_of_audio(job) for job in queued):
            return True
        run = min(DECODE_FRAMES_PER_JOB, self.max_buffered_frames)
        return all(count >= run for count in queued.values())

    def _next_decode_batch(
        self, frames_per_job: int = DECODE_FRAMES_PER_JOB
    ) -> list[tuple[SynthesisJob, LatentFrame | None, Exception | None]]:
        """Take the queue's entries, up to `frames_per_job` frames of each job.

        A job's later entries stay queued, in order, for the next call: one call over
        a long backlog would keep a new request's first frame waiting behind it. While
        some listener is short of audio, the call takes only such jobs: it is then a
        fraction of a call over every job, and the others have audio in hand. Jobs
        another thread is decoding are left alone; the jobs taken wait for this call
        (`_in_decoding`) until `_decode_batch` has done it, whichever thread takes
        their next. Called with `_wake` held.
        """
        urgent = {job for job in self._decodable_jobs() if self._short_of_audio(job)}
        taken, left = [], deque()
        frames: dict[SynthesisJob, int] = {}
        for entry in self._decode_queue:
            job, frame, _ = entry
            if (
                job in self._in_decoding
                or (urgent and job not in urgent)
                or (job in frames and frames[job] >= frames_per_job)
            ):
                left.append(entry)
                continue
            frames[job] = frames.get(job, 0) + (frame is not None)  # an end counts no frame
            taken.append(entry)
        self._decode_queue = left
        self._in_decoding.update(frames)
        return taken

    def _decode_batch(
        self, batch: list[tuple[SynthesisJob, LatentFrame | None, Exception | None]],
        tail_layers: int = 0,
    ) -> list[SynthesisJob]:
        """Decode a batch's frames in one call; then finish the jobs whose end was queued.
        Returns the jobs that got their first audio. With `tail_layers` (the decoder
        thread) the call stops before Mimi's last layers, and the generator thread
        runs them (`_finish_decoder_calls`), hands the audio out and ends the jobs."""
        try:
            delivery: _Delivery = {}
            for job, frame, _ in batch:
                if frame is not None:
                    delivery.setdefault(job, []).append(frame)
            for job in [job for job in delivery if job.cancelled]:
                with job._changed:
                    job._in_decoder -= len(delivery.pop(job))
            ends = [(job, error) for job, frame, error in batch if frame is None]
            part = self._start_call(delivery, tail_layers) if delivery else None
            if tail_layers:  # even for ends alone: they come after the audio before them
                with self._wake:
                    if not self._closing:  # a closing worker's generator thread is gone
                        self._unfinished.append((part, delivery, ends))
                        self._wake.notify_all()
                        return []
            return self._finish_call(part, delivery, ends)
        finally:
            with self._wake:
                self._in_decoding.difference_update(job for job, *_ in batch)
                self._wake.notify_all()

    def _decode_and_deliver(self, delivery: _Delivery) -> list[SynthesisJob]:
        """Decode `delivery`'s frames here and hand each job its audio; returns the jobs
        heard for the first time."""
        return self._finish_call(self._start_call(delivery, 0), delivery, [])

    def _start_call(self, delivery: _Delivery, tail_layers: int) -> PartlyDecoded | None:
        try:
            return self.synthesizer.start_decoding(
                [frame for frames in delivery.values() for frame in frames], tail_layers
            )
        except Exception as error:
            _LOGGER.exception("decoding failed")
            self._fail(delivery, error)
            return None

    def _finish_call(
        self, part: PartlyDecoded | None, delivery: _Delivery, ends: list[_End]
    ) -> list[SynthesisJob]:
        """Finish a Mimi call (None: it failed), hand each job its audio, then end the
        jobs whose end was queued behind it; returns the jobs heard for the first time."""
        first_heard: list[SynthesisJob] = []
        if part is not None:
            try:
                audio = self.synthesizer.finish_decoding(part)
            except Exception as error:
                _LOGGER.exception("decoding failed")
                self._fail(delivery, error)
            else:
                first_heard = [job for job in delivery if job.first_audio_at is None]
                start = 0
                for job, frames in delivery.items():
                    job._push(audio[start : start + len(frames)])
                    start += len(frames)
        for job, error in ends:
            job._finish(error)
        return first_heard

    @staticmethod
    def _fail(delivery: _Delivery, error: Exception) -> None:
        """End a failed call's jobs with its error: the other jobs go on."""
        for job in delivery:
            job.cancel()
            job._finish(error)
