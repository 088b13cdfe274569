"""What a language brings to normalisation: its words, its conventions, its grammar.

A `Locale` is data (separators, unit and currency names, month names,
abbreviations) and a few methods with a default grammar; each language under
`languages/` is one instance, of a subclass where its grammar differs (gender,
how a clock time or a date is said). The passes that find numbers, dates and
units in a text know no language: they ask the locale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache

# num2words ships without type information.
from num2words import num2words  # type: ignore[import-untyped]

from wyoming_pocket_tts.normalize.written import WrittenNumber


@lru_cache(maxsize=4096)
def _spell(language: str, number: int, to: str) -> str:
    # Texts repeat their numbers (digits above all), and num2words takes microseconds.
    return str(num2words(number, lang=language, to=to))


class Gender(Enum):
    """The grammatical gender a number agrees with ("un"/"une", "dois"/"duas")."""

    MASCULINE = "masculine"
    FEMININE = "feminine"


@dataclass(frozen=True)
class Noun:
    """A word said after a number (a unit, a currency), in both numbers and its gender."""

    singular: str
    plural: str
    gender: Gender = Gender.MASCULINE

    def form(self, singular: bool) -> str:
        return self.singular if singular else self.plural


@dataclass(frozen=True)
class Nouns:
    """How a language writes a noun whose plural is not spelt out: the singular and
    `suffix` ("grado", "grados"; German's "Grad" takes none)."""

    suffix: str = "s"

    def __call__(
        self, singular: str, plural: str | None = None, gender: Gender = Gender.MASCULINE
    ) -> Noun:
        return Noun(singular, singular + self.suffix if plural is None else plural, gender)

    def feminine(self, singular: str, plural: str | None = None) -> Noun:
        return self(singular, plural, Gender.FEMININE)


@dataclass(frozen=True)
class Currency:
    """A currency's name and, when it has one, the name of its hundredth."""

    major: Noun
    minor: Noun | None = None


class Before(Enum):
    """Where an abbreviation means what it stands for."""

    ANYTHING = "anything"
    NUMBER = "number"  # "No. 5", not "No."
    NAME = "name"  # "St. Louis" (Saint), a capitalised word after it


@dataclass(frozen=True)
class Abbreviation:
    written: str
    spoken: str
    before: Before = Before.ANYTHING


@dataclass(frozen=True, eq=False)
class Locale:
    """One language's rules. Instances compare and hash by identity (compiled
    patterns are cached per locale)."""

    code: str
    num2words_code: str
    # Numbers: which of "." and "," is the decimal mark when "1.234" could be either,
    # whether a plain space groups thousands, the words around a number.
    decimal_mark: str
    point: str
    dot: str
    minus: str
    and_word: str
    range_template: str
    groups_with_space: bool = False
    # "21,25" as "vingt et un virgule vingt-cinq" rather than digit by digit.
    fraction_digits_as_number: bool = False
    # Units by symbol and currencies by ISO code: the nouns said after a number.
    units: Mapping[str, Noun] = field(default_factory=dict)
    currencies: Mapping[str, Currency] = field(default_factory=dict)
    # "{major} {currency} {minor}": how an amount with cents is said.
    currency_template: str = "{major} {currency} {minor}"
    # Dates: the twelve month names, every written form of them (lower case, without
    # the abbreviation's full stop), the order of a numeric date, the word between day
    # and month ("9 de diciembre").
    months: tuple[str, ...] = ()
    month_forms: Mapping[str, int] = field(default_factory=dict)
    date_order: str = "dmy"
    date_connector: str = ""
    # "9. Dezember", "9.12.": a day number ends with a full stop.
    dotted_day: bool = False
    # Words after which a four-digit number is a year ("in 1999", "seit 1999").
    year_cues: frozenset[str] = frozenset()
    # Ordinal endings written after the digits ("st", "er", "º"), and for languages
    # that mark an ordinal with a full stop, the words after which "3." is one.
    ordinal_suffixes: tuple[str, ...] = ()
    dotted_ordinal_cues: frozenset[str] = frozenset()
    # Clock times: what may follow one and is already said ("Uhr"), "19h05", "pm".
    time_suffixes: tuple[str, ...] = ()
    hour_letter_times: bool = False
    meridiems: tuple[str, ...] = ()
    # "06 12 34 56 78" in pairs, as numbers ("zéro six, douze, ...").
    telephone_pairs: bool = False
    code_cues: frozenset[str] = frozenset()
    abbreviations: tuple[Abbreviation, ...] = ()
    # "&", "+", "=", "@" and "#" as words; "#5" and "~5" before a number.
    symbols: Mapping[str, str] = field(default_factory=dict)
    number_sign: str = ""
    about: str = ""
    # Fractions: "{whole} and a half", then the words of the common ones by (n, d).
    mixed_half: str = ""
    named_fractions: Mapping[tuple[int, int], str] = field(default_factory=dict)
    # A counted word's gender ("1 porta", "2 portas"), guessed from its ending, with the
    # exceptions that matter; words that count nothing ("1 de 3") keep the plain number.
    feminine_endings: tuple[str, ...] = ()
    feminine_nouns: frozenset[str] = frozenset()
    masculine_nouns: frozenset[str] = frozenset()
    not_nouns: frozenset[str] = frozenset()
    nouns_capitalized: bool = False

    # -- numbers ---------------------------------------------------------------------

    def spell(self, number: int, to: str = "cardinal") -> str:
        """num2words' words for a number, as it writes them ("cardinal", "ordinal", "year")."""
        return _spell(self.num2words_code, number, to)

    def cardinal(self, number: int) -> str:
        return self.tidy(self.spell(number))

    def tidy(self, words: str) -> str:
        """Correct what num2words says differently from a speaker of the language."""
        return words

    def before_noun(self, words: str, gender: Gender) -> str:
        """A cardinal's form before a noun ("un" kilomètre, "eine" Stunde)."""
        return words

    def noun_gender(self, word: str) -> Gender | None:
        """The gender of a word that follows a number, None when it is no noun or the
        language's numbers do not agree."""
        if not (self.feminine_endings or self.feminine_nouns):
            return None
        if self.nouns_capitalized and not word[:1].isupper():
            return None
        lowered = word.lower()
        if len(lowered) < 3 or lowered in self.not_nouns:
            return None
        singular = lowered.removesuffix("s")  # the lists hold singulars ("fenêtres")
        if lowered in self.masculine_nouns or singular in self.masculine_nouns:
            return Gender.MASCULINE
        if (lowered in self.feminine_nouns or singular in self.feminine_nouns
                or lowered.endswith(self.feminine_endings)):
            return Gender.FEMININE
        return Gender.MASCULINE

    def is_singular(self, number: WrittenNumber) -> bool:
        """Whether the noun after this number is singular ("1 km", but "1.0 km")."""
        return number.integer.lstrip("0") == "1" and number.is_integer

    def digits(self, text: str) -> str:
        return " ".join(self.cardinal(int(digit)) for digit in text if digit.isascii()
                        and digit.isdigit())

    def number(self, number: WrittenNumber, gender: Gender | None = None) -> str:
        """The words of a written number; before a noun of `gender` when given."""
        if number.reads_as_digits:
            words = self.digits(number.integer)
        else:
            words = self.cardinal(int(number.integer))
            if gender is not None and number.is_integer:
                words = self.before_noun(words, gender)
        if number.fraction:
            words = f"{words} {self.point} {self.fraction_digits(number.fraction)}"
        if number.negative:
            words = f"{self.minus} {words}"
        return words

    def fraction_digits(self, digits: str) -> str:
        significant = digits.lstrip("0")
        if not self.fraction_digits_as_number or len(digits) > 3 or not significant:
            return self.digits(digits)
        zeros = [self.cardinal(0)] * (len(digits) - len(significant))
        return " ".join([*zeros, self.cardinal(int(significant))])

    def ordinal(self, number: int, suffix: str = "", previous: str = "") -> str:
        """An ordinal; `suffix` is how it was written ("er", "ª"), `previous` the word
        before it, for languages whose ordinals agree with it."""
        return self.tidy(self.spell(number, "ordinal"))

    def year(self, year: int) -> str:
        return self.cardinal(year)

    def fraction(self, numerator: int, denominator: int) -> str:
        """A common fraction: the named ones, else numerator and ordinal denominator."""
        named = self.named_fractions.get((numerator, denominator))
        if named is not None:
            return named
        numerator_words = self.before_noun(self.cardinal(numerator), Gender.MASCULINE)
        return f"{numerator_words} {self.denominator(denominator, numerator != 1)}"

    def mixed_number(self, whole: int, numerator: int, denominator: int) -> str:
        """"1½": the whole number and the fraction ("one and a half")."""
        if (numerator, denominator) == (1, 2) and self.mixed_half:
            return self.mixed_half.format(whole=self.cardinal(whole))
        fraction = self.fraction(numerator, denominator)
        return f"{self.cardinal(whole)} {self.and_word} {fraction}"

    def denominator(self, denominator: int, plural: bool) -> str:
        ordinal = self.ordinal(denominator)
        return ordinal + "s" if plural else ordinal

    # -- units -----------------------------------------------------------------------

    def quantity(self, number_words: str, noun: str) -> str:
        """A number's words followed by its noun ("un'ora" joins them in Italian)."""
        return f"{number_words} {noun}"

    # -- dates and times ---------------------------------------------------------------

    def date(self, day: int | None, month: int, year: int | None, previous: str = "") -> str:
        """A date (day or year may be missing); `previous` is the word before it."""
        parts = [] if day is None else [self.cardinal(day)]
        parts.append(self.months[month - 1])
        if year is not None:
            parts.append(self.year(year))
        return " ".join(parts)

    def time(self, hour: int, minute: int, meridiem: str | None = None) -> str:
        """A clock time; `meridiem` is "am" or "pm" when the text gave one."""
        raise NotImplementedError

    def duration(self, hours: int, minutes: int, seconds: int) -> str:
        """"1:30:00": the non-zero parts with their units, the last after "and"."""
        amounts = [(hours, "h"), (minutes, "min"), (seconds, "s")]
        parts = [
            self.quantity(
                self.number(WrittenNumber(str(amount)), self.units[unit].gender),
                self.units[unit].form(self.is_singular(WrittenNumber(str(amount)))),
            )
            for amount, unit in amounts
            if amount
        ]
        if not parts:
            zero = WrittenNumber("0")
            parts = [self.quantity(self.number(zero), self.units["s"].form(self.is_singular(zero)))]
        if len(parts) == 1:
            return parts[0]
        return f"{' '.join(parts[:-1])} {self.and_word} {parts[-1]}"
