"""An amount: a signed number or a range of two ("-5", "10-15"), and its words."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from wyoming_pocket_tts.normalize.locale import Locale, Noun
from wyoming_pocket_tts.normalize.text import GAP
from wyoming_pocket_tts.normalize.written import WrittenNumber, number_pattern, parse_number

_MINUS_SIGNS = "-\u2212"


def amount_pattern(locale: Locale) -> str:
    """Named groups: sign, low, and for a range dash, high_sign, high.

    A minus sign counts only where no word or number comes just before it ("COVID-19"
    and "10-15" have none); a hyphen makes a range only without spaces, as "10 - 5"
    is more often a subtraction, while a dash makes one either way.
    """
    number = number_pattern(locale.groups_with_space)
    return (
        rf"(?P<sign>(?<![\w.,{_MINUS_SIGNS}])[{_MINUS_SIGNS}])?(?P<low>{number})"
        rf"(?:(?P<dash>-|{GAP}[\u2013\u2014]{GAP})"
        rf"(?P<high_sign>[{_MINUS_SIGNS}])?(?P<high>{number}))?"
    )


@dataclass(frozen=True)
class Amount:
    low: WrittenNumber
    high: WrittenNumber | None = None
    # What separated low and high when they make no range ("5-3"): kept as written.
    dash: str = ""

    @property
    def is_range(self) -> bool:
        return self.high is not None and not self.dash

    @property
    def last(self) -> WrittenNumber:
        """The number a following noun agrees with."""
        return self.high if self.high is not None else self.low


def read_amount(match: re.Match[str], locale: Locale) -> Amount | None:
    """The amount a match of `amount_pattern` found; None when no number can be read."""
    low = parse_number(match["low"], locale.decimal_mark, negative=bool(match["sign"]))
    if low is None:
        return None
    if match["high"] is None:
        return Amount(low)
    high = parse_number(match["high"], locale.decimal_mark, negative=bool(match["high_sign"]))
    if high is None:
        return None
    if low.value < high.value:
        return Amount(low, high)
    return Amount(low, high, dash=match["dash"])


@cache
def _whole(locale: Locale) -> re.Pattern[str]:
    return re.compile(amount_pattern(locale))


def parse_amount(text: str, locale: Locale) -> Amount | None:
    """The amount `text` is, all of it; None when it is something else."""
    match = _whole(locale).fullmatch(text)
    return None if match is None else read_amount(match, locale)


def say_amount(amount: Amount, locale: Locale, noun: Noun | None = None) -> str:
    """The amount's words, followed by the noun it counts when there is one."""
    gender = noun.gender if noun is not None else None
    words = locale.number(amount.low, gender)
    if amount.high is not None:
        high = locale.number(amount.high, gender)
        if amount.is_range:
            words = locale.range_template.format(low=words, high=high)
        else:
            words = f"{words}{amount.dash}{high}"
    if noun is None:
        return words
    return locale.quantity(words, noun.form(locale.is_singular(amount.last)))
