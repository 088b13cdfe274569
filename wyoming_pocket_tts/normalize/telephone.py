"""Telephone numbers and long runs of digits, said digit by digit in their groups."""

from __future__ import annotations

import re

from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.text import replace
from wyoming_pocket_tts.normalize.written import MAX_SPOKEN_DIGITS

# A telephone number has at least this many digits, and at most 15 (E.164).
_MIN_DIGITS = 7
_MAX_DIGITS = 15
_BEFORE = r"(?<![\w+.,:/-])"
_AFTER = r"(?![0-9]|[-.,:/][0-9])"
_PATTERNS = (
    # "+41 44 668 18 00", "+1 (555) 123-4567", "+4915112345678"
    re.compile(
        rf"{_BEFORE}\+[0-9]{{1,15}}(?:[ -]?\([0-9]{{1,4}}\)|[ -][0-9]{{1,5}}){{0,6}}{_AFTER}"
    ),
    # A national number: a leading zero ("06 12 34 56 78", "0171 1234567", "(020) 7946 0958").
    re.compile(
        rf"{_BEFORE}(?:\(0[0-9]{{1,4}}\)|0[0-9]{{1,4}})(?:[ /-][0-9]{{2,8}}){{1,5}}{_AFTER}"
    ),
    # North American: "(555) 123-4567", "555-123-4567".
    re.compile(rf"{_BEFORE}(?:\([0-9]{{3}}\) ?|[0-9]{{3}}-)[0-9]{{3}}-[0-9]{{4}}{_AFTER}"),
)
_LONG_RUN = re.compile(rf"(?<![0-9])[0-9]{{{MAX_SPOKEN_DIGITS + 1},}}")
_GROUPS = re.compile(r"[0-9]+")


def say_telephone(number: str, locale: Locale) -> str:
    """Group by group, digit by digit, a pause between groups; in pairs where the
    language reads pairs as numbers (French "zéro six, douze, trente-quatre")."""
    groups = []
    for group in _GROUPS.findall(number):
        if locale.telephone_pairs and len(group) == 2:
            groups.append(locale.digits(group) if group[0] == "0" else locale.cardinal(int(group)))
        else:
            groups.append(locale.digits(group))
    spoken = ", ".join(groups)
    return f"{locale.symbols['+']} {spoken}" if number.startswith("+") else spoken


def telephone(text: str, locale: Locale) -> str:
    def say(match: re.Match[str]) -> str:
        digits = sum(character.isdigit() for character in match[0])
        if not _MIN_DIGITS <= digits <= _MAX_DIGITS:
            return match[0]
        return replace(match, say_telephone(match[0], locale))

    for pattern in _PATTERNS:
        text = pattern.sub(say, text)
    return _LONG_RUN.sub(lambda match: replace(match, locale.digits(match[0])), text)
