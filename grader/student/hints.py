"""Reads an exercise's hints and picks the one that answers the failure in front of the student.

``exercises/hints/<id>.md`` holds one ``## Hint N`` section per hint, from the least to the most
revealing. A section may start with a ``Checks:`` line naming the checks it helps with (as
exercism links each hint to a task): ``choose`` gives, for the first cause still failing, the
least revealing of its hints not yet shown, and each call after that the next one for that cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Hint:
    number: int  # 1-based, as the file numbers it
    text: str
    checks: tuple[str, ...]


def read_tagged_hints(path: Path) -> list[Hint]:
    text = path.read_text(encoding="utf-8")
    parts = re.split(r"^## Hint \d+\s*$", text, flags=re.MULTILINE)
    hints = []
    for part in parts[1:]:
        body = part.strip()
        if not body:
            continue
        checks: tuple[str, ...] = ()
        first, _, rest = body.partition("\n")
        if first.startswith("Checks:"):
            checks = tuple(c.strip() for c in first[len("Checks:"):].split(",") if c.strip())
            body = rest.strip()
        hints.append(Hint(len(hints) + 1, body, checks))
    if not hints:
        raise ValueError(f"{path} has no '## Hint N' sections")
    return hints


def hints_for(hints: list[Hint], check_ids) -> list[Hint]:
    """The hints that help with the first of ``check_ids`` that has any (the cause's own check
    first, then the others it fails), least revealing first."""
    for check_id in check_ids:
        tagged = [hint for hint in hints if check_id in hint.checks]
        if tagged:
            return tagged
    return []


def choose(hints: list[Hint], check_ids, shown: int) -> tuple[Hint, int, int] | None:
    """(hint, its place among the cause's hints, how many the cause has) after ``shown`` of them
    were shown for it; the last one repeats. None when no hint is tagged with any of the checks."""
    tagged = hints_for(hints, check_ids)
    if not tagged:
        return None
    place = min(shown, len(tagged) - 1)
    return tagged[place], place, len(tagged)
