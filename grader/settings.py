"""The settings of a grading besides the submission, and their defaults: light enough for the
command to resolve them without importing the grading machinery (``grader.api`` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SEED = None  # a fresh secret seed for every run
DEFAULT_TIMEOUT = 120.0
DEFAULT_MEMORY_MB = 4096
CHECKS_SECONDS = 60.0
DEFAULT_BACKEND = "tensorflow"


@dataclass(frozen=True)
class Settings:
    """Everything that can change a verdict besides the submission, resolved once."""

    seed: int | None = DEFAULT_SEED
    timeout: float = DEFAULT_TIMEOUT
    memory_mb: int = DEFAULT_MEMORY_MB
    checks_timeout: float = CHECKS_SECONDS  # one submission's checks, once its evidence is complete
    private: tuple[str, ...] = ()  # folders no grading may read (a class's submissions); the solutions always
    backend: str = DEFAULT_BACKEND  # the Keras backend the submission runs on (grader.backends)
