"""Convert a unigram SentencePiece model into an equivalent HuggingFace `tokenizer.json`.

Kyutai ships its tokenizers as `tokenizer.json` files converted from SentencePiece
models, so tests need such a file holding the same vocabulary as the model that
`tests/support/spm.py` trains. The conversion reproduces SentencePiece's encoder:

- the model's own precompiled normalisation table (nmt_nfkc), then SentencePiece's
  whitespace cleanup (trim both ends, collapse runs of spaces);
- a `Metaspace` pre-tokenizer that marks word starts with "▁" and adds the dummy prefix;
- a unigram model with the same pieces and scores, except that user-defined symbols
  get the score SentencePiece's lattice gives them (`length * max_score - 0.1`, where
  max_score starts at FLT_MIN and so is FLT_MIN for log-probabilities) so that "..."
  beats three "." exactly as it does there.

The decoder renders unknown pieces as " ⁇ " like SentencePiece does, so decoded text
matches as well as ids. One difference remains: SentencePiece adds path scores in
float32 and `tokenizers` in float64, so where two segmentations score (nearly) the
same, such as "ccc" as "cc c" or "c cc", the two may pick different ones; ordinary
text is not affected. Reading the model needs its protobuf fields; the format is
small enough to read with a few lines of wire-format parsing instead of a protobuf
dependency.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from tests.support.spm import build_sentencepiece_model

_FLT_MIN = struct.unpack("<f", struct.pack("<I", 0x00800000))[0]

# SentencePiece's piece types (sentencepiece_model.proto).
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4

# SentencePiece never matches control pieces or "<unk>" against text; a unigram model
# matches every piece it holds, so those get a score no segmentation would choose.
# (Finite and moderate, so that path scores keep their precision: every segmentation
# of a text holds the same unknown characters, so the unknown score is a constant.)
_NEVER_CHOSEN = -1000.0


def _varint(buffer: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buffer[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _fields(buffer: bytes) -> Iterator[tuple[int, int | bytes]]:
    """Yield (field number, value) for each field of one protobuf message."""
    position = 0
    while position < len(buffer):
        key, position = _varint(buffer, position)
        number, wire_type = key >> 3, key & 7
        value: int | bytes
        if wire_type == 0:
            value, position = _varint(buffer, position)
        elif wire_type == 1:
            value, position = buffer[position : position + 8], position + 8
        elif wire_type == 2:
            length, position = _varint(buffer, position)
            value, position = buffer[position : position + length], position + length
        elif wire_type == 5:
            value, position = buffer[position : position + 4], position + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
        yield number, value


def _read_model(path: Path) -> tuple[list[tuple[str, float, int]], bytes]:
    """The (piece, score, type) list and the precompiled normalisation table of a `.model`."""
    pieces: list[tuple[str, float, int]] = []
    charsmap = b""
    # Messages and strings come length-delimited (bytes), enums as varints (int).
    for number, value in _fields(path.read_bytes()):
        if number == 1:  # ModelProto.pieces
            assert isinstance(value, bytes)
            piece, score, kind = "", 0.0, _NORMAL
            for field, item in _fields(value):
                if field == 1:
                    assert isinstance(item, bytes)
                    piece = item.decode("utf-8")
                elif field == 2:
                    assert isinstance(item, bytes)
                    score = struct.unpack("<f", item)[0]
                elif field == 3:
                    assert isinstance(item, int)
                    kind = item
            pieces.append((piece, score, kind))
        elif number == 3:  # ModelProto.normalizer_spec
            assert isinstance(value, bytes)
            for field, item in _fields(value):
                if field == 2:  # NormalizerSpec.precompiled_charsmap
                    assert isinstance(item, bytes)
                    charsmap = item
    return pieces, charsmap


def _unigram_score(piece: str, score: float, kind: int, max_score: float) -> float:
    if kind == _USER_DEFINED:
        return len(piece) * max_score - 0.1
    if kind in (_UNKNOWN, _CONTROL):
        return _NEVER_CHOSEN
    return score


def convert_sentencepiece_to_json(model_path: Path, json_path: Path) -> Path:
    """Write (once) a `tokenizer.json` equivalent to the unigram model at `model_path`."""
    if json_path.exists():
        return json_path
    pieces, charsmap = _read_model(model_path)
    max_score = max([_FLT_MIN] + [score for _, score, kind in pieces if kind == _NORMAL])
    vocab = [
        (piece, _unigram_score(piece, score, kind, max_score)) for piece, score, kind in pieces
    ]
    unk_id = next(index for index, (_, _, kind) in enumerate(pieces) if kind == _UNKNOWN)
    unk_piece = pieces[unk_id][0]

    tokenizer = Tokenizer(models.Unigram(vocab, unk_id, False))
    tokenizer.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(charsmap),
            normalizers.Replace(Regex("^ +| +$"), ""),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Sequence(
        [
            decoders.Replace(unk_piece, " \u2047 "),
            decoders.Metaspace(replacement="▁", prepend_scheme="always"),
        ]
    )
    json_path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(json_path))
    return json_path


def build_test_tokenizers(directory: Path) -> tuple[Path, Path]:
    """The 4000-piece test SentencePiece model and its tokenizer.json twin (built once)."""
    model_path = build_sentencepiece_model(directory)
    return model_path, convert_sentencepiece_to_json(model_path, model_path.with_suffix(".json"))
