"""From the text a user sends to the chunks the model speaks one at a time.

Pocket TTS was trained on single sentences that start with a capital and end with
a full stop, so a text is first tidied into that shape (`prepare_text`), then cut
into chunks of at most about 50 tokens at sentence ends (`split_into_chunks`),
and each chunk is tidied again (`prepare_text`) before it is spoken.
Every step reproduces the reference implementation's output exactly, quirks
included, because a model was trained and evaluated on text prepared that way.

The module also holds the two per-chunk numbers the generation loop needs: how
many frames to keep generating after the end-of-speech signal, and a cap on the
number of frames for a chunk of a given length.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from wyoming_pocket_tts.engine.errors import ConfigError, TextError
from wyoming_pocket_tts.engine.model.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

MAX_TOKENS_PER_CHUNK = 50

_SENTENCE_END = ".!?\u2026"
# Marks that end a clause but not a sentence: a text ending in one gets a full stop instead.
_CLAUSE_END = ",;:-\u2013\u2014"
# Closing quotes and brackets that may follow a sentence's final mark.
_CLOSERS = "\"'\u201d\u2019)]\u00bb"
# Removing quotes turns '"Hi?", she said' into 'Hi?, she said': a sentence end followed by
# a clause mark, which the model reads badly. The clause mark goes, the sentence end stays.
_CLAUSE_MARK_AFTER_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s*[,;:]")
# Half of a UTF-16 surrogate pair can reach us in JSON-decoded text; it has no UTF-8 form
# and both tokenizer libraries reject it, so it becomes the replacement character.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# The model under-performs on very short inputs; padding with spaces lengthens them.
_SHORT_INPUT_WORDS = 5
_SHORT_INPUT_PADDING = " " * 8

# Texts of at most this many words get more frames after the end-of-speech signal:
# a short utterance is more often cut off early.
_FEW_WORDS = 4
_FRAMES_AFTER_EOS_FEW_WORDS = 3
_FRAMES_AFTER_EOS_MORE_WORDS = 1
_FRAMES_AFTER_EOS_MARGIN = 2

# Generous estimate of speaking speed used only to cap a chunk's generation length.
_TOKENS_PER_SECOND = 3.0
_SECONDS_OF_SLACK = 2.0

# The tokens that separate chunks are found by encoding these marks. SentencePiece puts a
# word-start marker before any text, so the first id of each encoding is not a mark.
_SENTENCE_MARKS = ".!...?"
_CLAUSE_MARKS = ",;:"


@dataclass(frozen=True)
class TextRules:
    """How a model wants its text prepared; each model's configuration sets these.

    `replace_characters` maps single characters to replacements ("" deletes): for
    characters the model's training text never contained, whose embeddings are
    untrained.
    """

    replace_characters: Mapping[str, str] = field(default_factory=dict)
    remove_semicolons: bool = False
    capitalize_first_letter: bool = True
    append_terminal_punctuation: bool = True
    pad_with_spaces_for_short_inputs: bool = False
    _translation: Mapping[int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        long_keys = [key for key in self.replace_characters if len(key) != 1]
        if long_keys:
            raise ConfigError(
                f"replace_characters keys must be single characters, got {long_keys!r}"
            )
        # Frozen means frozen: a caller's later change to its dict must not leak in.
        frozen = MappingProxyType(dict(self.replace_characters))
        object.__setattr__(self, "replace_characters", frozen)
        object.__setattr__(self, "_translation", str.maketrans(dict(frozen)))

    def replace_in(self, text: str) -> str:
        """Apply the replacements; whitespace runs, newlines included, become one space."""
        text = " ".join(text.translate(self._translation).split())
        return _CLAUSE_MARK_AFTER_SENTENCE_END.sub("", text)


@dataclass(frozen=True)
class PreparedText:
    """A text ready for the tokenizer, with the reference's guess of how many frames to
    generate after the end-of-speech signal (before the safety margin)."""

    text: str
    frames_after_eos_guess: int


def _end_as_sentence(text: str) -> str:
    """Make the text end with a sentence mark, before any closing quotes or brackets.

    A clause mark at the end becomes a full stop. Otherwise the full stop goes after the
    closers: the chunker only recognises a sentence end by its own token, and a quote left
    after it would become a chunk of its own.
    """
    body = text.rstrip(_CLOSERS + " ")
    if not body or body[-1] in _SENTENCE_END:
        return text
    if body[-1] in _CLAUSE_END:
        closers = text[len(body) :].strip()
        return body.rstrip(_CLAUSE_END + " ") + "." + closers
    return text + "."


def prepare_text(text: str, rules: TextRules) -> PreparedText:
    """Tidy a text into the shape the model was trained on. Raises `TextError` if empty."""
    stripped = _LONE_SURROGATE.sub("\ufffd", text).strip()
    if not stripped:
        raise TextError("the text is empty: there is nothing to speak")
    text = rules.replace_in(stripped) if rules.replace_characters else stripped
    if not text:
        raise TextError(
            f"nothing is left to speak of {stripped[:40]!r} once the model's character "
            "replacements are applied"
        )
    # A single pass, as in the reference: a blank line becomes one space, longer runs of
    # spaces stay (the tokenizer collapses them anyway).
    text = text.replace("\n", " ").replace("\r", " ").replace("  ", " ")
    if rules.remove_semicolons:
        text = text.replace(";", ",")
    few_words = len(text.split()) <= _FEW_WORDS
    guess = _FRAMES_AFTER_EOS_FEW_WORDS if few_words else _FRAMES_AFTER_EOS_MORE_WORDS
    if rules.capitalize_first_letter and not text[0].isupper():
        text = text[0].upper() + text[1:]
    if rules.append_terminal_punctuation:
        text = _end_as_sentence(text)
    if rules.pad_with_spaces_for_short_inputs and len(text.split()) < _SHORT_INPUT_WORDS:
        text = _SHORT_INPUT_PADDING + text
    return PreparedText(text=text, frames_after_eos_guess=guess)


def _mark_ids(tokenizer: Tokenizer, marks: str) -> frozenset[int]:
    return frozenset(tokenizer.encode(marks)[1:])


class _DecodedText:
    """Characters of the decoded text around a token position, without decoding it all.

    The decimal-point rule asks about the last two characters of the decoded prefix and
    the first character of the decoded rest; decoding whole prefixes at every sentence
    end would make chunking quadratic in the text's length. Decoding is local (each
    piece renders on its own; only the very first loses its leading space), so a short
    window gives the same characters, unless it is too short or cuts a multi-byte
    character (seen as U+FFFD); then the window doubles, up to the whole text.
    """

    _FIRST_WINDOW = 8

    def __init__(self, tokenizer: Tokenizer, ids: Sequence[int]) -> None:
        self._tokenizer = tokenizer
        self._ids = ids

    def last_chars_before(self, position: int, count: int) -> str:
        width = self._FIRST_WINDOW
        while True:
            start = max(0, position - width)
            text = self._tokenizer.decode(self._ids[start:position])
            tail = text[-count:]
            if start == 0 or (len(tail) == count and "\ufffd" not in tail):
                return tail
            width *= 2

    def first_char_from(self, position: int) -> str:
        width = self._FIRST_WINDOW
        while True:
            end = min(len(self._ids), position + width)
            text = self._tokenizer.decode(self._ids[position:end])
            if end == len(self._ids) or (text and text[0] != "\ufffd"):
                return text[:1]
            width *= 2


def _is_decimal_point(decoded: _DecodedText, position: int) -> bool:
    """True if the cut before `position` would fall just after the point of a number ("3.|14")."""
    before = decoded.last_chars_before(position, 2)
    after = decoded.first_char_from(position)
    return len(before) == 2 and before[1] == "." and before[0].isdigit() and after.isdigit()


def _segments(
    tokenizer: Tokenizer,
    ids: Sequence[int],
    marks: frozenset[int],
    skip_decimal_points: bool,
) -> list[tuple[int, str]]:
    """Cut after each run of mark tokens; return (token count, decoded text) per piece."""
    decoded = _DecodedText(tokenizer, ids)
    cuts = [
        position
        for position in range(1, len(ids))
        if ids[position] not in marks
        and ids[position - 1] in marks
        and not (skip_decimal_points and _is_decimal_point(decoded, position))
    ]
    bounds = [0, *cuts, len(ids)]
    return [
        (end - start, tokenizer.decode(ids[start:end])) for start, end in itertools.pairwise(bounds)
    ]


def _sentences(tokenizer: Tokenizer, text: str, max_tokens: int) -> list[tuple[int, str]]:
    """Sentences with their token counts; a sentence longer than `max_tokens` is cut
    further at commas, semicolons and colons when it has any."""
    sentence_marks = _mark_ids(tokenizer, _SENTENCE_MARKS)
    clause_marks = _mark_ids(tokenizer, _CLAUSE_MARKS)
    pieces: list[tuple[int, str]] = []
    for count, sentence in _segments(tokenizer, tokenizer.encode(text), sentence_marks, True):
        clauses = []
        if count > max_tokens:
            clause_ids = tokenizer.encode(sentence.strip())
            clauses = _segments(tokenizer, clause_ids, clause_marks, False)
        pieces.extend(clauses if len(clauses) > 1 else [(count, sentence)])
    return pieces


def split_into_chunks(
    tokenizer: Tokenizer, text: str, rules: TextRules, max_tokens: int = MAX_TOKENS_PER_CHUNK,
    pack: bool = True,
) -> list[str]:
    """Prepare `text` and cut it into chunks of at most `max_tokens` tokens where possible.

    Sentences (and clauses of over-long sentences) are packed greedily, in order, while
    their token counts fit; with `pack=False` each is a chunk of its own. A single sentence
    longer than `max_tokens` with no comma, semicolon or colon stays whole (logged as a
    warning). The chunks are not yet prepared for speaking: the reference passes each
    through `prepare_text` again, and so must we.
    """
    prepared = prepare_text(text, rules).text.strip()
    chunks: list[str] = []
    current, current_count = "", 0
    for count, piece in _sentences(tokenizer, prepared, max_tokens):
        # A piece that decoded to nothing does not open a chunk (nor count toward one).
        if current and pack and current_count + count <= max_tokens:
            current, current_count = current + " " + piece, current_count + count
            continue
        if current:
            chunks.append(current.strip())
        current, current_count = piece, count
    if current:
        chunks.append(current.strip())

    for chunk in chunks:
        count = len(tokenizer.encode(chunk))
        if count > max_tokens:
            logger.warning(
                "Chunk of %d tokens exceeds %d; the model may skip words in %.50r",
                count,
                max_tokens,
                chunk,
            )
    return chunks


def frames_after_eos_for(prepared: PreparedText, requested: int | None) -> int:
    """Frames to generate after the end-of-speech signal: the caller's (or the model
    configuration's) number if given, else the guess plus a safety margin."""
    if requested is None:
        return prepared.frames_after_eos_guess + _FRAMES_AFTER_EOS_MARGIN
    if requested < 0:
        raise ValueError(f"frames after end of speech must be >= 0, got {requested}")
    return requested


def max_frames_for(token_count: int, frame_rate: float = 12.5) -> int:
    """Upper bound on the frames generated for a chunk of `token_count` tokens, in case
    the end-of-speech signal never comes."""
    seconds = token_count / _TOKENS_PER_SECOND + _SECONDS_OF_SLACK
    return math.ceil(seconds * frame_rate)
