"""`normalize`: a text as a person would read it aloud, pass by pass.

Each pass rewrites one kind of written form into words and leaves everything else
byte for byte. The order matters: the most specific forms go first (a date before
the numbers in it, a telephone number before its "+", a unit before the year a
bare number might be), plain numbers last.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from wyoming_pocket_tts.normalize.currency import currency
from wyoming_pocket_tts.normalize.dates import dates
from wyoming_pocket_tts.normalize.fractions import VULGAR, fractions
from wyoming_pocket_tts.normalize.languages import locale_for
from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.ordinals import ordinals
from wyoming_pocket_tts.normalize.quantities import numbers, units
from wyoming_pocket_tts.normalize.symbols import symbols
from wyoming_pocket_tts.normalize.telephone import telephone
from wyoming_pocket_tts.normalize.times import times
from wyoming_pocket_tts.normalize.years import years

PASSES: tuple[Callable[[str, Locale], str], ...] = (
    dates, telephone, times, symbols, currency, fractions, units, ordinals, years, numbers,
)

# Every pass but `symbols` reads something written with digits (or "½").
_NUMERAL = re.compile(f"[0-9{''.join(VULGAR)}]")


def normalize(text: str, language: str) -> str:
    """`text` with its numbers, units, dates, times, amounts, abbreviations and symbols
    written out in words of `language` (a code such as "en" or "fr")."""
    locale = locale_for(language)
    if not _NUMERAL.search(text):  # most of what Home Assistant says: only symbols to read
        return symbols(text, locale)
    for apply in PASSES:
        text = apply(text, locale)
    return text
