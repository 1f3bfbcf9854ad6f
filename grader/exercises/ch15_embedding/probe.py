"""Phases that exercise a student's third-edition ``PositionalEmbedding``: exercise 1's."""

from ..exercise1.probe import run  # noqa: F401
