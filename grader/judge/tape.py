"""Recomputes the tensor operations a custom layer claims its call ran (``grader.probe.op_tape``).

A layer of the student's own that runs no Keras layer (a masked pooling, a
helper layer, a ``Lambda``) arrives as a tape: each operation's name, its
arguments — references to the layer's inputs, its mask or earlier operations,
or small plain values — and the output the child saw. ``verify`` checks the
tape's form, recomputes every operation in float64 from the parent's values
and compares it with what the child recorded; ``run`` is the same
computation as a function of the layer's inputs, differentiable with
autograd. Only operations of the allow-list (``OPERATIONS``) are recomputed:
any other makes the layer unverified (``ReplayFailed``), and the message names
the operation and the student's line.

Every array an operation makes is bounded before it is made (``budget``): the
shapes come from the parent's own values, but a reshape, a concatenation or a
claimed constant could still ask for more.
"""

from __future__ import annotations

import math

import autograd.numpy as anp
import numpy as np
from autograd.tracer import getval

from . import budget, ops

MAX_OPS = 400
MAX_CONSTANT = 4
FLOAT_DTYPES = {"float16", "bfloat16", "float32", "float64"}
INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}

ReplayFailed = budget.ReplayFailed


def _kind(value) -> str:
    return np.asarray(getval(value)).dtype.kind


def _float(value):
    """A value as float64, keeping autograd's box if it has one."""
    if _kind(value) == "f":
        return value
    return np.asarray(getval(value), dtype=np.float64)


def _cost(*shapes) -> None:
    size = 0
    for shape in shapes:
        size += math.prod(shape)
    budget.charge(size + 1, size)


def _broadcast(*values) -> tuple:
    try:
        shape = np.broadcast_shapes(*(np.shape(getval(v)) for v in values))
    except ValueError:
        raise ReplayFailed("operands whose shapes do not broadcast") from None
    _cost(shape)
    return shape


def _arithmetic(function):
    def apply(x1, x2):
        _broadcast(x1, x2)
        if _kind(x1) == "b" and _kind(x2) == "b" and function in (anp.add, anp.multiply):
            return np.logical_or(x1, x2) if function is anp.add else np.logical_and(x1, x2)
        if _kind(x1) in "iu" and _kind(x2) in "iu" and function is not anp.true_divide:
            return function(np.asarray(getval(x1)), np.asarray(getval(x2)))
        return function(_float(x1), _float(x2))

    return apply


def _comparison(function):
    def apply(x1, x2):
        _broadcast(x1, x2)
        return function(np.asarray(getval(x1)), np.asarray(getval(x2)))

    return apply


def _logical(function):
    def apply(x1, x2=None):
        if x2 is None:
            _broadcast(x1)
            return function(np.asarray(getval(x1), dtype=bool))
        _broadcast(x1, x2)
        return function(np.asarray(getval(x1), dtype=bool), np.asarray(getval(x2), dtype=bool))

    return apply


def _unary(function):
    def apply(x):
        _broadcast(x)
        if _kind(x) == "b" and function is anp.negative:
            raise ReplayFailed("a negation of a boolean tensor")
        return function(_float(x))

    return apply


def _activation(name, **defaults):
    def apply(x, *args, **kwargs):
        _broadcast(x)
        options = dict(defaults, **kwargs)
        return ops.activation(_float(x), name, *args, **options) if args else ops.activation(_float(x), name, **options)

    return apply


def _axes(axis, ndim: int):
    if axis is None:
        return None
    items = axis if isinstance(axis, (list, tuple)) else [axis]
    if not all(isinstance(a, int) and not isinstance(a, bool) and -ndim <= a < ndim for a in items):
        raise ReplayFailed(f"an axis {axis!r} that a tensor of {ndim} dimensions does not have")
    return tuple(a % ndim for a in items) if isinstance(axis, (list, tuple)) else axis % ndim


def _reduction(function, floats=True):
    def apply(x, axis=None, keepdims=False):
        _broadcast(x)
        axis = _axes(axis, np.ndim(getval(x)))
        value = _float(x) if floats or _kind(x) == "f" else np.asarray(getval(x))
        return function(value, axis=axis, keepdims=bool(keepdims))

    return apply


