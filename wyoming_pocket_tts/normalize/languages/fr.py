"""French: "1 234,5", "une heure", "premier décembre", "dix-neuf heures cinq"."""

from __future__ import annotations

from wyoming_pocket_tts.normalize.locale import (
    Abbreviation,
    Before,
    Currency,
    Gender,
    Locale,
    Nouns,
)
from wyoming_pocket_tts.normalize.written import WrittenNumber

_FEMININE_FIRST = ("re", "ère", "\u02b3\u1d49")


class French(Locale):
    def before_noun(self, words: str, gender: Gender) -> str:
        if gender is Gender.FEMININE and words.endswith("un"):
            return words + "e"  # "vingt et une heures"
        return words

    def is_singular(self, number: WrittenNumber) -> bool:
        # French counts below two as one: "1,5 kilomètre", "0 degré".
        return abs(number.value) < 2

    def ordinal(self, number: int, suffix: str = "", previous: str = "") -> str:
        if number == 1:
            return "première" if suffix in _FEMININE_FIRST else "premier"
        return super().ordinal(number, suffix, previous)

    def denominator(self, denominator: int, plural: bool) -> str:
        named = {2: ("demi", "demis"), 3: ("tiers", "tiers"), 4: ("quart", "quarts")}
        if denominator in named:
            return named[denominator][plural]
        return super().denominator(denominator, plural)

    def date(self, day: int | None, month: int, year: int | None, previous: str = "") -> str:
        parts = [] if day is None else ["premier" if day == 1 else self.cardinal(day)]
        parts.append(self.months[month - 1])
        if year is not None:
            parts.append(self.year(year))
        return " ".join(parts)

    def time(self, hour: int, minute: int, meridiem: str | None = None) -> str:
        if minute == 0 and hour == 12:
            return "midi"
        if minute == 0 and hour in (0, 24):
            return "minuit"
        words = self.before_noun(self.cardinal(hour), Gender.FEMININE)
        words += " heure" if hour < 2 else " heures"
        if minute:
            words += " " + self.before_noun(self.cardinal(minute), Gender.FEMININE)
        return words


_noun = Nouns("s")
_feminine = _noun.feminine


