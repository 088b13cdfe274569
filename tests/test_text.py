"""Text preparation and chunking: exactly the reference's output, on many kinds of text.

The reference (`pocket_tts.models.text_chunking`) is the oracle: every comparison runs
its functions and ours on the same input, with the same tokenizer file, under the
text rules of several of its model configurations.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from pocket_tts.models.text_chunking import prepare_text_prompt, split_into_best_sentences
from pocket_tts.models.tts_model import TTSModel
from pocket_tts.modules.text_conditioner import JsonTokenizer as ReferenceJsonTokenizer
from pocket_tts.modules.text_conditioner import (
    SentencePieceTokenizer as ReferenceSentencePieceTokenizer,
)
from pocket_tts.utils.config import CONFIGS_DIR, load_config

from wyoming_pocket_tts.engine.errors import ConfigError, TextError
from wyoming_pocket_tts.engine.model.text import (
    PreparedText,
    TextRules,
    frames_after_eos_for,
    max_frames_for,
    prepare_text,
    split_into_chunks,
)
from wyoming_pocket_tts.engine.model.tokenizer import Tokenizer, load_tokenizer

VOCAB = 4000

LONG_PARAGRAPH = (
    "The kitchen light has been on since seven in the morning, and nobody remembers "
    "turning it on. It uses about 9.5 watts, which over a year adds up to a small but "
    "real cost; we should automate it. Tomorrow at 7:30 the heating starts, then the "
    "blinds open: first the living room, then the bedroom, and finally the office. "
    "Does that sound right?! If not... tell me."
)
LONG_SENTENCE_WITH_COMMAS = (
    "first the hallway lamp, then the porch light, then the garden spotlights near the "
    "fence, then the garage door opener, then the basement fan, then the attic heater, "
    "then every remaining light in the whole house including the small ones"
)
LONG_SENTENCE_WITHOUT_PUNCTUATION = " ".join(["and then the light goes on"] * 12)

TEXTS = [
    "turn on the kitchen light",
    "what time is it",
    "Hello.",
    "  hi  ",
    "a",
    "Hello world. How are you? I am fine! Well... maybe.",
    "Pi is 3.14 and e is 2.718. The end",
    "Version 2.0. Released in 2026. Done",
    "It costs 3. 5 people came.",
    "Wake me at 7:30; then at 8:15: ok",
    "Numbers 1 2 3 4 5 6 7 8 9 10 and 1,000,000 and 42.",
    '"Hi?", she said. "Bye!" he answered',
    'He said "hello"',
    "\u201cWhat?\u201d, she asked \u2014 and left \u2026",
    "It\u2019s fine, isn\u2019t it \u2018really\u2019",
    "(a parenthetical remark)",
    "[bracketed] \u00abguillemets\u00bb end",
    "Ends with a comma,",
    "Ends with a dash -",
    "Ends with an em dash \u2014",
    "Ends with an en dash \u2013",
    "Ends with a colon:",
    "Question?!",
    "Really?! Yes!! No...",
    "...leading ellipsis",
    "line one\nline two\n\nline three\r\n\r\nline four\n\n\n\nfive",
    "semi; colons; everywhere;",
    "tab\tseparated\ttext",
    "x\u00a0non-breaking\u2009thin\u3000ideographic spaces",
    "\U0001f600 emoji first",
    "only emoji \U0001f600\U0001f389",
    "\U0001f600",
    "\u00e9t\u00e9 \u00e0 Paris, \u00e7a va? Tr\u00e8s bien.",
    "stra\u00dfe \u00fcber alles",
    "\u00df starts with sharp s",
    "\u01c5 titlecase first letter",
    "\x00nul and \x7f control characters",
    "'single quoted'",
    'x ) "',
    LONG_PARAGRAPH,
    LONG_SENTENCE_WITH_COMMAS,
    LONG_SENTENCE_WITHOUT_PUNCTUATION,
]


def _reference_rules(config_name: str) -> TextRules:
    config = load_config(CONFIGS_DIR / f"{config_name}.yaml")
    return TextRules(
        replace_characters=config.replace_characters,
        remove_semicolons=config.remove_semicolons,
        capitalize_first_letter=config.capitalize_first_letter,
        append_terminal_punctuation=config.append_terminal_punctuation,
        pad_with_spaces_for_short_inputs=config.pad_with_spaces_for_short_inputs,
    )


RULES = {
    "english": _reference_rules("english"),
    "french": _reference_rules("french"),
    "german": _reference_rules("german"),
    "english_2026-01": _reference_rules("english_2026-01"),  # pads short inputs
    "bare": TextRules(capitalize_first_letter=False, append_terminal_punctuation=False),
}


def _reference_options(rules: TextRules) -> dict:
    return {
        "pad_with_spaces_for_short_inputs": rules.pad_with_spaces_for_short_inputs,
        "remove_semicolons": rules.remove_semicolons,
        "append_terminal_punctuation": rules.append_terminal_punctuation,
        "capitalize_first_letter": rules.capitalize_first_letter,
        "replace_characters": dict(rules.replace_characters),
    }


def reference_prepare(text: str, rules: TextRules) -> PreparedText:
    prepared, guess = prepare_text_prompt(text, **_reference_options(rules))
    return PreparedText(text=prepared, frames_after_eos_guess=guess)


def reference_chunks(tokenizer, text: str, rules: TextRules, max_tokens: int) -> list[str]:
    return split_into_best_sentences(tokenizer, text, max_tokens, **_reference_options(rules))


def _prepared_chunks(tokenizer: Tokenizer, text: str, rules: TextRules) -> list[PreparedText]:
    """What the generation loop speaks: each chunk prepared again, as the reference does."""
    return [prepare_text(chunk, rules) for chunk in split_into_chunks(tokenizer, text, rules)]


def long_text(n_chars: int, seed: int, words: list[str], max_words: int = 30) -> str:
    """Deterministic prose of sentences and clauses with every kind of boundary mark."""
    rng = random.Random(seed)
    ends = [".", ".", ".", "?", "!", "...", "?!"]
    parts: list[str] = []
    length = 0
    while length < n_chars:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(2, max_words)))
        if rng.random() < 0.5:
            sentence += rng.choice([",", ";", ":"]) + " " + rng.choice(words)
        parts.append(sentence + rng.choice(ends))
        length += len(parts[-1]) + 1
    return " ".join(parts)[:n_chars]


PLAIN_PROSE = (
    "the kitchen light is on and we will turn it off at 7:30 because pi is about 3.14 "
    "while the year 2026 has 365 days so please open the blinds in the living room now"
)
PLAIN_WORDS = PLAIN_PROSE.split()
MIXED_WORDS = [
    *PLAIN_WORDS,
    "\u201cquoted\u201d",
    "it\u2019s",
    "\u2014",
    "(aside)",
    "\u00e9t\u00e9",
    "\U0001f600",
    "2.5",
]


@pytest.fixture(scope="session")
def tokenizer_pairs(tokenizer_files: tuple[Path, Path]) -> dict[str, tuple[Tokenizer, object]]:
    """Ours and the reference's tokenizer on the same file, per format."""
    model_path, json_path = tokenizer_files
    return {
        "sentencepiece": (
            load_tokenizer(model_path, None, VOCAB),
            ReferenceSentencePieceTokenizer(VOCAB, str(model_path)),
        ),
        "json": (
            load_tokenizer(json_path, None, VOCAB),
            ReferenceJsonTokenizer(VOCAB, str(json_path)),
        ),
    }