def _count_nonzero(x, axis=None):
    _broadcast(x)
    return np.count_nonzero(np.asarray(getval(x)), axis=_axes(axis, np.ndim(getval(x))))


def _cast(x, dtype):
    name = str(dtype)
    _broadcast(x)
    if name in FLOAT_DTYPES:
        return _float(x)
    if name in INT_DTYPES:
        value = np.asarray(getval(x))
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise ReplayFailed("a cast of NaN or infinite values to integers")
        return np.trunc(value).astype(np.int64) if value.dtype.kind == "f" else value.astype(np.int64)
    if name == "bool":
        return np.asarray(getval(x)) != 0
    raise ReplayFailed(f"a cast to {name!r}")


def _convert_to_tensor(x, dtype=None, sparse=None, ragged=None):
    return x if dtype is None else _cast(x, dtype)


def _where(condition, x1=None, x2=None):
    if x1 is None or x2 is None:
        raise ReplayFailed("where() with only a condition")
    _broadcast(condition, x1, x2)
    condition = np.asarray(getval(condition), dtype=bool)
    if _kind(x1) == "b" and _kind(x2) == "b":
        return np.where(condition, getval(x1), getval(x2))
    return anp.where(condition, _float(x1), _float(x2))


def _expand_dims(x, axis):
    _broadcast(x)
    ndim = np.ndim(getval(x)) + 1
    items = axis if isinstance(axis, (list, tuple)) else [axis]
    _axes(list(items), ndim)
    return anp.expand_dims(x, axis if not isinstance(axis, list) else tuple(axis)) if _kind(x) == "f" else \
        np.expand_dims(getval(x), tuple(items) if isinstance(axis, (list, tuple)) else axis)


def _squeeze(x, axis=None):
    _broadcast(x)
    axis = _axes(axis, np.ndim(getval(x)))
    try:
        return anp.squeeze(x, axis) if _kind(x) == "f" else np.squeeze(getval(x), axis)
    except ValueError:
        raise ReplayFailed("a squeeze of an axis that is not of size 1") from None


def _reshape(x, newshape=None, new_shape=None):
    shape = new_shape if newshape is None else newshape
    if isinstance(shape, int):
        shape = [shape]
    if not isinstance(shape, (list, tuple)) or len(shape) > 8 or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= -1 for d in shape):
        raise ReplayFailed("a reshape to a shape that is not a list of sizes")
    _broadcast(x)
    try:
        return anp.reshape(x, tuple(shape)) if _kind(x) == "f" else np.reshape(getval(x), tuple(shape))
    except ValueError:
        raise ReplayFailed(f"a reshape of {np.shape(getval(x))} to {tuple(shape)}") from None


def _transpose(x, axes=None):
    _broadcast(x)
    ndim = np.ndim(getval(x))
    if axes is not None:
        if not isinstance(axes, (list, tuple)) or \
                sorted(a % ndim for a in _axes(list(axes), ndim)) != list(range(ndim)):
            raise ReplayFailed(f"a transpose with axes {axes!r}")
        axes = tuple(axes)
    return anp.transpose(x, axes) if _kind(x) == "f" else np.transpose(getval(x), axes)


def _concatenate(xs, axis=0):
    if not isinstance(xs, list) or not xs or len(xs) > 64:
        raise ReplayFailed("a concatenation of something other than a list of tensors")
    shapes = [np.shape(getval(x)) for x in xs]
    ndim = len(shapes[0])
    axis = _axes(axis, ndim)
    if any(len(s) != ndim or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != axis) for s in shapes):
        raise ReplayFailed("a concatenation of tensors whose shapes do not fit")
    _cost(*shapes)
    if all(_kind(x) == "b" for x in xs):
        return np.concatenate([getval(x) for x in xs], axis=axis)
    return anp.concatenate([_float(x) for x in xs], axis=axis)


