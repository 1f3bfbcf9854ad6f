"""The API topic's shared checks: the constructor and the output's shape."""

from __future__ import annotations

import numpy as np

from ..evidence import format_student_error
from ..framework import fail


def assert_constructor(evidence, class_name: str, sizes: dict) -> None:
    construct = evidence.phase("construct", "api.constructor")
    if construct["positional_error"]:
        args = ", ".join(str(v) for v in sizes.values())
        fail(
            format_student_error(f"{class_name}({args}) raised", construct["positional_error"]),
            f"{class_name}({', '.join(sizes)}) in that order, also by keyword.",
            "Code that uses your layer (and the book) passes the sizes positionally.",
        )


def assert_output_shape(forward: dict, expected: tuple, what: str) -> None:
    output = (forward.get("observation") or {}).get("output")
    if not isinstance(output, np.ndarray):
        kind = output.get("not_a_tensor") if isinstance(output, dict) else type(output).__name__
        fail(
            f"call returned a {kind}, not a tensor"
            + (": does call() end with `return <the output>`?" if kind == "NoneType" else "."),
            f"one tensor of shape {expected} {what}.",
            "A layer maps tensors to a tensor, so layers can be stacked.",
        )
    if tuple(output.shape) != tuple(expected):
        fail(
            f"output of shape {tuple(output.shape)}.",
            f"shape {expected} {what}.",
            "The layers after this one depend on this shape.",
        )
    if not np.all(np.isfinite(output)):
        fail("the output holds NaN or infinite values.", "finite numbers.", "NaNs poison training.")
