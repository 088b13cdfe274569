"""`say_as`: a text read as one kind of thing, as SSML's say-as asks.

Each reader handles the forms its kind is written in; whatever it cannot read is
normalised as running text instead, so no input raises. An interpretation without a
reader is read as if there were no say-as, as SSML asks of a processor.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from wyoming_pocket_tts.normalize.amounts import parse_amount, say_amount
from wyoming_pocket_tts.normalize.currency import say_money
from wyoming_pocket_tts.normalize.languages import locale_for
from wyoming_pocket_tts.normalize.locale import Locale
from wyoming_pocket_tts.normalize.pipeline import normalize
from wyoming_pocket_tts.normalize.telephone import say_telephone
from wyoming_pocket_tts.normalize.written import WrittenNumber

_ORDINAL = re.compile(r"([0-9]{1,9})(\S{0,4})")
_TIME = re.compile(
    r"([0-9]{1,2})(?:[:.h]([0-9]{2}))?(?::([0-9]{2}))?\s?(?i:([ap])\.?m\.?)?"
)
_DATE_FORMATS = frozenset({"mdy", "dmy", "ymd", "ydm", "md", "dm", "ym", "my", "d", "m", "y"})

Reader = Callable[[str, Locale, str | None], str]


def _spell(text: str, locale: Locale, format: str | None) -> str:
    """Character by character: letters by name (upper case reads as a letter), digits as
    words, symbols the language names; other punctuation and spaces are left out."""
    spoken = []
    for character in text:
        if character.isascii() and character.isdigit():
            spoken.append(locale.cardinal(int(character)))
        elif character.isalpha():
            spoken.append(character.upper())
        elif character in locale.symbols:
            spoken.append(locale.symbols[character])
    return " ".join(spoken)


def _cardinal(text: str, locale: Locale, format: str | None) -> str:
    amount = parse_amount(text, locale)
    return normalize(text, locale.code) if amount is None else say_amount(amount, locale)


def _ordinal(text: str, locale: Locale, format: str | None) -> str:
    match = _ORDINAL.fullmatch(text)
    if match is None:
        return normalize(text, locale.code)
    return locale.ordinal(int(match[1]), match[2])


def _digits(text: str, locale: Locale, format: str | None) -> str:
    spoken = locale.digits(text)
    return spoken or normalize(text, locale.code)


def _date(text: str, locale: Locale, format: str | None) -> str:
    numbers = re.findall(r"[0-9]{1,4}", text)
    if format not in _DATE_FORMATS or len(numbers) != len(format):
        return normalize(text, locale.code)
    fields = dict(zip(format, (int(number) for number in numbers), strict=True))
    day, month, year = fields.get("d"), fields.get("m"), fields.get("y")
    if (month is not None and not 1 <= month <= 12) or (day is not None and not 1 <= day <= 31):
        return normalize(text, locale.code)
    if month is None:
        if day is not None:
            return locale.ordinal(day)
        return locale.year(year) if year is not None else normalize(text, locale.code)
    if day is None and year is None:
        return locale.months[month - 1]
    return locale.date(day, month, year)


def _time(text: str, locale: Locale, format: str | None) -> str:
    match = _TIME.fullmatch(text)
    if match is None:
        return normalize(text, locale.code)
    hour, minute, seconds = int(match[1]), int(match[2] or 0), int(match[3] or 0)
    meridiem = None if match[4] is None else match[4].lower() + "m"
    if minute > 59 or seconds > 59 or hour > (12 if meridiem else 24):
        return normalize(text, locale.code)
    if meridiem is not None and not locale.meridiems:  # a 24-hour clock says 7 pm as 19
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
        meridiem = None
    spoken = locale.time(hour, minute, meridiem)
    if seconds:
        second = WrittenNumber(str(seconds))
        noun = locale.units["s"]
        said = locale.quantity(locale.number(second, noun.gender),
                               noun.form(locale.is_singular(second)))
        spoken = f"{spoken} {locale.and_word} {said}"
    return spoken


def _telephone(text: str, locale: Locale, format: str | None) -> str:
    if not any(character.isascii() and character.isdigit() for character in text):
        return normalize(text, locale.code)
    return say_telephone(text, locale)


def _currency(text: str, locale: Locale, format: str | None) -> str:
    amount = parse_amount(text, locale)
    currency = locale.currencies.get((format or "").upper())
    if amount is None or currency is None:
        return normalize(text, locale.code)
    return say_money(amount, currency, locale)


def _running_text(text: str, locale: Locale, format: str | None) -> str:
    return normalize(text, locale.code)


READERS: dict[str, Reader] = {
    "characters": _spell,
    "spell-out": _spell,
    "verbatim": _spell,
    "cardinal": _cardinal,
    "ordinal": _ordinal,
    "digits": _digits,
    "date": _date,
    "time": _time,
    "telephone": _telephone,
    "currency": _currency,
    "unit": _running_text,
}


def say_as(text: str, interpret_as: str, language: str, format: str | None = None) -> str:
    """`text` read as `interpret_as` (one of `READERS`; any other reads it as running
    text) in `language`. `format` is say-as's: a date's field order ("dmy", "ym", ...),
    a currency's ISO code ("EUR"). Raises ValueError for an unknown language."""
    locale = locale_for(language)
    reader = READERS.get(interpret_as.lower(), _running_text)
    return reader(text.strip(), locale, format)
