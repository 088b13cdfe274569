"""SSML markup turned into what to speak: text pieces, pauses and sentence boundaries.

The parser is the standard library's expat, run on the markup wrapped in an element of
our own. Inside an element a DOCTYPE is not well-formed, so no entity can ever be
declared and expanded: a "billion laughs" document is refused at its first bytes.
Markup that is not well-formed never raises; it is read as plain text with its tags
stripped, and the document says why, for the caller's one warning.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace
from typing import Literal
from xml.parsers import expat

MIN_RATE = 0.5
MAX_RATE = 2.0
MAX_PAUSE_SECONDS = 10.0
# A hostile document could name a new bad value on every element; the warning quotes a few.
MAX_IGNORED_NOTES = 5
MAX_QUOTED_CHARS = 40

# Named rates replace the rate around them; they spread evenly from half to one and a
# half times the voice's own pace.
NAMED_RATES = {
    "x-slow": 0.5,
    "slow": 0.75,
    "medium": 1.0,
    "default": 1.0,
    "fast": 1.25,
    "x-fast": 1.5,
}
# Break strengths in seconds, Azure's values (medium is also a bare <break/>).
BREAK_STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.25,
    "weak": 0.5,
    "medium": 0.75,
    "strong": 1.0,
    "x-strong": 1.25,
}
BoundaryKind = Literal["sentence", "paragraph"]
BOUNDARY_ELEMENTS: dict[str, BoundaryKind] = {
    "s": "sentence",
    "sentence": "sentence",
    "p": "paragraph",
    "paragraph": "paragraph",
}
# Elements whose text describes something rather than being said.
SILENT_ELEMENTS = frozenset({"desc", "lexicon", "meta", "metadata"})

_WRAPPER = "wyoming-ssml-fragment"
# A byte order mark and an XML declaration may only open a document, not our wrapper.
_PROLOGUE = re.compile(r"\ufeff?(?:\s*<\?xml\s[^>]*\?>)?")
_XML_WHITESPACE = re.compile(r"[ \t\r\n]+")
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile(rf"\s*{_NUMBER}\s*(ms|s)\s*", re.IGNORECASE)
_PERCENT = re.compile(rf"\s*([+-]?)\s*{_NUMBER}\s*%\s*")
_FACTOR = re.compile(rf"\s*{_NUMBER}\s*")
_DECLARATIONS = re.compile(r"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_TAG_NAME = re.compile(r"</?\s*([^\s/>]+)")


@dataclass(frozen=True)
class SayAs:
    """How a piece of text is to be read (`<say-as>`), for the normaliser to resolve."""

    interpret_as: str
    format: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Speech:
    """Text to speak, without spaces at its edges. Pieces between two pauses or
    boundaries are one utterance; `space_before` says whether a space parts this piece
    from the one before, which matters once say-as text has been rewritten."""

    text: str
    rate: float = 1.0
    say_as: SayAs | None = None
    space_before: bool = False


@dataclass(frozen=True)
class Pause:
    """Silence asked for by `<break>`, at most MAX_PAUSE_SECONDS."""

    seconds: float


@dataclass(frozen=True)
class Boundary:
    """The speech before it ends a sentence (`<s>`) or a paragraph (`<p>`)."""

    kind: BoundaryKind


Segment = Speech | Pause | Boundary


@dataclass(frozen=True)
class SsmlDocument:
    """What a document asks to be spoken, in order, and what in it was not followed."""

    segments: tuple[Segment, ...]
    language: str | None = None  # xml:lang of the <speak> root
    malformed: str | None = None  # why the markup was read as plain text
    rate_clamped: bool = False  # a rate outside MIN_RATE..MAX_RATE was brought inside
    ignored: tuple[str, ...] = ()  # attribute values that were not understood

    @property
    def warning(self) -> str | None:
        """Everything above in one line, or None when the document was followed as written."""
        notes = [self.malformed] if self.malformed else []
        if self.rate_clamped:
            notes.append(f"speaking rate clamped to {MIN_RATE}..{MAX_RATE}")
        notes.extend(self.ignored)
        return "; ".join(notes) or None


def parse_ssml(markup: str) -> SsmlDocument:
    """Read `markup`, with or without a `<speak>` root; never raises."""
    body = _PROLOGUE.sub("", markup, count=1)  # it matches at the start, if only emptily
    reader = _Reader()
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.text
    try:
        parser.Parse(f"<{_WRAPPER}>{body}</{_WRAPPER}>", True)
    except expat.ExpatError as error:
        return _plain_text(markup, _why_malformed(markup, error))
    except UnicodeEncodeError:
        return _plain_text(markup, "text is not valid Unicode (lone surrogates)")
    return reader.document()


@dataclass(frozen=True)
class _Scope:
    """What applies to the text inside an element."""

    rate: float = 1.0
    say_as: SayAs | None = None
    # Each <say-as> element is its own piece: two adjacent dates must not merge into one.
    say_as_element: int = 0
    silent: bool = False


class _Reader:
    """Expat's callbacks, building the segments as the elements open and close."""

    def __init__(self) -> None:
        self._stack: list[tuple[_Scope, BoundaryKind | None]] = [(_Scope(), None)]
        self._segments: list[Segment] = []
        # Text since the last pause or boundary: pieces as [scope, text parts].
        self._run: list[tuple[_Scope, list[str]]] = []
        self._say_as_elements = 0
        self._language: str | None = None
        self._rate_clamped = False
        self._ignored: list[str] = []

    def document(self) -> SsmlDocument:
        self._flush_run()
        while self._segments and isinstance(self._segments[-1], Boundary):
            self._segments.pop()
        return SsmlDocument(
            segments=tuple(self._segments),
            language=self._language,
            rate_clamped=self._rate_clamped,
            ignored=tuple(self._ignored),
        )

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        scope = self._stack[-1][0]
        name = _local_name(tag)
        boundary = None
        if scope.silent:
            pass
        elif name == "speak" and len(self._stack) == 2 and self._language is None:
            self._language = attributes.get("xml:lang")
        elif name in BOUNDARY_ELEMENTS:
            boundary = BOUNDARY_ELEMENTS[name]
            self._boundary(boundary)
        elif name == "break":
            self._pause(self._break_seconds(attributes))
        elif name == "prosody" and "rate" in attributes:
            scope = replace(scope, rate=self._rate(scope.rate, attributes["rate"]))
        elif name == "say-as":
            scope = self._say_as(scope, attributes)
        elif name == "sub":
            if "alias" in attributes:
                self.text(attributes["alias"])
                scope = replace(scope, silent=True)
            else:
                self._ignore("<sub> without alias")
        elif name in SILENT_ELEMENTS:
            scope = replace(scope, silent=True)
        self._stack.append((scope, boundary))

    def end(self, tag: str) -> None:
        _, boundary = self._stack.pop()
        if boundary is not None:
            self._boundary(boundary)

    def text(self, data: str) -> None:
        scope = self._stack[-1][0]
        if scope.silent:
            return
        if self._run and self._run[-1][0] == scope:
            self._run[-1][1].append(data)
        else:
            self._run.append((scope, [data]))

    def _say_as(self, scope: _Scope, attributes: dict[str, str]) -> _Scope:
        interpret_as = attributes.get("interpret-as")
        if not interpret_as:
            self._ignore("<say-as> without interpret-as")
            return scope
        self._say_as_elements += 1
        say_as = SayAs(interpret_as, attributes.get("format"), attributes.get("detail"))
        return replace(scope, say_as=say_as, say_as_element=self._say_as_elements)

    def _rate(self, current: float, value: str) -> float:
        """Percentages and bare factors multiply the rate around them; names replace it."""
        if (named := NAMED_RATES.get(value.strip().lower())) is not None:
            rate = named
        elif percent := _PERCENT.fullmatch(value):
            sign, number = percent.groups()
            if sign:
                rate = current * (1 + float(sign + number) / 100)
            else:
                rate = current * float(number) / 100
        elif factor := _FACTOR.fullmatch(value):
            rate = current * float(factor.group(1))
        else:
            self._ignore(f"prosody rate {_quote(value)}")
            return current
        clamped = min(max(rate, MIN_RATE), MAX_RATE)
        self._rate_clamped |= clamped != rate
        return clamped

    def _break_seconds(self, attributes: dict[str, str]) -> float:
        """`time` wins over `strength`, as SSML says; a bare <break/> is a medium one."""
        if "time" in attributes:
            if duration := _DURATION.fullmatch(attributes["time"]):
                number, unit = duration.groups()
                return float(number) / (1000 if unit.lower() == "ms" else 1)
            self._ignore(f"break time {_quote(attributes['time'])}")
        strength = attributes.get("strength", "medium")
        if (seconds := BREAK_STRENGTHS.get(strength.strip().lower())) is not None:
            return seconds
        self._ignore(f"break strength {_quote(strength)}")
        return BREAK_STRENGTHS["medium"]

    def _pause(self, seconds: float) -> None:
        self._flush_run()
        if seconds <= 0:
            return
        if self._segments and isinstance(last := self._segments[-1], Pause):
            seconds += last.seconds
            self._segments.pop()
        self._segments.append(Pause(min(seconds, MAX_PAUSE_SECONDS)))

    def _boundary(self, kind: BoundaryKind) -> None:
        """Never two boundaries in a row (the stronger stays), nor one before anything."""
        self._flush_run()
        if not self._segments:
            return
        last = self._segments[-1]
        if isinstance(last, Boundary):
            if kind == "paragraph":
                self._segments[-1] = Boundary(kind)
        else:
            self._segments.append(Boundary(kind))

    def _flush_run(self) -> None:
        """Collapse the run's whitespace as XML text is read: words are parted by one
        space, whichever pieces the spaces were in, and the run's edges have none."""
        pieces: list[Speech] = []
        space = False
        for scope, parts in self._run:
            text = _XML_WHITESPACE.sub(" ", "".join(parts))
            space |= text.startswith(" ")
            if words := text.strip(" "):
                pieces.append(Speech(words, scope.rate, scope.say_as, space and bool(pieces)))
                space = text.endswith(" ")
        self._run.clear()
        self._segments.extend(pieces)

    def _ignore(self, what: str) -> None:
        note = f"ignored {what}"
        if len(self._ignored) < MAX_IGNORED_NOTES and note not in self._ignored:
            self._ignored.append(note)


