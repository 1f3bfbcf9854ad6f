"""The registry of exercises: one id used everywhere, and where each part lives.

An exercise has a solution (the single source, with nbgrader's solution
markers), a generated stub the student edits, instructions and hints, a probe
module that runs in the child (``grader/child/probes/<id>.py``), a check module
that runs in the parent (``grader/checks/<id>.py``) and a job: the seeded
inputs both sides share.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
# An installed wheel carries exercises/ and solutions/ inside the package (see pyproject.toml);
# a clone of the repository (an editable install included) keeps them at its top.
INSTALLED_FROM_WHEEL = (PACKAGE_DIR / "_exercises").is_dir()
EXERCISES_DIR = PACKAGE_DIR / "_exercises" if INSTALLED_FROM_WHEEL else PROJECT_ROOT / "exercises"
SOLUTIONS_DIR = PACKAGE_DIR / "_solutions" if INSTALLED_FROM_WHEEL else PROJECT_ROOT / "solutions"


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    target: str  # the class (or, for kind "function", the function) the student writes
    kind: str = "layer"
    # Phases that cannot run when an earlier one failed: phase -> (blocking phase, check naming it).
    prerequisites: dict = field(default_factory=dict)

    @property
    def class_name(self) -> str:
        return self.target

    @property
    def solution(self) -> Path:
        return SOLUTIONS_DIR / f"{self.id}.py"

    @property
    def stub(self) -> Path:
        """The stub as generated: in a clone, also the student's working copy."""
        return EXERCISES_DIR / f"{self.id}.py"

    @property
    def instructions(self) -> Path:
        return EXERCISES_DIR / f"{self.id}.md"

    @property
    def hints(self) -> Path:
        return EXERCISES_DIR / "hints" / f"{self.id}.md"

    @property
    def checks(self) -> Path:
        return PACKAGE_DIR / "checks" / f"{self.id}.py"

    def job(self, seed: int) -> dict:
        return JOBS[self.id](seed)

    def declared_checks(self) -> list[dict]:
        """The ``@check(id, title, topic, points=...)`` declarations of the check module, in order,
        read from its source: nothing is imported or run."""
        tree = ast.parse(self.checks.read_text(encoding="utf-8"))
        declared = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check":
                check_id, title, topic = (ast.literal_eval(arg) for arg in node.args[:3])
                points = [ast.literal_eval(k.value) for k in node.keywords if k.arg == "points"]
                declared.append({"id": check_id, "title": title, "topic": topic,
                                 "points": float(points[0]) if points else 1.0})
        return declared

    def topic_points(self) -> dict[str, float]:
        """Points per topic, in the order of the topics."""
        from .verdict import TOPICS

        points: dict[str, float] = {}
        for declared in self.declared_checks():
            points[declared["topic"]] = points.get(declared["topic"], 0.0) + declared["points"]
        return {topic: points[topic] for topic in TOPICS if topic in points}


def _padding(lengths: list[int], seq: int) -> np.ndarray:
    return np.arange(seq)[None, :] < np.array(lengths)[:, None]


def _sequence_layer_job(seed: int, dims: dict) -> dict:
    """Float inputs of 3 sequences of 6 positions, with 6, 4 and 2 of them real."""
    rng = np.random.default_rng(seed)
    batch, seq = 3, 6
    mask = _padding([6, 4, 2], seq)
    inputs = rng.normal(0.0, 2.0, size=(batch, seq, dims["embed_dim"])).astype(np.float32)
    perturbed = inputs.copy()
    perturbed[~mask] = rng.normal(0.0, 5.0, size=perturbed[~mask].shape).astype(np.float32)
    return {
        "dims": dims,
        "inputs": inputs.tolist(),
        "inputs_perturbed": perturbed.tolist(),
        "mask": mask.tolist(),
        "loss_weights": rng.normal(size=inputs.shape).astype(np.float32).tolist(),
        "optimizer_steps": 3,
        "constructor_arguments": dims,
    }


def _exercise1_job(seed: int) -> dict:
    """Token ids of 3 sequences of 7 positions (shorter than sequence_length), 0 for padding."""
    rng = np.random.default_rng(seed)
    dims = {"sequence_length": 10, "input_dim": 50, "output_dim": 8}
    batch, seq = 3, 7
    mask = _padding([7, 5, 3], seq)
    tokens = np.where(mask, rng.integers(1, 30, size=(batch, seq)), 0).astype(np.int32)
    return {
        "dims": dims,
        "tokens": tokens.tolist(),
        "mask": mask.tolist(),
        "loss_weights": rng.normal(size=(batch, seq, dims["output_dim"])).astype(np.float32).tolist(),
        "optimizer_steps": 3,
        "constructor_arguments": dims,
    }