def _index(key):
    """A claimed index, checked: ints, slices of ints, None, an Ellipsis, or a tuple of these."""
    items = key if isinstance(key, tuple) else (key,)
    if len(items) > 8:
        raise ReplayFailed("an index with too many parts")
    for item in items:
        if item is None or item is Ellipsis or (isinstance(item, int) and not isinstance(item, bool)):
            continue
        if isinstance(item, slice) and all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                                           for v in (item.start, item.stop, item.step)) and item.step != 0:
            continue
        raise ReplayFailed("an index the grader cannot follow (a tensor or a list as an index)")
    return key


def _getitem(x, key):
    _broadcast(x)
    try:
        return x[_index(key)] if _kind(x) == "f" else np.asarray(getval(x))[_index(key)]
    except IndexError:
        raise ReplayFailed("an index out of the tensor's range") from None


def _like(fill):
    def apply(x, dtype=None):
        shape = np.shape(getval(x))
        _cost(shape)
        value = np.full(shape, fill, dtype=np.float64)
        return value if dtype is None else _cast(value, dtype)

    return apply


def _clip(x, x_min, x_max):
    _broadcast(x)
    return anp.clip(_float(x), x_min, x_max)


OPERATIONS = {
    # element-wise arithmetic
    "add": _arithmetic(anp.add), "subtract": _arithmetic(anp.subtract), "multiply": _arithmetic(anp.multiply),
    "divide": _arithmetic(anp.true_divide), "true_divide": _arithmetic(anp.true_divide),
    "maximum": _arithmetic(anp.maximum), "minimum": _arithmetic(anp.minimum), "power": _arithmetic(anp.power),
    "negative": _unary(anp.negative), "absolute": _unary(anp.abs), "abs": _unary(anp.abs),
    "exp": _unary(anp.exp), "log": _unary(anp.log), "sqrt": _unary(anp.sqrt), "square": _unary(anp.square),
    "reciprocal": _unary(anp.reciprocal), "clip": _clip,
    # comparisons and logic
    "equal": _comparison(np.equal), "not_equal": _comparison(np.not_equal), "greater": _comparison(np.greater),
    "greater_equal": _comparison(np.greater_equal), "less": _comparison(np.less),
    "less_equal": _comparison(np.less_equal), "logical_and": _logical(np.logical_and),
    "logical_or": _logical(np.logical_or), "logical_xor": _logical(np.logical_xor),
    "logical_not": _logical(np.logical_not),
    # casts, selection, constants shaped like a tensor
    "cast": _cast, "convert_to_tensor": _convert_to_tensor, "where": _where,
    "ones_like": _like(1.0), "zeros_like": _like(0.0),
    # reductions (a masked one is a where or a product with the mask, then one of these)
    "sum": _reduction(anp.sum), "mean": _reduction(anp.mean), "max": _reduction(anp.max, floats=False),
    "min": _reduction(anp.min, floats=False), "amax": _reduction(anp.max, floats=False),
    "amin": _reduction(anp.min, floats=False), "prod": _reduction(anp.prod),
    "any": _reduction(np.any, floats=False), "all": _reduction(np.all, floats=False),
    "count_nonzero": _count_nonzero,
    # shapes
    "expand_dims": _expand_dims, "squeeze": _squeeze, "reshape": _reshape, "transpose": _transpose,
    "concatenate": _concatenate, "getitem": _getitem,
}
# keras.ops' activations (gelu approximate by default there) and keras.activations' (exact gelu)
for _name in ops.ACTIVATIONS:
    if _name not in ("linear", "exponential", "mish"):  # keras.activations only
        OPERATIONS.setdefault(_name, _activation(_name, **({"approximate": True} if _name == "gelu" else {})))
    OPERATIONS[f"activations.{_name}"] = _activation(_name)


# --------------------------------------------------------------------------- form


