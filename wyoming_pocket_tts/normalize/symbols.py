"""Abbreviations ("Dr.", "z. B.", "No. 5") and symbols ("&", "+", "=", "@", "#", "~5")."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from functools import cache

from wyoming_pocket_tts.normalize.locale import Abbreviation, Before, Locale
from wyoming_pocket_tts.normalize.text import replace

_SYMBOLS = re.compile(r"[&+=@#~\u2248]")


@cache
def _abbreviations(locale: Locale) -> tuple[re.Pattern[str], Mapping[str, list[Abbreviation]]]:
    by_written: defaultdict[str, list[Abbreviation]] = defaultdict(list)
    for abbreviation in locale.abbreviations:
        by_written[abbreviation.written].append(abbreviation)
    alternatives = [
        re.escape(written) + (r"(?!\w)" if written[-1].isalnum() else "")
        for written in sorted(by_written, key=len, reverse=True)
    ]
    return re.compile(rf"(?<![\w.])(?:{'|'.join(alternatives)})"), by_written


def _fits(abbreviation: Abbreviation, text: str, end: int) -> bool:
    after = text[end : end + 2]
    if abbreviation.before is Before.NUMBER:
        return after[:1].isdigit() or (after[:1] == " " and after[1:].isdigit())
    if abbreviation.before is Before.NAME:
        return after[:1] == " " and after[1:].isupper()
    return True


def _ends_sentence(text: str, end: int) -> bool:
    """An abbreviation's full stop that also ends the sentence: keep it."""
    after = text[end : end + 2]
    return not after.strip() or (after[0] == " " and after[1].isupper())


def symbols(text: str, locale: Locale) -> str:
    if locale.abbreviations:
        pattern, by_written = _abbreviations(locale)

        def expand(match: re.Match[str]) -> str:
            for abbreviation in by_written[match[0]]:
                if _fits(abbreviation, match.string, match.end()):
                    spoken = abbreviation.spoken
                    if (abbreviation.before is Before.ANYTHING and match[0].endswith(".")
                            and _ends_sentence(match.string, match.end())):
                        spoken += "."
                    return replace(match, spoken)
            return match[0]

        text = pattern.sub(expand, text)

    def say(match: re.Match[str]) -> str:
        symbol, after = match[0], match.string[match.end() : match.end() + 2]
        before_number = after[:1].isdigit() or (after[:1] == " " and after[1:].isdigit())
        if symbol == "#" and before_number:
            return replace(match, locale.number_sign)
        if symbol in "~\u2248":
            return replace(match, locale.about) if before_number else symbol
        return replace(match, locale.symbols.get(symbol, symbol))

    return _SYMBOLS.sub(say, text)
