"""Italian: "1.234,5", "un'ora", "primo dicembre", "diciannove e cinque"."""

from __future__ import annotations

import re

from wyoming_pocket_tts.normalize.locale import (
    Abbreviation,
    Before,
    Currency,
    Gender,
    Locale,
    Nouns,
)

_VOWELS = "aeiouàèéìòù"
_KEEPS_UNO = re.compile(rf"(?i:s[^{_VOWELS}]|z|gn|ps|x|y)")


class Italian(Locale):
    def tidy(self, words: str) -> str:
        return words.replace("centouno", "centuno")

    def before_noun(self, words: str, gender: Gender) -> str:
        if words == "uno":
            return "una" if gender is Gender.FEMININE else "un"
        return words

    def noun_gender(self, word: str) -> Gender | None:
        gender = super().noun_gender(word)
        if gender is Gender.MASCULINE and _KEEPS_UNO.match(word):
            return None  # "uno sportello", "uno zaino": "uno" stays whole
        return gender

    def quantity(self, number_words: str, noun: str) -> str:
        if number_words.endswith("una") and noun[:1] in _VOWELS:
            return f"{number_words[:-1]}'{noun}"  # "un'ora"
        return super().quantity(number_words, noun)

    def ordinal(self, number: int, suffix: str = "", previous: str = "") -> str:
        words = super().ordinal(number, suffix, previous)
        return words[:-1] + "a" if suffix == "ª" else words

    def denominator(self, denominator: int, plural: bool) -> str:
        words = "mezzo" if denominator == 2 else self.ordinal(denominator)
        return words[:-1] + "i" if plural else words  # "tre quarti"

    def date(self, day: int | None, month: int, year: int | None, previous: str = "") -> str:
        parts = [] if day is None else ["primo" if day == 1 else self.cardinal(day)]
        parts.append(self.months[month - 1])
        if year is not None:
            parts.append(self.year(year))
        return " ".join(parts)

    def time(self, hour: int, minute: int, meridiem: str | None = None) -> str:
        if hour in (0, 24):
            words = "mezzanotte"
        elif hour == 12 and minute == 0:
            return "mezzogiorno"
        else:
            words = self.before_noun(self.cardinal(hour), Gender.FEMININE)
        return f"{words} e {self.cardinal(minute)}" if minute else words


_noun = Nouns("")
_feminine = _noun.feminine