LOCALE = French(
    code="fr",
    num2words_code="fr",
    decimal_mark=",",
    point="virgule",
    dot="point",
    minus="moins",
    and_word="et",
    range_template="{low} à {high}",
    groups_with_space=True,
    fraction_digits_as_number=True,
    units={
        "°C": _noun("degré Celsius", "degrés Celsius"),
        "°F": _noun("degré Fahrenheit", "degrés Fahrenheit"),
        "°": _noun("degré"),
        "K": _noun("kelvin"),
        "%": _noun("pour cent", "pour cent"),
        "W": _noun("watt"),
        "kW": _noun("kilowatt"),
        "MW": _noun("mégawatt"),
        "Wh": _noun("wattheure"),
        "kWh": _noun("kilowattheure"),
        "MWh": _noun("mégawattheure"),
        "V": _noun("volt"),
        "mV": _noun("millivolt"),
        "A": _noun("ampère"),
        "mA": _noun("milliampère"),
        "mAh": _noun("milliampère-heure", "milliampères-heures"),
        "VA": _noun("voltampère"),
        "Hz": _noun("hertz", "hertz"),
        "kHz": _noun("kilohertz", "kilohertz"),
        "MHz": _noun("mégahertz", "mégahertz"),
        "GHz": _noun("gigahertz", "gigahertz"),
        "Pa": _noun("pascal"),
        "hPa": _noun("hectopascal"),
        "kPa": _noun("kilopascal"),
        "bar": _noun("bar"),
        "mbar": _noun("millibar"),
        "mmHg": _noun("millimètre de mercure", "millimètres de mercure"),
        "inHg": _noun("pouce de mercure", "pouces de mercure"),
        "psi": _feminine("livre par pouce carré", "livres par pouce carré"),
        "mm": _noun("millimètre"),
        "cm": _noun("centimètre"),
        "m": _noun("mètre"),
        "km": _noun("kilomètre"),
        "mi": _noun("mile"),
        "ft": _noun("pied"),
        "in": _noun("pouce"),
        "m²": _noun("mètre carré", "mètres carrés"),
        "m³": _noun("mètre cube", "mètres cubes"),
        "m³/h": _noun("mètre cube par heure", "mètres cubes par heure"),
        "L": _noun("litre"),
        "mL": _noun("millilitre"),
        "L/min": _noun("litre par minute", "litres par minute"),
        "gal": _noun("gallon"),
        "g": _noun("gramme"),
        "mg": _noun("milligramme"),
        "kg": _noun("kilogramme"),
        "lb": _feminine("livre"),
        "oz": _feminine("once"),
        "km/h": _noun("kilomètre par heure", "kilomètres par heure"),
        "m/s": _noun("mètre par seconde", "mètres par seconde"),
        "mph": _noun("mile par heure", "miles par heure"),
        "kn": _noun("nœud"),
        "lx": _noun("lux", "lux"),
        "lm": _noun("lumen"),
        "dB": _noun("décibel"),
        "dBm": _noun("décibel-milliwatt", "décibels-milliwatts"),
        "ppm": _feminine("partie par million", "parties par million"),
        "ppb": _feminine("partie par milliard", "parties par milliard"),
        "µg/m³": _noun("microgramme par mètre cube", "microgrammes par mètre cube"),
        "mg/dL": _noun("milligramme par décilitre", "milligrammes par décilitre"),
        "mmol/L": _feminine("millimole par litre", "millimoles par litre"),
        "W/m²": _noun("watt par mètre carré", "watts par mètre carré"),
        "s": _feminine("seconde"),
        "ms": _feminine("milliseconde"),
        "min": _feminine("minute"),
        "h": _feminine("heure"),
        "d": _noun("jour"),
        "kB": _noun("kilooctet"),
        "MB": _noun("mégaoctet"),
        "GB": _noun("gigaoctet"),
        "TB": _noun("téraoctet"),
        "ko": _noun("kilooctet"),
        "Mo": _noun("mégaoctet"),
        "Go": _noun("gigaoctet"),
        "To": _noun("téraoctet"),
        "kbit/s": _noun("kilobit par seconde", "kilobits par seconde"),
        "Mbit/s": _noun("mégabit par seconde", "mégabits par seconde"),
        "Gbit/s": _noun("gigabit par seconde", "gigabits par seconde"),
        "rpm": _noun("tour par minute", "tours par minute"),
        "tr/min": _noun("tour par minute", "tours par minute"),
        "bpm": _noun("battement par minute", "battements par minute"),
    },
    currencies={
        "USD": Currency(_noun("dollar"), _noun("cent")),
        "EUR": Currency(_noun("euro"), _noun("centime")),
        "GBP": Currency(_feminine("livre sterling", "livres sterling"), _noun("penny", "pence")),
        "CHF": Currency(_noun("franc suisse", "francs suisses"), _noun("centime")),
        "JPY": Currency(_noun("yen")),
    },
    months=(
        "janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août",
        "septembre", "octobre", "novembre", "décembre",
    ),
    month_forms={
        "janvier": 1, "janv": 1, "février": 2, "fevrier": 2, "févr": 2, "fév": 2,
        "mars": 3, "avril": 4, "avr": 4, "mai": 5, "juin": 6, "juillet": 7, "juil": 7,
        "août": 8, "aout": 8, "septembre": 9, "sept": 9, "octobre": 10, "oct": 10,
        "novembre": 11, "nov": 11, "décembre": 12, "decembre": 12, "déc": 12, "dec": 12,
    },
    ordinal_suffixes=(
        "er", "re", "ère", "e", "ème", "eme", "nd", "nde",
        "\u1d49\u02b3", "\u02b3\u1d49", "\u1d49",
    ),
    time_suffixes=("h",),
    hour_letter_times=True,
    telephone_pairs=True,
    code_cues=frozenset({"code", "pin"}),
    abbreviations=(
        Abbreviation("M.", "Monsieur", Before.NAME),
        Abbreviation("MM.", "Messieurs", Before.NAME),
        Abbreviation("Mme", "Madame", Before.NAME),
        Abbreviation("Mmes", "Mesdames", Before.NAME),
        Abbreviation("Mlle", "Mademoiselle", Before.NAME),
        Abbreviation("Dr", "Docteur", Before.NAME),
        Abbreviation("Dr.", "Docteur", Before.NAME),
        Abbreviation("Pr", "Professeur", Before.NAME),
        Abbreviation("St", "Saint", Before.NAME),
        Abbreviation("Ste", "Sainte", Before.NAME),
        Abbreviation("env.", "environ"),
        Abbreviation("approx.", "approximativement"),
        Abbreviation("p. ex.", "par exemple"),
        Abbreviation("p.ex.", "par exemple"),
        Abbreviation("c.-à-d.", "c'est-à-dire"),
        Abbreviation("etc.", "et cetera"),
        Abbreviation("max.", "maximum"),
        Abbreviation("n°", "numéro", Before.NUMBER),
        Abbreviation("nº", "numéro", Before.NUMBER),
        Abbreviation("N°", "numéro", Before.NUMBER),
        Abbreviation("No", "numéro", Before.NUMBER),
    ),
    symbols={"&": "et", "+": "plus", "=": "égale", "@": "arobase", "#": "dièse"},
    number_sign="numéro",
    about="environ",
    mixed_half="{whole} et demi",
    named_fractions={(1, 2): "un demi"},
    feminine_endings=(
        "tion", "sion", "té", "ure", "ette", "ière", "ance", "ence", "ise", "ine", "ée",
        "elle", "esse", "ie",
    ),
    feminine_nouns=frozenset({
        "porte", "fenêtre", "lampe", "alarme", "personne", "seconde", "minute", "semaine",
        "fois", "chambre", "salle", "pièce", "voiture", "alerte", "douche", "zone", "vanne",
        "pompe", "caméra", "ampoule", "heure", "chose", "maison", "clé", "sonnette", "plante",
        "fuite", "prise",
    }),
)
