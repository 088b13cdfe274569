"""English: "1,234.5", "December ninth", "seven thirty p.m.", years in pairs."""

from __future__ import annotations

from wyoming_pocket_tts.normalize.locale import Abbreviation, Before, Currency, Locale, Nouns


class English(Locale):
    def tidy(self, words: str) -> str:
        # num2words writes "one thousand, two hundred": the comma would be read as a pause.
        return words.replace(",", "")

    def year(self, year: int) -> str:
        return self.tidy(self.spell(year, "year")).replace("oh-", "oh ")

    def denominator(self, denominator: int, plural: bool) -> str:
        named = {2: ("half", "halves"), 4: ("quarter", "quarters")}.get(denominator)
        if named is not None:
            return named[plural]
        return super().denominator(denominator, plural)

    def date(self, day: int | None, month: int, year: int | None, previous: str = "") -> str:
        name = self.months[month - 1]
        if day is None:
            spoken = name
        elif previous == "the":  # "the 9th of December"
            spoken = f"{self.ordinal(day)} of {name}"
        else:
            spoken = f"{name} {self.ordinal(day)}"
        if year is None:
            return spoken
        return f"{spoken}, {self.year(year)}" if day is not None else f"{spoken} {self.year(year)}"

    def time(self, hour: int, minute: int, meridiem: str | None = None) -> str:
        if meridiem is None:
            if minute == 0 and hour in (0, 24):
                return "midnight"
            if minute == 0 and hour == 12:
                return "noon"
            meridiem = "pm" if 12 <= hour < 24 else "am"
        words = self.cardinal(hour % 12 or 12)
        if 0 < minute < 10:
            words += f" oh {self.cardinal(minute)}"
        elif minute:
            words += f" {self.cardinal(minute)}"
        return f"{words} {'p.m.' if meridiem == 'pm' else 'a.m.'}"


_noun = Nouns("s")


