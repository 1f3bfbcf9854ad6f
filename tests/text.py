"""Reading rendered output in tests, whatever the width it was wrapped at."""

from __future__ import annotations

import re

_LAYOUT = re.compile(r"[\s│┃┆║]+")


def flat(text: str) -> str:
    """``text`` without white space and without the vertical lines of Rich's tables: a phrase is
    found in it (``flat(phrase) in flat(text)``) wherever a long path made Rich wrap the line."""
    return _LAYOUT.sub("", text)


def says(text: str, phrase: str) -> bool:
    """Whether rendered ``text`` holds ``phrase``, however its lines were wrapped."""
    return flat(phrase) in flat(text)
