"""Portuguese (as in Portugal): "1.234,5", "duas horas", "nove de dezembro", "dezanove e cinco"."""

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

# "um" and "dois", and the hundreds, agree with a feminine noun; "milhão" stays masculine.
_FEMININE = (
    (re.compile(r"\bum\b(?! milh)"), "uma"),
    (re.compile(r"\bdois\b(?! milh)"), "duas"),
    (re.compile(r"entos\b"), "entas"),
)


class Portuguese(Locale):
    def before_noun(self, words: str, gender: Gender) -> str:
        if gender is Gender.FEMININE:
            for pattern, feminine in _FEMININE:
                words = pattern.sub(feminine, words)
        return words

    def ordinal(self, number: int, suffix: str = "", previous: str = "") -> str:
        words = super().ordinal(number, suffix, previous)
        return re.sub(r"o\b", "a", words) if suffix.endswith("ª") else words

    def denominator(self, denominator: int, plural: bool) -> str:
        words = {2: "meio", 3: "terço"}.get(denominator) or self.ordinal(denominator)
        return words + "s" if plural else words

    def date(self, day: int | None, month: int, year: int | None, previous: str = "") -> str:
        parts = [] if day is None else ["primeiro" if day == 1 else self.cardinal(day)]
        parts.append(self.months[month - 1])
        if year is not None:
            parts.append(self.year(year))
        return " de ".join(parts)

    def time(self, hour: int, minute: int, meridiem: str | None = None) -> str:
        if minute == 0 and hour in (0, 24):
            return "meia-noite"
        if minute == 0 and hour == 12:
            return "meio-dia"
        words = self.before_noun(self.cardinal(hour), Gender.FEMININE)
        if minute:
            return f"{words} e {self.cardinal(minute)}"
        return f"{words} {'hora' if hour == 1 else 'horas'}"


_noun = Nouns("s")
_feminine = _noun.feminine


