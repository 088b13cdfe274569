"""Spanish: "1.234,5", "veintiún grados", "nueve de diciembre", "diecinueve y cinco"."""

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

# "uno" shortens before a masculine noun, or before "mil" and "millones".
_SHORTENED = {"uno": "un", "veintiuno": "veintiún"}
_UNO_BEFORE_THOUSANDS = re.compile(r"\b(veinti)?uno(?= (?:mil|millones|billones)\b)")
_FINAL_UNO = re.compile(r"\b(veinti)?uno$")


def _shorten(match: re.Match[str]) -> str:
    return _SHORTENED[match[0]]


class Spanish(Locale):
    def tidy(self, words: str) -> str:
        words = _UNO_BEFORE_THOUSANDS.sub(_shorten, words)
        # "decimotercero" is one word, without the accent of "décimo".
        return re.sub(r"décimo(?=\w)", "decimo", words)

    def before_noun(self, words: str, gender: Gender) -> str:
        if gender is Gender.FEMININE:  # "veintiuna horas", "doscientas libras"
            return re.sub(r"uno$", "una", words.replace("ientos", "ientas"))
        return _FINAL_UNO.sub(_shorten, words)

    def ordinal(self, number: int, suffix: str = "", previous: str = "") -> str:
        words = super().ordinal(number, suffix, previous)
        if suffix.endswith("ª"):
            return re.sub(r"o\b", "a", words)
        if suffix.endswith("er"):  # "1.er piso": "primer", "tercer"
            return re.sub(r"(primer|tercer)o$", r"\1", words)
        return words

    def denominator(self, denominator: int, plural: bool) -> str:
        words = {2: "medio", 3: "tercio"}.get(denominator) or self.ordinal(denominator)
        return words + "s" if plural else words

    def date(self, day: int | None, month: int, year: int | None, previous: str = "") -> str:
        parts = [] if day is None else ["primero" if day == 1 else self.cardinal(day)]
        parts.append(self.months[month - 1])
        if year is not None:
            parts.append(self.year(year))
        return " de ".join(parts)

    def time(self, hour: int, minute: int, meridiem: str | None = None) -> str:
        words = self.before_noun(self.cardinal(hour), Gender.FEMININE)
        return f"{words} y {self.cardinal(minute)}" if minute else f"{words} en punto"


_noun = Nouns("s")
_feminine = _noun.feminine