def _exercise4_job(seed: int) -> dict:
    """Decoder inputs of 5 target positions, encoder outputs of 7 source positions."""
    rng = np.random.default_rng(seed)
    dims = {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}
    batch, target, source = 3, 5, 7
    target_mask = _padding([5, 4, 2], target)
    source_mask = _padding([7, 5, 3], source)
    inputs = rng.normal(0.0, 2.0, size=(batch, target, dims["embed_dim"])).astype(np.float32)
    encoder = rng.normal(0.0, 2.0, size=(batch, source, dims["embed_dim"])).astype(np.float32)
    future = inputs.copy()
    future[:, 2:] = rng.normal(0.0, 5.0, size=future[:, 2:].shape)
    encoder_perturbed = encoder.copy()
    encoder_perturbed[~source_mask] = rng.normal(0.0, 5.0, size=encoder_perturbed[~source_mask].shape)
    return {
        "dims": dims,
        "inputs": inputs.tolist(),
        "encoder_outputs": encoder.tolist(),
        "inputs_future_perturbed": future.tolist(),
        "future_from": 2,
        "encoder_outputs_perturbed": encoder_perturbed.tolist(),
        "target_mask": target_mask.tolist(),
        "source_mask": source_mask.tolist(),
        "loss_weights": rng.normal(size=inputs.shape).astype(np.float32).tolist(),
        "optimizer_steps": 3,
        "constructor_arguments": dims,
    }


def _exercise5_job(seed: int) -> dict:
    """A small classifier and the package's synthetic task (see grader.tasks)."""
    from .tasks import contains_token_task

    dims = {"vocab_size": 40, "sequence_length": 12, "embed_dim": 16, "dense_dim": 32, "num_heads": 2}
    tokens, labels = contains_token_task(seed, vocab_size=dims["vocab_size"], sequence_length=12, count=64)
    return {
        "dims": dims,
        "tokens": tokens.tolist(),
        "labels": labels.tolist(),
        "training_steps": 15,
        "constructor_arguments": dims,
    }


JOBS = {
    "exercise1": _exercise1_job,
    "exercise2": lambda seed: _sequence_layer_job(seed, {"embed_dim": 8, "num_heads": 2}),
    "exercise3": lambda seed: _sequence_layer_job(seed, {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}),
    "exercise4": _exercise4_job,
    "exercise5": _exercise5_job,
}

_LAYER_PREREQUISITES = {
    "construct": ("load", "api.constructor"),
    "variables": ("construct", "api.constructor"),
    "values": ("variables", "api.output_shape"),
    "forward": ("values", "api.output_shape"),
    "mask": ("values", "api.output_shape"),
    "causal": ("values", "api.output_shape"),
    "functional": ("values", "api.output_shape"),
    "config": ("values", "api.output_shape"),
    "saving": ("values", "api.output_shape"),
    "gradients": ("forward", "api.output_shape"),
}

EXERCISES = {
    e.id: e
    for e in (
        Exercise("exercise1", "Positional embedding", "PositionalEmbedding", prerequisites=_LAYER_PREREQUISITES),
        Exercise("exercise2", "A self-attention block", "SelfAttentionBlock", prerequisites=_LAYER_PREREQUISITES),
        Exercise("exercise3", "The Transformer encoder", "TransformerEncoder", prerequisites=_LAYER_PREREQUISITES),
        Exercise("exercise4", "The Transformer decoder", "TransformerDecoder", prerequisites=_LAYER_PREREQUISITES),
        Exercise(
            "exercise5", "A text classifier", "build_classifier", kind="function",
            prerequisites={
                "variables": ("build", "api.model"),
                "values": ("variables", "api.model"),
                "predict": ("values", "api.model"),
                "mask": ("values", "api.model"),
                "training": ("values", "api.model"),
                "saving": ("values", "api.model"),
            },
        ),
    )
}

def get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        known = ", ".join(sorted(EXERCISES))
        raise KeyError(f"unknown exercise {exercise_id!r}; known exercises: {known}") from None
