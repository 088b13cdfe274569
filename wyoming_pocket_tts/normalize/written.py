"""Numbers as they are written: the pattern that finds them and what their marks mean.

Every quantifier here is bounded and every number starts where a run of digits
starts, so a scan costs time linear in the text's length whatever the text is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

# More digits than this are no quantity anyone says as a number: read digit by digit.
MAX_SPOKEN_DIGITS = 15
# Ungrouped integers longer than this are codes or identifiers rather than amounts.
MAX_UNGROUPED_DIGITS = 9

# Separators that can only group thousands: each must be followed by exactly 3 digits.
_GROUPING_ONLY = "\u00a0\u202f\u2009'\u2019"
_SPACES = " \u00a0\u202f\u2009"


def number_pattern(groups_with_space: bool) -> str:
    """A regular expression for one written number, unsigned, with its grouping marks.

    It never starts inside another number (after a digit or a digit and a mark), so
    "1.5" is one number, not "1" and "5". Which mark is the decimal one is decided
    by `parse_number`, which sees the whole token.
    """
    grouping = _GROUPING_ONLY + (" " if groups_with_space else "")
    return (
        r"(?<![0-9])(?<![0-9][.,])[0-9]{1,15}"
        rf"(?:[.,][0-9]{{1,20}}|[{grouping}](?=[0-9]{{3}}(?![0-9]))[0-9]{{3}}){{0,6}}"
        r"(?![0-9])"
    )


@dataclass(frozen=True)
class WrittenNumber:
    """A number read from text: its sign and digits before and after the decimal mark."""

    integer: str
    fraction: str = ""
    negative: bool = False
    grouped: bool = False

    @property
    def value(self) -> Decimal:
        magnitude = Decimal(f"{self.integer}.{self.fraction or '0'}")
        return -magnitude if self.negative else magnitude

    @property
    def is_integer(self) -> bool:
        return not self.fraction

    @property
    def reads_as_digits(self) -> bool:
        """Leading zeros ("007"), or too long to be an amount: said digit by digit."""
        if len(self.integer) > MAX_SPOKEN_DIGITS:
            return True
        if self.fraction:
            return False
        leading_zero = len(self.integer) > 1 and self.integer.startswith("0")
        return leading_zero or (not self.grouped and len(self.integer) > MAX_UNGROUPED_DIGITS)


def _valid_groups(runs: list[str]) -> bool:
    return 1 <= len(runs[0]) <= 3 and all(len(run) == 3 for run in runs[1:])


def parse_number(token: str, decimal_mark: str, negative: bool = False) -> WrittenNumber | None:
    """Read a token found by `number_pattern`; None when its marks make no number.

    Two different marks: the last is the decimal one. One mark used once, before
    other than 3 digits: decimal. Before exactly 3 digits ("1.234") the language's
    convention decides. Used several times, a mark groups thousands. "1.2.3" (a
    version, an address) is no number and returns None.
    """
    parts = re.split(r"([.,\u00a0\u202f\u2009 '\u2019])", token)
    runs, separators = parts[0::2], parts[1::2]
    if not separators:
        return WrittenNumber(token, negative=negative)
    marks = [separator for separator in separators if separator in ".,"]
    if not marks:
        integer_runs, fraction = runs, ""
    elif len(set(marks)) == 2 or (len(marks) == 1 and separators[-1] in ".,"
                                 and _decimal_when_alone(runs, separators, decimal_mark)):
        if separators[-1] not in ".," or marks.count(separators[-1]) != 1:
            return None
        integer_runs, fraction = runs[:-1], runs[-1]
    else:
        integer_runs, fraction = runs, ""
    if len(integer_runs) > 1 and not _valid_groups(integer_runs):
        return None
    grouping = set(separators[: len(integer_runs) - 1])
    if len(grouping) > 1 and not grouping <= set(_SPACES):
        return None
    return WrittenNumber(
        "".join(integer_runs), fraction, negative=negative, grouped=len(integer_runs) > 1
    )


def _decimal_when_alone(runs: list[str], separators: list[str], decimal_mark: str) -> bool:
    """For a token with a single '.' or ',' as its last separator: is it the decimal one?"""
    if len(runs[-1]) != 3 or len(separators) > 1:
        return True
    return separators[-1] == decimal_mark or runs[0] == "0"