def check_form(event: dict, label: str) -> list[dict]:
    """The event's op records, checked for form; ReplayFailed naming the first op the grader cannot
    recompute (and the student's line) or the first malformed record."""
    records = event.get("ops")
    if not isinstance(records, list) or len(records) > MAX_OPS or event.get("ops_truncated"):
        raise ReplayFailed(f"{label} runs more operations than the grader follows ({MAX_OPS})")
    for position, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("op"), str) or \
                not isinstance(record.get("args"), list) or not isinstance(record.get("kwargs"), dict):
            raise ReplayFailed(f"{label}'s operation {position} is malformed")
        if record["op"] not in OPERATIONS:
            raise ReplayFailed(f"{label} runs {describe(record)}, an operation the grader cannot recompute")
        for argument in list(record["args"]) + list(record["kwargs"].values()):
            _check_argument(argument, position, label)
        output = record.get("output")
        if output is not None and not isinstance(output, np.ndarray):
            raise ReplayFailed(f"{label}'s operation {position} has a malformed output")
    _check_argument(event.get("result"), len(records), label)
    return records


def describe(record: dict) -> str:
    """How a report names an op: keras.ops.where (line 12 of your file: `...`)."""
    name = str(record.get("op", "?"))[:60]
    name = f"keras.{name}" if name.startswith("activations.") else "indexing (x[...])" if name == "getitem" \
        else f"keras.ops.{name}"
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
    elif tag == "source":
        if not isinstance(value, str):
            raise ReplayFailed(f"{label}'s operation {position} has a malformed argument")
    elif tag == "constant":
        if not isinstance(value, np.ndarray) or value.size > MAX_CONSTANT or value.ndim > 2:
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
                           "(by an operation other than keras.ops, or a weight)")
    elif tag not in ("value", "ellipsis"):
        raise ReplayFailed(f"{label}'s operation {position} has a malformed argument")


# --------------------------------------------------------------------------- running


def _resolve(argument, sources: dict, results: list):
    (tag, value), = argument.items()
    if tag == "op":
        return results[value]
    if tag == "source":
        if value not in sources:
            raise ReplayFailed(f"an operation uses the argument {value[:40]!r}, which the layer did not receive")
        return sources[value]
    if tag == "constant":
        return np.asarray(value, dtype=np.float64) if value.dtype.kind == "f" else np.asarray(value)
    if tag == "list":
        return [_resolve(item, sources, results) for item in value]
    if tag == "slice":
        return slice(*value)
    if tag == "ellipsis":
        return Ellipsis
    if isinstance(value, float) and not math.isfinite(value):
        raise ReplayFailed("an operation with a number that is not finite")
    return value


def _apply(record: dict, sources: dict, results: list):
    args = [_resolve(a, sources, results) for a in record["args"]]
    kwargs = {k: _resolve(v, sources, results) for k, v in record["kwargs"].items()}
    if record["op"] == "getitem" and len(args) == 2 and isinstance(args[1], list):
        args[1] = tuple(args[1])
    try:
        return OPERATIONS[record["op"]](*args, **kwargs)
    except budget.TooLarge:
        raise
    except ReplayFailed as exc:
        raise ReplayFailed(f"{describe(record)}: {exc}") from None
    except (TypeError, ValueError, IndexError, ArithmeticError) as exc:
        raise ReplayFailed(f"{describe(record)} was called with arguments the grader cannot recompute "
                           f"({type(exc).__name__})") from None


def run(event: dict, sources: dict):
    """The layer's output: the tape run on ``sources`` (name -> the parent's value; may be autograd
    boxes, so the result is differentiable in them)."""
    results: list = []
    for record in event["ops"]:
        results.append(_apply(record, sources, results))
    return _resolve(event["result"], sources, results)


def verify(event: dict, sources: dict, label: str, close) -> None:
    """Recompute every op from ``sources`` (the layer's inputs as the parent knows them) and compare
    each with the output the child recorded; ReplayFailed at the first that differs."""
    records = check_form(event, label)
    results: list = []
    for record in records:
        value = _apply(record, sources, results)
        recorded = record.get("output")
        if recorded is None or not agrees(value, recorded, close):
            raise ReplayFailed(f"{label}: {describe(record)} does not give what the layer recorded for it")
        results.append(value)
    _resolve(event["result"], sources, results)


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
