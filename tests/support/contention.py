"""A contention signal whose verdict a test sets: the worker's decisions, without
depending on what else the machine runs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SetContention:
    busy: bool = False

    def contended(self) -> bool:
        return self.busy
