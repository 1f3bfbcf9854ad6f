"""Recomputes the tensor operations a custom layer claims its call ran (``grader.probe.op_tape``).

A layer of the student's own that runs no Keras layer (a masked pooling, a
helper layer, a ``Lambda``) arrives as a tape: each operation's name, its
arguments — references to the layer's inputs, its mask, earlier operations or
one of the tensors an earlier operation gave, or small plain values — and the
output (or outputs) the child saw. ``verify`` checks the tape's form,
recomputes every operation in float64 from the parent's values and compares it
with what the child recorded; ``run`` is the same computation as a function of
the layer's inputs, differentiable with autograd. The operations are those of
the table built against keras.ops (``grader.judge.operations``); one the table
leaves out makes the layer unverified (``ReplayFailed``), and the message names
the operation, the student's line and why.

Every array an operation makes is charged to the budget from its shape before
it is made (``operations.apply``): the shapes come from the parent's own values,
but a reshape, a tile or a claimed constant could still ask for more.
"""

from __future__ import annotations

import math

import numpy as np
from autograd.tracer import getval

from ..protocol import limits
from . import budget, operations

ReplayFailed = budget.ReplayFailed
OPERATIONS = operations.OPERATIONS


# --------------------------------------------------------------------------- form


def check_form(event: dict, label: str) -> list[dict]:
    """The event's op records, checked for form; ReplayFailed at the first malformed record, or
    naming the first op the layer's result depends on that the grader cannot recompute (and the
    student's line). An op whose result nothing uses (a debugging line) is not recomputed."""
    records = event.get("ops")
    if not isinstance(records, list) or len(records) > limits.MAX_OPS or event.get("ops_truncated"):
        raise ReplayFailed(f"{label} runs more operations than the grader follows ({limits.MAX_OPS})")
    for position, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("op"), str) or \
                not isinstance(record.get("args"), list) or not isinstance(record.get("kwargs"), dict):
            raise ReplayFailed(f"{label}'s operation {position} is malformed")
        for argument in list(record["args"]) + list(record["kwargs"].values()):
            _check_argument(argument, position, label)
        output, outputs = record.get("output"), record.get("outputs")
        if output is not None and not isinstance(output, np.ndarray):
            raise ReplayFailed(f"{label}'s operation {position} has a malformed output")
        if outputs is not None and (not isinstance(outputs, list) or len(outputs) > limits.MAX_OP_ITEMS
                                    or output is not None
                                    or not all(isinstance(o, np.ndarray) for o in outputs)):
            raise ReplayFailed(f"{label}'s operation {position} has malformed outputs")
    _check_argument(event.get("result"), len(records), label)
    for position in sorted(needed(records, event["result"])):
        record = records[position]
        if record["op"] not in OPERATIONS:
            reason = operations.excluded(record["op"]) or "an operation the grader cannot recompute"
            raise ReplayFailed(f"{label} runs {describe(record)}: {reason}")
    return records


def needed(records: list[dict], result: dict) -> set[int]:
    """The positions of the records (checked for form) that the layer's result depends on."""
    found: set[int] = set()
    pending = _made_by(result)
    while pending:
        position = pending.pop()
        if position in found:
            continue
        found.add(position)
        for argument in list(records[position]["args"]) + list(records[position]["kwargs"].values()):
            pending.extend(_made_by(argument))
    return found


def _made_by(argument, depth: int = 0) -> list[int]:
    (tag, value), = argument.items()
    if tag == "op":
        return [value]
    if tag == "part":
        return [value[0]]
    if tag == "list" and depth < 5:
        return [p for item in value for p in _made_by(item, depth + 1)]
    return []


def describe(record: dict) -> str:
    """How a report names an op: keras.ops.where (line 12 of your file: `...`), or the TensorFlow
    function the student called (tf.reduce_sum) when the child recorded it under its keras.ops name."""
    name = str(record.get("op", "?"))[:60]
    via = record.get("via")
    if isinstance(via, str) and via.startswith("tf.") and len(via) <= 60:
        name = via
    elif name.startswith("tf."):
        pass
    else:
        name = f"keras.{name}" if name.startswith(("activations.", "random.")) else "indexing (x[...])" \
            if name == "getitem" else f"keras.ops.{name}"
    line = record.get("line")
    code = str(record.get("code") or "").strip()[:80]
    if isinstance(line, int) and not isinstance(line, bool):
        return f"{name} (line {line} of your file{': ' + code if code else ''})"
    return name