LOCALE = Italian(
    code="it",
    num2words_code="it",
    decimal_mark=",",
    point="virgola",
    dot="punto",
    minus="meno",
    and_word="e",
    range_template="da {low} a {high}",
    fraction_digits_as_number=True,
    units={
        "°C": _noun("grado Celsius", "gradi Celsius"),
        "°F": _noun("grado Fahrenheit", "gradi Fahrenheit"),
        "°": _noun("grado", "gradi"),
        "K": _noun("kelvin"),
        "%": _noun("per cento"),
        "W": _noun("watt"),
        "kW": _noun("chilowatt"),
        "MW": _noun("megawatt"),
        "Wh": _noun("wattora"),
        "kWh": _noun("chilowattora"),
        "MWh": _noun("megawattora"),
        "V": _noun("volt"),
        "mV": _noun("millivolt"),
        "A": _noun("ampere"),
        "mA": _noun("milliampere"),
        "mAh": _noun("milliampereora"),
        "VA": _noun("voltampere"),
        "Hz": _noun("hertz"),
        "kHz": _noun("kilohertz"),
        "MHz": _noun("megahertz"),
        "GHz": _noun("gigahertz"),
        "Pa": _noun("pascal"),
        "hPa": _noun("ettopascal"),
        "kPa": _noun("kilopascal"),
        "bar": _noun("bar"),
        "mbar": _noun("millibar"),
        "mmHg": _noun("millimetro di mercurio", "millimetri di mercurio"),
        "inHg": _noun("pollice di mercurio", "pollici di mercurio"),
        "psi": _feminine("libbra per pollice quadrato", "libbre per pollice quadrato"),
        "mm": _noun("millimetro", "millimetri"),
        "cm": _noun("centimetro", "centimetri"),
        "m": _noun("metro", "metri"),
        "km": _noun("chilometro", "chilometri"),
        "mi": _noun("miglio", "miglia"),
        "ft": _noun("piede", "piedi"),
        "in": _noun("pollice", "pollici"),
        "m²": _noun("metro quadrato", "metri quadrati"),
        "m³": _noun("metro cubo", "metri cubi"),
        "m³/h": _noun("metro cubo all'ora", "metri cubi all'ora"),
        "L": _noun("litro", "litri"),
        "mL": _noun("millilitro", "millilitri"),
        "L/min": _noun("litro al minuto", "litri al minuto"),
        "gal": _noun("gallone", "galloni"),
        "g": _noun("grammo", "grammi"),
        "mg": _noun("milligrammo", "milligrammi"),
        "kg": _noun("chilogrammo", "chilogrammi"),
        "lb": _feminine("libbra", "libbre"),
        "oz": _feminine("oncia", "once"),
        "km/h": _noun("chilometro all'ora", "chilometri all'ora"),
        "m/s": _noun("metro al secondo", "metri al secondo"),
        "mph": _noun("miglio all'ora", "miglia all'ora"),
        "kn": _noun("nodo", "nodi"),
        "lx": _noun("lux"),
        "lm": _noun("lumen"),
        "dB": _noun("decibel"),
        "dBm": _noun("decibel milliwatt"),
        "ppm": _feminine("parte per milione", "parti per milione"),
        "ppb": _feminine("parte per miliardo", "parti per miliardo"),
        "µg/m³": _noun("microgrammo per metro cubo", "microgrammi per metro cubo"),
        "mg/dL": _noun("milligrammo per decilitro", "milligrammi per decilitro"),
        "mmol/L": _feminine("millimole per litro", "millimoli per litro"),
        "W/m²": _noun("watt per metro quadrato"),
        "s": _noun("secondo", "secondi"),
        "ms": _noun("millisecondo", "millisecondi"),
        "min": _noun("minuto", "minuti"),
        "h": _feminine("ora", "ore"),
        "d": _noun("giorno", "giorni"),
        "kB": _noun("kilobyte"),
        "MB": _noun("megabyte"),
        "GB": _noun("gigabyte"),
        "TB": _noun("terabyte"),
        "kbit/s": _noun("kilobit al secondo"),
        "Mbit/s": _noun("megabit al secondo"),
        "Gbit/s": _noun("gigabit al secondo"),
        "rpm": _noun("giro al minuto", "giri al minuto"),
        "bpm": _noun("battito al minuto", "battiti al minuto"),
    },
    currencies={
        "USD": Currency(_noun("dollaro", "dollari"), _noun("centesimo", "centesimi")),
        "EUR": Currency(_noun("euro"), _noun("centesimo", "centesimi")),
        "GBP": Currency(_feminine("sterlina", "sterline"), _noun("penny", "pence")),
        "CHF": Currency(_noun("franco svizzero", "franchi svizzeri"),
                        _noun("centesimo", "centesimi")),
        "JPY": Currency(_noun("yen")),
    },
    currency_template="{major} {currency} e {minor}",
    months=(
        "gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto",
        "settembre", "ottobre", "novembre", "dicembre",
    ),
    month_forms={
        "gennaio": 1, "gen": 1, "febbraio": 2, "feb": 2, "marzo": 3, "mar": 3,
        "aprile": 4, "apr": 4, "maggio": 5, "mag": 5, "giugno": 6, "giu": 6,
        "luglio": 7, "lug": 7, "agosto": 8, "ago": 8, "settembre": 9, "set": 9,
        "ottobre": 10, "ott": 10, "novembre": 11, "nov": 11, "dicembre": 12, "dic": 12,
    },
    # "°" here too: "1° maggio" is the first of May (the date pass sees it before units).
    ordinal_suffixes=("º", "ª", "°"),
    code_cues=frozenset({"codice", "pin"}),
    abbreviations=(
        Abbreviation("Sig.", "signor", Before.NAME),
        Abbreviation("Sig.ra", "signora", Before.NAME),
        Abbreviation("Sig.na", "signorina", Before.NAME),
        Abbreviation("Dott.", "dottor", Before.NAME),
        Abbreviation("Dott.ssa", "dottoressa", Before.NAME),
        Abbreviation("Dr.", "dottor", Before.NAME),
        Abbreviation("Prof.", "professor", Before.NAME),
        Abbreviation("Prof.ssa", "professoressa", Before.NAME),
        Abbreviation("ecc.", "eccetera"),
        Abbreviation("ca.", "circa"),
        Abbreviation("ad es.", "ad esempio"),
        Abbreviation("p. es.", "per esempio"),
        Abbreviation("tel.", "telefono"),
        Abbreviation("max.", "massimo"),
        Abbreviation("n.", "numero", Before.NUMBER),
        Abbreviation("N.", "numero", Before.NUMBER),
    ),
    symbols={"&": "e", "+": "più", "=": "uguale", "@": "chiocciola", "#": "cancelletto"},
    number_sign="numero",
    about="circa",
    mixed_half="{whole} e mezzo",
    named_fractions={(1, 2): "un mezzo"},
    feminine_endings=("a", "zione", "sione", "tà", "tù", "trice"),
    feminine_nouns=frozenset({"luce", "notte", "chiave", "parte", "neve", "stampante"}),
    masculine_nouns=frozenset({
        "problema", "sistema", "programma", "clima", "tema", "cinema", "pigiama",
    }),
    not_nouns=frozenset({
        "di", "del", "della", "dei", "delle", "ed", "al", "alla", "da", "in", "su", "sul",
        "sulla", "per", "con", "tra", "fra", "che", "nel", "nella", "sono", "era", "resta",
        "restano",
    }),
)
