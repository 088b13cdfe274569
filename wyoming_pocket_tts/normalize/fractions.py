"""Fractions: "1/2", "3/4", "1 1/2", "½", "2¾"."""

from __future__ import annotations

import re

from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.text import replace

VULGAR = {
    "½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4),
    "⅕": (1, 5), "⅖": (2, 5), "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6),
    "⅐": (1, 7), "⅛": (1, 8), "⅜": (3, 8), "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9),
    "⅒": (1, 10),
}
# Larger denominators are more often dates or scores ("9/12", "3/20") than fractions.
_MAX_DENOMINATOR = 10

_SLASHED = re.compile(
    r"(?<![0-9/.,])(?:(?P<whole>[0-9]{1,6}) )?(?P<numerator>[0-9]{1,2})/(?P<denominator>[0-9]{1,2})"
    r"(?![0-9]|/[0-9]|[.,][0-9])"
)
_VULGAR = re.compile(rf"(?<![0-9.,])(?P<whole>[0-9]{{1,6}})?(?P<fraction>[{''.join(VULGAR)}])")


def _say(locale: Locale, whole: str | None, numerator: int, denominator: int) -> str:
    if whole is None:
        return locale.fraction(numerator, denominator)
    return locale.mixed_number(int(whole), numerator, denominator)


def fractions(text: str, locale: Locale) -> str:
    def slashed(match: re.Match[str]) -> str:
        numerator, denominator = int(match["numerator"]), int(match["denominator"])
        if not 0 < numerator < denominator <= _MAX_DENOMINATOR:
            return match[0]
        return replace(match, _say(locale, match["whole"], numerator, denominator))

    def vulgar(match: re.Match[str]) -> str:
        return replace(match, _say(locale, match["whole"], *VULGAR[match["fraction"]]))

    return _VULGAR.sub(vulgar, _SLASHED.sub(slashed, text))
