"""Years after a word that announces one ("in 1999", "seit 1999"), said as years are."""

from __future__ import annotations

import re
from functools import cache

from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.text import LETTER, alternation


@cache
def _pattern(locale: Locale) -> re.Pattern[str]:
    return re.compile(
        rf"(?<!{LETTER})(?P<cue>(?i:{alternation(locale.year_cues)})) "
        r"(?P<year>[12][0-9]{3})(?![0-9]|[.,][0-9])"
    )


def years(text: str, locale: Locale) -> str:
    if not locale.year_cues:
        return text
    return _pattern(locale).sub(
        lambda match: f"{match['cue']} {locale.year(int(match['year']))}", text
    )