@pytest.mark.parametrize("rules_name", RULES)
def test_prepare_text_matches_reference(rules_name: str) -> None:
    rules = RULES[rules_name]
    mismatches = [
        (text, ours, expected)
        for text in TEXTS
        if (ours := prepare_text(text, rules)) != (expected := reference_prepare(text, rules))
    ]
    assert mismatches == []


@pytest.mark.parametrize("max_tokens", [50, 10])
@pytest.mark.parametrize("kind", ["sentencepiece", "json"])
@pytest.mark.parametrize("rules_name", RULES)
def test_split_matches_reference(
    tokenizer_pairs, rules_name: str, kind: str, max_tokens: int
) -> None:
    ours, reference = tokenizer_pairs[kind]
    rules = RULES[rules_name]
    mismatches = []
    for text in TEXTS:
        chunks = split_into_chunks(ours, text, rules, max_tokens)
        expected = reference_chunks(reference, text, rules, max_tokens)
        if chunks != expected:
            mismatches.append((text, chunks, expected))
    assert mismatches == []


@pytest.mark.parametrize("kind", ["sentencepiece", "json"])
@pytest.mark.parametrize("rules_name", RULES)
def test_prepared_chunks_match_reference_generation(
    tokenizer_pairs, rules_name: str, kind: str
) -> None:
    """The reference prepares each chunk again before generating it; so must we."""
    ours, reference = tokenizer_pairs[kind]
    rules = RULES[rules_name]
    for text in TEXTS:
        expected = [
            reference_prepare(chunk, rules)
            for chunk in reference_chunks(reference, text, rules, 50)
        ]
        assert _prepared_chunks(ours, text, rules) == expected, text


