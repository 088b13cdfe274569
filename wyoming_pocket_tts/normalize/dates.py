"""Dates: ISO ("2026-12-09"), the language's numeric order ("09/12/2026", "9.12."),
and with a month's name ("Dec 9", "9 décembre 2026", "9 de diciembre", "December 2026")."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.text import LETTER, alternation, previous_word, replace

# Not inside a longer run of numbers and marks, on either side.
_START = r"(?<![0-9.,:/-])"
_END = r"(?![0-9]|[-/.,:][0-9])"
_ISO = re.compile(
    rf"{_START}(?P<year>[0-9]{{4}})-(?P<month>[0-9]{{2}})-(?P<day>[0-9]{{2}})"
    rf"(?:(?P<clock>T)(?=[0-9]{{2}}:)|{_END})"
)
_NUMERIC = re.compile(
    rf"{_START}(?P<first>[0-9]{{1,2}})(?P<mark>[./-])(?P<second>[0-9]{{1,2}})(?P=mark)"
    rf"(?P<year>[0-9]{{4}}){_END}"
)
# "am 9.12.": day and month, each followed by a full stop, no year.
_DOTTED = re.compile(rf"{_START}(?P<day>[0-9]{{1,2}})\.(?P<month>[0-9]{{1,2}})\.(?![0-9])")

Speak = Callable[[re.Match[str]], str]


@cache
def _named(locale: Locale) -> tuple[re.Pattern[str], ...]:
    """Dates with a month's name: day first, month first (English), month and year."""
    # An abbreviation's full stop goes with it, unless it also ends the sentence.
    months = (
        rf"(?P<month>(?i:{alternation(locale.month_forms)}))(?!{LETTER})"
        r"(?:\.(?=[,;:)]| [a-zà-ÿ]))?"
    )
    connector = rf"(?:{locale.date_connector} )?" if locale.date_connector else ""
    suffix = f"(?:{alternation(locale.ordinal_suffixes)})?" if locale.ordinal_suffixes else ""
    dot = r"\.?" if locale.dotted_day else ""
    year = rf"(?:\.?,? {connector}(?P<year>[0-9]{{4}})(?![0-9]))?"
    day_first = rf"{_START}(?P<day>[0-9]{{1,2}}){suffix}{dot} {connector}{months}{year}"
    month_year = rf"(?<!{LETTER}){months}\.?,? {connector}(?P<year>[0-9]{{4}})(?![0-9])"
    patterns = [day_first]
    if locale.date_order == "mdy":
        patterns.append(
            rf"(?<!{LETTER}){months}\.? (?P<day>[0-9]{{1,2}}){suffix}(?![0-9]|{LETTER}){year}"
        )
    patterns.append(month_year)
    return tuple(re.compile(pattern) for pattern in patterns)


def dates(text: str, locale: Locale) -> str:
    def say(match: re.Match[str], day: int | None, month: int | None, year: int | None) -> str:
        if month is None or not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
            return match[0]
        spoken = locale.date(day, month, year, previous_word(match.string, match.start()))
        return replace(match, spoken)

    def numeric(match: re.Match[str]) -> str:
        first, second = int(match["first"]), int(match["second"])
        month_first = (locale.date_order == "mdy" and first <= 12) or second > 12
        day, month = (second, first) if month_first else (first, second)
        return say(match, day, month, int(match["year"]))

    def named(match: re.Match[str]) -> str:
        groups = match.groupdict()
        day = int(groups["day"]) if groups.get("day") else None
        year = int(groups["year"]) if groups.get("year") else None
        return say(match, day, locale.month_forms.get(match["month"].lower()), year)

    # A "T" before the time of day goes with the date; the time is then a word away.
    text = _ISO.sub(lambda m: say(m, int(m["day"]), int(m["month"]), int(m["year"])), text)
    text = _NUMERIC.sub(numeric, text)
    if locale.dotted_day:
        text = _DOTTED.sub(lambda m: say(m, int(m["day"]), int(m["month"]), None), text)
    for pattern in _named(locale):
        text = pattern.sub(named, text)
    return text
