"""The registry of exercises: one id used everywhere, and where each part lives.

An exercise has a solution (the single source, with nbgrader's solution
markers), a generated stub the student edits, instructions and hints, a probe
module that runs in the child (``grader/exercises/<id>/probe.py``), a check module
that runs in the parent (``grader/exercises/<id>/checks.py``) and a job (``grader.protocol.job``):
public sizes, and the secret inputs and weight values the parent draws per run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
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
        return PACKAGE_DIR / "exercises" / self.id / "checks.py"

    @property
    def checks_module(self) -> str:
        return f"grader.exercises.{self.id}.checks"

    @property
    def probe_module(self) -> str:
        return f"grader.exercises.{self.id}.probe"

    def public_job(self) -> dict:
        """The part of the job the child gets on start (the rest is drawn per run: ``grader.protocol.job``)."""
        from ..protocol.job import public_job

        return public_job(self)

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
        from ..verdict import TOPICS

        points: dict[str, float] = {}
        for declared in self.declared_checks():
            points[declared["topic"]] = points.get(declared["topic"], 0.0) + declared["points"]
        return {topic: points[topic] for topic in TOPICS if topic in points}


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
    "inference": ("values", "api.output_shape"),
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
                "inference": ("values", "api.model"),
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