@pytest.mark.parametrize("rules_name", RULES)
def test_both_tokenizers_give_the_same_ids(tokenizer_pairs, rules_name: str) -> None:
    sentencepiece, _ = tokenizer_pairs["sentencepiece"]
    json, _ = tokenizer_pairs["json"]
    rules = RULES[rules_name]
    for text in TEXTS:
        for piece in [
            text,
            *(chunk.text for chunk in _prepared_chunks(sentencepiece, text, rules)),
        ]:
            ids = sentencepiece.encode(piece)
            assert json.encode(piece) == ids, piece
            assert json.decode(ids) == sentencepiece.decode(ids), piece


@pytest.mark.parametrize("rules_name", ["english", "french"])
def test_twenty_thousand_characters_match_reference(tokenizer_pairs, rules_name: str) -> None:
    text = long_text(20_000, seed=1, words=MIXED_WORDS)
    assert len(text) == 20_000
    rules = RULES[rules_name]
    ours, reference = tokenizer_pairs["sentencepiece"]
    chunks = split_into_chunks(ours, text, rules)
    assert len(chunks) > 100
    assert chunks == reference_chunks(reference, text, rules, 50)
    # The reference is slow on such a text with tokenizers' decoding; both formats agree.
    json, _ = tokenizer_pairs["json"]
    assert split_into_chunks(json, text, rules) == chunks


def test_long_text_keeps_every_character_in_chunks_of_at_most_50_tokens(tokenizer_pairs) -> None:
    ours, _ = tokenizer_pairs["sentencepiece"]
    rules = RULES["english"]
    text = long_text(20_000, seed=2, words=PLAIN_WORDS, max_words=10)
    chunks = split_into_chunks(ours, text, rules)
    # Spacing may change ("7:30" cut at its colon is rejoined as "7: 30"), nothing else.
    assert "".join("".join(chunks).split()) == "".join(prepare_text(text, rules).text.split())
    assert max(len(ours.encode(chunk)) for chunk in chunks) <= 50


class _CountingDecodes(ReferenceSentencePieceTokenizer):
    """Counts the token ids decoded: chunking should decode each id a few times, not
    once per sentence boundary as the reference does."""

    decoded_ids = 0

    def decode(self, tokens: list[int]) -> str:
        self.decoded_ids += len(tokens)
        return super().decode(tokens)


def test_chunking_work_is_linear_in_text_length(tokenizer_files: tuple[Path, Path]) -> None:
    rules = RULES["english"]
    text = long_text(20_000, seed=3, words=PLAIN_WORDS)
    ours = _CountingDecodes(VOCAB, str(tokenizer_files[0]))
    token_count = len(ours.encode(prepare_text(text, rules).text))
    split_into_chunks(ours, text, rules)
    assert ours.decoded_ids < 10 * token_count
    reference = _CountingDecodes(VOCAB, str(tokenizer_files[0]))
    reference_chunks(reference, text, rules, 50)
    assert reference.decoded_ids > 10 * token_count  # the bound above tells the two apart


class _ByteTokenizer:
    """UTF-8 bytes as tokens plus a silent token ("~") that decodes to nothing.

    With it a short decoding window can hold fewer than two characters or cut a
    multi-byte digit ("٣", "²") in half: the cases where the chunker must widen its
    window to see what decoding the whole text would show.
    """

    SILENT = 256
    vocab_size = 257

    def encode(self, text: str) -> list[int]:
        return [self.SILENT if byte == ord("~") else byte for byte in text.encode()]

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(i for i in ids if i != self.SILENT).decode("utf-8", "replace")

    def __call__(self, text: str) -> torch.Tensor:  # the reference's tokenizer interface
        return torch.tensor([self.encode(text)])


@pytest.mark.parametrize(
    "text",
    [
        "Pay 3" + "~" * 20 + "." + "~" * 20 + "5 now. Then more words here.",
        "Pay 3." + "~" * 7 + "\u0663 now. Then more words here.",
        "Pay \u0663." + "~" * 30 + "\u00b2 now. Then more words here.",
        "A word" + "~" * 12 + ". Next sentence" + "~" * 9 + "! Last one.",
        "~" * 40 + "1." + "~" * 40 + "2. 3. 4.",
    ],
)
def test_split_widens_its_decoding_window_like_a_full_decode(text: str) -> None:
    tokenizer = _ByteTokenizer()
    rules = RULES["english"]
    assert split_into_chunks(tokenizer, text, rules, 8) == reference_chunks(
        tokenizer, text, rules, 8
    )


