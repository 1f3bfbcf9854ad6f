"""Exercise 5, a text classifier built from the positional embedding and the encoder."""

from __future__ import annotations

from ..spec import Exercise, Notebook

VISIBLE_TEST = '''\
model = build_classifier(40, 12, 16, 32, 2)
assert model.output_shape == (None, 1), f"expected (None, 1), got {model.output_shape}"
'''

EXERCISE = Exercise(
    id="exercise5",
    position=5,
    parts=("embedding", "attention", "feed-forward", "norm", "residual", "pooling"),
    title="A text classifier",
    target="build_classifier",
    kind="function",
    prerequisites={
        "variables": ("build", "api.model"),
        "values": ("variables", "api.model"),
        "predict": ("values", "api.model"),
        "mask": ("values", "api.model"),
        "training": ("values", "api.model"),
        "saving": ("values", "api.model"),
        "inference": ("values", "api.model"),
    },
    provided=("exercise1", "exercise3"),
    notebook=Notebook(
        visible_test=VISIBLE_TEST,
        wording=(
            ("The file provides reference versions",
             "The answer cell provides reference versions"),
        ),
    ),
)
