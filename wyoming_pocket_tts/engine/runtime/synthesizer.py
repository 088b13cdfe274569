"""The generation loop: text and a voice in, audio out one 80 ms frame at a time.

An `Utterance` is an explicit state machine over the text's chunks. Each chunk
starts from the voice (its keys/values copied into the utterance's working buffer,
never deep-copied), feeds the chunk's tokens, then alternates FlowLM steps and Mimi
decoding, so the first audio exists after the first frame. `next_frame()` advances
by exactly one frame: a scheduler can interleave many utterances, and a caller can
stop between any two frames.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum, auto

import numpy as np
import torch

from ..cpu.threads import intra_op_threads
from ..errors import EngineError, VoiceError
from ..model.kv_cache import LinearKV
from ..model.mimi import DecoderBatch, DecoderState
from ..model.pocket_tts import PocketTTS
from ..model.text import frames_after_eos_for, max_frames_for, prepare_text, split_into_chunks
from ..model.voice import VoiceState
from .options import DEFAULT_OPTIONS, GenerationOptions

_LOGGER = logging.getLogger(__name__)

# Before speech starts the EOS logit of some voices crosses the threshold; the
# model was tuned to ignore it for the first frames.
MIN_FRAMES_BEFORE_EOS = 6
# A fresh decoder starts with a small step (a click): fade the first 5 ms in.
FADE_IN_SECONDS = 0.005
# Working buffers kept for the next utterances once theirs end. Each holds a voice
# prompt, a text and its frames for every layer (tens of MB for the standard model):
# enough spares for the usual one or two requests at a time, not one per request of
# the busiest minute the server ever had.
MAX_SPARE_CACHES = 2
INVALID_AUDIO = "the voice state or model produced invalid audio (NaN or infinity)"


@dataclass(frozen=True)
class TextChunk:
    """One piece of the text, generated from the voice on its own."""

    text: str
    tokens: torch.Tensor  # [1, T]
    frames_after_eos: int
    max_frames: int


@dataclass
class _ChunkProgress:
    chunk: TextChunk
    decoder: DecoderState
    frame: int = 0
    eos_frame: int | None = None
    previous_latent: torch.Tensor | None = None
    text_embeddings: torch.Tensor | None = None  # not yet fed to the transformer
    paused: bool = False  # the silence after the chunk has been emitted

    def finished(self) -> bool:
        chunk = self.chunk
        if self.eos_frame is not None and self.frame >= self.eos_frame + chunk.frames_after_eos:
            return True
        return self.frame >= chunk.max_frames


class StepKind(Enum):
    """What an utterance's next step does."""

    PAUSE = auto()  # emit the silence after a spoken chunk; no model runs
    PROMPT = auto()  # a chunk's first FlowLM step, which feeds its text too
    FRAME = auto()  # a FlowLM step from the chunk's previous latent


@dataclass(frozen=True)
class NextStep:
    """An utterance's next step, as `Synthesizer.advance` batches it."""

    kind: StepKind
    text: torch.Tensor | None = None  # PROMPT: the chunk's text embeddings


@dataclass(frozen=True)
class LatentFrame:
    """One generated latent, with the decoder stream of the chunk it belongs to; or,
    with no latent, the silence after a chunk, which decodes to `silence` zeros."""

    latent: torch.Tensor | None  # [1, latent_dim], denormalised for Mimi
    decoder: DecoderState
    starts_chunk: bool
    silence: int = 0


@dataclass
class PartlyDecoded:
    """A Mimi call stopped before its last layers (`Synthesizer.start_decoding`)."""

    frames: list[LatentFrame]
    # Streams decoded together: their runs (indices into `frames`), their batch, and
    # the activations before the last `tail_layers` layers, in pieces.
    groups: list[tuple[list[list[int]], DecoderState | DecoderBatch, list[torch.Tensor]]]
    tail_layers: int