def test_decimal_point_is_not_a_sentence_end(tokenizer_pairs) -> None:
    ours, _ = tokenizer_pairs["sentencepiece"]
    chunks = split_into_chunks(ours, "Pi is 3.14 today. E is 2.718 today.", RULES["english"], 5)
    assert chunks == ["Pi is 3.14 today.", "E is 2.718 today."]


def test_oversized_sentence_is_cut_at_commas(tokenizer_pairs) -> None:
    ours, _ = tokenizer_pairs["sentencepiece"]
    chunks = split_into_chunks(ours, LONG_SENTENCE_WITH_COMMAS, RULES["english"], 20)
    assert len(chunks) > 1
    assert all(chunk.endswith((",", ".")) for chunk in chunks)


def test_oversized_sentence_without_commas_stays_whole_with_a_warning(
    tokenizer_pairs, caplog: pytest.LogCaptureFixture
) -> None:
    ours, _ = tokenizer_pairs["sentencepiece"]
    with caplog.at_level(logging.WARNING, logger="wyoming_pocket_tts.engine.model.text"):
        chunks = split_into_chunks(ours, LONG_SENTENCE_WITHOUT_PUNCTUATION, RULES["english"])
    assert len(chunks) == 1 and len(ours.encode(chunks[0])) > 50
    assert "exceeds 50" in caplog.text


@pytest.mark.parametrize("text", ["", "   ", "\n\t \r\n", "\u3000\u00a0"])
def test_empty_text_is_rejected(text: str) -> None:
    with pytest.raises(TextError, match="empty"):
        prepare_text(text, RULES["english"])
    with pytest.raises(ValueError):
        reference_prepare(text, RULES["english"])


def test_text_emptied_by_replacements_is_rejected(tokenizer_pairs) -> None:
    ours, _ = tokenizer_pairs["sentencepiece"]
    text = "\u00ab \u201c\u201d \u00bb ( )"
    with pytest.raises(TextError, match="replacements"):
        split_into_chunks(ours, text, RULES["french"])
    with pytest.raises(ValueError):
        reference_prepare(text, RULES["french"])


def test_lone_surrogate_does_not_crash(tokenizer_pairs) -> None:
    """Half a surrogate pair (possible in JSON) crashes both tokenizer libraries."""
    ours, _ = tokenizer_pairs["json"]
    chunks = split_into_chunks(ours, "bad \ud800 character. Still spoken.", RULES["english"], 5)
    assert chunks[-1] == "Still spoken."
    assert "\ufffd" in prepare_text("bad \udfff", RULES["english"]).text


def test_frames_after_eos_guess_depends_on_word_count() -> None:
    few = prepare_text("turn on the light", RULES["english"])
    many = prepare_text(LONG_PARAGRAPH, RULES["english"])
    assert few.frames_after_eos_guess > many.frames_after_eos_guess
    assert frames_after_eos_for(few, None) == few.frames_after_eos_guess + 2
    assert frames_after_eos_for(many, None) == many.frames_after_eos_guess + 2
    assert frames_after_eos_for(few, 7) == 7
    assert frames_after_eos_for(few, 0) == 0
    with pytest.raises(ValueError, match=">= 0"):
        frames_after_eos_for(few, -1)


@pytest.mark.parametrize("frame_rate", [12.5, 25.0, 7.0])
def test_max_frames_matches_reference(frame_rate: float) -> None:
    model = SimpleNamespace(
        _TOKENS_PER_SECOND_ESTIMATE=TTSModel._TOKENS_PER_SECOND_ESTIMATE,
        _GEN_SECONDS_PADDING=TTSModel._GEN_SECONDS_PADDING,
        config=SimpleNamespace(mimi=SimpleNamespace(frame_rate=frame_rate)),
    )
    for token_count in range(300):
        expected = TTSModel._estimate_max_gen_len(model, token_count)
        assert max_frames_for(token_count, frame_rate) == expected, token_count


def test_rules_reject_multi_character_keys() -> None:
    with pytest.raises(ConfigError, match="single characters"):
        TextRules(replace_characters={"ab": "c"})


def test_rules_do_not_follow_later_changes_to_the_callers_dict() -> None:
    table = {"\u2019": "'"}
    rules = TextRules(replace_characters=table)
    table["x"] = "y"
    assert prepare_text("x\u2019x", rules).text == "X'x."
