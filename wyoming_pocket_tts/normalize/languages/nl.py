"""Dutch: "1.234,5", "negen december", "negentien uur vijf"."""

from __future__ import annotations

from wyoming_pocket_tts.normalize.locale import Abbreviation, Before, Currency, Locale, Nouns


class Dutch(Locale):
    def tidy(self, words: str) -> str:
        # Only "één" alone carries the accents: "honderdeen", "duizendeen".
        return words if words == "één" else words.replace("één", "een")

    def year(self, year: int) -> str:
        # num2words writes "negentien honderd negenennegentig"; Dutch writes one word.
        return "".join(self.tidy(self.spell(year, "year")).split())

    def fraction(self, numerator: int, denominator: int) -> str:
        if numerator == 1 and (numerator, denominator) not in self.named_fractions:
            return f"een {self.denominator(denominator, False)}"  # "een derde", not "één"
        return super().fraction(numerator, denominator)

    def denominator(self, denominator: int, plural: bool) -> str:
        return {2: "half", 4: "kwart"}.get(denominator) or self.ordinal(denominator)

    def mixed_number(self, whole: int, numerator: int, denominator: int) -> str:
        if (whole, numerator, denominator) == (1, 1, 2):
            return "anderhalf"
        return super().mixed_number(whole, numerator, denominator)

    def time(self, hour: int, minute: int, meridiem: str | None = None) -> str:
        if minute == 0 and hour in (0, 24):
            return "middernacht"
        words = f"{self.cardinal(hour)} uur"
        return f"{words} {self.cardinal(minute)}" if minute else words


_noun = Nouns("")


