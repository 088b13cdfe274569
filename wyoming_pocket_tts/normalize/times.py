"""Clock times ("7:30", "19:05 Uhr", "19h05", "7:30 pm", "7 am") and durations ("1:30:00")."""

from __future__ import annotations

import re
from functools import cache

from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.text import GAP, LETTER, alternation, replace

_START = r"(?<![0-9.,:])"


@cache
def _patterns(locale: Locale) -> tuple[re.Pattern[str], ...]:
    meridiem = (
        rf"(?:{GAP}(?P<meridiem>(?i:{alternation(locale.meridiems)}))(?!{LETTER}))?"
        if locale.meridiems else ""
    )
    said = (
        rf"(?:{GAP}(?:{alternation(locale.time_suffixes)})(?!{LETTER}))?"
        if locale.time_suffixes else ""
    )
    patterns = [
        rf"{_START}(?P<hour>[0-9]{{1,2}}):(?P<minute>[0-9]{{2}})(?::(?P<second>[0-9]{{2}}))?"
        rf"(?![0-9]|[:.,][0-9]){meridiem}{said}"
    ]
    # "19.05 Uhr": a full stop between hour and minutes, with a clock word after it; before
    # a mere "h" it is as often a decimal mark ("1.25 h").
    clock_words = [suffix for suffix in locale.time_suffixes if len(suffix) > 1]
    if clock_words:
        patterns.append(
            rf"{_START}(?P<hour>[0-9]{{1,2}})\.(?P<minute>[0-9]{{2}}){GAP}"
            rf"(?:{alternation(clock_words)})(?!{LETTER})"
        )
    if locale.hour_letter_times:
        # "19h05", but not the "1 h" of "1 h 20 min", a duration the units read.
        patterns.append(
            rf"{_START}(?P<hour>[0-9]{{1,2}}){GAP}h{GAP}(?P<minute>[0-9]{{2}})(?![0-9])"
            rf"(?!{GAP}(?:min|mn|s)(?!{LETTER}))"
        )
    if locale.meridiems:
        patterns.append(
            rf"{_START}(?P<hour>[0-9]{{1,2}}){GAP}"
            rf"(?P<meridiem>(?i:{alternation(locale.meridiems)}))(?!{LETTER})"
        )
    return tuple(re.compile(pattern) for pattern in patterns)


def times(text: str, locale: Locale) -> str:
    def say(match: re.Match[str]) -> str:
        groups = match.groupdict()
        hour = int(groups["hour"])
        minute = int(groups.get("minute") or 0)
        meridiem = groups.get("meridiem")
        if meridiem is not None:
            meridiem = "pm" if meridiem[0] in "pP" else "am"
            if not 1 <= hour <= 12 or minute > 59:
                return match[0]
            return replace(match, locale.time(hour, minute, meridiem))
        if groups.get("second") is not None:
            seconds = int(groups["second"])
            if minute > 59 or seconds > 59:
                return match[0]
            # "1:30:00", "0:05:00" count down; "07:30:00" is the clock's time.
            if len(groups["hour"]) == 1 or hour == 0 or hour > 24 or seconds:
                return replace(match, locale.duration(hour, minute, seconds))
        if hour > 24 or minute > 59 or (hour == 24 and minute):
            return match[0]
        return replace(match, locale.time(hour, minute))

    for pattern in _patterns(locale):
        text = pattern.sub(say, text)
    return text
