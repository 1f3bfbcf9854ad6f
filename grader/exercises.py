"""The registry of exercises: one id used everywhere, and where each part lives.

An exercise has a solution (the single source, with nbgrader's solution
markers), a generated stub the student edits, instructions, a probe module
that runs in the child and a check module that runs in the parent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    class_name: str

    @property
    def solution(self) -> Path:
        return PROJECT_ROOT / "solutions" / f"{self.id}.py"

    @property
    def stub(self) -> Path:
        return PROJECT_ROOT / "exercises" / f"{self.id}.py"

    @property
    def instructions(self) -> Path:
        return PROJECT_ROOT / "exercises" / f"{self.id}.md"

    @property
    def checks(self) -> Path:
        return Path(__file__).resolve().parent / "checks" / f"{self.id}.py"

    def job(self, seed: int) -> dict:
        return JOBS[self.id](seed)


def _exercise3_job(seed: int) -> dict:
    """Seeded inputs: 3 sequences of 6 positions, 4 and 2 of them real in the last two."""
    rng = np.random.default_rng(seed)
    batch, seq = 3, 6
    dims = {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}
    lengths = [6, 4, 2]
    mask = np.arange(seq)[None, :] < np.array(lengths)[:, None]
    inputs = rng.normal(0.0, 2.0, size=(batch, seq, dims["embed_dim"])).astype(np.float32)
    perturbed = inputs.copy()
    perturbed[~mask] = rng.normal(0.0, 5.0, size=perturbed[~mask].shape).astype(np.float32)
    loss_weights = rng.normal(size=(batch, seq, dims["embed_dim"])).astype(np.float32)
    return {
        "dims": dims,
        "inputs": inputs.tolist(),
        "inputs_perturbed": perturbed.tolist(),
        "mask": mask.tolist(),
        "loss_weights": loss_weights.tolist(),
        "optimizer_steps": 3,
        "constructor_arguments": dims,
    }


JOBS = {"exercise3": _exercise3_job}

EXERCISES = {
    "exercise3": Exercise("exercise3", "The Transformer encoder", "TransformerEncoder"),
}

# Phases that cannot run when an earlier one failed: phase -> (blocking phase, check naming it).
PREREQUISITES = {
    "exercise3": {
        "construct": ("load", "api.constructor"),
        "forward": ("construct", "api.constructor"),
        "mask": ("construct", "api.constructor"),
        "config": ("construct", "api.constructor"),
        "saving": ("construct", "api.constructor"),
        "gradients": ("forward", "api.output_shape"),
    }
}


def get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        known = ", ".join(sorted(EXERCISES))
        raise KeyError(f"unknown exercise {exercise_id!r}; known exercises: {known}") from None
