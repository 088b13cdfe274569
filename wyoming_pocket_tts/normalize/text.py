"""Small helpers the passes share: building patterns, and what surrounds a match."""

from __future__ import annotations

import re
from collections.abc import Iterable

# A letter in any script: a word character that is neither a digit nor "_".
LETTER = r"[^\W\d_]"
# One optional space between a number and what it counts ("21.5 °C", "21.5°C").
GAP = "[ \u00a0\u202f\u2009]?"

_LAST_WORD = re.compile(r"(\w+)\W{0,3}$")
# How far back `previous_word` looks: enough for any word a rule keys on.
_LOOK_BACK = 24


def alternation(forms: Iterable[str]) -> str:
    """A regular-expression alternation of literal forms, the longest tried first."""
    return "|".join(re.escape(form) for form in sorted(set(forms), key=len, reverse=True))


def previous_word(text: str, start: int) -> str:
    """The word just before `start` in lower case ("" when none), looking back a little."""
    found = _LAST_WORD.search(text, max(0, start - _LOOK_BACK), start)
    return found.group(1).lower() if found else ""


def replace(match: re.Match[str], words: str) -> str:
    """`words` to replace a match, with a space where they would touch a letter or digit
    ("5G" becomes "five G", not "fiveG"), and one full stop where both end in one
    ("at 7 pm." is "at seven p.m.")."""
    text, start, end = match.string, match.start(), match.end()
    if words.endswith(".") and text[end : end + 1] == ".":
        words = words[:-1]
    if start > 0 and text[start - 1].isalnum():
        words = " " + words
    if end < len(text) and text[end].isalnum():
        words += " "
    return words