LOCALE = Portuguese(
    code="pt",
    num2words_code="pt",
    decimal_mark=",",
    point="vírgula",
    dot="ponto",
    minus="menos",
    and_word="e",
    range_template="{low} a {high}",
    fraction_digits_as_number=True,
    units={
        "°C": _noun("grau Celsius", "graus Celsius"),
        "°F": _noun("grau Fahrenheit", "graus Fahrenheit"),
        "°": _noun("grau"),
        "K": _noun("kelvin"),
        "%": _noun("por cento", "por cento"),
        "W": _noun("watt"),
        "kW": _noun("quilowatt"),
        "MW": _noun("megawatt"),
        "Wh": _noun("watt-hora", "watts-hora"),
        "kWh": _noun("quilowatt-hora", "quilowatts-hora"),
        "MWh": _noun("megawatt-hora", "megawatts-hora"),
        "V": _noun("volt"),
        "mV": _noun("milivolt"),
        "A": _noun("ampere"),
        "mA": _noun("miliampere"),
        "mAh": _noun("miliampere-hora", "miliamperes-hora"),
        "VA": _noun("volt-ampere", "volts-ampere"),
        "Hz": _noun("hertz", "hertz"),
        "kHz": _noun("quilohertz", "quilohertz"),
        "MHz": _noun("megahertz", "megahertz"),
        "GHz": _noun("gigahertz", "gigahertz"),
        "Pa": _noun("pascal", "pascals"),
        "hPa": _noun("hectopascal", "hectopascais"),
        "kPa": _noun("quilopascal", "quilopascais"),
        "bar": _noun("bar", "bares"),
        "mbar": _noun("milibar", "milibares"),
        "mmHg": _noun("milímetro de mercúrio", "milímetros de mercúrio"),
        "inHg": _feminine("polegada de mercúrio", "polegadas de mercúrio"),
        "psi": _feminine("libra por polegada quadrada", "libras por polegada quadrada"),
        "mm": _noun("milímetro"),
        "cm": _noun("centímetro"),
        "m": _noun("metro"),
        "km": _noun("quilómetro"),
        "mi": _feminine("milha"),
        "ft": _noun("pé"),
        "in": _feminine("polegada"),
        "m²": _noun("metro quadrado", "metros quadrados"),
        "m³": _noun("metro cúbico", "metros cúbicos"),
        "m³/h": _noun("metro cúbico por hora", "metros cúbicos por hora"),
        "L": _noun("litro"),
        "mL": _noun("mililitro"),
        "L/min": _noun("litro por minuto", "litros por minuto"),
        "gal": _noun("galão", "galões"),
        "g": _noun("grama"),
        "mg": _noun("miligrama"),
        "kg": _noun("quilograma"),
        "lb": _feminine("libra"),
        "oz": _feminine("onça"),
        "km/h": _noun("quilómetro por hora", "quilómetros por hora"),
        "m/s": _noun("metro por segundo", "metros por segundo"),
        "mph": _feminine("milha por hora", "milhas por hora"),
        "kn": _noun("nó", "nós"),
        "lx": _noun("lux", "lux"),
        "lm": _noun("lúmen", "lúmenes"),
        "dB": _noun("decibel", "decibéis"),
        "dBm": _noun("decibel-miliwatt", "decibéis-miliwatt"),
        "ppm": _feminine("parte por milhão", "partes por milhão"),
        "ppb": _feminine("parte por mil milhões", "partes por mil milhões"),
        "µg/m³": _noun("micrograma por metro cúbico", "microgramas por metro cúbico"),
        "mg/dL": _noun("miligrama por decilitro", "miligramas por decilitro"),
        "mmol/L": _feminine("milimole por litro", "milimoles por litro"),
        "W/m²": _noun("watt por metro quadrado", "watts por metro quadrado"),
        "s": _noun("segundo"),
        "ms": _noun("milissegundo"),
        "min": _noun("minuto"),
        "h": _feminine("hora"),
        "d": _noun("dia"),
        "kB": _noun("quilobyte"),
        "MB": _noun("megabyte"),
        "GB": _noun("gigabyte"),
        "TB": _noun("terabyte"),
        "kbit/s": _noun("quilobit por segundo", "quilobits por segundo"),
        "Mbit/s": _noun("megabit por segundo", "megabits por segundo"),
        "Gbit/s": _noun("gigabit por segundo", "gigabits por segundo"),
        "rpm": _feminine("rotação por minuto", "rotações por minuto"),
        "bpm": _noun("batimento por minuto", "batimentos por minuto"),
    },
    currencies={
        "USD": Currency(_noun("dólar", "dólares"), _noun("cêntimo")),
        "EUR": Currency(_noun("euro"), _noun("cêntimo")),
        "GBP": Currency(_feminine("libra"), _noun("péni", "pence")),
        "CHF": Currency(_noun("franco suíço", "francos suíços"), _noun("cêntimo")),
        "JPY": Currency(_noun("iene")),
    },
    currency_template="{major} {currency} e {minor}",
    months=(
        "janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto",
        "setembro", "outubro", "novembro", "dezembro",
    ),
    month_forms={
        "janeiro": 1, "jan": 1, "fevereiro": 2, "fev": 2, "março": 3, "marco": 3,
        "mar": 3, "abril": 4, "abr": 4, "maio": 5, "mai": 5, "junho": 6, "jun": 6,
        "julho": 7, "jul": 7, "agosto": 8, "ago": 8, "setembro": 9, "set": 9,
        "outubro": 10, "out": 10, "novembro": 11, "nov": 11, "dezembro": 12, "dez": 12,
    },
    date_connector="de",
    ordinal_suffixes=("º", "ª", ".º", ".ª"),
    time_suffixes=("h",),
    hour_letter_times=True,
    code_cues=frozenset({"código", "pin"}),
    abbreviations=(
        Abbreviation("Sr.", "senhor", Before.NAME),
        Abbreviation("Sra.", "senhora", Before.NAME),
        Abbreviation("Dr.", "doutor", Before.NAME),
        Abbreviation("Dra.", "doutora", Before.NAME),
        Abbreviation("Prof.", "professor", Before.NAME),
        Abbreviation("Av.", "avenida", Before.NAME),
        Abbreviation("Av.", "avenida"),
        Abbreviation("aprox.", "aproximadamente"),
        Abbreviation("p. ex.", "por exemplo"),
        Abbreviation("p.ex.", "por exemplo"),
        Abbreviation("etc.", "et cetera"),
        Abbreviation("máx.", "máximo"),
        Abbreviation("n.º", "número", Before.NUMBER),
        Abbreviation("nº", "número", Before.NUMBER),
    ),
    symbols={"&": "e", "+": "mais", "=": "igual a", "@": "arroba", "#": "cardinal"},
    number_sign="número",
    about="cerca de",
    mixed_half="{whole} e meio",
    named_fractions={(1, 2): "um meio"},
    feminine_endings=("a", "as", "ção", "ções", "são", "sões", "dade", "dades", "gem", "gens"),
    feminine_nouns=frozenset({
        "luz", "luzes", "noite", "chave", "parte", "tarde", "rede", "vez", "vezes",
    }),
    masculine_nouns=frozenset({
        "dia", "mapa", "problema", "sistema", "programa", "clima", "tema", "sofá", "planeta",
    }),
    not_nouns=frozenset({
        "de", "do", "da", "dos", "das", "os", "as", "em", "no", "na", "nos", "nas", "com",
        "por", "para", "sem", "sobre", "entre", "até", "que", "mais", "menos", "são",
        "está", "estão", "foi", "era", "fica", "ficam",
    }),
)
