"""German: "1.234,5", "eine Stunde", "am neunten Dezember", "neunzehn Uhr fünf"."""

from __future__ import annotations

from wyoming_pocket_tts.normalize.locale import (
    Abbreviation,
    Before,
    Currency,
    Gender,
    Locale,
    Nouns,
)

# After these an ordinal takes "-n" ("am neunten", "zum dritten", "bis neunten").
_OBLIQUE = frozenset({
    "am", "im", "zum", "zur", "vom", "beim", "dem", "den", "des",
    "ab", "bis", "seit", "vor", "nach", "für", "über", "um",
})
# After an article it ends in "-e" ("der dritte"); with neither, as a date, "-r"
# ("neunter Dezember").
_ARTICLES = frozenset({"der", "die", "das"})


class German(Locale):
    def before_noun(self, words: str, gender: Gender) -> str:
        if words.endswith("eins"):  # "ein Grad", "eine Stunde", "hundertein Grad"
            return words[:-1] + ("e" if gender is Gender.FEMININE else "")
        return words

    def ordinal(self, number: int, suffix: str = "", previous: str = "") -> str:
        words = super().ordinal(number, suffix, previous)
        return words + "n" if previous in _OBLIQUE else words

    def year(self, year: int) -> str:
        return self.spell(year, "year")

    def denominator(self, denominator: int, plural: bool) -> str:
        if denominator == 2:
            return "halbe" if plural else "halb"
        return (super().ordinal(denominator) + "l").capitalize()  # "Drittel", "Achtel"

    def mixed_number(self, whole: int, numerator: int, denominator: int) -> str:
        if (numerator, denominator) == (1, 2):  # "eineinhalb", "zweieinhalb"
            return self.before_noun(self.cardinal(whole), Gender.MASCULINE) + "einhalb"
        return super().mixed_number(whole, numerator, denominator)

    def date(self, day: int | None, month: int, year: int | None, previous: str = "") -> str:
        parts = []
        if day is not None:
            ending = "n" if previous in _OBLIQUE else "" if previous in _ARTICLES else "r"
            parts.append(super().ordinal(day) + ending)
        parts.append(self.months[month - 1])
        if year is not None:
            parts.append(self.year(year))
        return " ".join(parts)

    def time(self, hour: int, minute: int, meridiem: str | None = None) -> str:
        words = f"{'ein' if hour == 1 else self.cardinal(hour)} Uhr"
        return f"{words} {self.cardinal(minute)}" if minute else words


_noun = Nouns("")
_feminine = _noun.feminine