class Utterance:
    """One text being spoken with one voice.

    Two halves that may run on different threads: `next_latent()` (FlowLM) and
    `decode()` (Mimi); `next_frame()` does both, one frame at a time.
    """

    def __init__(
        self, synthesizer: Synthesizer, voice: VoiceState, chunks: list[TextChunk],
        options: GenerationOptions,
    ):
        model = synthesizer.model
        self._synthesizer = synthesizer
        self._buffers = synthesizer.buffers
        self._model = model
        self._voice = voice
        self._pending = list(reversed(chunks))
        self._progress: _ChunkProgress | None = None
        self._cache: LinearKV | None = None
        self.chunks = chunks
        # One working buffer size for the whole text, so no chunk has to grow it.
        self._capacity = max(
            (voice.num_positions + c.tokens.shape[1] + c.max_frames for c in chunks), default=0
        )
        self.temperature = model.config.default_temperature if options.temperature is None else (
            options.temperature
        )
        self.eos_threshold = (
            model.config.default_eos_threshold
            if options.eos_threshold is None
            else options.eos_threshold
        )
        self.options = options
        self._silence = round(options.sentence_silence * model.sample_rate)
        self._generator = torch.Generator()
        if options.seed is not None:
            self._generator.manual_seed(options.seed)
        else:
            self._generator.seed()

    @property
    def finished(self) -> bool:
        return self._progress is None and not self._pending

    def close(self) -> None:
        """Give the working buffer back; called at the end, or early to abandon the text."""
        self._pending.clear()
        self._progress = None
        if self._cache is not None:
            self._buffers.release(self._cache)
            self._cache = None

    def next_frame(self) -> np.ndarray | None:
        """The next 80 ms of audio (float32 mono in [-1, 1]), or None when the text is spoken."""
        frame = self.next_latent()
        return None if frame is None else self._synthesizer.decode([frame])[0]

    def next_latent(self) -> LatentFrame | None:
        """Run FlowLM for one frame; None when every chunk is done (the buffer is released)."""
        while self._ready() is not None:
            (frame,) = self._synthesizer.advance([self])
            if frame is not None:
                return frame
        return None

    # The per-step interface of `Synthesizer.advance`, which batches many utterances'
    # steps: what the step is, what it reads, and what becomes of its output.

    def next_step(self) -> NextStep | None:
        """What the next step does (starting the next chunk if needed); None: every
        chunk is done (the buffer is released)."""
        progress = self._ready()
        if progress is None:
            return None
        if progress.finished():
            return NextStep(StepKind.PAUSE)
        if progress.text_embeddings is not None:
            return NextStep(StepKind.PROMPT, progress.text_embeddings)
        return NextStep(StepKind.FRAME)

    @property
    def cache(self) -> LinearKV:
        """The working buffer, held from the first chunk's start until `close()`."""
        if self._cache is None:
            raise RuntimeError("the utterance holds no working buffer")
        return self._cache

    def input_latent(self) -> torch.Tensor:
        """The latent the step's transformer pass reads: the chunk's last, or BOS."""
        previous = self._chunk.previous_latent
        return self._model.flow_lm.bos_emb[None] if previous is None else previous

    def continues_after(self, eos_logit: float) -> bool:
        """Close the step's transformer pass (the chunk's text, if it fed it, is in the
        buffer now) and apply the end-of-speech rule to its logit; False: the chunk
        just ended."""
        progress = self._chunk
        progress.text_embeddings = None
        if (
            progress.eos_frame is None
            and progress.frame >= MIN_FRAMES_BEFORE_EOS
            and eos_logit > self.eos_threshold
        ):
            progress.eos_frame = progress.frame
        return not progress.finished()

    def sample_noise(self) -> torch.Tensor:
        """The flow head's noise for the step, from this utterance's own generator: a
        seeded request sounds the same whatever it is batched with."""
        shape = (1, self._model.flow_lm.latent_dim)
        if self.temperature <= 0:
            return torch.zeros(shape)
        std = math.sqrt(self.temperature)
        clamp = self.options.noise_clamp
        if clamp is None:
            return torch.randn(shape, generator=self._generator) * std
        noise = torch.empty(shape)
        return torch.nn.init.trunc_normal_(
            noise, 0.0, std, -clamp, clamp, generator=self._generator
        )

    def emit(self, latent: torch.Tensor) -> LatentFrame:
        """Take the step's sampled latent as the chunk's next frame."""
        progress = self._chunk
        progress.previous_latent = latent
        progress.frame += 1
        flow_lm = self._model.flow_lm
        return LatentFrame(
            latent * flow_lm.emb_std + flow_lm.emb_mean, progress.decoder,
            starts_chunk=progress.frame == 1,
        )

    def emit_pause(self) -> LatentFrame:
        """The silence after the spoken chunk, in place of a step."""
        progress = self._chunk
        progress.paused = True
        return LatentFrame(None, progress.decoder, starts_chunk=False, silence=self._silence)

    def _ready(self) -> _ChunkProgress | None:
        """The chunk to generate the next frame of (starting one if needed); None: all done."""
        while True:
            if self._progress is None:
                if not self._pending:
                    self.close()
                    return None
                self._progress = self._start_chunk(self._pending.pop())
            if not self._progress.finished() or self._pause_due():
                return self._progress
            if self._progress.eos_frame is None:
                _LOGGER.warning(
                    "no end of speech after %d frames: %.40r",
                    self._progress.frame, self._progress.chunk.text,
                )
            self._progress = None

    @property
    def _chunk(self) -> _ChunkProgress:
        """The chunk being generated, which `_ready()` has started."""
        if self._progress is None:
            raise RuntimeError("no chunk is being generated")
        return self._progress

    def _pause_due(self) -> bool:
        """The chunk is spoken but the silence after it has not been emitted yet."""
        return self._silence > 0 and not self._chunk.paused

    def _start_chunk(self, chunk: TextChunk) -> _ChunkProgress:
        if self._cache is None:
            self._cache = self._buffers.acquire(self._capacity)
        self._cache.reset(self._voice.keys, self._voice.values, self._capacity)
        return _ChunkProgress(
            chunk, self._model.mimi.new_decoder_state(),
            text_embeddings=self._model.flow_lm.conditioner(chunk.tokens),
        )


