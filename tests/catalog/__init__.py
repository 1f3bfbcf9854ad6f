"""Student mistakes and correct variants of each exercise, written as edits of its solution.

Each mistake names the checks that must fail (and so the topic they must fail
on) and a phrase the first of them must say. Each variant must pass every
check. An edit whose text is not found exactly once in the solution is an
error, so a catalog cannot silently drift from its solution.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from grader import exercises


@dataclass(frozen=True)
class Mistake:
    name: str
    source: str
    failing: tuple[str, ...]  # check ids that must fail; the first must mention `says`
    says: str
    only: bool = False  # every other check passes: the mistake is graded as what it is, and nothing more
    causes: int | None = None  # how many causes the report tells (grader.causes.root_causes), when it matters
    first: str | None = None  # the check the report starts with, when it is not the first of ``failing``


@dataclass(frozen=True)
class Variant:
    name: str
    source: str


def solution(exercise_id: str) -> str:
    return exercises.get(exercise_id).solution.read_text(encoding="utf-8")


def edit(text: str, *replacements: tuple[str, str], prefix: str = "") -> str:
    for old, new in replacements:
        count = text.count(old)
        if count != 1:
            raise ValueError(f"edit target found {count} times in the solution: {old!r}")
        text = text.replace(old, new)
    if prefix:
        text = text.replace("import keras\n", prefix + "import keras\n", 1)
    return text


def layer_api_mistakes(text: str, signature: str, call: str, config_line: str, key: str) -> list[Mistake]:
    """The mistakes every layer exercise shares: a keyword-only constructor, and the three ways
    of breaking get_config. ``signature`` is the solution's ``def __init__(...)`` line,
    ``call`` how the positional construction reads in the message, ``config_line`` the
    line of get_config that stores ``key``."""
    return [
        Mistake(
            "keyword_only_constructor",
            edit(text, (signature, signature.replace("(self, ", "(self, *, "))),
            ("api.constructor",),
            f"{call} raised",
        ),
        Mistake(
            "missing_config_key",
            edit(text, (config_line, "" if config_line.strip().startswith(f'"{key}"')
                        else config_line.replace(f', "{key}": self.{key}', ""))),
            ("config.own_keys", "config.from_config", "config.keras_file"),
            f"{key} is missing",
        ),
        Mistake(
            "config_without_super",
            edit(text, ("config = super().get_config()", "config = {}")),
            ("config.base_keys",),
            "get_config() lacks name, trainable, dtype",
        ),
        Mistake(
            "kwargs_not_forwarded",
            edit(text, ("super().__init__(**kwargs)", "super().__init__()")),
            ("config.base_keys", "config.from_config"),
            "reports name=",
        ),
    ]


def dropout_on_by_default(text: str, call: str, dropped: tuple[str, str]) -> Mistake:
    """The layer exercises' shared inference mistake: a Dropout whose ``training`` defaults to True,
    so every call made without it is random. ``call`` is the solution's ``def call(...)`` line,
    ``dropped`` the line the dropout goes into, and that line with the dropout."""
    return Mistake(
        "dropout_on_by_default",
        edit(
            text,
            ("        self.supports_masking = True\n",
             "        self.supports_masking = True\n        self.dropout = layers.Dropout(0.3)\n"),
            (call, call.replace("):", ", training=True):")),
            dropped,
        ),
        ("forward.inference",),
        "returned different outputs",
    )


def catalog(exercise_id: str):
    """(MISTAKES, VARIANTS) of an exercise."""
    module = importlib.import_module(f"tests.catalog.{exercise_id}")
    return module.MISTAKES, module.VARIANTS


CATALOGUED = [e for e in exercises.EXERCISES]
