"""A real 4000-piece SentencePiece model, trained offline for tests.

Kyutai's tokenizers live on a model hub we cannot reach here, so tests train a
model of the same kind and size on text that ships with Python itself (the
standard library's docstrings and comments), plus sentences that make sure
digits and the punctuation the text chunker splits on are pieces of their own.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import sentencepiece

# Lines guaranteeing that the pieces the chunker looks for exist: sentence ends
# (". ! ? ...") and the weaker boundaries (", ; :").
_SEED_LINES = [
    "Hello world. How are you? I am fine! Well... maybe; or not: who knows, really.",
    "The year 2026 had 365 days, and pi is about 3.14 while e is 2.718.",
    "Turn on the kitchen light. Done, the kitchen light is on!",
    "It's 7:30 in the morning; the temperature is 21.5 degrees.",
]


def _corpus_lines(limit: int) -> list[str]:
    """Text lines from the standard library's sources: plenty of varied English."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for source in sorted(stdlib.glob("*.py")):
        for line in source.read_text(encoding="utf-8", errors="ignore").splitlines():
            text = line.strip().lstrip("#").strip()
            if len(text) > 20 and text.isascii():
                lines.append(text)
        if len(lines) >= limit:
            break
    return lines[:limit]


def build_sentencepiece_model(directory: Path, vocab_size: int = 4000) -> Path:
    """Train (once per directory) a unigram SentencePiece model; return its `.model` path."""
    directory.mkdir(parents=True, exist_ok=True)
    prefix = directory / f"tokenizer_{vocab_size}"
    model_path = prefix.with_suffix(".model")
    if model_path.exists():
        return model_path
    corpus = directory / "corpus.txt"
    corpus.write_text("\n".join(_SEED_LINES * 50 + _corpus_lines(60_000)) + "\n", encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        split_digits=True,
        user_defined_symbols=["...", "."],
        num_threads=2,
        minloglevel=2,
    )
    return model_path
