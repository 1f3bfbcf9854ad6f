"""Reads an exercise's hints: ``exercises/hints/<id>.md``, one ``## Hint N`` section each."""

from __future__ import annotations

import re
from pathlib import Path


def read_hints(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    parts = re.split(r"^## Hint \d+\s*$", text, flags=re.MULTILINE)
    hints = [part.strip() for part in parts[1:] if part.strip()]
    if not hints:
        raise ValueError(f"{path} has no '## Hint N' sections")
    return hints