class WorkingBuffers:
    """One model's pool of working buffers: an utterance holds one while it speaks, and
    gives it back for the next utterances when it ends."""

    def __init__(self, model: PocketTTS):
        self._model = model
        self._spares: list[LinearKV] = []
        self._lock = threading.Lock()

    @property
    def spare_bytes(self) -> int:
        """Memory held in working buffers that no utterance is using."""
        with self._lock:
            return sum(cache.keys.nbytes + cache.values.nbytes for cache in self._spares)

    def acquire(self, capacity: int) -> LinearKV:
        """The smallest spare buffer that holds `capacity` positions, else a new one of
        exactly that size: a spare too small would be grown, and buffers would ratchet
        up to the longest text ever spoken."""
        with self._lock:
            fitting = [cache for cache in self._spares if cache.capacity >= capacity]
            if fitting:
                cache = min(fitting, key=lambda cache: cache.capacity)
                self._spares.remove(cache)
                return cache
        return self._model.new_cache(capacity)

    def release(self, cache: LinearKV) -> None:
        """Keep the buffer as a spare; beyond `MAX_SPARE_CACHES`, the largest go."""
        with self._lock:
            self._spares.append(cache)
            self._spares.sort(key=lambda cache: cache.capacity)
            del self._spares[MAX_SPARE_CACHES:]