def _local_name(tag: str) -> str:
    """`amazon:effect` is `effect`: prefixes are not resolved, and case is forgiven."""
    return tag.rpartition(":")[2].lower()


def _quote(value: str) -> str:
    return repr(value[:MAX_QUOTED_CHARS] + ("..." if len(value) > MAX_QUOTED_CHARS else ""))


def _why_malformed(markup: str, error: expat.ExpatError) -> str:
    if _DECLARATIONS.search(markup):
        return "DOCTYPE and ENTITY declarations are refused"
    # The line is the document's own (the wrapper adds no line); the column may not be.
    return f"not well-formed SSML: {expat.ErrorString(error.code)} at line {error.lineno}"


def _plain_text(markup: str, why: str) -> SsmlDocument:
    text = _XML_WHITESPACE.sub(" ", _strip_tags(markup)).strip(" ")
    return SsmlDocument(segments=(Speech(text),) if text else (), malformed=why)


def _strip_tags(markup: str) -> str:
    """The text of markup that is not XML, read leniently in one pass.

    Tags go (those that part words, like <break/> and <p>, leave a space), comments and
    declarations go whole, CDATA keeps its text, entities are unescaped, and a `<` that
    starts no tag is text. Every search starts where the last ended or ends the scan, so
    the time is linear however the markup is broken.
    """
    out = []
    position = 0
    end = len(markup)
    while position < end:
        opening = markup.find("<", position)
        if opening < 0:
            out.append(html.unescape(markup[position:]))
            break
        out.append(html.unescape(markup[position:opening]))
        if markup.startswith("<!--", opening):
            position = _after(markup, "-->", opening + 4)
        elif markup.startswith("<![CDATA[", opening):
            closing = markup.find("]]>", opening + 9)
            out.append(markup[opening + 9 : closing if closing >= 0 else end])
            position = closing + 3 if closing >= 0 else end
        elif markup.startswith("<!", opening):
            position = _after_declaration(markup, opening)
        elif markup.startswith("<?", opening):
            position = _after(markup, "?>", opening + 2)
        elif _starts_tag(markup, opening):
            closing = markup.find(">", opening)
            if closing < 0:
                # No `>` anywhere after: nothing from here on can be a tag.
                out.append(html.unescape(markup[opening:]))
                break
            name = _TAG_NAME.match(markup, opening, closing)
            parts_words = name is not None and (
                _local_name(name.group(1)) in {"break", "speak", *BOUNDARY_ELEMENTS}
            )
            out.append(" " if parts_words else "")
            position = closing + 1
        else:
            out.append("<")
            position = opening + 1
    return "".join(out)


def _starts_tag(markup: str, opening: int) -> bool:
    after = opening + 1
    if markup.startswith("/", after):
        after += 1
    return after < len(markup) and (markup[after].isalpha() or markup[after] in "_:")


def _after(markup: str, closing: str, start: int) -> int:
    """Past the next `closing`, or the end when there is none (the rest is swallowed)."""
    found = markup.find(closing, start)
    return found + len(closing) if found >= 0 else len(markup)


def _after_declaration(markup: str, opening: int) -> int:
    """Past a `<!...>` declaration, with a DOCTYPE's bracketed internal subset."""
    closing = markup.find(">", opening)
    bracket = markup.find("[", opening, closing if closing >= 0 else len(markup))
    if bracket >= 0:
        return _after(markup, ">", _after(markup, "]", bracket))
    return closing + 1 if closing >= 0 else len(markup)
