"""What a request asks to be said: texts for the engine, each at a speaking rate, and
silences between them.

This is the one place where a request's text becomes what the model reads: plain
text is normalised as a whole (or passed through untouched when normalising is off);
SSML is parsed into pieces, its say-as read as asked, its breaks made silences and its
`<s>`/`<p>` boundaries separate texts. Rates multiply the voice's own speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .pipeline import normalize as normalize_text
from .say_as import say_as
from .ssml import MAX_RATE, MIN_RATE, Boundary, Pause, Speech, parse_ssml


@dataclass(frozen=True)
class SpokenText:
    """A text for the engine, spoken at `rate` times the voice's pace."""

    text: str
    rate: float = 1.0


@dataclass(frozen=True)
class Silence:
    seconds: float


Piece = SpokenText | Silence


@dataclass(frozen=True)
class SpokenRequest:
    pieces: tuple[Piece, ...]
    warning: str | None = None  # malformed markup or a clamped rate: for one log line

    @property
    def chars(self) -> int:
        return sum(len(piece.text) for piece in self.pieces if isinstance(piece, SpokenText))


@dataclass(frozen=True)
class TextOptions:
    """How a server reads its requests' texts."""

    normalize: bool = True  # numbers, units, dates... in words; off: the text as sent
    speed: float = 1.0  # the voice's pace, which SSML rates multiply

    def for_voice(self, speed: float | None) -> TextOptions:
        """The options for a voice with its own speed (None: the server's), which wins."""
        return self if speed is None else replace(self, speed=speed)


def spoken(text: str, language: str, options: TextOptions, ssml: bool = False) -> SpokenRequest:
    """`text` (plain, or SSML markup if `ssml`) as pieces to speak in `language`."""
    if not ssml:
        said = normalize_text(text, language) if options.normalize else text
        return SpokenRequest((SpokenText(said, options.speed),))
    document = parse_ssml(text)
    pieces: list[Piece] = []
    clamped = False
    for piece in _pieces(document.segments, language, options):
        if isinstance(piece, SpokenText):
            rate = piece.rate * options.speed
            speed = min(MAX_RATE, max(MIN_RATE, rate))
            clamped |= not math.isclose(speed, rate)
            piece = SpokenText(piece.text, speed)
        pieces.append(piece)
    warning = document.warning
    if clamped and not document.rate_clamped:
        note = f"a rate times the voice's speed was held within {MIN_RATE} to {MAX_RATE}"
        warning = f"{warning}; {note}" if warning else note
    return SpokenRequest(tuple(pieces), warning)


def _said(piece: Speech, language: str, options: TextOptions) -> str:
    if piece.say_as is not None:
        return say_as(piece.text, piece.say_as.interpret_as, language, piece.say_as.format)
    return normalize_text(piece.text, language) if options.normalize else piece.text


def _pieces(
    segments: tuple[Speech | Pause | Boundary, ...], language: str, options: TextOptions
) -> list[Piece]:
    """One text per run of speech at one rate, ended by a pause, a boundary or a change
    of rate; each pause a silence."""
    pieces: list[Piece] = []
    words: list[str] = []
    rate = 1.0

    def end_text() -> None:
        text = "".join(words).strip()
        if text:
            pieces.append(SpokenText(text, rate))
        words.clear()

    for segment in segments:
        if isinstance(segment, Speech):
            if words and segment.rate != rate:
                end_text()
            said = _said(segment, language, options)
            words.append(f" {said}" if words and segment.space_before else said)
            rate = segment.rate
            continue
        end_text()
        if isinstance(segment, Pause) and segment.seconds > 0:
            pieces.append(Silence(segment.seconds))
    end_text()
    return pieces