def _check_argument(argument, position: int, label: str, depth: int = 0) -> None:
    if depth > 4 or not isinstance(argument, dict) or len(argument) != 1:
        raise ReplayFailed(f"{label}'s operation {position} has a malformed argument")
    (tag, value), = argument.items()
    if tag == "op":
        if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < position):
            raise ReplayFailed(f"{label}'s operation {position} uses a result of an operation that did not run "
                               "before it")
    elif tag == "part":
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                    for v in value)
                and 0 <= value[0] < position and 0 <= value[1] < limits.MAX_OP_ITEMS):
            raise ReplayFailed(f"{label}'s operation {position} uses a result of an operation that did not run "
                               "before it")
    elif tag == "source":
        if not isinstance(value, str):
            raise ReplayFailed(f"{label}'s operation {position} has a malformed argument")
    elif tag == "constant":
        if not isinstance(value, np.ndarray) or value.size > limits.MAX_CONSTANT or value.ndim > 2:
            raise ReplayFailed(f"{label}'s operation {position} uses a constant tensor larger than the grader "
                               "accepts")
    elif tag == "list":
        if not isinstance(value, list) or len(value) > 64:
            raise ReplayFailed(f"{label}'s operation {position} has a malformed argument")
        for item in value:
            _check_argument(item, position, label, depth + 1)
    elif tag == "slice":
        if not isinstance(value, list) or len(value) != 3:
            raise ReplayFailed(f"{label}'s operation {position} has a malformed index")
    elif tag == "event":
        raise ReplayFailed(f"{label}'s operation {position} uses the output of a layer it calls, which the grader "
                           "follows only between the Keras layers of a layer that calls them")
    elif tag == "unknown":
        raise ReplayFailed(f"{label}'s operation {position} uses a tensor the grader did not see being made "
                           "(by something other than keras.ops or the layer's weights: a constant of more than a "
                           "few numbers, say)")
    elif tag not in ("value", "ellipsis"):
        raise ReplayFailed(f"{label}'s operation {position} has a malformed argument")


# --------------------------------------------------------------------------- running


def resolve(argument, sources: dict, results: list):
    """An operation's argument as a value: a source's, an earlier result's (or one of the tensors it
    gave), or the plain value it holds."""
    (tag, value), = argument.items()
    if tag == "op":
        if isinstance(results[value], tuple):
            raise ReplayFailed("an operation uses the tensors of another operation as if they were one tensor")
        return results[value]
    if tag == "part":
        made = results[value[0]]
        if not isinstance(made, tuple) or value[1] >= len(made):
            raise ReplayFailed("an operation uses a tensor an earlier operation did not give")
        return made[value[1]]
    if tag == "source":
        if value not in sources:
            raise ReplayFailed(f"an operation uses the argument {value[:40]!r}, which the layer did not receive")
        return sources[value]
    if tag == "constant":
        return np.asarray(value, dtype=np.float64) if value.dtype.kind == "f" else np.asarray(value)
    if tag == "list":
        return [resolve(item, sources, results) for item in value]
    if tag == "slice":
        return slice(*value)
    if tag == "ellipsis":
        return Ellipsis
    if isinstance(value, float) and not math.isfinite(value):
        raise ReplayFailed("an operation with a number that is not finite")
    return value


def _apply(record: dict, sources: dict, results: list):
    args = [resolve(a, sources, results) for a in record["args"]]
    kwargs = {k: resolve(v, sources, results) for k, v in record["kwargs"].items()}
    if record["op"] in ("getitem", "get_item") and len(args) == 2 and isinstance(args[1], list):
        args[1] = tuple(args[1])
    try:
        return operations.apply(record["op"], args, kwargs)
    except budget.TooLarge:
        raise
    except ReplayFailed as exc:
        raise ReplayFailed(f"{describe(record)}: {exc}") from None


def run(event: dict, sources: dict):
    """The layer's output: the tape run on ``sources`` (name -> the parent's value; may be autograd
    boxes, so the result is differentiable in them)."""
    results: list = []
    used = needed(event["ops"], event["result"])
    for position, record in enumerate(event["ops"]):
        results.append(_apply(record, sources, results) if position in used else None)
    return resolve(event["result"], sources, results)


def verify(event: dict, sources: dict, label: str, close) -> None:
    """Recompute every op from ``sources`` (the layer's inputs as the parent knows them) and compare
    each with the output the child recorded; ReplayFailed at the first that differs."""
    records = check_form(event, label)
    used = needed(records, event["result"])
    results: list = []
    for position, record in enumerate(records):
        if position not in used:
            results.append(None)
            continue
        value = _apply(record, sources, results)
        if isinstance(value, tuple):
            recorded = record.get("outputs")
            same = isinstance(recorded, list) and len(recorded) == len(value) and all(
                agrees(part, made, close) for part, made in zip(value, recorded))
        else:
            recorded = record.get("output")
            same = recorded is not None and agrees(value, recorded, close)
        if not same:
            raise ReplayFailed(f"{label}: {describe(record)} does not give what the layer recorded for it")
        results.append(value)
    resolve(event["result"], sources, results)


def agrees(value, recorded: np.ndarray, close) -> bool:
    """The parent's value of an op and the child's: same shape; booleans and integers equal; floats
    equal where not finite, and close elsewhere."""
    value = np.asarray(getval(value))
    if value.shape != recorded.shape:
        return False
    if value.dtype.kind in "biu" or recorded.dtype.kind in "biu":
        return value.dtype.kind in "biu" and recorded.dtype.kind in "biu" and bool(np.array_equal(value, recorded))
    finite = np.isfinite(value)
    if not np.array_equal(finite, np.isfinite(recorded)) or not np.array_equal(value[~finite], recorded[~finite]):
        return False
    return bool(close(value[finite], recorded[finite]))
