"""The work the parent may spend recomputing one submission's calls.

Everything the replay computes comes from shapes the child reported, so a
submission could describe a computation that is cheap for TensorFlow in the
child and immense for the parent (an einsum over every index combination, a
bias declared (K, 1, 1, 1) broadcast against the activations, thousands of
terms to match). A single NumPy call cannot be interrupted by the checks' time
limit, so the cost of each step is counted before it runs: past the budget, the
replay fails (``TooLarge``), the call counts as not verified and the checks
that need it say so. Every array the grader's operations make (``ops``, the
tape, the references through them) has its size checked here from its shape
before it exists: ``charge`` with the elements it makes, or ``elementwise``,
which finds the broadcast shape first. A correct layer of these exercises
needs well under a thousandth of the budget, and its largest array a few
thousand values.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..protocol import limits

BUDGET = 500_000_000  # element operations for one grading's replays and references
DEFAULT_MAX_AXIS = 64  # the largest size of a batch, sequence or heads axis, until a job sets its own


class ReplayFailed(Exception):
    """The traced call cannot be rebuilt from steps the grader can run; the message says where."""


class TooLarge(ReplayFailed):
    """Rebuilding the call would cost more than the grader spends on one submission."""


_spent = 0
_max_axis = DEFAULT_MAX_AXIS


def reset(job: dict | None = None) -> None:
    """Start a new submission's budget; with its public ``job``, bound the axes of claimed masks
    and attention inputs by the largest size the job names (``check_axes``)."""
    global _spent, _max_axis
    _spent = 0
    _max_axis = max(_sizes(job), default=DEFAULT_MAX_AXIS) if job else DEFAULT_MAX_AXIS


def _sizes(value):
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _sizes(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _sizes(item)


def check_axes(shape, what: str) -> None:
    """Refuse a claimed shape with an axis larger than any size of the exercise: a mask, queries
    or keys no layer of the exercise makes, described to make the grader build a huge array."""
    for size in shape:
        if int(size) > _max_axis:
            raise TooLarge(f"{what} has an axis of {int(size):,}, larger than any size of this exercise "
                           f"({_max_axis})")


def charge(operations: float, elements: float = 0) -> None:
    """Count ``operations`` element operations, making arrays of ``elements``, before they run."""
    global _spent
    if elements > limits.MAX_ARRAY_ELEMENTS:
        raise TooLarge(f"a step of the call would make an array of {int(elements):,} values, more than the grader "
                       f"computes ({limits.MAX_ARRAY_ELEMENTS:,})")
    _spent += int(operations)
    if _spent > BUDGET:
        raise TooLarge(f"recomputing the call would take more than the {BUDGET:,} operations the grader spends "
                       "on one submission")


def broadcast_shape(*operands) -> tuple:
    """The shape ``operands`` broadcast to, charged as an array of that shape before it is made;
    ReplayFailed if they do not broadcast."""
    try:
        shape = np.broadcast_shapes(*(np.shape(operand) for operand in operands))
    except ValueError:
        raise ReplayFailed("operands whose shapes do not broadcast") from None
    size = math.prod(shape)
    charge(size + 1, size)
    return shape


def elementwise(function, *operands):
    """``function(*operands)`` (an element-wise NumPy or autograd function), its output charged from the
    broadcast shape first."""
    broadcast_shape(*operands)
    return function(*operands)


def einsum_cost(equation: str, *operands) -> tuple[float, float]:
    """(operations, output elements) of ``np.einsum(equation, *operands)``: the product of the sizes
    of every index letter, and of the output's. An equation with '...' is bounded by the product of
    the operands' sizes."""
    shapes = [np.shape(operand) for operand in operands]
    sizes = [math.prod(shape) for shape in shapes]
    if "..." in equation or "->" not in equation:
        bound = math.prod(sizes)
        return bound, bound
    inputs, output = equation.replace(" ", "").split("->")
    letters: dict[str, int] = {}
    for spec, shape in zip(inputs.split(","), shapes):
        if len(spec) != len(shape) or not re.fullmatch(r"[A-Za-z]*", spec):
            bound = math.prod(sizes)
            return bound, bound
        for letter, size in zip(spec, shape):
            letters[letter] = max(letters.get(letter, 1), int(size))
    return math.prod(letters.values()), math.prod(letters.get(letter, 1) for letter in output)