LOCALE = Dutch(
    code="nl",
    num2words_code="nl",
    decimal_mark=",",
    point="komma",
    dot="punt",
    minus="min",
    and_word="en",
    range_template="{low} tot {high}",
    fraction_digits_as_number=True,
    units={
        "°C": _noun("graad Celsius", "graden Celsius"),
        "°F": _noun("graad Fahrenheit", "graden Fahrenheit"),
        "°": _noun("graad", "graden"),
        "K": _noun("kelvin"),
        "%": _noun("procent"),
        "W": _noun("watt"),
        "kW": _noun("kilowatt"),
        "MW": _noun("megawatt"),
        "Wh": _noun("wattuur"),
        "kWh": _noun("kilowattuur"),
        "MWh": _noun("megawattuur"),
        "V": _noun("volt"),
        "mV": _noun("millivolt"),
        "A": _noun("ampère"),
        "mA": _noun("milliampère"),
        "mAh": _noun("milliampère-uur"),
        "VA": _noun("voltampère"),
        "Hz": _noun("hertz"),
        "kHz": _noun("kilohertz"),
        "MHz": _noun("megahertz"),
        "GHz": _noun("gigahertz"),
        "Pa": _noun("pascal"),
        "hPa": _noun("hectopascal"),
        "kPa": _noun("kilopascal"),
        "bar": _noun("bar"),
        "mbar": _noun("millibar"),
        "mmHg": _noun("millimeter kwik"),
        "inHg": _noun("inch kwik"),
        "psi": _noun("pond per vierkante inch"),
        "mm": _noun("millimeter"),
        "cm": _noun("centimeter"),
        "m": _noun("meter"),
        "km": _noun("kilometer"),
        "mi": _noun("mijl"),
        "ft": _noun("voet"),
        "in": _noun("inch"),
        "m²": _noun("vierkante meter"),
        "m³": _noun("kubieke meter"),
        "m³/h": _noun("kubieke meter per uur"),
        "L": _noun("liter"),
        "mL": _noun("milliliter"),
        "L/min": _noun("liter per minuut"),
        "gal": _noun("gallon"),
        "g": _noun("gram"),
        "mg": _noun("milligram"),
        "kg": _noun("kilogram"),
        "lb": _noun("pond"),
        "oz": _noun("ons"),
        "km/h": _noun("kilometer per uur"),
        "m/s": _noun("meter per seconde"),
        "mph": _noun("mijl per uur"),
        "kn": _noun("knoop", "knopen"),
        "lx": _noun("lux"),
        "lm": _noun("lumen"),
        "dB": _noun("decibel"),
        "dBm": _noun("decibel-milliwatt"),
        "ppm": _noun("deeltje per miljoen", "deeltjes per miljoen"),
        "ppb": _noun("deeltje per miljard", "deeltjes per miljard"),
        "µg/m³": _noun("microgram per kubieke meter"),
        "mg/dL": _noun("milligram per deciliter"),
        "mmol/L": _noun("millimol per liter"),
        "W/m²": _noun("watt per vierkante meter"),
        "s": _noun("seconde", "seconden"),
        "ms": _noun("milliseconde", "milliseconden"),
        "min": _noun("minuut", "minuten"),
        "h": _noun("uur"),
        "d": _noun("dag", "dagen"),
        "kB": _noun("kilobyte"),
        "MB": _noun("megabyte"),
        "GB": _noun("gigabyte"),
        "TB": _noun("terabyte"),
        "kbit/s": _noun("kilobit per seconde"),
        "Mbit/s": _noun("megabit per seconde"),
        "Gbit/s": _noun("gigabit per seconde"),
        "rpm": _noun("toer per minuut", "toeren per minuut"),
        "bpm": _noun("slag per minuut", "slagen per minuut"),
    },
    currencies={
        "USD": Currency(_noun("dollar"), _noun("cent")),
        "EUR": Currency(_noun("euro"), _noun("cent")),
        "GBP": Currency(_noun("pond"), _noun("penny", "pence")),
        "CHF": Currency(_noun("Zwitserse frank"), _noun("rappen")),
        "JPY": Currency(_noun("yen")),
    },
    months=(
        "januari", "februari", "maart", "april", "mei", "juni", "juli", "augustus",
        "september", "oktober", "november", "december",
    ),
    month_forms={
        "januari": 1, "jan": 1, "februari": 2, "feb": 2, "maart": 3, "mrt": 3,
        "april": 4, "apr": 4, "mei": 5, "juni": 6, "jun": 6, "juli": 7, "jul": 7,
        "augustus": 8, "aug": 8, "september": 9, "sep": 9, "sept": 9, "oktober": 10,
        "okt": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
    },
    year_cues=frozenset({
        "jaar", "sinds", "in", "tot", "van", "vanaf", "voor", "na", "anno", "rond",
    }),
    ordinal_suffixes=("e", "de", "ste"),
    time_suffixes=("uur",),
    code_cues=frozenset({"code", "pincode", "pin"}),
    abbreviations=(
        Abbreviation("dhr.", "de heer", Before.NAME),
        Abbreviation("Dhr.", "De heer", Before.NAME),
        Abbreviation("mevr.", "mevrouw", Before.NAME),
        Abbreviation("Mevr.", "Mevrouw", Before.NAME),
        Abbreviation("dr.", "dokter", Before.NAME),
        Abbreviation("Dr.", "dokter", Before.NAME),
        Abbreviation("prof.", "professor", Before.NAME),
        Abbreviation("bijv.", "bijvoorbeeld"),
        Abbreviation("bv.", "bijvoorbeeld"),
        Abbreviation("b.v.", "bijvoorbeeld"),
        Abbreviation("ca.", "circa"),
        Abbreviation("enz.", "enzovoort"),
        Abbreviation("etc.", "et cetera"),
        Abbreviation("d.w.z.", "dat wil zeggen"),
        Abbreviation("o.a.", "onder andere"),
        Abbreviation("i.p.v.", "in plaats van"),
        Abbreviation("max.", "maximaal"),
        Abbreviation("nr.", "nummer", Before.NUMBER),
        Abbreviation("Nr.", "nummer", Before.NUMBER),
    ),
    symbols={"&": "en", "+": "plus", "=": "is", "@": "apenstaartje", "#": "hekje"},
    number_sign="nummer",
    about="ongeveer",
    mixed_half="{whole} en een half",
    named_fractions={(1, 2): "een half", (3, 4): "drie kwart"},
)