LOCALE = English(
    code="en",
    num2words_code="en",
    decimal_mark=".",
    point="point",
    dot="dot",
    minus="minus",
    and_word="and",
    range_template="{low} to {high}",
    units={
        "°C": _noun("degree Celsius", "degrees Celsius"),
        "°F": _noun("degree Fahrenheit", "degrees Fahrenheit"),
        "°": _noun("degree"),
        "K": _noun("kelvin"),
        "%": _noun("percent", "percent"),
        "W": _noun("watt"),
        "kW": _noun("kilowatt"),
        "MW": _noun("megawatt"),
        "Wh": _noun("watt hour"),
        "kWh": _noun("kilowatt hour"),
        "MWh": _noun("megawatt hour"),
        "V": _noun("volt"),
        "mV": _noun("millivolt"),
        "A": _noun("amp"),
        "mA": _noun("milliamp"),
        "mAh": _noun("milliamp hour"),
        "VA": _noun("volt-ampere"),
        "Hz": _noun("hertz", "hertz"),
        "kHz": _noun("kilohertz", "kilohertz"),
        "MHz": _noun("megahertz", "megahertz"),
        "GHz": _noun("gigahertz", "gigahertz"),
        "Pa": _noun("pascal"),
        "hPa": _noun("hectopascal"),
        "kPa": _noun("kilopascal"),
        "bar": _noun("bar"),
        "mbar": _noun("millibar"),
        "mmHg": _noun("millimeter of mercury", "millimeters of mercury"),
        "inHg": _noun("inch of mercury", "inches of mercury"),
        "psi": _noun("pound per square inch", "pounds per square inch"),
        "mm": _noun("millimeter"),
        "cm": _noun("centimeter"),
        "m": _noun("meter"),
        "km": _noun("kilometer"),
        "mi": _noun("mile"),
        "ft": _noun("foot", "feet"),
        "in": _noun("inch", "inches"),
        "m²": _noun("square meter"),
        "m³": _noun("cubic meter"),
        "m³/h": _noun("cubic meter per hour", "cubic meters per hour"),
        "L": _noun("liter"),
        "mL": _noun("milliliter"),
        "L/min": _noun("liter per minute", "liters per minute"),
        "gal": _noun("gallon"),
        "g": _noun("gram"),
        "mg": _noun("milligram"),
        "kg": _noun("kilogram"),
        "lb": _noun("pound"),
        "oz": _noun("ounce"),
        "km/h": _noun("kilometer per hour", "kilometers per hour"),
        "m/s": _noun("meter per second", "meters per second"),
        "mph": _noun("mile per hour", "miles per hour"),
        "kn": _noun("knot"),
        "lx": _noun("lux", "lux"),
        "lm": _noun("lumen"),
        "dB": _noun("decibel"),
        "dBm": _noun("decibel milliwatt"),
        "ppm": _noun("part per million", "parts per million"),
        "ppb": _noun("part per billion", "parts per billion"),
        "µg/m³": _noun("microgram per cubic meter", "micrograms per cubic meter"),
        "mg/dL": _noun("milligram per deciliter", "milligrams per deciliter"),
        "mmol/L": _noun("millimole per liter", "millimoles per liter"),
        "W/m²": _noun("watt per square meter", "watts per square meter"),
        "s": _noun("second"),
        "ms": _noun("millisecond"),
        "min": _noun("minute"),
        "h": _noun("hour"),
        "d": _noun("day"),
        "kB": _noun("kilobyte"),
        "MB": _noun("megabyte"),
        "GB": _noun("gigabyte"),
        "TB": _noun("terabyte"),
        "kbit/s": _noun("kilobit per second", "kilobits per second"),
        "Mbit/s": _noun("megabit per second", "megabits per second"),
        "Gbit/s": _noun("gigabit per second", "gigabits per second"),
        "rpm": _noun("revolution per minute", "revolutions per minute"),
        "bpm": _noun("beat per minute", "beats per minute"),
    },
    currencies={
        "USD": Currency(_noun("dollar"), _noun("cent")),
        "EUR": Currency(_noun("euro"), _noun("cent")),
        "GBP": Currency(_noun("pound"), _noun("penny", "pence")),
        "CHF": Currency(_noun("Swiss franc"), _noun("centime")),
        "JPY": Currency(_noun("yen", "yen")),
    },
    months=(
        "January", "February", "March", "April", "May", "June", "July", "August",
        "September", "October", "November", "December",
    ),
    month_forms={
        "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3,
        "april": 4, "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7,
        "august": 8, "aug": 8, "september": 9, "sep": 9, "sept": 9, "october": 10,
        "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
    },
    date_order="mdy",
    date_connector="of",
    year_cues=frozenset({
        "in", "since", "until", "till", "before", "after", "during", "year", "by",
        "around", "circa",
    }),
    ordinal_suffixes=("st", "nd", "rd", "th"),
    meridiems=("am", "pm", "a.m.", "p.m."),
    code_cues=frozenset({"code", "pin", "passcode", "otp"}),
    abbreviations=(
        Abbreviation("Mr.", "Mister", Before.NAME),
        Abbreviation("Mrs.", "Missus", Before.NAME),
        Abbreviation("Ms.", "Miz", Before.NAME),
        Abbreviation("Dr.", "Doctor", Before.NAME),
        Abbreviation("Dr.", "Drive"),
        Abbreviation("St.", "Saint", Before.NAME),
        Abbreviation("St.", "Street"),
        Abbreviation("Mt.", "Mount", Before.NAME),
        Abbreviation("Prof.", "Professor", Before.NAME),
        Abbreviation("Prof.", "Professor"),
        Abbreviation("Jr.", "Junior"),
        Abbreviation("Sr.", "Senior"),
        Abbreviation("Ave.", "Avenue"),
        Abbreviation("Rd.", "Road"),
        Abbreviation("e.g.", "for example"),
        Abbreviation("i.e.", "that is"),
        Abbreviation("etc.", "et cetera"),
        Abbreviation("approx.", "approximately"),
        Abbreviation("vs.", "versus"),
        Abbreviation("max.", "maximum"),
        Abbreviation("No.", "number", Before.NUMBER),
        Abbreviation("no.", "number", Before.NUMBER),
    ),
    symbols={"&": "and", "+": "plus", "=": "equals", "@": "at", "#": "hash"},
    number_sign="number",
    about="about",
    mixed_half="{whole} and a half",
    named_fractions={(1, 2): "one half", (1, 4): "one quarter"},
)
