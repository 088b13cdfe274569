"""Unit symbols: the ones Home Assistant's sensors use, their other spellings, and
the pattern that finds one just after a number."""

from __future__ import annotations

import re
from collections.abc import Mapping

from wyoming_pocket_tts.normalize.locale import Locale, Noun
from wyoming_pocket_tts.normalize.text import LETTER

# Every language names each of these; `ALIASES` maps other spellings onto them.
SYMBOLS = (
    "°C", "°F", "°", "K", "%",
    "W", "kW", "MW", "Wh", "kWh", "MWh", "V", "mV", "A", "mA", "mAh", "VA",
    "Hz", "kHz", "MHz", "GHz",
    "Pa", "hPa", "kPa", "bar", "mbar", "mmHg", "inHg", "psi",
    "mm", "cm", "m", "km", "mi", "ft", "in", "m²", "m³", "m³/h", "L", "mL", "L/min", "gal",
    "g", "mg", "kg", "lb", "oz",
    "km/h", "m/s", "mph", "kn",
    "lx", "lm", "dB", "dBm", "ppm", "ppb", "µg/m³", "mg/dL", "mmol/L", "W/m²",
    "s", "ms", "min", "h", "d",
    "kB", "MB", "GB", "TB", "kbit/s", "Mbit/s", "Gbit/s", "rpm", "bpm",
)

ALIASES = {
    "\u2103": "°C", "\u2109": "°F", "ºC": "°C", "ºF": "°F", "°c": "°C",
    "m2": "m²", "m3": "m³", "m3/h": "m³/h", "W/m2": "W/m²",
    "l": "L", "ml": "mL", "l/min": "L/min",
    "\u03bcg/m³": "µg/m³", "µg/m3": "µg/m³", "\u03bcg/m3": "µg/m³", "ug/m3": "µg/m³",
    "kmh": "km/h", "kph": "km/h", "lbs": "lb", "hr": "h", "hrs": "h", "sec": "s",
    "mins": "min", "kbps": "kbit/s", "Mbps": "Mbit/s", "Gbps": "Gbit/s", "kt": "kn",
    "KB": "kB", "kVA": "VA",
}

# Symbols that are also words ("5 in the morning"): units only when no word follows.
_WORD_LIKE = frozenset({"in", "K"})


def unit_forms(locale: Locale) -> Mapping[str, Noun]:
    """Every written form of a unit the language names, with its noun."""
    forms = {alias: locale.units[symbol] for alias, symbol in ALIASES.items()
             if symbol in locale.units}
    forms.update(locale.units)
    return forms


def unit_pattern(forms: Mapping[str, Noun]) -> str:
    """An alternation of unit forms, each ending where the symbol does ("m" is no unit
    in "5 mice"), the longest first so that "min" wins over "m"."""
    alternatives = []
    for form in sorted(forms, key=len, reverse=True):
        pattern = re.escape(form)
        if form in _WORD_LIKE:
            pattern += rf"(?![ \u00a0]?{LETTER}|[0-9])"
        elif form[-1].isalnum():
            pattern += rf"(?!{LETTER}|[0-9])"
        alternatives.append(pattern)
    return "|".join(alternatives)
