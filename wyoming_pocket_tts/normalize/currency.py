"""Amounts of money, the currency before or after ("$5", "5 €", "£3.50", "CHF 20")."""

from __future__ import annotations

import re
from functools import cache

from wyoming_pocket_tts.normalize.amounts import Amount, amount_pattern, read_amount, say_amount
from wyoming_pocket_tts.normalize.locale import Currency, Locale
from wyoming_pocket_tts.normalize.text import GAP, alternation, replace
from wyoming_pocket_tts.normalize.written import WrittenNumber

# Written forms of each currency, by ISO code; a language names the codes it knows.
WRITTEN = {
    "$": "USD", "US$": "USD", "USD": "USD",
    "€": "EUR", "EUR": "EUR",
    "£": "GBP", "GBP": "GBP",
    "CHF": "CHF",
    "¥": "JPY", "JPY": "JPY",
}


@cache
def _patterns(locale: Locale) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The currency before the amount, and after it."""
    forms = alternation(form for form, code in WRITTEN.items() if code in locale.currencies)
    amount = amount_pattern(locale)
    return (
        re.compile(rf"(?<![\w$€£¥])(?P<currency>{forms}){GAP}{amount}(?![0-9])"),
        re.compile(rf"{amount}{GAP}(?P<currency>{forms})(?!\w)"),
    )


def say_money(amount: Amount, currency: Currency, locale: Locale) -> str:
    """"three pounds fifty" for £3.50, "fifty pence" for £0.50, else the number and the
    currency's name ("one point five dollars")."""
    low = amount.low
    if amount.high is not None or len(low.fraction) != 2 or low.reads_as_digits:
        return say_amount(amount, locale, currency.major)
    cents = int(low.fraction)
    if int(low.integer) == 0 and cents and currency.minor is not None:
        minor = WrittenNumber(low.fraction.lstrip("0"), negative=low.negative)
        return say_amount(Amount(minor), locale, currency.minor)
    whole = WrittenNumber(low.integer, negative=low.negative)
    major = locale.number(whole, currency.major.gender)
    name = currency.major.form(locale.is_singular(whole))
    if not cents:
        return locale.quantity(major, name)
    return locale.currency_template.format(
        major=major, currency=name, minor=locale.cardinal(cents)
    )


def currency(text: str, locale: Locale) -> str:
    if not locale.currencies:
        return text

    def say(match: re.Match[str]) -> str:
        amount = read_amount(match, locale)
        if amount is None:
            return match[0]
        spoken = say_money(amount, locale.currencies[WRITTEN[match["currency"]]], locale)
        return replace(match, spoken)

    for pattern in _patterns(locale):
        text = pattern.sub(say, text)
    return text
