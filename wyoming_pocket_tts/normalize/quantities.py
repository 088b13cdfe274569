"""Numbers with a unit ("21.5 °C", "10-15 km/h"), then numbers alone ("1.234,5", "-5")."""

from __future__ import annotations

import re
from functools import cache

from wyoming_pocket_tts.normalize.amounts import amount_pattern, read_amount, say_amount
from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.text import GAP, LETTER, previous_word, replace
from wyoming_pocket_tts.normalize.units import unit_forms, unit_pattern
from wyoming_pocket_tts.normalize.written import WrittenNumber

_TOKEN_PARTS = re.compile(r"([0-9]+)|(.)")
_NEXT_WORD = re.compile(rf" ({LETTER}{{1,30}})(?!{LETTER})")


@cache
def _with_unit(locale: Locale) -> re.Pattern[str]:
    units = unit_pattern(unit_forms(locale))
    return re.compile(rf"{amount_pattern(locale)}{GAP}(?P<unit>{units})")


@cache
def _alone(locale: Locale) -> re.Pattern[str]:
    return re.compile(amount_pattern(locale))


def units(text: str, locale: Locale) -> str:
    forms = unit_forms(locale)

    def say(match: re.Match[str]) -> str:
        amount = read_amount(match, locale)
        if amount is None:
            return match[0]
        return replace(match, say_amount(amount, locale, forms[match["unit"]]))

    return _with_unit(locale).sub(say, text)


def numbers(text: str, locale: Locale) -> str:
    def say(match: re.Match[str]) -> str:
        if previous_word(match.string, match.start()) in locale.code_cues:
            return replace(match, locale.digits(match[0]))
        amount = read_amount(match, locale)
        if amount is None:
            return replace(match, _say_parts(match[0], locale))
        counted = _NEXT_WORD.match(match.string, match.end())
        gender = locale.noun_gender(counted[1]) if counted else None
        if gender is not None and amount.high is None:  # "eine Lampe", "doscientas personas"
            return replace(match, locale.number(amount.low, gender))
        return replace(match, say_amount(amount, locale))

    return _alone(locale).sub(say, text)


def _say_parts(token: str, locale: Locale) -> str:
    """What makes no single number ("192.168.1.1", "1,2,3"): each run of digits a number,
    a dot said as such, a comma kept as a pause."""
    words = []
    for digits, other in _TOKEN_PARTS.findall(token):
        if digits:
            words.append(locale.number(WrittenNumber(digits)))
        elif other == ".":
            words.append(f" {locale.dot} ")
        elif other in "-\u2212" and not words:
            words.append(f"{locale.minus} ")
        elif other == ",":
            words.append(", ")
        else:
            words.append(other)
    return "".join(words)