LOCALE = German(
    code="de",
    num2words_code="de",
    decimal_mark=",",
    point="Komma",
    dot="Punkt",
    minus="minus",
    and_word="und",
    range_template="{low} bis {high}",
    units={
        "°C": _noun("Grad Celsius"),
        "°F": _noun("Grad Fahrenheit"),
        "°": _noun("Grad"),
        "K": _noun("Kelvin"),
        "%": _noun("Prozent"),
        "W": _noun("Watt"),
        "kW": _noun("Kilowatt"),
        "MW": _noun("Megawatt"),
        "Wh": _feminine("Wattstunde", "Wattstunden"),
        "kWh": _feminine("Kilowattstunde", "Kilowattstunden"),
        "MWh": _feminine("Megawattstunde", "Megawattstunden"),
        "V": _noun("Volt"),
        "mV": _noun("Millivolt"),
        "A": _noun("Ampere"),
        "mA": _noun("Milliampere"),
        "mAh": _feminine("Milliamperestunde", "Milliamperestunden"),
        "VA": _noun("Voltampere"),
        "Hz": _noun("Hertz"),
        "kHz": _noun("Kilohertz"),
        "MHz": _noun("Megahertz"),
        "GHz": _noun("Gigahertz"),
        "Pa": _noun("Pascal"),
        "hPa": _noun("Hektopascal"),
        "kPa": _noun("Kilopascal"),
        "bar": _noun("Bar"),
        "mbar": _noun("Millibar"),
        "mmHg": _noun("Millimeter Quecksilbersäule"),
        "inHg": _noun("Zoll Quecksilbersäule"),
        "psi": _noun("Pfund pro Quadratzoll"),
        "mm": _noun("Millimeter"),
        "cm": _noun("Zentimeter"),
        "m": _noun("Meter"),
        "km": _noun("Kilometer"),
        "mi": _feminine("Meile", "Meilen"),
        "ft": _noun("Fuß"),
        "in": _noun("Zoll"),
        "m²": _noun("Quadratmeter"),
        "m³": _noun("Kubikmeter"),
        "m³/h": _noun("Kubikmeter pro Stunde"),
        "L": _noun("Liter"),
        "mL": _noun("Milliliter"),
        "L/min": _noun("Liter pro Minute"),
        "gal": _feminine("Gallone", "Gallonen"),
        "g": _noun("Gramm"),
        "mg": _noun("Milligramm"),
        "kg": _noun("Kilogramm"),
        "lb": _noun("Pfund"),
        "oz": _feminine("Unze", "Unzen"),
        "km/h": _noun("Kilometer pro Stunde"),
        "m/s": _noun("Meter pro Sekunde"),
        "mph": _feminine("Meile pro Stunde", "Meilen pro Stunde"),
        "kn": _noun("Knoten"),
        "lx": _noun("Lux"),
        "lm": _noun("Lumen"),
        "dB": _noun("Dezibel"),
        "dBm": _noun("Dezibel Milliwatt"),
        "ppm": _noun("Teil pro Million", "Teile pro Million"),
        "ppb": _noun("Teil pro Milliarde", "Teile pro Milliarde"),
        "µg/m³": _noun("Mikrogramm pro Kubikmeter"),
        "mg/dL": _noun("Milligramm pro Deziliter"),
        "mmol/L": _noun("Millimol pro Liter"),
        "W/m²": _noun("Watt pro Quadratmeter"),
        "s": _feminine("Sekunde", "Sekunden"),
        "ms": _feminine("Millisekunde", "Millisekunden"),
        "min": _feminine("Minute", "Minuten"),
        "h": _feminine("Stunde", "Stunden"),
        "d": _noun("Tag", "Tage"),
        "kB": _noun("Kilobyte"),
        "MB": _noun("Megabyte"),
        "GB": _noun("Gigabyte"),
        "TB": _noun("Terabyte"),
        "kbit/s": _noun("Kilobit pro Sekunde"),
        "Mbit/s": _noun("Megabit pro Sekunde"),
        "Gbit/s": _noun("Gigabit pro Sekunde"),
        "rpm": _feminine("Umdrehung pro Minute", "Umdrehungen pro Minute"),
        "U/min": _feminine("Umdrehung pro Minute", "Umdrehungen pro Minute"),
        "bpm": _noun("Schlag pro Minute", "Schläge pro Minute"),
        "Std.": _feminine("Stunde", "Stunden"),
        "Min.": _feminine("Minute", "Minuten"),
        "Sek.": _feminine("Sekunde", "Sekunden"),
    },
    currencies={
        "USD": Currency(_noun("Dollar"), _noun("Cent")),
        "EUR": Currency(_noun("Euro"), _noun("Cent")),
        "GBP": Currency(_noun("Pfund"), _noun("Penny", "Pence")),
        "CHF": Currency(_noun("Franken"), _noun("Rappen")),
        "JPY": Currency(_noun("Yen")),
    },
    months=(
        "Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August",
        "September", "Oktober", "November", "Dezember",
    ),
    month_forms={
        "januar": 1, "jänner": 1, "jan": 1, "februar": 2, "feb": 2, "märz": 3,
        "maerz": 3, "mär": 3, "mrz": 3, "april": 4, "apr": 4, "mai": 5, "juni": 6,
        "jun": 6, "juli": 7, "jul": 7, "august": 8, "aug": 8, "september": 9,
        "sep": 9, "sept": 9, "oktober": 10, "okt": 10, "november": 11, "nov": 11,
        "dezember": 12, "dez": 12,
    },
    dotted_day=True,
    year_cues=frozenset({
        "jahr", "jahre", "jahres", "seit", "bis", "von", "ab", "anno", "vor", "nach", "um",
    }),
    dotted_ordinal_cues=_OBLIQUE | _ARTICLES,
    time_suffixes=("Uhr",),
    code_cues=frozenset({"code", "pin", "geheimzahl"}),
    abbreviations=(
        Abbreviation("Dr.", "Doktor", Before.NAME),
        Abbreviation("Dr.", "Doktor"),
        Abbreviation("Prof.", "Professor", Before.NAME),
        Abbreviation("Prof.", "Professor"),
        Abbreviation("Hr.", "Herr", Before.NAME),
        Abbreviation("Hrn.", "Herrn", Before.NAME),
        Abbreviation("Fr.", "Frau", Before.NAME),
        Abbreviation("St.", "Sankt", Before.NAME),
        Abbreviation("Str.", "Straße"),
        Abbreviation("z. B.", "zum Beispiel"),
        Abbreviation("z.B.", "zum Beispiel"),
        Abbreviation("d. h.", "das heißt"),
        Abbreviation("d.h.", "das heißt"),
        Abbreviation("u. a.", "unter anderem"),
        Abbreviation("u.a.", "unter anderem"),
        Abbreviation("bzw.", "beziehungsweise"),
        Abbreviation("usw.", "und so weiter"),
        Abbreviation("ca.", "circa"),
        Abbreviation("etc.", "et cetera"),
        Abbreviation("inkl.", "inklusive"),
        Abbreviation("evtl.", "eventuell"),
        Abbreviation("ggf.", "gegebenenfalls"),
        Abbreviation("max.", "maximal"),
        Abbreviation("mind.", "mindestens"),
        Abbreviation("Nr.", "Nummer", Before.NUMBER),
    ),
    symbols={"&": "und", "+": "plus", "=": "gleich", "@": "at", "#": "Raute"},
    number_sign="Nummer",
    about="etwa",
    named_fractions={(1, 2): "ein halb"},
    feminine_endings=("e", "ung", "heit", "keit", "schaft", "ion", "tät", "ik", "ei"),
    feminine_nouns=frozenset({"tür", "nacht", "zeit", "uhrzeit", "hand", "wand", "stadt", "luft"}),
    # "ein Uhr" is the time of day; the rest end in "-e" and are masculine or neuter.
    masculine_nouns=frozenset({
        "uhr", "name", "käse", "auge", "ende", "gebäude", "interesse", "kunde", "junge",
    }),
    nouns_capitalized=True,
)