LOCALE = Spanish(
    code="es",
    num2words_code="es",
    decimal_mark=",",
    point="coma",
    dot="punto",
    minus="menos",
    and_word="y",
    range_template="{low} a {high}",
    fraction_digits_as_number=True,
    units={
        "°C": _noun("grado Celsius", "grados Celsius"),
        "°F": _noun("grado Fahrenheit", "grados Fahrenheit"),
        "°": _noun("grado"),
        "K": _noun("kelvin", "kelvin"),
        "%": _noun("por ciento", "por ciento"),
        "W": _noun("vatio"),
        "kW": _noun("kilovatio"),
        "MW": _noun("megavatio"),
        "Wh": _noun("vatio hora", "vatios hora"),
        "kWh": _noun("kilovatio hora", "kilovatios hora"),
        "MWh": _noun("megavatio hora", "megavatios hora"),
        "V": _noun("voltio"),
        "mV": _noun("milivoltio"),
        "A": _noun("amperio"),
        "mA": _noun("miliamperio"),
        "mAh": _noun("miliamperio hora", "miliamperios hora"),
        "VA": _noun("voltamperio"),
        "Hz": _noun("hercio"),
        "kHz": _noun("kilohercio"),
        "MHz": _noun("megahercio"),
        "GHz": _noun("gigahercio"),
        "Pa": _noun("pascal", "pascales"),
        "hPa": _noun("hectopascal", "hectopascales"),
        "kPa": _noun("kilopascal", "kilopascales"),
        "bar": _noun("bar", "bares"),
        "mbar": _noun("milibar", "milibares"),
        "mmHg": _noun("milímetro de mercurio", "milímetros de mercurio"),
        "inHg": _feminine("pulgada de mercurio", "pulgadas de mercurio"),
        "psi": _feminine("libra por pulgada cuadrada", "libras por pulgada cuadrada"),
        "mm": _noun("milímetro"),
        "cm": _noun("centímetro"),
        "m": _noun("metro"),
        "km": _noun("kilómetro"),
        "mi": _feminine("milla"),
        "ft": _noun("pie"),
        "in": _feminine("pulgada"),
        "m²": _noun("metro cuadrado", "metros cuadrados"),
        "m³": _noun("metro cúbico", "metros cúbicos"),
        "m³/h": _noun("metro cúbico por hora", "metros cúbicos por hora"),
        "L": _noun("litro"),
        "mL": _noun("mililitro"),
        "L/min": _noun("litro por minuto", "litros por minuto"),
        "gal": _noun("galón", "galones"),
        "g": _noun("gramo"),
        "mg": _noun("miligramo"),
        "kg": _noun("kilogramo"),
        "lb": _feminine("libra"),
        "oz": _feminine("onza"),
        "km/h": _noun("kilómetro por hora", "kilómetros por hora"),
        "m/s": _noun("metro por segundo", "metros por segundo"),
        "mph": _feminine("milla por hora", "millas por hora"),
        "kn": _noun("nudo"),
        "lx": _noun("lux", "lux"),
        "lm": _noun("lumen", "lúmenes"),
        "dB": _noun("decibelio"),
        "dBm": _noun("decibelio milivatio", "decibelios milivatio"),
        "ppm": _feminine("parte por millón", "partes por millón"),
        "ppb": _feminine("parte por mil millones", "partes por mil millones"),
        "µg/m³": _noun("microgramo por metro cúbico", "microgramos por metro cúbico"),
        "mg/dL": _noun("miligramo por decilitro", "miligramos por decilitro"),
        "mmol/L": _noun("milimol por litro", "milimoles por litro"),
        "W/m²": _noun("vatio por metro cuadrado", "vatios por metro cuadrado"),
        "s": _noun("segundo"),
        "ms": _noun("milisegundo"),
        "min": _noun("minuto"),
        "h": _feminine("hora"),
        "d": _noun("día"),
        "kB": _noun("kilobyte"),
        "MB": _noun("megabyte"),
        "GB": _noun("gigabyte"),
        "TB": _noun("terabyte"),
        "kbit/s": _noun("kilobit por segundo", "kilobits por segundo"),
        "Mbit/s": _noun("megabit por segundo", "megabits por segundo"),
        "Gbit/s": _noun("gigabit por segundo", "gigabits por segundo"),
        "rpm": _feminine("revolución por minuto", "revoluciones por minuto"),
        "bpm": _noun("latido por minuto", "latidos por minuto"),
    },
    currencies={
        "USD": Currency(_noun("dólar", "dólares"), _noun("centavo")),
        "EUR": Currency(_noun("euro"), _noun("céntimo")),
        "GBP": Currency(_feminine("libra"), _noun("penique")),
        "CHF": Currency(_noun("franco suizo", "francos suizos"), _noun("céntimo")),
        "JPY": Currency(_noun("yen", "yenes")),
    },
    currency_template="{major} {currency} con {minor}",
    months=(
        "enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
        "septiembre", "octubre", "noviembre", "diciembre",
    ),
    month_forms={
        "enero": 1, "ene": 1, "febrero": 2, "feb": 2, "marzo": 3, "mar": 3, "abril": 4,
        "abr": 4, "mayo": 5, "may": 5, "junio": 6, "jun": 6, "julio": 7, "jul": 7,
        "agosto": 8, "ago": 8, "septiembre": 9, "setiembre": 9, "sep": 9, "sept": 9,
        "octubre": 10, "oct": 10, "noviembre": 11, "nov": 11, "diciembre": 12, "dic": 12,
    },
    date_connector="de",
    ordinal_suffixes=("º", "ª", ".º", ".ª", "er", ".er"),
    time_suffixes=("h",),
    code_cues=frozenset({"código", "pin"}),
    abbreviations=(
        Abbreviation("Sr.", "señor", Before.NAME),
        Abbreviation("Sra.", "señora", Before.NAME),
        Abbreviation("Srta.", "señorita", Before.NAME),
        Abbreviation("Dr.", "doctor", Before.NAME),
        Abbreviation("Dra.", "doctora", Before.NAME),
        Abbreviation("Prof.", "profesor", Before.NAME),
        Abbreviation("Ud.", "usted"),
        Abbreviation("Uds.", "ustedes"),
        Abbreviation("Avda.", "avenida", Before.NAME),
        Abbreviation("Avda.", "avenida"),
        Abbreviation("aprox.", "aproximadamente"),
        Abbreviation("p. ej.", "por ejemplo"),
        Abbreviation("p.ej.", "por ejemplo"),
        Abbreviation("etc.", "etcétera"),
        Abbreviation("máx.", "máximo"),
        Abbreviation("EE. UU.", "Estados Unidos"),
        Abbreviation("EE.UU.", "Estados Unidos"),
        Abbreviation("n.º", "número", Before.NUMBER),
        Abbreviation("nº", "número", Before.NUMBER),
        Abbreviation("núm.", "número", Before.NUMBER),
    ),
    symbols={"&": "y", "+": "más", "=": "igual a", "@": "arroba", "#": "almohadilla"},
    number_sign="número",
    about="aproximadamente",
    mixed_half="{whole} y medio",
    named_fractions={(1, 2): "un medio"},
    feminine_endings=("a", "as", "ión", "iones", "dad", "dades", "tud", "tudes", "umbre"),
    feminine_nouns=frozenset({
        "luz", "luces", "noche", "llave", "calle", "tarde", "parte", "nube", "red", "redes",
        "vez", "veces", "gente",
    }),
    masculine_nouns=frozenset({
        "día", "mapa", "problema", "sistema", "programa", "clima", "idioma", "tema", "sofá",
        "planeta",
    }),
    not_nouns=frozenset({
        "de", "del", "al", "en", "con", "por", "para", "sin", "sobre", "entre", "hasta",
        "desde", "que", "más", "menos", "es", "son", "está", "están", "hay", "era", "fue",
    }),
)