class Synthesizer:
    """Turns (voice, text) into utterances for one model, which share its working buffers."""

    def __init__(self, model: PocketTTS, decode_steps: int = 1):
        self.model = model
        # Steps of the flow head per frame; the released models are distilled for one.
        self.decode_steps = decode_steps
        self.buffers = WorkingBuffers(model)
        self._fade = torch.linspace(0, 1, int(model.sample_rate * FADE_IN_SECONDS))

    @torch.inference_mode()
    def advance(
        self, utterances: Sequence[Utterance], prompt_threads: int | None = None
    ) -> list[LatentFrame | None]:
        """One FlowLM step for each utterance, batched: the weights are read once for all.

        A chunk's first step also feeds its text, so those steps run first, in a pass
        of their own (all such chunks' texts together), with `prompt_threads` intra-op
        threads if given: it is compute-bound (a dozen rows or more a text through
        every weight) and it is what a listener waits for first. Returns a frame per
        utterance, or None where a chunk ended (or the utterance is finished).

        If the transformer raises, or makes a value that is not finite (a corrupt
        voice state), this raises EngineError or the error and leaves every
        utterance as it was: a caller can step each one alone to find the culprit.
        """
        planned = [(u, step) for u in utterances if (step := u.next_step()) is not None]
        # A spoken chunk whose silence is due gets it after the step: a failed step
        # leaves every utterance as it was.
        pausing = [u for u, step in planned if step.kind is StepKind.PAUSE]
        prompted = [(u, step) for u, step in planned if step.kind is StepKind.PROMPT]
        batched = [(u, step) for u, step in planned if step.kind is StepKind.FRAME]
        groups = [group for group in (prompted, batched) if group]
        lengths = [(u.cache, u.cache.length) for group in groups for u, _ in group]
        try:
            outputs = [
                self._transformer_step(group, prompt_threads if group is prompted else None)
                for group in groups
            ]
        except BaseException:
            for cache, length in lengths:  # what the step wrote past them is overwritten
                cache.length = length
            raise
        frames = {id(u): u.emit_pause() for u in pausing}
        for group, z in zip(groups, outputs, strict=True):
            frames.update(self._sample([u for u, _ in group], z))
        return [frames.get(id(u)) for u in utterances]

    def _transformer_step(
        self, group: list[tuple[Utterance, NextStep]], prompt_threads: int | None
    ) -> torch.Tensor:
        """The transformer's pass for `group` (feeding the texts of those that start a
        chunk); changes nothing but their caches."""
        # A group's chunks all start (each has its text) or none does.
        prefixes = [step.text for _, step in group if step.text is not None] or None
        with intra_op_threads(prompt_threads if prefixes else None):
            previous = torch.cat([u.input_latent() for u, _ in group])
            z = self.model.flow_lm.step(previous, [u.cache for u, _ in group], prefixes)
        if not torch.isfinite(z).all():
            raise EngineError(INVALID_AUDIO)
        return z

    def _sample(self, group: list[Utterance], z: torch.Tensor) -> dict[int, LatentFrame]:
        """End the chunks whose speech ended, and sample the others' next latents."""
        flow_lm = self.model.flow_lm
        eos_logits = flow_lm.eos_logit(z).tolist()
        rows = [i for i, u in enumerate(group) if u.continues_after(eos_logits[i])]
        if not rows:
            return {}
        noise = torch.cat([group[i].sample_noise() for i in rows])
        latents = flow_lm.sample(z[rows], noise, self.decode_steps)
        return {
            id(group[i]): group[i].emit(latent)
            for latent, i in zip(torch.split(latents, 1), rows, strict=True)
        }

    def decode(self, frames: Sequence[LatentFrame]) -> list[np.ndarray]:
        """Mimi-decode frames of any utterances (each one's in order); audio per frame.

        All frames of one chunk go in one call (several frames at once cost less per
        frame, so a decoder that fell behind catches up), and chunks with as many
        frames each are decoded together as one batch (concurrent requests). Either
        way each stream's audio is what decoding it alone would give.
        """
        return self.finish_decoding(self.start_decoding(frames))

    @torch.inference_mode()
    def start_decoding(self, frames: Sequence[LatentFrame], tail_layers: int = 0) -> PartlyDecoded:
        """`decode` up to Mimi's last `tail_layers` layers; `finish_decoding` runs them.

        The two may run on different threads, one call's finish beside the next one's
        start, as long as the calls of a stream are finished in order.
        """
        runs: dict[int, list[int]] = {}  # per decoder stream: indices into `frames`
        for index, frame in enumerate(frames):
            if frame.latent is not None:  # silence needs no decoding
                runs.setdefault(id(frame.decoder), []).append(index)
        same_length: dict[int, list[list[int]]] = {}
        for run in runs.values():
            same_length.setdefault(len(run), []).append(run)
        groups = []
        for group in same_length.values():
            latents = torch.stack([
                torch.cat([latent for i in run if (latent := frames[i].latent) is not None])
                for run in group
            ])
            states = [frames[run[0]].decoder for run in group]
            streams = states[0] if len(states) == 1 else DecoderBatch(states)
            groups.append(
                (group, streams, self.model.mimi.decode_head(latents, streams, tail_layers))
            )
        return PartlyDecoded(list(frames), groups, tail_layers)

    @torch.inference_mode()
    def finish_decoding(self, part: PartlyDecoded) -> list[np.ndarray]:
        """The rest of `start_decoding`'s call: audio per frame."""
        frames = part.frames
        audio = [np.zeros(frame.silence, dtype=np.float32) for frame in frames]
        for group, streams, pieces in part.groups:
            decoded = self.model.mimi.decode_tail(pieces, streams, part.tail_layers)
            for run, samples in zip(group, decoded[:, 0], strict=True):
                if frames[run[0]].starts_chunk:
                    samples[: self._fade.numel()] *= self._fade
                for index, piece in zip(run, samples.numpy().reshape(len(run), -1), strict=True):
                    audio[index] = piece
        return audio

    def chunks(self, text: str, options: GenerationOptions = DEFAULT_OPTIONS) -> list[TextChunk]:
        """Split and prepare a text the way the model was trained to read it."""
        model = self.model
        requested = options.frames_after_eos
        if requested is None:
            requested = model.config.model_recommended_frames_after_eos
        chunks = []
        # A pause after each sentence needs each sentence in a chunk of its own.
        pieces = split_into_chunks(
            model.tokenizer, text, model.text_rules, options.max_tokens_per_chunk,
            pack=options.sentence_silence == 0,
        )
        for piece in pieces:
            prepared = prepare_text(piece, model.text_rules)
            tokens = torch.tensor([model.tokenizer.encode(prepared.text)], dtype=torch.long)
            max_frames = max_frames_for(tokens.shape[1], model.frame_rate)
            if options.max_frames_per_chunk:  # None or 0: no limit of the caller's
                max_frames = min(max_frames, options.max_frames_per_chunk)
            chunks.append(TextChunk(
                text=prepared.text,
                tokens=tokens,
                frames_after_eos=frames_after_eos_for(prepared, requested),
                max_frames=max_frames,
            ))
        return chunks

    def start(
        self, voice: VoiceState, text: str, options: GenerationOptions = DEFAULT_OPTIONS
    ) -> Utterance:
        """Prepare an utterance; no model code runs until its first `next_frame()`."""
        transformer = self.model.config.flow_lm.transformer
        if (voice.num_layers, voice.keys.shape[1], voice.keys.shape[3]) != (
            transformer.num_layers, transformer.kv_heads, transformer.head_dim
        ):
            raise VoiceError("this voice was made for another model")
        return Utterance(self, voice, self.chunks(text, options), options)

    def stream(
        self, voice: VoiceState, text: str, options: GenerationOptions = DEFAULT_OPTIONS,
        cancel: threading.Event | None = None,
    ) -> Iterator[np.ndarray]:
        """Yield audio frames as they are decoded; stops early once `cancel` is set."""
        utterance = self.start(voice, text, options)
        try:
            while cancel is None or not cancel.is_set():
                frame = utterance.next_frame()
                if frame is None:
                    return
                yield frame
        finally:
            utterance.close()
