"""Ordinals: "1st", "22nd", "1er", "2e", "1º", "2ª", "3de", and "am 3." in German."""

from __future__ import annotations

import re
from functools import cache

from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.text import LETTER, alternation, replace


@cache
def _patterns(locale: Locale) -> tuple[re.Pattern[str], ...]:
    patterns = []
    if locale.ordinal_suffixes:
        patterns.append(
            rf"(?<![\w.,])(?P<number>[0-9]{{1,9}})(?P<suffix>{alternation(locale.ordinal_suffixes)})"
            rf"(?!{LETTER}|[0-9])"
        )
    if locale.dotted_ordinal_cues:
        # "3." is an ordinal after an article or preposition and before a word.
        patterns.append(
            rf"(?<!{LETTER})(?P<cue>(?i:{alternation(locale.dotted_ordinal_cues)})) "
            rf"(?P<number>[0-9]{{1,4}})(?P<suffix>\.)(?= {LETTER})"
        )
    return tuple(re.compile(pattern) for pattern in patterns)


def ordinals(text: str, locale: Locale) -> str:
    def say(match: re.Match[str]) -> str:
        cue = match.groupdict().get("cue")
        previous = cue.lower() if cue else ""
        spoken = locale.ordinal(int(match["number"]), match["suffix"], previous)
        return f"{cue} {spoken}" if cue else replace(match, spoken)

    for pattern in _patterns(locale):
        text = pattern.sub(say, text)
    return text
