"""The engine's tokenizers: both file formats, the same ids as the reference, clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pocket_tts.modules.text_conditioner import JsonTokenizer as ReferenceJsonTokenizer
from pocket_tts.modules.text_conditioner import (
    SentencePieceTokenizer as ReferenceSentencePieceTokenizer,
)

from wyoming_pocket_tts.engine.errors import TokenizerError
from wyoming_pocket_tts.engine.model.tokenizer import (
    JsonTokenizer,
    SentencePieceTokenizer,
    load_tokenizer,
)

VOCAB = 4000

TEXTS = [
    "Turn on the kitchen light.",
    "Hello world... How are you?! I'm fine; thanks: really.",
    "Pi is 3.14, it's 7:30 and the year is 2026.",
    "\u201cCurly quotes\u201d, \u2018single\u2019 \u2014 em dash \u2013 en dash \u2026 ellipsis",
    "Emoji \U0001f600 and unknown \u65e5\u672c characters, NUL \x00 and tab\there.",
    "        Padded with spaces.",
    "<s> <unk> </s> look like control pieces",
]


@pytest.fixture(scope="session")
def model_path(tokenizer_files: tuple[Path, Path]) -> Path:
    return tokenizer_files[0]


@pytest.fixture(scope="session")
def json_path(tokenizer_files: tuple[Path, Path]) -> Path:
    return tokenizer_files[1]


def test_kind_is_chosen_by_suffix(model_path: Path, json_path: Path) -> None:
    assert isinstance(load_tokenizer(model_path, None, VOCAB), SentencePieceTokenizer)
    assert isinstance(load_tokenizer(json_path, None, VOCAB), JsonTokenizer)


def test_explicit_kind(model_path: Path, json_path: Path, tmp_path: Path) -> None:
    unsuffixed = tmp_path / "tokenizer"
    unsuffixed.write_bytes(json_path.read_bytes())
    assert isinstance(load_tokenizer(unsuffixed, "tokenizers", VOCAB), JsonTokenizer)
    assert isinstance(load_tokenizer(unsuffixed, "json", VOCAB), JsonTokenizer)
    assert isinstance(load_tokenizer(model_path, "sentencepiece", VOCAB), SentencePieceTokenizer)
    # As in the reference, a .json file is a tokenizer.json even if the kind says otherwise.
    assert isinstance(load_tokenizer(json_path, "sentencepiece", VOCAB), JsonTokenizer)


@pytest.mark.parametrize("text", TEXTS)
def test_same_ids_as_the_reference_and_each_other(
    model_path: Path, json_path: Path, text: str
) -> None:
    ours_sp = load_tokenizer(model_path, None, VOCAB)
    ours_json = load_tokenizer(json_path, None, VOCAB)
    reference_sp = ReferenceSentencePieceTokenizer(VOCAB, str(model_path))
    reference_json = ReferenceJsonTokenizer(VOCAB, str(json_path))

    ids = ours_sp.encode(text)
    assert len(ids) > 1
    assert ids == reference_sp.encode(text)
    assert ours_json.encode(text) == ids
    assert reference_json.encode(text) == ids
    assert ours_sp.decode(ids) == reference_sp.decode(ids)
    assert ours_json.decode(ids) == ours_sp.decode(ids)


@pytest.mark.parametrize("which", [0, 1])
def test_vocab_size_and_round_trip(tokenizer_files: tuple[Path, Path], which: int) -> None:
    tokenizer = load_tokenizer(tokenizer_files[which], None, VOCAB)
    assert tokenizer.vocab_size == VOCAB
    text = "Turn on the kitchen light. It is 7:30."
    assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.parametrize("which", [0, 1])
def test_wrong_vocabulary_size(tokenizer_files: tuple[Path, Path], which: int) -> None:
    path = tokenizer_files[which]
    with pytest.raises(TokenizerError) as caught:
        load_tokenizer(path, None, 8000)
    message = str(caught.value)
    assert str(path) in message and "4000" in message and "8000" in message


@pytest.mark.parametrize("name", ["missing.model", "missing.json"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    with pytest.raises(TokenizerError, match="not found") as caught:
        load_tokenizer(tmp_path / name, None, VOCAB)
    assert name in str(caught.value)


def test_directory_is_not_a_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="not found"):
        load_tokenizer(tmp_path, None, VOCAB)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("garbage.model", b"\x00\x01 this is not a sentencepiece model \xff"),
        ("garbage.json", b"\x00\x01 this is not json \xff"),
        ("wrong_shape.json", b'{"version": "1.0", "model": 42}'),
        ("empty.model", b""),
    ],
)
def test_garbage_file(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TokenizerError, match="cannot read") as caught:
        load_tokenizer(path, None, VOCAB)
    assert str(path) in str(caught.value)


def test_model_file_read_as_json_is_an_error(model_path: Path) -> None:
    with pytest.raises(TokenizerError, match=re.escape("tokenizer.json")):
        load_tokenizer(model_path, "json", VOCAB)


def test_unknown_kind(model_path: Path) -> None:
    with pytest.raises(TokenizerError, match="unknown tokenizer kind 'bpe'"):
        load_tokenizer(model_path, "bpe", VOCAB)
