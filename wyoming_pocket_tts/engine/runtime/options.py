"""What a request may ask of the engine: a home for it that imports no torch, so that
the server and the studio can carry it before the process has loaded a model."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.text import MAX_TOKENS_PER_CHUNK


@dataclass(frozen=True)
class GenerationOptions:
    """Per-request settings; None means the model configuration's default."""

    temperature: float | None = None
    eos_threshold: float | None = None
    frames_after_eos: int | None = None
    seed: int | None = None
    noise_clamp: float | None = None
    max_tokens_per_chunk: int = MAX_TOKENS_PER_CHUNK
    # Hard cap on frames per text chunk, below the model's own length estimate.
    max_frames_per_chunk: int | None = None
    # Seconds of silence after each sentence, as Piper's --sentence-silence; each sentence
    # is then a chunk of its own, so that a server that streams one sentence per job and
    # one that sends the whole text as one job pause alike.
    sentence_silence: float = 0.0


DEFAULT_OPTIONS = GenerationOptions()
