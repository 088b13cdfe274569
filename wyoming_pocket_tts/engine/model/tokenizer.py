"""Text to token ids: SentencePiece `.model` files and HuggingFace `tokenizer.json` files.

Pocket TTS models ship either format; a `tokenizer.json` is a conversion of the
SentencePiece model and gives the same ids. The rest of the engine sees only the
`Tokenizer` protocol, and loading checks the vocabulary against the model's
embedding table (`n_bins`) so that a mismatched file fails at start-up with a
readable message instead of as an index error in the middle of a synthesis.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import sentencepiece
import tokenizers

from wyoming_pocket_tts.engine.errors import TokenizerError

SENTENCEPIECE = "sentencepiece"
# Both spellings appear in the reference's configuration files.
TOKENIZERS_JSON = ("tokenizers", "json")


class Tokenizer(Protocol):
    """What the engine needs from a tokenizer: ids for text, and text back for chunking."""

    @property
    def vocab_size(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class SentencePieceTokenizer:
    """A SentencePiece model (`.model` file)."""

    def __init__(self, processor: sentencepiece.SentencePieceProcessor) -> None:
        self._processor = processor

    @property
    def vocab_size(self) -> int:
        return self._processor.vocab_size()

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._processor.encode(text, out_type=int)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self._processor.decode(list(ids))
        return text


class JsonTokenizer:
    """A HuggingFace `tokenizers` pipeline (`tokenizer.json` file)."""

    def __init__(self, tokenizer: tokenizers.Tokenizer) -> None:
        self._tokenizer = tokenizer

    @property
    def vocab_size(self) -> int:
        # Counting added tokens too: they are ids the embedding table must hold.
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(ids))


def _is_json(path: Path, kind: str | None) -> bool:
    """Which format to read. A `.json` file is always a tokenizer.json, whatever `kind`
    says: the reference decides the same way, so its configurations load alike here."""
    if kind is not None and kind != SENTENCEPIECE and kind not in TOKENIZERS_JSON:
        choices = ", ".join((SENTENCEPIECE, *TOKENIZERS_JSON))
        raise TokenizerError(
            f"unknown tokenizer kind {kind!r} for {path} (expected one of {choices})"
        )
    return kind in TOKENIZERS_JSON or path.suffix.lower() == ".json"


def load_tokenizer(path: Path, kind: str | None, n_bins: int) -> Tokenizer:
    """Load the tokenizer at `path` and check it has exactly `n_bins` pieces.

    `kind` is "sentencepiece", "tokenizers" or "json"; None chooses by the suffix.
    Every failure raises `TokenizerError` naming the file.
    """
    path = Path(path)
    as_json = _is_json(path, kind)
    if not path.is_file():
        raise TokenizerError(f"tokenizer file not found: {path}")
    try:
        if as_json:
            tokenizer: Tokenizer = JsonTokenizer(tokenizers.Tokenizer.from_file(str(path)))
        else:
            tokenizer = SentencePieceTokenizer(
                sentencepiece.SentencePieceProcessor(model_file=str(path))
            )
    except Exception as error:  # each library has its own error types for a bad file
        format_name = "tokenizer.json" if as_json else "SentencePiece model"
        raise TokenizerError(f"cannot read {path} as a {format_name}: {error}") from error
    if tokenizer.vocab_size != n_bins:
        raise TokenizerError(
            f"tokenizer {path} has a vocabulary of {tokenizer.vocab_size} pieces, "
            f"but the model's text embedding expects {n_bins} (n_bins)"
        )
    return tokenizer
