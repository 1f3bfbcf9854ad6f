"""The operations of ``keras.ops`` that the replay recomputes, and the few it does not, each with why.

``OPERATIONS`` is one table: a ``keras.ops`` name (``activations.<name>`` for
``keras.activations``, ``getitem`` for a tensor's ``[...]``) -> an ``Op``: its
parameters as Keras declares them (names, order, defaults and what kind of value
each is), the rule that gives its result's shape from its arguments, and its
computation in float64 with ``autograd.numpy``, so that a replayed layer has exact
gradients. An operation whose NumPy counterpart has the same name and an autograd
gradient takes it from ``autograd.numpy`` by that name; the others are written
here. tests/test_op_table.py holds every entry to the installed Keras: its
parameters, its values and its gradients.

``apply`` is the only way in. It binds a recorded call's arguments to the
parameters, checks each against its kind (a tensor, an axis, a shape, a dtype,
...), computes the result's shape from the arguments alone, charges that to the
budget (``budget.charge``) and only then computes: the arguments are claims of
the child, and a claimed ``full((10**9,))`` is refused before any array exists.

``EXCLUDED`` names the operations the replay does not follow, each with the
sentence a report shows when a layer uses one; ``VALUES`` the functions whose
result is a plain Python value, which the tape carries as a value.
"""

from __future__ import annotations

import ast
import math
import string
import warnings
from dataclasses import dataclass
from typing import Callable

import autograd.numpy as anp
import numpy as np
from autograd.extend import defvjp, primitive
from autograd.tracer import Box, getval

from .. import keras_ops
from ..protocol import limits
from . import budget, ops

ReplayFailed = budget.ReplayFailed

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)
MAX_RANK = 16
MAX_ITEMS = limits.MAX_OP_ITEMS  # items of a list argument, parts of a result
MAX_INT = 1 << 40
EPSILON = 1e-7  # keras.backend.epsilon()
FLOAT32_LOWEST = float(np.finfo(np.float32).min)
REQUIRED = object()

# --------------------------------------------------------------------------- values


def value(x) -> np.ndarray:
    """The plain array of a tensor argument (an autograd box unwrapped)."""
    return np.asarray(getval(x))


def shape_of(x) -> tuple:
    return tuple(np.shape(getval(x)))


def kind(x) -> str:
    return value(x).dtype.kind


def size_of(x) -> int:
    return math.prod(shape_of(x))


def floats(x):
    """A tensor as float64, keeping autograd's box if it has one."""
    if kind(x) == "f":
        return x
    return value(x).astype(np.float64)


def _kinds(*xs) -> str:
    """The kind of a result computed from ``xs`` as Keras promotes them: float, int or bool."""
    found = {kind(x) for x in xs}
    return "f" if "f" in found else "i" if found & set("iu") else "b"


def _promoted(*xs):
    """``xs`` converted to the kind Keras computes them in."""
    target = _kinds(*xs)
    if target == "f":
        return [floats(x) for x in xs]
    if target == "i":
        return [value(x).astype(np.int64) for x in xs]
    return [value(x) for x in xs]


# --------------------------------------------------------------------------- argument kinds


def _tensor(v, name: str, depth: int = 0):
    if isinstance(v, Box):
        inner = getval(v)
        if isinstance(inner, (float, np.floating)):  # a reduction to one number, while gradients are taken
            return v
        if not isinstance(inner, np.ndarray) or inner.dtype.kind != "f" or inner.ndim > MAX_RANK:
            raise ReplayFailed(f"the argument {name} is not a tensor the grader can use")
        return v
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "biuf" or v.ndim > MAX_RANK:
            raise ReplayFailed(f"the argument {name} is not a tensor of numbers")
        if v.dtype.kind == "f" and v.dtype != np.float64:
            return v.astype(np.float64)
        if v.dtype.kind in "iu" and v.dtype != np.int64:
            if v.dtype.kind == "u" and v.size and int(v.max()) >= MAX_INT:
                raise ReplayFailed(f"the argument {name} holds integers too large for the grader")
            return v.astype(np.int64)
        return v
    if isinstance(v, (bool, np.bool_)):
        return np.asarray(bool(v))
    if isinstance(v, (int, np.integer)):
        if abs(int(v)) >= MAX_INT:
            raise ReplayFailed(f"the argument {name} is an integer too large for the grader")
        return np.asarray(int(v), dtype=np.int64)
    if isinstance(v, (float, np.floating)):
        return np.asarray(float(v))
    if isinstance(v, (list, tuple)) and depth < 4 and len(v) <= MAX_ITEMS:
        items = [_tensor(item, name, depth + 1) for item in v]
        if not items:
            return np.zeros((0,))
        shapes = {shape_of(item) for item in items}
        if len(shapes) != 1:
            raise ReplayFailed(f"the argument {name} is a list of tensors of different shapes")
        total = len(items) * size_of(items[0])
        budget.charge(total + 1, total)
        if any(isinstance(item, Box) for item in items):
            return anp.stack([floats(item) for item in items])
        return np.stack([value(item) for item in items])
    raise ReplayFailed(f"the argument {name} is not a tensor")


def _optional_tensor(v, name):
    return None if v is None else _tensor(v, name)


def _tensors(v, name):
    if not isinstance(v, (list, tuple)) or not v or len(v) > MAX_ITEMS:
        raise ReplayFailed(f"the argument {name} is not a list of tensors")
    return [_tensor(item, name) for item in v]


def _integer(v, name):
    if isinstance(v, (bool, np.bool_)):
        raise ReplayFailed(f"the argument {name} is a boolean where an integer belongs")
    if isinstance(v, (int, np.integer)):
        number = int(v)
    elif isinstance(v, np.ndarray) and v.dtype.kind in "iu" and v.size == 1 and v.ndim <= 1:
        number = int(v.reshape(-1)[0])
    elif isinstance(v, float) and v.is_integer():
        number = int(v)
    else:
        raise ReplayFailed(f"the argument {name} is not an integer")
    if abs(number) >= MAX_INT:
        raise ReplayFailed(f"the argument {name} is an integer too large for the grader")
    return number


def _optional_integer(v, name):
    return None if v is None else _integer(v, name)


def _integers(v, name):
    """An int, or a sequence of ints (a list, a tuple or a 1-D integer array): a tuple."""
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu" and v.ndim <= 1:
        v = [int(item) for item in v.reshape(-1)]
    if isinstance(v, (list, tuple)):
        if len(v) > MAX_RANK * 2:
            raise ReplayFailed(f"the argument {name} has too many items")
        return tuple(_integer(item, name) for item in v)
    return (_integer(v, name),)


def _axes(v, name):
    if v is None:
        return None
    if isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim == 1):
        return _integers(v, name)
    return _integer(v, name)


def _number(v, name):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return _integer(v, name)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" and v.size == 1:
        return v.reshape(-1)[0].item()
    raise ReplayFailed(f"the argument {name} is not a number")


def _optional_number(v, name):
    return None if v is None else _number(v, name)


def _boolean(v, name):
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, int) and v in (0, 1)):
        return bool(v)
    if isinstance(v, np.ndarray) and v.dtype.kind in "biu" and v.size == 1:
        return bool(v.reshape(-1)[0])
    raise ReplayFailed(f"the argument {name} is not True or False")


def _dtype(v, name):
    if v is None:
        return None
    if isinstance(v, str) and v in DTYPES:
        return v
    raise ReplayFailed(f"the argument {name} names a dtype ({str(v)[:30]!r}) the grader does not follow")


def _text(v, name):
    if v is None or (isinstance(v, str) and len(v) <= 200):
        return v
    raise ReplayFailed(f"the argument {name} is not a short string")


KINDS: dict[str, Callable] = {
    "t": _tensor, "t?": _optional_tensor, "ts": _tensors, "int": _integer, "int?": _optional_integer,
    "ints": _integers, "axes": _axes, "num": _number, "num?": _optional_number, "bool": _boolean,
    "dtype": _dtype, "str": _text, "raw": lambda v, name: v,
}


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: object = REQUIRED
    star: bool = False  # *operands
    extra: bool = False  # **kwargs


def signature(spec: str) -> tuple[Param, ...]:
    """"x:t, axis:axes=None" -> its parameters."""
    params = []
    for item in _split_top(spec):
        star = item.startswith("*") and not item.startswith("**")
        extra = item.startswith("**")
        item = item.lstrip("*")
        head, _, default = item.partition("=")
        name, _, kind_name = head.partition(":")
        if kind_name not in KINDS and not extra:
            raise ValueError(f"unknown kind {kind_name!r} in {spec!r}")
        params.append(Param(name.strip(), kind_name or "raw",
                            ast.literal_eval(default) if default else REQUIRED, star, extra))
    return tuple(params)


def _split_top(spec: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in spec:
        depth += char in "([" and 1 or (char in ")]" and -1 or 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


@dataclass(frozen=True)
class Op:
    """One operation: its parameters, its result's shape (a list of shapes when it gives several
    tensors, ``multi``) and its computation, each a function of the checked arguments by name.
    ``work`` counts element operations beyond the arguments' and the result's sizes (a product's
    sum over its inner index); ``space`` the largest temporary array beyond the result."""

    params: tuple
    shape: Callable
    compute: Callable
    multi: bool | Callable = False
    work: Callable | None = None
    space: Callable | None = None


def op(spec: str, shape: Callable, compute: Callable, **options) -> Op:
    return Op(signature(spec), shape, compute, **options)


def bind(name: str, entry: Op, args: list, kwargs: dict) -> dict:
    """The recorded arguments as the operation's parameters, checked: ReplayFailed for an argument
    it does not take, one given twice or one missing."""
    positional = [p for p in entry.params if not p.star and not p.extra]
    star = next((p for p in entry.params if p.star), None)
    extra = next((p for p in entry.params if p.extra), None)
    bound: dict = {}
    before_star = positional if star is None else positional[:entry.params.index(star)]
    after_star = [] if star is None else positional[len(before_star):]
    if len(args) > len(before_star) and star is None:
        raise ReplayFailed(f"keras.ops.{name} was given {len(args)} positional arguments; it takes "
                           f"{len(before_star)}")
    for param, given in zip(before_star, args):
        bound[param.name] = given
    if star is not None:
        bound[star.name] = list(args[len(before_star):])
        if len(bound[star.name]) > MAX_ITEMS:
            raise ReplayFailed(f"keras.ops.{name} was given too many arguments")
    extras = {}
    known = {p.name for p in positional}
    for key, given in kwargs.items():
        if key in bound or (key not in known and extra is None):
            raise ReplayFailed(f"keras.ops.{name} was given an argument {str(key)[:40]!r} "
                               f"{'twice' if key in bound else 'it does not take'}")
        if key in known:
            bound[key] = given
        else:
            extras[key] = given
    checked = {}
    for param in before_star + after_star:
        if param.name not in bound:
            if param.default is REQUIRED:
                raise ReplayFailed(f"keras.ops.{name} was called without its argument {param.name}")
            checked[param.name] = param.default
            continue
        checked[param.name] = KINDS[param.kind](bound[param.name], param.name)
    if star is not None:
        checked[star.name] = [KINDS[star.kind](item, star.name) for item in bound[star.name]]
    if extra is not None:
        checked[extra.name] = extras
    return checked


def _shapes(claimed, multi: bool) -> list[tuple]:
    shapes = list(claimed) if multi else [claimed]
    if len(shapes) > MAX_ITEMS:
        raise budget.TooLarge(f"a step of the call would make {len(shapes)} tensors")
    checked = []
    for shape in shapes:
        shape = tuple(shape)
        if len(shape) > 32 or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
                                      for d in shape):
            raise ReplayFailed(f"a result of shape {shape!r}")
        checked.append(tuple(int(d) for d in shape))
    return checked


def _input_size(arguments: dict) -> int:
    total = 0
    for item in arguments.values():
        for part in (item if isinstance(item, list) else [item]):
            if isinstance(part, (np.ndarray, Box)):
                total += size_of(part)
    return total


def apply(name: str, args: list, kwargs: dict):
    """Operation ``name`` on a record's resolved arguments: bound and checked, its result's shape
    computed and charged to the budget, then computed. Only ReplayFailed (and its TooLarge)
    leaves: arguments that are malformed, of the wrong kind or that do not fit, and results the
    budget does not allow."""
    entry = OPERATIONS.get(name)
    if entry is None:
        raise ReplayFailed(f"keras.ops.{name[:60]} is not an operation the grader recomputes")
    arguments = bind(name, entry, list(args), dict(kwargs))
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NumPy's notes on empty slices and the like: the arguments are claims
            multi = entry.multi(**arguments) if callable(entry.multi) else entry.multi
            shapes = _shapes(entry.shape(**arguments), multi)
            produced = sum(math.prod(s) for s in shapes)
            elements = max(produced, entry.space(**arguments) if entry.space else 0)
            work = entry.work(**arguments) if entry.work else 0
            budget.charge(_input_size(arguments) + produced + work + 1, elements)
            result = entry.compute(**arguments)
    except (budget.TooLarge, ReplayFailed):
        raise
    except Exception as exc:  # the arguments are claims: whatever they make NumPy raise is theirs
        raise ReplayFailed(f"arguments the grader cannot recompute ({type(exc).__name__})") from None
    parts = list(result) if multi else [result]
    if [shape_of(part) for part in parts] != shapes:
        raise ReplayFailed(f"the grader's own recomputation of keras.ops.{name} gave a result of another shape")
    return tuple(parts) if multi else result


# --------------------------------------------------------------------------- shapes


def _broadcast(*shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ReplayFailed(f"operands of shapes {', '.join(str(s) for s in shapes)} that do not broadcast") from None


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ReplayFailed(f"an axis {axis} that a tensor of {ndim} dimensions does not have")
    return axis % ndim


def _axis_tuple(axis, ndim: int):
    """None, or the axes as a sorted tuple of distinct non-negative ints."""
    if axis is None:
        return None
    items = axis if isinstance(axis, tuple) else (axis,)
    found = tuple(sorted({_axis(a, ndim) for a in items}))
    if len(found) != len(items):
        raise ReplayFailed(f"the axes {axis} repeat an axis")
    return found


def _reduced(shape: tuple, axis, keepdims: bool) -> tuple:
    axes = _axis_tuple(axis, len(shape))
    if axes is None:
        axes = tuple(range(len(shape)))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _view_shape(shape: tuple, view: Callable) -> tuple:
    """The shape NumPy gives a view of an array of ``shape`` (an index, a transpose, a diagonal),
    found on an array of that shape that takes no memory."""
    try:
        return tuple(view(_dummy(shape)).shape)
    except (ValueError, IndexError, TypeError) as exc:
        raise ReplayFailed(f"{type(exc).__name__}: {str(exc)[:120]}") from None


def _same(**arguments):
    """The shape of the operation's first argument."""
    return shape_of(next(iter(arguments.values())))


def _same_along(x, axis=None, **_):
    """The shape of ``x``, once ``axis`` (an int, a tuple or None) is checked to be among its axes."""
    _axis_tuple(axis, len(shape_of(x)))
    return shape_of(x)


# --------------------------------------------------------------------------- primitives autograd lacks


@primitive
def _fmod(x1, x2):
    return np.fmod(x1, x2)


defvjp(_fmod, lambda ans, x1, x2: lambda g: _unbroadcast(g, x1),
       lambda ans, x1, x2: lambda g: _unbroadcast(-g * np.trunc(x1 / x2), x2))


@primitive
def _cbrt(x):
    return np.cbrt(x)


defvjp(_cbrt, lambda ans, x: lambda g: g / (3.0 * ans ** 2))


@primitive
def _i0(x):
    return np.i0(x)


defvjp(_i0, lambda ans, x: lambda g: g * _i1(x))


def _i1(x):
    from scipy.special import i1

    return i1(x)


@primitive
def _scatter_add(updates, positions, size):
    """A flat array of ``size`` rows (each the shape of an update's row) with every update added
    at its position; positions outside [0, size) are dropped."""
    rows = np.reshape(updates, (len(positions), -1))
    out = np.zeros((size, rows.shape[1]), dtype=rows.dtype)
    keep = (positions >= 0) & (positions < size)
    np.add.at(out, positions[keep], rows[keep])
    return out


defvjp(_scatter_add, lambda ans, updates, positions, size: lambda g: np.reshape(
    np.where(((positions >= 0) & (positions < size))[:, None], g[np.clip(positions, 0, max(size - 1, 0))], 0.0),
    np.shape(updates)))


@primitive
def _segment_extreme(data, positions, size, largest):
    rows = np.reshape(data, (len(positions), -1))
    fill = -np.inf if largest else np.inf
    out = np.full((size, rows.shape[1]), fill)
    keep = (positions >= 0) & (positions < size)
    (np.maximum if largest else np.minimum).at(out, positions[keep], rows[keep])
    return np.where(np.isinf(out) & (out == fill), FLOAT32_LOWEST if largest else -FLOAT32_LOWEST, out)


def _segment_extreme_vjp(ans, data, positions, size, largest):
    def vjp(g):
        rows = np.reshape(data, (len(positions), -1))
        keep = (positions >= 0) & (positions < size)
        safe = np.clip(positions, 0, max(size - 1, 0))
        hit = keep[:, None] & (rows == ans[safe])
        counts = np.zeros_like(ans)
        np.add.at(counts, safe[keep], hit[keep].astype(float))
        share = np.where(hit, g[safe] / np.maximum(counts[safe], 1.0), 0.0)
        return np.reshape(share, np.shape(data))

    return vjp


defvjp(_segment_extreme, _segment_extreme_vjp)


def _unbroadcast(g, x):
    """The gradient ``g`` of a broadcast result, summed back to ``x``'s shape."""
    target = np.shape(x)
    while np.ndim(g) > len(target):
        g = np.sum(g, axis=0)
    for i, d in enumerate(target):
        if d == 1 and np.shape(g)[i] != 1:
            g = np.sum(g, axis=i, keepdims=True)
    return g


def _choose(condition, a, b):
    """``anp.where`` with its operands broadcast first: autograd's own does not sum the gradient of
    a broadcast operand back to its shape."""
    shape = np.broadcast_shapes(np.shape(condition), np.shape(getval(a)), np.shape(getval(b)))

    def full(v):
        return v if np.shape(getval(v)) == shape else v + np.zeros(shape)

    return anp.where(np.broadcast_to(condition, shape), full(a), full(b))


def _gather(x, index: tuple):
    """``x[index]`` (basic or advanced), differentiable in x."""
    return x[index] if kind(x) == "f" else value(x)[index]


# --------------------------------------------------------------------------- element-wise


def _special(name: str):
    """autograd's SciPy function ``name`` (SciPy's, with its derivative), imported when a replay first
    computes it: importing SciPy's special functions takes longer than the rest of the judge's imports."""
    def compute(x):
        from autograd.scipy import special

        return getattr(special, name)(x)
    return compute


def _float_unary(function):
    return op("x:t", _same, lambda x: function(floats(x)))


def _keep_unary(function, bools=None, spec="x:t"):
    """An element-wise function that keeps integers integers; ``bools``: what it does to booleans
    (None: Keras refuses them)."""
    def compute(x, **options):
        found = kind(x)
        if found == "f":
            return function(x, **options)
        if found == "b":
            if bools is None:
                raise ReplayFailed("a boolean tensor where Keras takes numbers")
            return bools(value(x), **options)
        return np.asarray(function(value(x), **options)).astype(np.int64)

    return op(spec, _same, compute)


def _predicate(function):
    return op("x:t", _same, lambda x: np.asarray(function(value(x)), dtype=bool))


def _names(spec: str) -> list[str]:
    return [p.name for p in signature(spec) if not p.star and not p.extra]


def _binary(function, spec="x1:t, x2:t", floats_only=False, bools=None, ints_only=False):
    first, second = _names(spec)[:2]

    def shape(**v):
        return _broadcast(shape_of(v[first]), shape_of(v[second]))

    def compute(**v):
        x1, x2 = v[first], v[second]
        found = "f" if floats_only else _kinds(x1, x2)
        if ints_only:
            if found != "i" or "b" in (kind(x1), kind(x2)):
                raise ReplayFailed("a tensor that is not of integers where Keras takes integers")
            return np.asarray(function(value(x1).astype(np.int64), value(x2).astype(np.int64)))
        if found == "b":
            if bools is None:
                raise ReplayFailed("an arithmetic operation on two boolean tensors")
            return bools(value(x1), value(x2))
        if found == "f":
            return function(floats(x1), floats(x2))
        return np.asarray(function(value(x1).astype(np.int64), value(x2).astype(np.int64)))

    return op(spec, shape, compute)


def _comparison(function):
    return op("x1:t, x2:t", lambda x1, x2: _broadcast(shape_of(x1), shape_of(x2)),
              lambda x1, x2: np.asarray(function(value(x1), value(x2)), dtype=bool))


def _logical(function):
    return op("x1:t, x2:t", lambda x1, x2: _broadcast(shape_of(x1), shape_of(x2)),
              lambda x1, x2: function(value(x1) != 0, value(x2) != 0))


def _divide_no_nan(x1, x2):
    x1, x2 = floats(x1), floats(x2)
    zero = value(x2) == 0
    return _choose(zero, 0.0, x1 / _choose(zero, 1.0, x2))


def _ldexp(x1, x2):
    if kind(x2) not in "iu":
        raise ReplayFailed("ldexp with an exponent that is not an integer")
    return floats(x1) * np.power(2.0, value(x2))


def _where(condition, x1=None, x2=None):
    if x1 is None or x2 is None:
        raise ReplayFailed("where() with only a condition, whose result's shape depends on the values")
    condition = value(condition) != 0
    found = _kinds(x1, x2)
    if found == "f":
        return _choose(condition, floats(x1), floats(x2))
    return np.where(condition, *_promoted(x1, x2))


def _where_shape(condition, x1=None, x2=None):
    if x1 is None or x2 is None:
        raise ReplayFailed("where() with only a condition, whose result's shape depends on the values")
    return _broadcast(shape_of(condition), shape_of(x1), shape_of(x2))


def _clip(x, x_min, x_max):
    found = _kinds(x, x_min, x_max)
    if found == "f":  # the lower bound wins where the bounds cross, as in TensorFlow
        return anp.maximum(anp.minimum(floats(x), floats(x_max)), floats(x_min))
    low, high = value(x_min), value(x_max)
    return np.maximum(np.minimum(value(x).astype(np.int64), high), low).astype(np.int64)


def _select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ReplayFailed("select() with as many conditions as choices")
    default = _tensor(default, "default")
    found = _kinds(default, *choicelist)
    result = floats(default) if found == "f" else value(default)
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        chosen = floats(choice) if found == "f" else value(choice)
        result = (_choose if found == "f" else np.where)(value(condition) != 0, chosen, result)
    return result if found != "i" else np.asarray(result).astype(np.int64)


def _select_shape(condlist, choicelist, default=0):
    return _broadcast(*[shape_of(c) for c in list(condlist) + list(choicelist)], np.shape(getval(default)))


def _nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    if kind(x) != "f":
        return value(x)
    finite = np.isfinite(value(x))
    replaced = np.nan_to_num(value(x), nan=nan, posinf=posinf, neginf=neginf)
    return _choose(finite, x, replaced)


def _round(x, decimals=0):
    if kind(x) == "b":
        raise ReplayFailed("a boolean tensor where Keras takes numbers")
    if kind(x) == "f":
        return anp.round(x, decimals)
    return np.round(value(x), decimals).astype(np.int64)


def _square(x):
    return x * x if kind(x) == "f" else value(x).astype(np.int64) ** 2


def _trunc(x):
    return anp.trunc(x) if kind(x) == "f" else value(x)


def _angle(x):
    return anp.angle(floats(x))


# --------------------------------------------------------------------------- reductions


def _reduce_shape(x, axis=None, keepdims=False, **_):
    return _reduced(shape_of(x), axis, keepdims)


def _reduction(function, result="keep", spec="x:t, axis:axes=None, keepdims:bool=False"):
    """A reduction over ``axis``; ``result``: "keep" (booleans become integers), "same" (booleans
    stay), "float", "bool" or "int"."""
    def compute(x, axis=None, keepdims=False, **options):
        axes = _axis_tuple(axis, len(shape_of(x)))
        found = kind(x)
        if result == "float" or (found == "f" and result in ("keep", "same")):
            data = floats(x)
        elif result == "same" and found == "b":
            data = value(x)
        elif result in ("bool",):
            data = value(x) != 0
        else:
            data = value(x).astype(np.int64) if found in "biu" else x
        return function(data, axes, bool(keepdims), **options)

    return op(spec, _reduce_shape, compute)


def _sum(x, axis, keepdims):
    return anp.sum(x, axis=axis, keepdims=keepdims)


def _extreme(largest):
    def apply(x, axis, keepdims, initial=None):
        if 0 in [shape_of(x)[i] for i in (axis if axis is not None else range(len(shape_of(x))))]:
            raise ReplayFailed("a maximum or minimum over an empty axis")
        if kind(x) == "b":
            found = (np.any if largest else np.all)(value(x), axis=axis, keepdims=keepdims)
            return found if initial is None else (found | bool(initial) if largest else found & bool(initial))
        found = (anp.max if largest else anp.min)(x, axis=axis, keepdims=keepdims)
        if initial is not None:
            found = (anp.maximum if largest else anp.minimum)(found, initial)
        return found

    return apply


def _prod(x, axis, keepdims, dtype=None):
    result = anp.prod(x, axis=axis, keepdims=keepdims)
    return result if dtype is None else cast(result, dtype)


def _logsumexp(x, axis, keepdims):
    top = np.max(value(x), axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    total = anp.log(anp.sum(anp.exp(x - top), axis=axis, keepdims=True)) + top
    return total if keepdims else anp.reshape(total, _reduced(shape_of(x), axis, False))


def _moved_last(x, axis):
    """``x`` with the axes ``axis`` (a tuple, or None for all) flattened into one last axis."""
    ndim = len(shape_of(x))
    axes = tuple(range(ndim)) if axis is None else axis
    rest = [i for i in range(ndim) if i not in axes]
    moved = anp.transpose(x, rest + list(axes)) if kind(x) == "f" else np.transpose(value(x), rest + list(axes))
    shape = [shape_of(x)[i] for i in rest] + [math.prod(shape_of(x)[i] for i in axes)]
    return anp.reshape(moved, shape) if kind(x) == "f" else np.reshape(moved, shape)


def _along(x, index):
    """``x[..., index]`` per slice: ``index`` has ``x``'s shape but for its last axis."""
    grids = np.ix_(*[np.arange(d) for d in shape_of(x)[:-1]]) if len(shape_of(x)) > 1 else ()
    grids = tuple(g[..., None] for g in grids)
    return _gather(x, grids + (index,))


def _quantiles(x, q, axis, keepdims, method="linear", nan_aware=False):
    """NumPy's quantile (q in [0, 1]) over ``axis``, differentiable in x: a gather of the sorted values."""
    if method not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ReplayFailed(f"a quantile method {str(method)[:20]!r} the grader does not follow")
    fractions = q
    q = np.asarray(value(q), dtype=np.float64)
    if q.ndim > 1 or np.any((q < 0) | (q > 1)) or np.any(np.isnan(q)):
        raise ReplayFailed("quantiles outside [0, 1]")
    data = floats(x)
    flat = _moved_last(data, axis)
    n = shape_of(flat)[-1]
    if n == 0:
        raise ReplayFailed("a quantile of an empty axis")
    order = np.argsort(value(flat), axis=-1, kind="stable")
    ordered = _along(flat, order)
    nan = np.isnan(value(flat))
    count = (n - nan.sum(axis=-1)) if nan_aware else np.full(shape_of(flat)[:-1], n)
    results = []
    last = np.maximum(count - 1, 0)
    for i, fraction in enumerate(q.reshape(-1)):
        position = fraction * last
        if method == "linear":
            # Keras's pair of neighbours: the one at or above the position and the one before it,
            # weighted by a function of q, so that q has its gradient too
            low = np.maximum(np.ceil(position).astype(np.int64) - 1, 0)
            high = np.minimum(low + 1, last)
            weight = (fractions[i] if q.ndim else fractions) * last - low
        else:
            low = np.around(position) if method == "nearest" else np.ceil(position) if method == "higher" \
                else np.floor(position)
            low = low.astype(np.int64)
            high = np.ceil(position).astype(np.int64) if method == "midpoint" else low
            weight = 0.5
        a, b = _along(ordered, low[..., None])[..., 0], _along(ordered, high[..., None])[..., 0]
        found = a + (b - a) * weight
        if nan_aware:
            found = _choose(count == 0, np.nan, found)
        else:
            found = _choose(nan.any(axis=-1), np.nan, found)
        results.append(found)
    stacked = anp.stack(results) if q.ndim else results[0]
    if keepdims:
        reduced = _reduced(shape_of(x), axis, True)
        stacked = anp.reshape(stacked, q.shape + reduced)
    return stacked


def _quantile_shape(x, q, axis=None, method="linear", keepdims=False):
    return np.shape(getval(q)) + _reduced(shape_of(x), axis, keepdims)


def _quantile(scale, nan_aware=False):
    def compute(x, q, axis=None, method="linear", keepdims=False):
        axes = _axis_tuple(axis, len(shape_of(x)))
        return _quantiles(x, floats(q) / scale, axes, keepdims, method, nan_aware)

    return op("x:t, q:t, axis:axes=None, method:str='linear', keepdims:bool=False", _quantile_shape, compute)


def _median(nan_aware):
    def median(x, axis, keepdims):
        return _quantiles(x, np.asarray(0.5), axis, keepdims, "linear", nan_aware)

    return _reduction(median, "float")


def _nan_filled(x, fill):
    return _choose(np.isnan(value(x)), fill, x) if kind(x) == "f" else x


def _nanmean(x, axis, keepdims):
    count = np.sum(~np.isnan(value(x)), axis=axis, keepdims=keepdims)
    return anp.sum(_nan_filled(x, 0.0), axis=axis, keepdims=keepdims) / count


def _nanvar(x, axis, keepdims):
    missing = np.isnan(value(x))
    centred = _choose(missing, 0.0, _nan_filled(x, 0.0) - _nanmean(x, axis, True))
    return anp.sum(centred * centred, axis=axis, keepdims=keepdims) / np.sum(~missing, axis=axis, keepdims=keepdims)


def _nanextreme(largest):
    def apply(x, axis, keepdims):
        filled = _nan_filled(x, -np.inf if largest else np.inf)
        found = (anp.max if largest else anp.min)(filled, axis=axis, keepdims=keepdims)
        empty = np.all(np.isnan(value(x)), axis=axis, keepdims=keepdims) if kind(x) == "f" else False
        return _choose(empty, np.nan, found) if np.any(empty) else found

    return apply


def _arg(largest, nan_aware=False):
    def compute(x, axis=None, keepdims=False):
        data = value(x)
        if nan_aware and data.dtype.kind == "f":
            data = np.where(np.isnan(data), -np.inf if largest else np.inf, data)
        if axis is None:
            found = (np.argmax if largest else np.argmin)(data.reshape(-1))
            return np.asarray(found).reshape((1,) * data.ndim if keepdims else ()).astype(np.int64)
        if isinstance(axis, tuple):
            raise ReplayFailed("argmax/argmin over several axes")
        if data.shape[_axis(axis, data.ndim)] == 0:
            raise ReplayFailed("an argmax or argmin over an empty axis")
        return (np.argmax if largest else np.argmin)(data, axis=axis, keepdims=keepdims).astype(np.int64)

    def shape(x, axis=None, keepdims=False):
        if isinstance(axis, tuple):
            raise ReplayFailed("argmax/argmin over several axes")
        return _reduced(shape_of(x), axis, keepdims)

    return op("x:t, axis:axes=None, keepdims:bool=False", shape, compute)


def _count_nonzero(x, axis=None):
    axes = _axis_tuple(axis, len(shape_of(x)))
    return np.asarray(np.count_nonzero(value(x), axis=axes)).astype(np.int64)


def _average(x, axis=None, weights=None):
    data = floats(x)
    if weights is None:
        return anp.mean(data, axis=axis)
    weights = floats(weights)
    if shape_of(weights) != shape_of(x):
        along = None if axis is None else shape_of(x)[_axis(axis, len(shape_of(x)))]
        if along is None or len(shape_of(weights)) != 1 or shape_of(weights)[0] != along:
            raise ReplayFailed("average() with weights whose shape does not fit the tensor")
        shape = [1] * len(shape_of(x))
        shape[_axis(axis, len(shape_of(x)))] = shape_of(weights)[0]
        weights = anp.reshape(weights, shape)
    return anp.sum(data * weights, axis=axis) / anp.sum(weights * np.ones(shape_of(x)), axis=axis)


def _average_shape(x, axis=None, weights=None):
    return _reduced(shape_of(x), axis, False)


def _norm_shape(x, ord=None, axis=None, keepdims=False):
    return _reduced(shape_of(x), axis, keepdims)


def _singular_values(x):
    return anp.linalg.svd(x, compute_uv=False)


def _norm(x, ord=None, axis=None, keepdims=False):
    data = floats(x)
    ndim = len(shape_of(x))
    axes = _axis_tuple(axis, ndim)
    if axes is None:
        if ord is None:
            axes = tuple(range(ndim))
            return anp.sqrt(anp.sum(data * data, axis=axes, keepdims=keepdims))
        if ndim not in (1, 2):
            raise ReplayFailed("a norm with an ord of a tensor that is not a vector or a matrix")
        axes = tuple(range(ndim))
    if isinstance(ord, (int, float)) and not isinstance(ord, bool) or ord is None or ord in ("fro", "nuc"):
        pass
    else:
        raise ReplayFailed(f"a norm of order {str(ord)[:20]!r}")
    magnitude = anp.abs(data)
    if len(axes) == 1:
        if ord is None or ord == 2:
            found = anp.sqrt(anp.sum(data * data, axis=axes, keepdims=keepdims))
        elif ord == np.inf:
            found = anp.max(magnitude, axis=axes, keepdims=keepdims)
        elif ord == -np.inf:
            found = anp.min(magnitude, axis=axes, keepdims=keepdims)
        elif ord == 0:
            found = np.sum(value(data) != 0, axis=axes, keepdims=keepdims).astype(np.float64)
        elif isinstance(ord, str):
            raise ReplayFailed(f"a vector norm of order {ord!r}")
        else:
            found = anp.sum(magnitude ** ord, axis=axes, keepdims=keepdims) ** (1.0 / ord)
        return found
    if len(axes) != 2:
        raise ReplayFailed("a norm over more than two axes")
    row, col = axes
    if ord is None or ord == "fro":
        return anp.sqrt(anp.sum(data * data, axis=axes, keepdims=keepdims))
    if ord in (1, -1):
        sums = anp.sum(magnitude, axis=row, keepdims=True)
        found = (anp.max if ord == 1 else anp.min)(sums, axis=col, keepdims=True)
    elif ord in (np.inf, -np.inf):
        sums = anp.sum(magnitude, axis=col, keepdims=True)
        found = (anp.max if ord > 0 else anp.min)(sums, axis=row, keepdims=True)
    elif ord in (2, -2, "nuc"):
        moved = anp.moveaxis(data, (row, col), (-2, -1))
        values = _singular_values(moved)
        found = anp.sum(values, axis=-1) if ord == "nuc" else (anp.max if ord == 2 else anp.min)(values, axis=-1)
        found = anp.reshape(found, _reduced(shape_of(x), axes, True))
    else:
        raise ReplayFailed(f"a matrix norm of order {ord!r}")
    return found if keepdims else anp.reshape(found, _reduced(shape_of(x), axes, False))


def _trace(x, offset=0, axis1=0, axis2=1):
    ndim = len(shape_of(x))
    axis1, axis2 = _axis(axis1, ndim), _axis(axis2, ndim)
    if axis1 == axis2:
        raise ReplayFailed("a trace over one axis twice")
    if kind(x) == "f":
        return anp.sum(_diagonal(x, offset, axis1, axis2), axis=-1)
    return np.trace(value(x).astype(np.int64), offset, axis1, axis2)


def _trace_shape(x, offset=0, axis1=0, axis2=1):
    ndim = len(shape_of(x))
    axis1, axis2 = _axis(axis1, ndim), _axis(axis2, ndim)
    if axis1 == axis2:
        raise ReplayFailed("a trace over one axis twice")
    return tuple(d for i, d in enumerate(shape_of(x)) if i not in (axis1, axis2))


def _moments(x, axes, keepdims=False, synchronized=False):
    reduce = _axis_tuple(axes, len(shape_of(x)))
    data = floats(x)
    mean = anp.mean(data, axis=reduce, keepdims=True)
    centred = data - mean
    variance = anp.mean(centred * centred, axis=reduce, keepdims=keepdims)
    return (mean if keepdims else anp.reshape(mean, _reduced(shape_of(x), reduce, False))), variance


# --------------------------------------------------------------------------- scans


def _flat_axis(x, axis):
    if axis is None:
        return (anp.reshape(x, (-1,)) if kind(x) == "f" else value(x).reshape(-1)), 0
    return x, _axis(axis, len(shape_of(x)))


def _scan_shape(x, axis=None, dtype=None):
    if axis is None:
        return (size_of(x),)
    _axis(axis, len(shape_of(x)))
    return shape_of(x)


def _cumsum(x, axis=None, dtype=None, nan=False):
    data, axis = _flat_axis(_nan_filled(x, 0.0) if nan else x, axis)
    result = anp.cumsum(data, axis=axis) if kind(data) == "f" else np.cumsum(value(data).astype(np.int64), axis=axis)
    return result if dtype is None else cast(result, dtype)


def _cumprod(x, axis=None, dtype=None, nan=False):
    data, axis = _flat_axis(_nan_filled(x, 1.0) if nan else x, axis)
    if kind(data) != "f":
        result = np.cumprod(value(data).astype(np.int64), axis=axis)
    else:
        moved = anp.moveaxis(data, axis, 0)
        parts = [moved[0]] if shape_of(moved)[0] else []
        for i in range(1, shape_of(moved)[0]):
            parts.append(parts[-1] * moved[i])
        result = anp.moveaxis(anp.stack(parts), 0, axis) if parts else data
    return result if dtype is None else cast(result, dtype)


def _scan_work(x, axis=None, dtype=None):
    return 5_000 * (size_of(x) if axis is None else shape_of(x)[_axis(axis, len(shape_of(x)))])


def _diff(a, n=1, axis=-1):
    if n < 0:
        raise ReplayFailed("diff() with a negative order")
    axis = _axis(axis, len(shape_of(a)))
    result = a if kind(a) == "f" else value(a)
    for _ in range(n):
        ahead = _gather(result, (slice(None),) * axis + (slice(1, None),))
        behind = _gather(result, (slice(None),) * axis + (slice(None, -1),))
        result = ahead != behind if kind(result) == "b" else ahead - behind
    return result


def _diff_shape(a, n=1, axis=-1):
    if n < 0:
        raise ReplayFailed("diff() with a negative order")
    shape = list(shape_of(a))
    axis = _axis(axis, len(shape))
    shape[axis] = max(shape[axis] - n, 0)
    return tuple(shape)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    y = floats(y)
    axis = _axis(axis, len(shape_of(y)))
    ahead = y[(slice(None),) * axis + (slice(1, None),)]
    behind = y[(slice(None),) * axis + (slice(None, -1),)]
    if x is None:
        step = dx
    else:
        x = floats(x)
        if len(shape_of(x)) == 1:
            step = anp.reshape(x[1:] - x[:-1], [-1 if i == axis else 1 for i in range(len(shape_of(y)))])
        else:
            step = _diff(x, 1, axis)
    return anp.sum(step * (ahead + behind) / 2.0, axis=axis)


# --------------------------------------------------------------------------- activations, normalisations, losses


def _activation(name, spec):
    def compute(x, **options):
        if name in ("relu",) and kind(x) in "iu" and not options:
            return np.maximum(value(x), 0)
        if name in ("softmax", "log_softmax") and "axis" in options:
            options["axis"] = _axis_tuple(options["axis"], len(shape_of(x))) if options["axis"] is not None \
                else tuple(range(len(shape_of(x))))
        if name == "glu":
            axis = _axis(options.get("axis", -1), len(shape_of(x)))
            if shape_of(x)[axis] % 2:
                raise ReplayFailed("glu() of an axis of odd size")
        return ops.activation(floats(x), name, **options)

    return op(spec, _glu_shape if name == "glu" else _same, compute)


def _glu_shape(x, axis=-1):
    shape = list(shape_of(x))
    axis = _axis(axis, len(shape))
    if shape[axis] % 2:
        raise ReplayFailed("glu() of an axis of odd size")
    shape[axis] //= 2
    return tuple(shape)


def _sparsemax(x, axis=-1):
    data = floats(x)
    axis = _axis(axis, len(shape_of(x)))
    moved = anp.moveaxis(data, axis, -1)
    order = np.argsort(-value(moved), axis=-1, kind="stable")
    ordered = _along(moved, order)
    total = anp.cumsum(ordered, axis=-1)
    rank = np.arange(1, shape_of(moved)[-1] + 1, dtype=np.float64)
    support = value(ordered - (total - 1.0) / rank) > 0
    count = support.sum(axis=-1, keepdims=True)
    tau = (anp.sum(_choose(support, total, 0.0), axis=-1, keepdims=True) - 1.0) / count
    return anp.moveaxis(anp.maximum(moved - tau, 0.0), -1, axis)


def _normalize(x, axis=-1, order=2, epsilon=None):
    if not isinstance(order, int) or order < 1:
        raise ReplayFailed("normalize() with an order that is not an int >= 1")
    data = floats(x)
    if not shape_of(x):
        data = anp.reshape(data, (1,))
    epsilon = EPSILON if epsilon is None else epsilon
    axes = _axis_tuple(axis, len(shape_of(data)))
    if order == 2:
        inverse = 1.0 / anp.sqrt(anp.sum(data * data, axis=axes, keepdims=True))
        return data * anp.minimum(inverse, 1.0 / epsilon)
    return data / anp.maximum(_norm(data, order, axes if axes is None or len(axes) > 1 else axes[0], True), epsilon)


def _normalize_shape(x, axis=-1, order=2, epsilon=None):
    return shape_of(x) or (1,)


def _norm_axes(axis, ndim):
    return _axis_tuple(axis if isinstance(axis, tuple) else (axis,), ndim)


def _along_axes(v, axes, ndim, shape):
    """``v`` (a gamma, a beta, a scale) shaped to broadcast along ``axes`` of a tensor of ``shape``."""
    if v is None:
        return None
    if len(shape_of(v)) != ndim and list(axes) != [ndim - 1]:
        target = [shape[i] if i in axes else 1 for i in range(ndim)]
        if math.prod(target) != size_of(v):
            raise ReplayFailed("a scale or offset whose size does not fit the normalised axes")
        return anp.reshape(floats(v), target)
    return floats(v)


def _layer_normalization(x, gamma=None, beta=None, axis=-1, epsilon=None, kwargs=None):
    extra = dict(kwargs or {})
    rms_scaling = _boolean(extra.pop("rms_scaling", False), "rms_scaling")
    if extra:
        raise ReplayFailed(f"layer_normalization() with arguments {sorted(extra)[:3]} the grader does not follow")
    epsilon = EPSILON if epsilon is None else epsilon
    data = floats(x)
    ndim = len(shape_of(x))
    axes = _norm_axes(axis, ndim)
    gamma, beta = _along_axes(gamma, axes, ndim, shape_of(x)), _along_axes(beta, axes, ndim, shape_of(x))
    mean = anp.mean(data, axis=axes, keepdims=True)
    centred = data - mean
    variance = anp.mean(centred * centred, axis=axes, keepdims=True)
    inverse = 1.0 / anp.sqrt(variance + epsilon)
    if rms_scaling:
        out = data * inverse
        return out if gamma is None else out * gamma
    if gamma is not None:
        inverse = inverse * gamma
    rest = -mean * inverse
    if beta is not None:
        rest = rest + beta
    return data * inverse + rest


def _layer_normalization_shape(x, gamma=None, beta=None, axis=-1, epsilon=None, kwargs=None):
    return _broadcast(shape_of(x), *[shape_of(v) for v in (gamma, beta) if v is not None and
                                     len(shape_of(v)) == len(shape_of(x))])


def _rms_normalization(x, scale=None, axis=-1, epsilon=None):
    epsilon = EPSILON if epsilon is None else epsilon
    data = floats(x)
    if not shape_of(x):
        data = anp.reshape(data, (1,))
    axes = _norm_axes(axis, len(shape_of(data)))
    out = data / anp.sqrt(anp.mean(data * data, axis=axes, keepdims=True) + epsilon)
    return out if scale is None else out * floats(scale)


def _rms_normalization_shape(x, scale=None, axis=-1, epsilon=None):
    shape = shape_of(x) or (1,)
    return shape if scale is None else _broadcast(shape, shape_of(scale))


def _batch_normalization(x, mean, variance, axis, offset=None, scale=None, epsilon=0.001):
    ndim = len(shape_of(x))
    axis_ = _axis(axis, ndim)

    def shaped(v):
        if v is None:
            return None
        if axis != -1:
            if len(shape_of(v)) < 1 or size_of(v) != shape_of(x)[axis_]:
                raise ReplayFailed("batch_normalization() with statistics that do not fit the axis")
            target = [1] * ndim
            target[axis_] = shape_of(v)[0]
            return anp.reshape(floats(v), target)
        return floats(v)

    mean, variance, offset, scale = shaped(mean), shaped(variance), shaped(offset), shaped(scale)
    inverse = 1.0 / anp.sqrt(variance + epsilon)
    if scale is not None:
        inverse = inverse * scale
    return floats(x) * inverse + ((offset - mean * inverse) if offset is not None else -mean * inverse)


def _batch_normalization_shape(x, mean, variance, axis, offset=None, scale=None, epsilon=0.001):
    ndim = len(shape_of(x))
    axis_ = _axis(axis, ndim)
    shapes = [shape_of(x)]
    for v in (mean, variance, offset, scale):
        if v is not None:
            shapes.append(tuple(shape_of(x)[axis_] if i == axis_ else 1 for i in range(ndim)) if axis != -1
                          else shape_of(v))
    return _broadcast(*shapes)


def _same_shapes(first, second, what):
    if shape_of(first) != shape_of(second):
        raise ReplayFailed(f"{what} of tensors of different shapes")


def _binary_crossentropy(target, output, from_logits=False):
    _same_shapes(target, output, "a cross-entropy")
    target, output = floats(target), floats(output)
    if from_logits:
        return anp.maximum(output, 0.0) - output * target + anp.log1p(anp.exp(-anp.abs(output)))
    output = anp.clip(output, EPSILON, 1.0 - EPSILON)
    return -(target * anp.log(output) + (1.0 - target) * anp.log(1.0 - output))


@primitive
def _softmax_cross_entropy(target, logits, axis):
    return -np.sum(target * ops.ACTIVATION_FUNCTIONS["log_softmax"](logits, axis=axis), axis=axis)


# TensorFlow's gradient: (softmax - target) for the logits, which assumes each target sums to 1
defvjp(_softmax_cross_entropy,
       lambda ans, target, logits, axis: lambda g: -np.expand_dims(g, axis) * ops.ACTIVATION_FUNCTIONS[
           "log_softmax"](logits, axis=axis),
       lambda ans, target, logits, axis: lambda g: np.expand_dims(g, axis) * (ops.softmax(logits, axis) - target))


def _categorical_crossentropy(target, output, from_logits=False, axis=-1):
    _same_shapes(target, output, "a cross-entropy")
    target, output = floats(target), floats(output)
    axis = _axis(axis, len(shape_of(output)))
    if from_logits:
        return _softmax_cross_entropy(target, output, axis)
    output = output / anp.sum(output, axis=axis, keepdims=True)
    output = anp.clip(output, EPSILON, 1.0 - EPSILON)
    return -anp.sum(target * anp.log(output), axis=axis)


def _sparse_target(target, output, axis):
    if axis != -1 and axis != len(shape_of(output)) - 1:
        raise ReplayFailed("a sparse cross-entropy over an axis other than the last")
    labels = value(target)
    if labels.dtype.kind == "f":
        labels = np.trunc(labels)
    labels = labels.astype(np.int64)
    if labels.ndim == len(shape_of(output)) and labels.shape[-1:] == (1,):
        labels = labels[..., 0]
    if labels.shape != shape_of(output)[:-1]:
        raise ReplayFailed("a sparse cross-entropy whose targets do not fit its outputs")
    if labels.size and (labels.min() < 0 or labels.max() >= shape_of(output)[-1]):
        raise ReplayFailed("a sparse cross-entropy with a target outside the classes")
    return labels


def _sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    labels = _sparse_target(target, output, axis)
    logits = floats(output)
    if not from_logits:
        logits = anp.log(anp.clip(logits, EPSILON, 1.0 - EPSILON))
    log_probabilities = ops.ACTIVATION_FUNCTIONS["log_softmax"](logits, axis=-1)
    return -_along(log_probabilities, labels[..., None])[..., 0]


def _sparse_shape(target, output, from_logits=False, axis=-1):
    return _sparse_target(target, output, axis).shape


def _psnr(x1, x2, max_val):
    _same_shapes(x1, x2, "psnr()")
    difference = floats(x1) - floats(x2)
    return 20.0 * np.log10(float(max_val)) - 10.0 * anp.log10(anp.mean(difference * difference))


def _dot_product_attention(query, key, value, bias=None, mask=None, scale=None, is_causal=False,
                           flash_attention=None, attn_logits_soft_cap=None):
    if flash_attention:
        raise ReplayFailed("dot_product_attention() with flash attention")
    q, k, v = floats(query), floats(key), floats(value)
    heads, kv_heads = shape_of(q)[2], shape_of(k)[2]
    if heads > kv_heads > 1:
        if heads % kv_heads:
            raise ReplayFailed("dot_product_attention() with query heads not a multiple of the key heads")
        index = np.repeat(np.arange(kv_heads), heads // kv_heads)
        k, v = k[:, :, index], v[:, :, index]
    scale = 1.0 / math.sqrt(shape_of(k)[-1]) if scale is None else scale
    logits = ops.einsum("BTNH,BSNH->BNTS", q, k) * scale
    if bias is not None:
        logits = logits + floats(bias)
    if mask is not None or is_causal:
        keep = np.ones(shape_of(logits), dtype=bool)
        if mask is not None:
            keep = keep & np.broadcast_to(np.asarray(getval(mask)) != 0, shape_of(logits))
        if is_causal:
            t, s = shape_of(logits)[2:]
            keep = keep & np.tril(np.ones((t, s), dtype=bool))[None, None]
        logits = _choose(keep, logits, -0.7 * 3.38953e38)
    return ops.einsum("BNTS,BSNH->BTNH", ops.softmax(logits), v)


def _attention_shape(query, key, value, bias=None, mask=None, scale=None, is_causal=False,
                     flash_attention=None, attn_logits_soft_cap=None):
    q, k, v = shape_of(query), shape_of(key), shape_of(value)
    if not len(q) == len(k) == len(v) == 4 or k != v or q[0] != k[0] or q[3] != k[3] or k[2] < 1 or \
            not (q[2] == k[2] or k[2] == 1 or q[2] % k[2] == 0):
        raise ReplayFailed("dot_product_attention() of query, key and value that do not fit (B, T, N, H)")
    scores = (q[0], q[2], q[1], k[1])
    for extra in (bias, mask):
        if extra is not None:
            _broadcast(shape_of(extra), scores)
    return q[:3] + (v[3],)


def _attention_work(query, key, **_):
    q, k = shape_of(query), shape_of(key)
    return 8 * q[0] * q[2] * q[1] * k[1] * max(q[3], 1) if len(q) == len(k) == 4 else 0


def _one_hot_shape(x, num_classes, axis=-1, dtype=None, sparse=False):
    if num_classes < 0:
        raise ReplayFailed("one_hot() with a negative number of classes")
    shape = list(shape_of(x))
    position = len(shape) if axis == -1 else _axis(axis, len(shape) + 1)
    shape.insert(position, num_classes)
    return tuple(shape)


def _one_hot(x, num_classes, axis=-1, dtype=None, sparse=False):
    if sparse:
        raise ReplayFailed("a sparse one_hot()")
    if kind(x) not in "iu":
        raise ReplayFailed("one_hot() of a tensor that is not of integers")
    hot = value(x)[..., None] == np.arange(num_classes)
    position = len(shape_of(x)) if axis == -1 else _axis(axis, len(shape_of(x)) + 1)
    return _typed(np.moveaxis(hot, -1, position), dtype or "float32")


def _multi_hot_classes(num_classes, kwargs):
    extra = dict(kwargs or {})
    if num_classes is None and "num_tokens" in extra:
        num_classes = _integer(extra.pop("num_tokens"), "num_tokens")
    if extra or num_classes is None:
        raise ReplayFailed("multi_hot() without its number of classes")
    return num_classes


def _multi_hot_shape(inputs, num_classes=None, axis=-1, dtype=None, sparse=False, kwargs=None):
    num_classes = _multi_hot_classes(num_classes, kwargs)
    shape = list(_one_hot_shape(inputs, num_classes, axis))
    del shape[1 if len(shape_of(inputs)) > 1 else 0]
    return tuple(shape)


def _multi_hot(inputs, num_classes=None, axis=-1, dtype=None, sparse=False, kwargs=None):
    num_classes = _multi_hot_classes(num_classes, kwargs)
    hot = _one_hot(inputs, num_classes, axis, "bool", sparse)
    return _typed(np.any(hot, axis=1 if len(shape_of(inputs)) > 1 else 0), dtype or "float32")


# --------------------------------------------------------------------------- casts and constants


def _bfloat16(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return np.where(np.isfinite(x), rounded.astype(np.uint32).view(np.float32), x).astype(np.float64)


@primitive
def _rounded(x, dtype):
    """``x`` rounded to a half-precision ``dtype`` (float16 or bfloat16), kept in float64."""
    return np.asarray(x, dtype=np.float16).astype(np.float64) if dtype == "float16" else _bfloat16(x)


defvjp(_rounded, lambda ans, x, dtype: lambda g: _rounded(g, dtype))


def cast(x, dtype):
    """``x`` as Keras casts it to ``dtype``: floats in float64 (rounded, and their gradient too, to a
    half-precision type), integers truncated, booleans nonzero."""
    if dtype in FLOAT_DTYPES:
        data = floats(x)
        return _rounded(data, dtype) if dtype in ("float16", "bfloat16") else data
    if dtype in INT_DTYPES:
        data = value(x)
        if data.dtype.kind == "f":
            if not np.all(np.isfinite(data)):
                raise ReplayFailed("a cast of NaN or infinite values to integers")
            return np.trunc(data).astype(np.int64)
        return data.astype(np.int64)
    if dtype == "bool":
        return value(x) != 0
    raise ReplayFailed(f"a cast to {str(dtype)[:30]!r}")


def _typed(data, dtype):
    """A computed constant (NumPy values) as ``dtype``."""
    return cast(np.asarray(data), dtype)


def _saturate_cast(x, dtype):
    if dtype in INT_DTYPES:
        info = np.iinfo(dtype)
        return cast(anp.clip(floats(x), float(info.min), float(info.max)) if kind(x) == "f"
                    else np.clip(value(x), info.min, info.max), dtype)
    return cast(x, dtype)


def _fill(shape, fill_value, dtype):
    filler = fill_value
    result = floats(filler) + np.zeros(shape) if kind(filler) == "f" or dtype in FLOAT_DTYPES else \
        np.broadcast_to(value(filler), shape).copy()
    return cast(result, dtype) if dtype is not None else result


def _full(shape, fill_value, dtype=None):
    return _fill(_sizes(shape), fill_value, dtype or "float32")


def _full_like(x, fill_value, dtype=None):
    return _fill(shape_of(x), fill_value, dtype or _dtype_of(x))


def _dtype_of(x) -> str:
    return {"f": "float64", "b": "bool"}.get(kind(x), "int64")


def _sizes(shape) -> tuple:
    if any(d < 0 for d in shape):
        raise ReplayFailed(f"a shape {shape} with a negative size")
    return tuple(shape)


def _full_shape(shape, fill_value, dtype=None):
    shape = _sizes(shape)
    _broadcast(shape_of(fill_value), shape)
    if _broadcast(shape_of(fill_value), shape) != shape:
        raise ReplayFailed("a fill value that does not broadcast to the shape")
    return shape


def _full_like_shape(x, fill_value, dtype=None):
    return _full_shape(shape_of(x), fill_value)


def _arange_length(start, stop=None, step=None) -> int:
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if step == 0:
        raise ReplayFailed("arange() with a step of 0")
    return max(0, math.ceil((stop - start) / step))


def _arange(start, stop=None, step=None, dtype=None):
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    integral = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step))
    found = np.arange(start, stop, step, dtype=np.int64 if integral else np.float64)
    return _typed(found, dtype or ("int32" if integral else "float32"))


def _space_shape(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, base=None):
    if num < 0:
        raise ReplayFailed("a number of samples below 0")
    base_shape = _broadcast(shape_of(start), shape_of(stop))
    shape = list(base_shape)
    shape.insert(_axis(axis, len(shape) + 1), num)
    return [tuple(shape), base_shape] if retstep else tuple(shape)


def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    start, stop = floats(start), floats(stop)
    divisions = (num - 1) if endpoint else num
    shape = _broadcast(shape_of(start), shape_of(stop))
    steps = np.arange(num, dtype=np.float64) / divisions if divisions > 0 else np.zeros(num)
    samples = start + (stop - start) * np.reshape(steps, [-1] + [1] * len(shape))
    samples = anp.moveaxis(samples + np.zeros((num,) + shape), 0, _axis(axis, len(shape) + 1))
    samples = cast(samples, dtype or "float32")
    step = (stop - start) / divisions if divisions > 0 else np.nan + 0.0 * (stop - start)
    return (samples, step) if retstep else samples


def _logspace(start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0):
    exponents = _linspace(start, stop, num, endpoint, False, None, axis)
    return cast(anp.power(float(base), exponents), dtype or "float32")


def _geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    start, stop = value(floats(start)), value(floats(stop))
    return _typed(np.geomspace(start, stop, num, endpoint, axis=axis), dtype or "float32")


def _window(function):
    def compute(x):
        return np.asarray(function(x), dtype=np.float64)

    return op("x:int", lambda x: (_sizes((x,))[0],), compute)


def _eye_shape(N, M=None, k=0, dtype=None):
    return _sizes((N, N if M is None else M))


def _stop_gradient(variable):
    return np.array(value(variable))


# --------------------------------------------------------------------------- shapes and indexing


def _index(key):
    """A claimed index, checked: ints, slices of ints, None, an Ellipsis, or a tuple of these."""
    items = key if isinstance(key, tuple) else (key,)
    if len(items) > MAX_RANK:
        raise ReplayFailed("an index with too many parts")
    checked = []
    for item in items:
        if isinstance(item, np.ndarray) and item.dtype.kind in "iu" and item.size == 1 and item.ndim <= 1:
            item = int(item.reshape(-1)[0])
        if item is None or item is Ellipsis or (isinstance(item, int) and not isinstance(item, bool)):
            checked.append(item)
            continue
        if isinstance(item, slice) and all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                                           for v in (item.start, item.stop, item.step)) and item.step != 0:
            checked.append(item)
            continue
        raise ReplayFailed("an index the grader cannot follow (a tensor or a list as an index)")
    return tuple(checked) if isinstance(key, tuple) else checked[0]


def _key(key):
    return _index(tuple(key) if isinstance(key, list) else key)


def _getitem_shape(x, key):
    key = _key(key)
    try:
        return _view_shape(shape_of(x), lambda a: a[key])
    except ReplayFailed:
        raise ReplayFailed("an index out of the tensor's range") from None


def _getitem(x, key):
    return _gather(x, _key(key))


def _reshape_target(shape: tuple, newshape) -> tuple:
    if len(newshape) > 32 or any(d < -1 for d in newshape) or list(newshape).count(-1) > 1:
        raise ReplayFailed(f"a reshape to {newshape}")
    known = math.prod(d for d in newshape if d != -1)
    total = math.prod(shape)
    if -1 in newshape:
        if known == 0 or total % known:
            raise ReplayFailed(f"a reshape of {shape} to {newshape}")
        newshape = tuple(total // known if d == -1 else d for d in newshape)
    if math.prod(newshape) != total:
        raise ReplayFailed(f"a reshape of {shape} to {tuple(newshape)}")
    return tuple(newshape)


def _reshape(x, newshape):
    target = _reshape_target(shape_of(x), newshape)
    return anp.reshape(x, target) if kind(x) == "f" else np.reshape(value(x), target)


def _on(x, function, plain=None):
    """``function`` of ``x``, differentiable when x is float; ``plain`` (NumPy's) otherwise."""
    return function(x) if kind(x) == "f" else (plain or function)(value(x))


def _expand_dims_shape(x, axis):
    items = axis if isinstance(axis, tuple) else (axis,)
    ndim = len(shape_of(x)) + len(items)
    positions = _axis_tuple(items, ndim)
    shape = iter(shape_of(x))
    return tuple(1 if i in positions else next(shape) for i in range(ndim))


def _squeeze_shape(x, axis=None):
    shape = shape_of(x)
    axes = _axis_tuple(axis, len(shape))
    if axes is None:
        return tuple(d for d in shape if d != 1)
    if any(shape[a] != 1 for a in axes):
        raise ReplayFailed("a squeeze of an axis that is not of size 1")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _permutation(axes, ndim):
    if axes is None:
        return tuple(reversed(range(ndim)))
    items = axes if isinstance(axes, tuple) else (axes,)
    if len(items) != ndim or sorted(a % ndim if -ndim <= a < ndim else -1 for a in items) != list(range(ndim)):
        raise ReplayFailed(f"a transpose with axes {axes!r}")
    return tuple(a % ndim for a in items)


def _transpose(x, axes=None):
    order = _permutation(axes, len(shape_of(x)))
    return _on(x, lambda a: anp.transpose(a, order), lambda a: np.transpose(a, order))


def _moveaxis(x, source, destination):
    ndim = len(shape_of(x))
    source = source if isinstance(source, tuple) else (source,)
    destination = destination if isinstance(destination, tuple) else (destination,)
    if len(source) != len(destination):
        raise ReplayFailed("moveaxis() with as many sources as destinations")
    source, destination = [_axis(a, ndim) for a in source], [_axis(a, ndim) for a in destination]
    if len(set(source)) != len(source) or len(set(destination)) != len(destination):
        raise ReplayFailed("moveaxis() with an axis twice")
    order = [i for i in range(ndim) if i not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return _transpose(x, tuple(order))


def _swapaxes(x, axis1, axis2):
    ndim = len(shape_of(x))
    order = list(range(ndim))
    a, b = _axis(axis1, ndim), _axis(axis2, ndim)
    order[a], order[b] = order[b], order[a]
    return _transpose(x, tuple(order))


def _flip(x, axis=None):
    ndim = len(shape_of(x))
    axes = _axis_tuple(axis, ndim)
    axes = range(ndim) if axes is None else axes
    return _gather(x, tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(ndim)))


def _roll(x, shift, axis=None):
    if axis is None:
        flat = _on(x, lambda a: anp.reshape(a, (-1,)), lambda a: a.reshape(-1))
        if len(shift) != 1:
            raise ReplayFailed("roll() of a flattened tensor by several shifts")
        return anp.reshape(_roll(flat, shift, 0), shape_of(x)) if kind(x) == "f" else \
            np.reshape(_roll(flat, shift, 0), shape_of(x))
    axes = axis if isinstance(axis, tuple) else (axis,)
    if len(shift) == 1 and len(axes) > 1:
        shift = shift * len(axes)
    if len(shift) != len(axes):
        raise ReplayFailed("roll() with as many shifts as axes")
    result = x if kind(x) == "f" else value(x)
    for move, along in zip(shift, axes):
        along = _axis(along, len(shape_of(x)))
        n = shape_of(x)[along]
        if n:
            order = (np.arange(n) - move) % n
            result = _gather(result, (slice(None),) * along + (order,))
    return result


def _rot90(array, k=1, axes=(0, 1)):
    """As Keras's TensorFlow backend rotates: the plane moved last, then k quarter turns of the
    (h, w) blocks, each reshaped to the final (h, w) before the next (so that for k > 1 a
    non-square plane is read in its new shape, as TensorFlow's code does)."""
    ndim = len(shape_of(array))
    a, b = _axis(axes[0], ndim), _axis(axes[1], ndim)
    k %= 4
    if k == 0:
        return array if kind(array) == "f" else value(array)
    perm = [i for i in range(ndim) if i not in (a, b)] + [a, b]
    data = _transpose(array, tuple(perm))
    rest, (h, w) = shape_of(data)[:-2], shape_of(data)[-2:]
    data = _reshape(data, (-1, h, w))
    data = _transpose(_flip(data, 2), (0, 2, 1))
    final = (w, h) if k % 2 else (h, w)
    if k > 1:
        data = _reshape(data, (-1,) + final)
        for _ in range(k - 1):
            data = _transpose(_flip(data, 2), (0, 2, 1))
    data = _reshape(data, rest + final)
    inverse = [0] * ndim
    for i, p in enumerate(perm):
        inverse[p] = i
    return _transpose(data, tuple(inverse))


def _rot90_shape(array, k=1, axes=(0, 1)):
    shape = list(shape_of(array))
    if not isinstance(axes, tuple) or len(axes) != 2 or len(shape) < 2:
        raise ReplayFailed("rot90() with axes that are not two axes of the tensor")
    a, b = _axis(axes[0], len(shape)), _axis(axes[1], len(shape))
    if a == b:
        raise ReplayFailed("rot90() with one axis twice")
    if k % 2:
        shape[a], shape[b] = shape[b], shape[a]
    return tuple(shape)


def _tile_shape(x, repeats):
    if any(r < 0 for r in repeats):
        raise ReplayFailed("tile() with a negative repeat")
    shape = shape_of(x)
    ndim = max(len(shape), len(repeats))
    shape = (1,) * (ndim - len(shape)) + shape
    repeats = (1,) * (ndim - len(repeats)) + tuple(repeats)
    return tuple(d * r for d, r in zip(shape, repeats))


def _tile(x, repeats):
    shape = shape_of(x)
    ndim = max(len(shape), len(repeats))
    data = _reshape(x, (1,) * (ndim - len(shape)) + shape)
    repeats = (1,) * (ndim - len(repeats)) + tuple(repeats)
    for along, (d, r) in enumerate(zip(shape_of(data), repeats)):
        if r != 1:
            data = _gather(data, (slice(None),) * along + (np.tile(np.arange(d), r),))
    return data


def _repeat_counts(x, repeats, axis):
    counts = value(repeats)
    if counts.dtype.kind not in "iu" or counts.ndim > 1 or (counts.size and counts.min() < 0):
        raise ReplayFailed("repeat() with repeats that are not non-negative integers")
    n = size_of(x) if axis is None else shape_of(x)[_axis(axis, len(shape_of(x)))]
    if counts.size == 1:
        counts = np.full(n, int(counts.reshape(-1)[0]))
    if counts.size != n:
        raise ReplayFailed("repeat() with as many repeats as the axis has positions")
    return counts


def _repeat_shape(x, repeats, axis=None):
    total = int(_repeat_counts(x, repeats, axis).sum())
    if axis is None:
        return (total,)
    shape = list(shape_of(x))
    shape[_axis(axis, len(shape))] = total
    return tuple(shape)


def _repeat(x, repeats, axis=None):
    counts = _repeat_counts(x, repeats, axis)
    data = x if kind(x) == "f" else value(x)
    if axis is None:
        data, axis = (anp.reshape(data, (-1,)) if kind(x) == "f" else data.reshape(-1)), 0
    index = np.repeat(np.arange(len(counts)), counts)
    return _gather(data, (slice(None),) * _axis(axis, len(shape_of(data))) + (index,))


def _broadcast_to_shape(x, shape):
    shape = _sizes(shape)
    if _broadcast(shape_of(x), shape) != shape:
        raise ReplayFailed(f"a broadcast of {shape_of(x)} to {shape}")
    return shape


def _broadcast_to(x, shape):
    return _on(x, lambda a: a + np.zeros(tuple(shape)), lambda a: np.broadcast_to(a, tuple(shape)).copy())


def _pad_widths(x, pad_width) -> list[tuple[int, int]]:
    ndim = len(shape_of(x))
    widths = pad_width
    if isinstance(widths, np.ndarray) and widths.dtype.kind in "iu" and widths.ndim <= 2:
        widths = widths.tolist()
    try:
        if isinstance(widths, (int, np.integer)) and not isinstance(widths, bool):
            pairs = [(int(widths), int(widths))] * ndim
        elif isinstance(widths, (list, tuple)) and widths and all(isinstance(w, int) and not isinstance(w, bool)
                                                                   for w in widths):
            pairs = [tuple(widths) * (2 if len(widths) == 1 else 1)] * ndim if len(widths) in (1, 2) else None
        elif isinstance(widths, (list, tuple)) and all(isinstance(w, (list, tuple)) and len(w) in (1, 2) and
                                                       all(isinstance(v, int) and not isinstance(v, bool) for v in w)
                                                       for w in widths):
            pairs = [tuple(w) * (2 if len(w) == 1 else 1) for w in widths]
            pairs = pairs * ndim if len(pairs) == 1 else pairs
        else:
            pairs = None
    except TypeError:
        pairs = None
    if not pairs or len(pairs) != ndim or any(len(p) != 2 or min(p) < 0 or max(p) >= MAX_INT for p in pairs):
        raise ReplayFailed("pad() with widths the grader cannot read (one non-negative pair per axis)")
    return [(int(a), int(b)) for a, b in pairs]


def _pad_shape(x, pad_width, mode="constant", constant_values=None):
    if mode not in ("constant", "reflect", "symmetric"):
        raise ReplayFailed(f"pad() in mode {str(mode)[:20]!r}, which the grader does not follow")
    pairs = _pad_widths(x, pad_width)
    for (before, after), d in zip(pairs, shape_of(x)):
        limit = d - 1 if mode == "reflect" else d
        if mode != "constant" and (before > limit or after > limit):
            raise ReplayFailed(f"pad() in mode {mode} by more than the axis holds")
    return tuple(d + a + b for d, (a, b) in zip(shape_of(x), pairs))


def _pad(x, pad_width, mode="constant", constant_values=None):
    pairs = _pad_widths(x, pad_width)
    if mode == "constant":
        fill = 0 if constant_values is None else constant_values
        if kind(x) != "f":
            return np.pad(value(x), pairs, constant_values=fill)
        if fill == 0:
            return anp.pad(x, pairs, mode="constant")
        inside = np.pad(np.ones(shape_of(x), dtype=bool), pairs)
        return _choose(inside, anp.pad(x, pairs, mode="constant"), float(fill))
    result = x if kind(x) == "f" else value(x)
    for along, (before, after) in enumerate(pairs):
        n = shape_of(result)[along]
        shift = 1 if mode == "reflect" else 0
        index = np.concatenate([np.arange(before, 0, -1) - 1 + shift, np.arange(n),
                                n - 1 - np.arange(after) - shift]).astype(np.int64)
        result = _gather(result, (slice(None),) * along + (index,))
    return result


def _flat_all(xs):
    return [anp.reshape(x, (-1,)) if kind(x) == "f" else value(x).reshape(-1) for x in xs]


def _join(xs, axis):
    found = _kinds(*xs)
    parts = [floats(x) if found == "f" else value(x).astype(np.int64) if found == "i" else value(x) for x in xs]
    return anp.concatenate(parts, axis=axis) if found == "f" else np.concatenate(parts, axis=axis)


def _concatenate_shape(xs, axis=0):
    shapes = [shape_of(x) for x in xs]
    if axis is None:
        return (sum(math.prod(s) for s in shapes),)
    ndim = len(shapes[0])
    if ndim == 0:
        raise ReplayFailed("a concatenation of scalars")
    axis = _axis(axis, ndim)
    if any(len(s) != ndim or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != axis) for s in shapes):
        raise ReplayFailed("a concatenation of tensors whose shapes do not fit")
    return shapes[0][:axis] + (sum(s[axis] for s in shapes),) + shapes[0][axis + 1:]


def _concatenate(xs, axis=0):
    if axis is None:
        return _join(_flat_all(xs), 0)
    return _join(xs, _axis(axis, len(shape_of(xs[0]))))


def _stack_shape(x, axis=0):
    shapes = {shape_of(item) for item in x}
    if len(shapes) != 1:
        raise ReplayFailed("a stack of tensors of different shapes")
    shape = list(shapes.pop())
    shape.insert(_axis(axis, len(shape) + 1), len(x))
    return tuple(shape)


def _expand(x, position):
    return anp.expand_dims(x, position) if kind(x) == "f" else np.expand_dims(value(x), position)


def _stack(x, axis=0):
    position = _axis(axis, len(shape_of(x[0])) + 1)
    return _join([_expand(item, position) for item in x], position)


def _dummy(shape: tuple):
    """An array of ``shape`` that takes no memory, for working out a result's shape."""
    return np.broadcast_to(np.zeros((), dtype=np.int8), shape)


def _hstack(xs):
    return _concatenate(xs, 0 if len(shape_of(xs[0])) == 1 else 1)


def _hstack_shape(xs):
    return _concatenate_shape(xs, 0 if len(shape_of(xs[0])) == 1 else 1)


def _vstack(xs):
    return _concatenate(xs, 0)


def _depth_form(shape: tuple) -> tuple:
    """How Keras's dstack shapes a tensor of fewer than three dimensions before it joins them."""
    return (1, 1, 1) if not shape else (1, shape[0], 1) if len(shape) == 1 else shape + (1,) if len(shape) == 2 \
        else shape


def _dstack(xs):
    return _concatenate([_reshape(x, _depth_form(shape_of(x))) for x in xs], 2)


def _dstack_shape(xs):
    return _concatenate_shape([_dummy(_depth_form(shape_of(x))) for x in xs], 2)


def _append(x1, x2, axis=None):
    return _concatenate([x1, x2], axis)


def _split_points(x, indices_or_sections, axis, even):
    n = shape_of(x)[_axis(axis, len(shape_of(x)))]
    sections = indices_or_sections
    if isinstance(sections, np.ndarray) and sections.dtype.kind in "iu" and sections.ndim <= 1:
        sections = sections.tolist()
    if isinstance(sections, (int, np.integer)) and not isinstance(sections, bool):
        sections = int(sections)
        if sections <= 0 or sections > MAX_ITEMS:
            raise ReplayFailed("a split into a number of parts the grader does not follow")
        if even and n % sections:
            raise ReplayFailed("a split into parts of unequal sizes")
        size, extra = divmod(n, sections)
        bounds = [0]
        for i in range(sections):
            bounds.append(bounds[-1] + size + (1 if i < extra else 0))
        return list(zip(bounds[:-1], bounds[1:]))
    if isinstance(sections, (list, tuple)) and len(sections) < MAX_ITEMS and all(
            isinstance(i, int) and not isinstance(i, bool) for i in sections):
        points = [0] + [min(max(i if i >= 0 else i + n, 0), n) for i in sections] + [n]
        return [(a, max(a, b)) for a, b in zip(points[:-1], points[1:])]
    raise ReplayFailed("a split with sections the grader cannot read")


def _split_shapes(x, indices_or_sections, axis=0, even=True):
    axis_ = _axis(axis, len(shape_of(x)))
    shape = shape_of(x)
    return [shape[:axis_] + (b - a,) + shape[axis_ + 1:]
            for a, b in _split_points(x, indices_or_sections, axis, even)]


def _split(x, indices_or_sections, axis=0, even=True):
    axis_ = _axis(axis, len(shape_of(x)))
    return [_gather(x, (slice(None),) * axis_ + (slice(a, b),))
            for a, b in _split_points(x, indices_or_sections, axis, even)]


def _split_along(axis, least):
    def check(x):
        if len(shape_of(x)) < least:
            raise ReplayFailed(f"a split of a tensor of fewer than {least} dimensions")

    def shape(x, indices_or_sections):
        check(x)
        return _split_shapes(x, indices_or_sections, axis if len(shape_of(x)) > 1 or least > 1 else 0)

    def compute(x, indices_or_sections):
        return _split(x, indices_or_sections, axis if len(shape_of(x)) > 1 or least > 1 else 0)

    return op("x:t, indices_or_sections:raw", shape, compute, multi=True)


def _unstack_shape(x, num=None, axis=0):
    shape = shape_of(x)
    axis_ = _axis(axis, len(shape))
    if num is not None and num != shape[axis_]:
        raise ReplayFailed("unstack() with a num other than the axis's size")
    if shape[axis_] > MAX_ITEMS:
        raise budget.TooLarge(f"unstack() into {shape[axis_]} tensors")
    return [shape[:axis_] + shape[axis_ + 1:]] * shape[axis_]


def _unstack(x, num=None, axis=0):
    axis_ = _axis(axis, len(shape_of(x)))
    return [_gather(x, (slice(None),) * axis_ + (i,)) for i in range(shape_of(x)[axis_])]


def _triangle(function):
    def compute(x, k=0):
        if len(shape_of(x)) < 2:
            raise ReplayFailed("a triangle of a tensor of fewer than two dimensions")
        if kind(x) == "f":
            return function(x, k)
        keep = function(np.ones(shape_of(x)[-2:], dtype=bool), k)
        return np.where(keep, value(x), np.zeros((), dtype=value(x).dtype))

    def shape(x, k=0):
        if len(shape_of(x)) < 2:
            raise ReplayFailed("a triangle of a tensor of fewer than two dimensions")
        return shape_of(x)

    return op("x:t, k:int=0", shape, compute)


def _tril(x, k):
    return _choose(np.tril(np.ones(shape_of(x)[-2:], dtype=bool), k), x, 0.0)


def _triu(x, k):
    return _choose(np.triu(np.ones(shape_of(x)[-2:], dtype=bool), k), x, 0.0)


def _diag_shape(x, k=0):
    shape = shape_of(x)
    if len(shape) == 1:
        return (shape[0] + abs(k),) * 2
    if len(shape) == 2:
        return _view_shape(shape, lambda a: np.diagonal(a, k))
    raise ReplayFailed("diag() of a tensor that is neither a vector nor a matrix")


def _diag(x, k=0):
    if len(shape_of(x)) == 1:
        n = shape_of(x)[0] + abs(k)
        rows = np.arange(shape_of(x)[0]) + max(-k, 0)
        cols = np.arange(shape_of(x)[0]) + max(k, 0)
        flat = rows * n + cols
        if kind(x) == "f":
            return anp.reshape(_scatter_add(x, flat, n * n), (n, n))
        out = np.zeros(n * n, dtype=value(x).dtype)
        out[flat] = value(x)
        return out.reshape(n, n)
    return _diagonal(x, k)


def _diagflat(x, k=0):
    return _diag(_on(x, lambda a: anp.reshape(a, (-1,)), lambda a: a.reshape(-1)), k)


def _diagflat_shape(x, k=0):
    return (size_of(x) + abs(k),) * 2


def _diagonal_shape(x, offset=0, axis1=0, axis2=1):
    return _view_shape(shape_of(x), lambda a: np.diagonal(a, offset, axis1, axis2))


def _diagonal(x, offset=0, axis1=0, axis2=1):
    """NumPy's diagonal, as a gather (differentiable for every offset and pair of axes)."""
    ndim = len(shape_of(x))
    a, b = _axis(axis1, ndim), _axis(axis2, ndim)
    if a == b:
        raise ReplayFailed("a diagonal of one axis twice")
    rows, cols = shape_of(x)[a], shape_of(x)[b]
    count = max(0, min(rows - max(-offset, 0), cols - max(offset, 0)))
    i = np.arange(count) + max(-offset, 0)
    j = np.arange(count) + max(offset, 0)
    moved = _moveaxis(x, (a, b), (-2, -1))
    return _gather(moved, (Ellipsis, i, j))


def _meshgrid_shapes(x, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ReplayFailed("meshgrid() with an indexing other than 'xy' or 'ij'")
    sizes = [size_of(item) for item in x]
    if indexing == "xy" and len(sizes) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    return [tuple(sizes)] * len(x)


def _meshgrid(x, indexing="xy"):
    ndim = len(x)
    out = []
    shape = _meshgrid_shapes(x, indexing)[0] if x else ()
    for i, item in enumerate(x):
        target = [1] * ndim
        position = i
        if indexing == "xy" and ndim >= 2 and i < 2:
            position = 1 - i
        target[position] = size_of(item)
        out.append(_broadcast_to(_on(item, lambda a: anp.reshape(a, target), lambda a: a.reshape(target)), shape))
    return out


def _slice_bounds(inputs, start_indices, shape):
    dims = shape_of(inputs)
    if len(start_indices) != len(dims) or len(shape) != len(dims):
        raise ReplayFailed("slice() with start indices and a shape that do not fit the tensor")
    bounds = []
    for start, size, dim in zip(start_indices, shape, dims):
        size = dim - start if size == -1 else size
        if start < 0 or size < 0 or start + size > dim:
            raise ReplayFailed("slice() outside the tensor")
        bounds.append((start, start + size))
    return bounds


def _slice(inputs, start_indices, shape):
    return _gather(inputs, tuple(slice(a, b) for a, b in _slice_bounds(inputs, start_indices, shape)))


def _slice_update(inputs, start_indices, updates):
    bounds = _slice_bounds(inputs, start_indices, shape_of(updates))
    pairs = [(a, dim - b) for (a, b), dim in zip(bounds, shape_of(inputs))]
    inside = np.pad(np.ones(shape_of(updates), dtype=bool), pairs)
    found = _kinds(inputs, updates)
    if found == "f":
        return _choose(inside, anp.pad(floats(updates), pairs, mode="constant"), floats(inputs))
    data, new = _promoted(inputs, updates)
    return np.where(inside, np.pad(new, pairs), data)


def _slice_update_shape(inputs, start_indices, updates):
    _slice_bounds(inputs, start_indices, shape_of(updates))
    return shape_of(inputs)


def _indices(indices, n):
    found = value(indices)
    if found.dtype.kind not in "iu":
        raise ReplayFailed("indices that are not integers")
    found = np.where(found < 0, found + n, found).astype(np.int64)
    if found.size and (found.min() < 0 or found.max() >= n):
        raise ReplayFailed("an index out of the tensor's range")
    return found


def _take_shape(x, indices, axis=None):
    if axis is None:
        return shape_of(indices)
    shape = shape_of(x)
    axis_ = _axis(axis, len(shape))
    return shape[:axis_] + shape_of(indices) + shape[axis_ + 1:]


def _take(x, indices, axis=None):
    if axis is None:
        flat = _on(x, lambda a: anp.reshape(a, (-1,)), lambda a: a.reshape(-1))
        return _gather(flat, (_indices(indices, size_of(x)),))
    axis_ = _axis(axis, len(shape_of(x)))
    return _gather(x, (slice(None),) * axis_ + (_indices(indices, shape_of(x)[axis_]),))


def _along_shape(x, indices, axis):
    xs, ids = list(shape_of(x)), list(shape_of(indices))
    if len(xs) != len(ids):
        raise ReplayFailed("take_along_axis() with indices of another rank")
    xs[axis], ids[axis] = 1, 1
    shape = list(_broadcast(tuple(xs), tuple(ids)))
    shape[axis] = shape_of(indices)[axis]
    return tuple(shape)


def _take_along_axis_shape(x, indices, axis=None):
    if axis is None:
        return (size_of(indices),)
    return _along_shape(x, indices, _axis(axis, len(shape_of(x))))


def _take_along_axis(x, indices, axis=None):
    if axis is None:
        flat = _on(x, lambda a: anp.reshape(a, (-1,)), lambda a: a.reshape(-1))
        return _gather(flat, (_indices(indices, size_of(x)).reshape(-1),))
    axis_ = _axis(axis, len(shape_of(x)))
    shape = _along_shape(x, indices, axis_)
    index = np.broadcast_to(_indices(indices, shape_of(x)[axis_]), shape)
    grid = []
    for i, d in enumerate(shape):
        if i == axis_:
            grid.append(index)
        else:
            positions = np.arange(d) if shape_of(x)[i] != 1 else np.zeros(d, dtype=np.int64)
            grid.append(np.reshape(positions, [-1 if j == i else 1 for j in range(len(shape))]))
    return _gather(x, tuple(np.broadcast_to(g, shape) for g in grid))


def _flat_positions(indices, shape):
    found = value(indices)
    if found.dtype.kind not in "iu" or found.ndim < 1 or found.shape[-1] > len(shape):
        raise ReplayFailed("scatter indices that are not integer coordinates")
    depth = found.shape[-1]
    coordinates = found.reshape(-1, depth)
    if coordinates.size and (coordinates.min() < 0 or np.any(coordinates >= np.asarray(shape[:depth]))):
        raise ReplayFailed("a scatter index outside the tensor")
    positions = np.ravel_multi_index(coordinates.T, shape[:depth]) if depth else np.zeros(len(coordinates), np.int64)
    return positions, depth, found.shape[:-1]


def _scatter_shape(indices, values, shape):
    shape = _sizes(shape)
    _, depth, leading = _flat_positions(indices, shape)
    if shape_of(values) != leading + shape[depth:]:
        raise ReplayFailed("scatter() with values that do not fit its indices and shape")
    return shape


def _scatter(indices, values, shape):
    positions, depth, _ = _flat_positions(indices, tuple(shape))
    rows = math.prod(shape[:depth])
    found = kind(values)
    data = floats(values) if found == "f" else value(values).astype(np.int64)
    if found == "f":
        return anp.reshape(_scatter_add(data, positions, rows), tuple(shape))
    out = np.zeros((rows, math.prod(shape[depth:])), dtype=np.int64)
    np.add.at(out, positions, data.reshape(len(positions), -1))
    out = out.reshape(tuple(shape))
    return out != 0 if found == "b" else out


def _scatter_update_shape(inputs, indices, updates, reduction=None):
    _, depth, leading = _flat_positions(indices, shape_of(inputs))
    if shape_of(updates) != leading + shape_of(inputs)[depth:]:
        raise ReplayFailed("scatter_update() with updates that do not fit its indices")
    return shape_of(inputs)


def _scatter_update(inputs, indices, updates, reduction=None):
    if reduction not in (None, "add"):
        raise ReplayFailed(f"scatter_update() with reduction {str(reduction)[:20]!r}")
    shape = shape_of(inputs)
    positions, depth, _ = _flat_positions(indices, shape)
    rows = math.prod(shape[:depth])
    if reduction is None and len(np.unique(positions)) != len(positions):
        raise ReplayFailed("scatter_update() of one position twice, which each library resolves its own way")
    found = _kinds(inputs, updates)
    base, new = (floats(inputs), floats(updates)) if found == "f" else _promoted(inputs, updates)
    hit = np.zeros(rows, dtype=bool)
    hit[positions] = True
    hit = np.reshape(np.repeat(hit, math.prod(shape[depth:])), shape)
    if found == "f":
        added = anp.reshape(_scatter_add(new, positions, rows), shape)
        return base + added if reduction == "add" else _choose(hit, added, base)
    out = np.asarray(base).copy().reshape(rows, -1)
    rows_new = np.asarray(new).reshape(len(positions), -1)
    if reduction == "add":
        np.add.at(out, positions, rows_new)
    else:
        out[positions] = rows_new
    return out.reshape(shape)


def _sort(x, axis=-1):
    axis_ = _axis(axis, len(shape_of(x)))
    order = np.argsort(value(x), axis=axis_, kind="stable")
    return _take_along_axis(x, order, axis_)


def _argsort(x, axis=-1):
    if not shape_of(x):
        return np.zeros((), dtype=np.int64)
    return np.argsort(value(x), axis=_axis(axis, len(shape_of(x))), kind="stable").astype(np.int64)


def _top_k_shape(x, k, sorted=True):
    shape = shape_of(x)
    if not shape or not 0 <= k <= shape[-1]:
        raise ReplayFailed("top_k() with a k the last axis does not have")
    return [shape[:-1] + (k,)] * 2


def _top_k(x, k, sorted=True):
    data = value(x)
    keyed = -data.astype(np.float64) if data.dtype.kind != "b" else -data.astype(np.int64)
    order = np.argsort(keyed, axis=-1, kind="stable")[..., :k]
    return _take_along_axis(x, order, len(shape_of(x)) - 1), order.astype(np.int64)


def _in_top_k_shape(targets, predictions, k):
    if len(shape_of(predictions)) != 2 or shape_of(targets) != shape_of(predictions)[:1]:
        raise ReplayFailed("in_top_k() with targets and predictions that do not fit (batch,) and (batch, classes)")
    return shape_of(targets)


def _in_top_k(targets, predictions, k):
    scores = value(predictions).astype(np.float64)
    labels = value(targets).astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= scores.shape[1]):
        return np.zeros(labels.shape, dtype=bool)
    chosen = scores[np.arange(len(labels)), labels]
    better = (scores > chosen[:, None]).sum(axis=1)
    return (better < k) & np.isfinite(chosen)


def _searchsorted(sorted_sequence, values, side="left"):
    if side not in ("left", "right") or len(shape_of(sorted_sequence)) != 1:
        raise ReplayFailed("searchsorted() of a sequence that is not 1-D, or with a side other than left or right")
    return np.searchsorted(value(sorted_sequence), value(values), side=side).astype(np.int64)


def _digitize(x, bins):
    if len(shape_of(bins)) != 1:
        raise ReplayFailed("digitize() with bins that are not 1-D")
    return np.digitize(value(x), value(bins)).astype(np.int64)


def _unravel_shapes(indices, shape):
    if len(shape) > MAX_RANK:
        raise ReplayFailed("unravel_index() into too many dimensions")
    return [shape_of(indices)] * len(shape)


def _unravel_index(indices, shape):
    found = value(indices)
    if found.dtype.kind not in "iu" or (found.size and (found.min() < 0 or found.max() >= math.prod(shape))):
        raise ReplayFailed("unravel_index() of an index outside the shape")
    return [part.astype(np.int64) for part in np.unravel_index(found, tuple(shape))]


def _segments(data, segment_ids, num_segments):
    ids = value(segment_ids)
    if ids.dtype.kind not in "iu" or ids.ndim != 1 or len(ids) != (shape_of(data)[0] if shape_of(data) else -1):
        raise ReplayFailed("segment ids that are not one integer per row of the data")
    count = (int(ids.max()) + 1 if ids.size else 0) if num_segments is None else num_segments
    if count < 0:
        raise ReplayFailed("a negative number of segments")
    return ids.astype(np.int64), count


def _segment_shape(data, segment_ids, num_segments=None, sorted=False):
    _, count = _segments(data, segment_ids, num_segments)
    return (count,) + shape_of(data)[1:]


def _segment(reduction):
    def compute(data, segment_ids, num_segments=None, sorted=False):
        ids, count = _segments(data, segment_ids, num_segments)
        shape = (count,) + shape_of(data)[1:]
        found = kind(data)
        if reduction == "sum":
            if found == "f":
                return anp.reshape(_scatter_add(data, ids, count), shape)
            out = np.zeros((count, math.prod(shape[1:])), dtype=np.int64)
            keep = (ids >= 0) & (ids < count)
            np.add.at(out, ids[keep], value(data).astype(np.int64).reshape(len(ids), -1)[keep])
            return out.reshape(shape)
        if reduction in ("max", "min"):
            return anp.reshape(_segment_extreme(floats(data), ids, count, reduction == "max"), shape)
        rows = floats(data)
        product = []
        flat = anp.reshape(rows, (len(ids), -1))
        for segment in range(count):
            members = np.nonzero(ids == segment)[0]
            product.append(anp.prod(flat[members], axis=0) if len(members) else np.ones(shape_of(flat)[1:]))
        return anp.reshape(anp.stack(product), shape) if product else np.zeros(shape)

    return op("data:t, segment_ids:t, num_segments:int?=None, sorted:bool=False", _segment_shape, compute,
              work=lambda data, segment_ids, num_segments=None, sorted=False: 5_000 * (num_segments or 1))


def _correlate_shape(x1, x2, mode="valid"):
    if len(shape_of(x1)) != 1 or len(shape_of(x2)) != 1 or mode not in ("valid", "same", "full"):
        raise ReplayFailed("correlate() of tensors that are not 1-D, or in a mode the grader does not follow")
    m, n = shape_of(x1)[0], shape_of(x2)[0]
    return ({"valid": max(m, n) - min(m, n) + 1, "same": max(m, n), "full": m + n - 1}[mode],)


def _correlate(x1, x2, mode="valid"):
    a, v = floats(x1), floats(x2)
    m, n = shape_of(a)[0], shape_of(v)[0]
    swapped = n > m
    if swapped:
        a, v, m, n = v, a, n, m
    padded = anp.concatenate([np.zeros(n - 1), a, np.zeros(n - 1)])
    windows = np.arange(m + n - 1)[:, None] + np.arange(n)[None, :]
    full = anp.sum(padded[windows] * v[None, :], axis=1)
    if swapped:
        full = full[::-1]
    if mode == "full":
        return full
    if mode == "valid":
        return full[n - 1:m]
    start = (n - 1) // 2
    return full[start:start + m]


def _vander_shape(x, N=None, increasing=False):
    if len(shape_of(x)) != 1:
        raise ReplayFailed("vander() of a tensor that is not 1-D")
    columns = shape_of(x)[0] if N is None else N
    if columns < 0:
        raise ReplayFailed("vander() with a negative number of columns")
    return (shape_of(x)[0], columns)


def _vander(x, N=None, increasing=False):
    columns = shape_of(x)[0] if N is None else N
    powers = np.arange(columns) if increasing else np.arange(columns)[::-1]
    if kind(x) != "f":
        return (value(x).astype(np.int64)[:, None] ** powers[None, :]).astype(np.int64)
    parts = [anp.ones(shape_of(x)) if p == 0 else x ** int(p) for p in powers]
    return anp.stack(parts, axis=1) if parts else np.zeros((shape_of(x)[0], 0))


def _cross_shape(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = list(shape_of(x1)), list(shape_of(x2))
    if not a or not b:
        raise ReplayFailed("cross() of scalars")
    da, db = a.pop(_axis(axisa, len(a))), b.pop(_axis(axisb, len(b)))
    if da not in (2, 3) or db not in (2, 3):
        raise ReplayFailed("cross() of vectors that are not of size 2 or 3")
    rest = list(_broadcast(tuple(a), tuple(b)))
    if da == 2 and db == 2:
        return tuple(rest)
    rest.insert(_axis(axisc, len(rest) + 1), 3)
    return tuple(rest)


def _cross(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a = anp.moveaxis(floats(x1), _axis(axisa, len(shape_of(x1))), -1)
    b = anp.moveaxis(floats(x2), _axis(axisb, len(shape_of(x2))), -1)
    planar = shape_of(a)[-1] == 2 and shape_of(b)[-1] == 2

    def parts(v):
        found = [v[..., i] for i in range(shape_of(v)[-1])]
        return found + [0.0 * found[0]] * (3 - len(found))

    (a0, a1, a2), (b0, b1, b2) = parts(a), parts(b)
    z = a0 * b1 - a1 * b0
    if planar:
        return z
    shape = _broadcast(np.shape(getval(a0)), np.shape(getval(b0)))
    result = anp.stack([p + np.zeros(shape) for p in (a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z)], axis=-1)
    return anp.moveaxis(result, -1, _axis(axisc, len(shape_of(result))))


def _cdist_shape(x, y):
    a, b = shape_of(x), shape_of(y)
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-1]:
        raise ReplayFailed("cdist() of tensors that are not (..., N, D) and (..., M, D)")
    return _broadcast(a[:-2], b[:-2]) + (a[-2], b[-2])


def _cdist(x, y):
    difference = floats(x)[..., :, None, :] - floats(y)[..., None, :, :]
    return anp.sqrt(anp.sum(difference * difference, axis=-1))


def _corrcoef_shape(x):
    shape = shape_of(x)
    if len(shape) > 2:
        raise ReplayFailed("corrcoef() of a tensor of more than two dimensions")
    rows = 1 if len(shape) < 2 else shape[0]
    return () if rows == 1 and len(shape) < 2 else (rows, rows)


def _corrcoef(x):
    data = floats(x)
    if len(shape_of(x)) < 2:
        data = anp.reshape(data, (1, -1))
    centred = data - anp.mean(data, axis=1, keepdims=True)
    covariance = anp.dot(centred, anp.transpose(centred))
    scale = anp.sqrt(_diagonal(covariance))
    result = anp.clip(covariance / (scale[:, None] * scale[None, :]), -1.0, 1.0)
    return result[0, 0] if len(shape_of(x)) < 2 else result


def _frames_shape(x, sequence_length, sequence_stride):
    shape = shape_of(x)
    if not shape or sequence_length <= 0 or sequence_stride <= 0 or sequence_length > shape[-1]:
        raise ReplayFailed("extract_sequences() with a length or stride that does not fit the last axis")
    return shape[:-1] + (1 + (shape[-1] - sequence_length) // sequence_stride, sequence_length)


def _frames(x, sequence_length, sequence_stride):
    count = _frames_shape(x, sequence_length, sequence_stride)[-2]
    index = np.arange(count)[:, None] * sequence_stride + np.arange(sequence_length)[None, :]
    return _gather(x, (Ellipsis, index))


def _blocks_check(x, block_size, data_format):
    if data_format not in ("channels_last", "channels_first") or len(shape_of(x)) != 4 or block_size < 1:
        raise ReplayFailed("a depth-to-space of a tensor that is not 4-D, or in an unknown data format")


def _depth_to_space_shape(x, block_size, data_format="channels_last"):
    _blocks_check(x, block_size, data_format)
    b, h, w, c = shape_of(x) if data_format == "channels_last" else np.array(shape_of(x))[[0, 2, 3, 1]]
    if c % (block_size * block_size):
        raise ReplayFailed("depth_to_space() of channels not a multiple of the block's area")
    out = (int(b), int(h) * block_size, int(w) * block_size, int(c) // block_size ** 2)
    return out if data_format == "channels_last" else (out[0], out[3], out[1], out[2])


def _depth_to_space(x, block_size, data_format="channels_last"):
    data = x if data_format == "channels_last" else _transpose(x, (0, 2, 3, 1))
    b, h, w, c = shape_of(data)
    s = block_size
    data = _reshape(data, (b, h, w, s, s, c // (s * s)))
    data = _transpose(data, (0, 1, 3, 2, 4, 5))
    data = _reshape(data, (b, h * s, w * s, c // (s * s)))
    return data if data_format == "channels_last" else _transpose(data, (0, 3, 1, 2))


def _space_to_depth_shape(x, block_size, data_format="channels_last"):
    _blocks_check(x, block_size, data_format)
    b, h, w, c = shape_of(x) if data_format == "channels_last" else np.array(shape_of(x))[[0, 2, 3, 1]]
    if h % block_size or w % block_size:
        raise ReplayFailed("space_to_depth() of a height or width not a multiple of the block")
    out = (int(b), int(h) // block_size, int(w) // block_size, int(c) * block_size ** 2)
    return out if data_format == "channels_last" else (out[0], out[3], out[1], out[2])


def _space_to_depth(x, block_size, data_format="channels_last"):
    data = x if data_format == "channels_last" else _transpose(x, (0, 2, 3, 1))
    b, h, w, c = shape_of(data)
    s = block_size
    data = _reshape(data, (b, h // s, s, w // s, s, c))
    data = _transpose(data, (0, 1, 3, 2, 4, 5))
    data = _reshape(data, (b, h // s, w // s, s * s * c))
    return data if data_format == "channels_last" else _transpose(data, (0, 3, 1, 2))


def _histogram_shapes(x, bins=10, range=None):
    if bins < 1 or len(shape_of(x)) != 1:
        raise ReplayFailed("histogram() of a tensor that is not 1-D, or with fewer than one bin")
    return [(bins,), (bins + 1,)]


def _histogram(x, bins=10, range=None):
    data = value(x).astype(np.float64)
    if range is not None:
        if not isinstance(range, (list, tuple)) or len(range) != 2 or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in range):
            raise ReplayFailed("histogram() with a range that is not two numbers")
    counts, edges = np.histogram(data, bins=bins, range=None if range is None else tuple(range))
    if range is not None or not data.size:
        return counts.astype(np.float64), edges
    low, high = anp.min(floats(x)), anp.max(floats(x))  # the edges follow the data's extremes, as in Keras
    return counts.astype(np.float64), low + (high - low) * np.linspace(0.0, 1.0, bins + 1)


# --------------------------------------------------------------------------- linear algebra


def _product(function, plain=None):
    """A product of two tensors, in the kind Keras gives it (booleans stay booleans)."""
    def compute(x1, x2, **options):
        found = _kinds(x1, x2)
        if found == "f":
            return function(floats(x1), floats(x2), **options)
        data = _promoted(x1, x2)
        result = (plain or function)(*data, **options)
        return np.asarray(result) != 0 if found == "b" else np.asarray(result).astype(np.int64)

    return compute


def _matmul_parts(a: tuple, b: tuple):
    if not a or not b:
        raise ReplayFailed("a matrix product of a scalar")
    a2 = a if len(a) > 1 else (1,) + a
    b2 = b if len(b) > 1 else b + (1,)
    if a2[-1] != b2[-2]:
        raise ReplayFailed(f"a matrix product of shapes {a} and {b}")
    batch = _broadcast(a2[:-2], b2[:-2])
    shape = batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    return shape, math.prod(batch) * a2[-2] * a2[-1] * b2[-1]


def _dot_parts(a: tuple, b: tuple):
    if not a or not b:
        shape = _broadcast(a, b)
        return shape, math.prod(shape)
    if len(b) == 1:
        if a[-1] != b[0]:
            raise ReplayFailed(f"a dot product of shapes {a} and {b}")
        return a[:-1], math.prod(a)
    if a[-1] != b[-2]:
        raise ReplayFailed(f"a dot product of shapes {a} and {b}")
    shape = a[:-1] + b[:-2] + b[-1:]
    return shape, math.prod(shape) * a[-1]


def _tensordot_axes(a: tuple, b: tuple, axes):
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0 or n > len(a) or n > len(b):
            raise ReplayFailed("tensordot() over more axes than the tensors have")
        return list(range(len(a) - n, len(a))), list(range(n))
    if isinstance(axes, (list, tuple)) and len(axes) == 2:
        first, second = (list(v) if isinstance(v, (list, tuple)) else [v] for v in axes)
        if len(first) != len(second) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in first + second):
            raise ReplayFailed("tensordot() with axes the grader cannot read")
        first, second = [_axis(v, len(a)) for v in first], [_axis(v, len(b)) for v in second]
        if len(set(first)) != len(first) or len(set(second)) != len(second):
            raise ReplayFailed("tensordot() with an axis twice")
        return first, second
    raise ReplayFailed("tensordot() with axes the grader cannot read")


def _tensordot_parts(a: tuple, b: tuple, axes):
    first, second = _tensordot_axes(a, b, axes)
    if any(a[i] != b[j] for i, j in zip(first, second)):
        raise ReplayFailed(f"tensordot() of shapes {a} and {b} over axes that differ in size")
    shape = tuple(d for i, d in enumerate(a) if i not in first) + tuple(d for j, d in enumerate(b) if j not in second)
    return shape, math.prod(shape) * math.prod(a[i] for i in first)


def _inner_parts(a: tuple, b: tuple):
    if not a or not b:
        shape = _broadcast(a, b)
        return shape, math.prod(shape)
    if a[-1] != b[-1]:
        raise ReplayFailed(f"an inner product of shapes {a} and {b}")
    shape = a[:-1] + b[:-1]
    return shape, math.prod(shape) * a[-1]


def _vdot_shape(x1, x2):
    if size_of(x1) != size_of(x2):
        raise ReplayFailed("vdot() of tensors of different sizes")
    return ()


def _kron_shape(x1, x2):
    a, b = shape_of(x1), shape_of(x2)
    ndim = max(len(a), len(b))
    a, b = (1,) * (ndim - len(a)) + a, (1,) * (ndim - len(b)) + b
    return tuple(p * q for p, q in zip(a, b))


def _einsum_plan(subscripts: str, shapes: list) -> tuple[tuple, int]:
    """(output shape, operations) of ``einsum(subscripts, *operands of shapes)``, from the equation."""
    if not isinstance(subscripts, str) or not shapes:
        raise ReplayFailed("einsum() without an equation and operands")
    text = subscripts.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes) or text.count("->") > 1:
        raise ReplayFailed(f"an einsum equation {subscripts[:40]!r} that does not fit its {len(shapes)} operands")
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    ellipsis: tuple = ()
    for term, shape in zip(terms, shapes):
        before, dots, after = term.partition("...")
        if "." in before + after or not all(c in string.ascii_letters for c in before + after):
            raise ReplayFailed(f"an einsum equation {subscripts[:40]!r} the grader cannot read")
        named = len(before) + len(after)
        if (dots and len(shape) < named) or (not dots and len(shape) != named):
            raise ReplayFailed(f"an einsum equation {subscripts[:40]!r} that does not fit its operands' shapes")
        middle = shape[len(before):len(shape) - len(after)] if dots else ()
        ellipsis = _broadcast(ellipsis, middle)
        for letter, d in list(zip(before, shape[:len(before)])) + list(zip(after, shape[len(shape) - len(after):])):
            if letter in sizes and sizes[letter] != d and 1 not in (sizes[letter], d):
                raise ReplayFailed(f"an einsum index {letter} of sizes {sizes[letter]} and {d}")
            sizes[letter] = max(sizes.get(letter, d), d)
            counts[letter] = counts.get(letter, 0) + 1
    if not arrow:
        output = ("..." if "..." in inputs else "") + "".join(sorted(c for c, n in counts.items() if n == 1))
    before, dots, after = output.partition("...")
    letters = before + after
    if "." in letters or len(set(letters)) != len(letters) or any(c not in sizes for c in letters):
        raise ReplayFailed(f"an einsum equation {subscripts[:40]!r} the grader cannot read")
    shape = tuple(sizes[c] for c in before) + (ellipsis if dots else ()) + tuple(sizes[c] for c in after)
    return shape, math.prod(sizes.values()) * math.prod(ellipsis) * len(shapes)


def _einsum(subscripts, operands, kwargs):
    if set(kwargs) - {"optimize"}:
        raise ReplayFailed("einsum() with arguments other than optimize")
    found = _kinds(*operands)
    if found == "f":
        return anp.einsum(subscripts, *[floats(o) for o in operands])
    result = np.einsum(subscripts, *_promoted(*operands))
    return result != 0 if found == "b" else result.astype(np.int64)


def _square_matrix(x, what):
    shape = shape_of(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ReplayFailed(f"{what} of a tensor that is not a stack of square matrices")
    return shape


def _solve_shapes(a, b, what="solve()"):
    shape = _square_matrix(a, what)
    rhs = shape_of(b)
    if len(rhs) == len(shape) - 1 and rhs == shape[:-1]:
        return rhs
    if len(rhs) < 2 or rhs[-2] != shape[-1]:
        raise ReplayFailed(f"{what} with a right-hand side that does not fit the matrix")
    return _broadcast(shape[:-2], rhs[:-2]) + rhs[-2:]


def _solve(a, b):
    a, b = floats(a), floats(b)
    if len(shape_of(b)) == len(shape_of(a)) - 1:
        return anp.linalg.solve(a, b[..., None])[..., 0]
    return anp.linalg.solve(a, b)


def _solve_triangular(a, b, lower=False):
    keep = (np.tril if lower else np.triu)(np.ones(shape_of(a)[-2:], dtype=bool))
    return _solve(_choose(keep, floats(a), 0.0), b)


def _cholesky(x, upper=False):
    lower = anp.linalg.cholesky(floats(x))
    return anp.swapaxes(lower, -1, -2) if upper else lower


def _cholesky_inverse(x, upper=False):
    factor = _triu(floats(x), 0) if upper else _tril(floats(x), 0)
    matrix = anp.matmul(anp.swapaxes(factor, -1, -2), factor) if upper else \
        anp.matmul(factor, anp.swapaxes(factor, -1, -2))
    return anp.linalg.inv(matrix)


def _pinv(x, rcond=None):
    data = floats(x)
    return anp.linalg.pinv(data) if rcond is None else anp.linalg.pinv(data, rcond)


def _pinv_shape(x, rcond=None):
    shape = shape_of(x)
    if len(shape) < 2:
        raise ReplayFailed("pinv() of a tensor that is not a matrix")
    return shape[:-2] + (shape[-1], shape[-2])


def _lstsq_shape(a, b, rcond=None):
    shape, rhs = shape_of(a), shape_of(b)
    if len(shape) != 2 or len(rhs) not in (1, 2) or rhs[0] != shape[0]:
        raise ReplayFailed("lstsq() of a matrix and a right-hand side that do not fit")
    return (shape[1],) + rhs[1:]


def _lstsq(a, b, rcond=None):
    return anp.dot(_pinv(a), floats(b))


def _slogdet(x):
    sign, magnitude = anp.linalg.slogdet(floats(x))
    return np.asarray(getval(sign), dtype=np.float64), magnitude


def _matrix_rank(x, tol=None):
    data = value(x).astype(np.float64)
    if len(data.shape) < 2:
        raise ReplayFailed("matrix_rank() of a tensor that is not a matrix")
    return np.asarray(np.linalg.matrix_rank(data, tol)).astype(np.int64)


def _matrices_work(x, *rest, **options):
    shape = shape_of(x)
    return math.prod(shape) * (shape[-1] if shape else 1) * 4


# --------------------------------------------------------------------------- the table


def _matmul_like(parts, plain_function, function, spec="x1:t, x2:t"):
    return op(spec, lambda x1, x2, **o: parts(shape_of(x1), shape_of(x2), **o)[0],
              _product(function, plain_function),
              work=lambda x1, x2, **o: parts(shape_of(x1), shape_of(x2), **o)[1])


OPERATIONS: dict[str, Op] = {}

# element-wise functions NumPy has by the same name, with autograd's gradient
for _name in ("exp exp2 expm1 log log10 log1p log2 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh "
              "arccosh arctanh deg2rad rad2deg sinc fabs floor ceil").split():
    OPERATIONS[_name] = _float_unary(getattr(anp, _name))
OPERATIONS.update({
    "rsqrt": _float_unary(lambda x: 1.0 / anp.sqrt(x)),
    "reciprocal": _float_unary(lambda x: 1.0 / x),
    "cbrt": _float_unary(_cbrt),
    "erf": _float_unary(_special("erf")), "erfc": _float_unary(_special("erfc")),
    "erfinv": _float_unary(_special("erfinv")),
    "i0": _float_unary(_i0),
    "angle": _float_unary(_angle),
    "abs": _keep_unary(anp.abs, bools=lambda x: x), "absolute": _keep_unary(anp.abs, bools=lambda x: x),
    "negative": _keep_unary(anp.negative), "sign": _keep_unary(anp.sign),
    "square": _keep_unary(_square, bools=lambda x: x.astype(np.int64)),
    "conj": _keep_unary(anp.conj), "conjugate": _keep_unary(anp.conj), "real": _keep_unary(anp.real),
    "imag": _keep_unary(lambda x: 0.0 * x, bools=lambda x: np.zeros_like(x)),
    "copy": _keep_unary(lambda x: x, bools=lambda x: x),
    "trunc": _keep_unary(_trunc, bools=lambda x: x),
    "round": op("x:t, decimals:int=0", _same, _round),
    "nan_to_num": op("x:t, nan:num=0.0, posinf:num?=None, neginf:num?=None", _same, _nan_to_num),
    "isnan": _predicate(np.isnan), "isinf": _predicate(np.isinf), "isfinite": _predicate(np.isfinite),
    "isposinf": _predicate(np.isposinf), "isneginf": _predicate(np.isneginf), "signbit": _predicate(np.signbit),
    "isreal": _predicate(np.isreal), "logical_not": _predicate(lambda x: x == 0),
})


def _invert(x):
    if kind(x) not in "iu":
        raise ReplayFailed("a bitwise operation on a tensor that is not of integers")
    return np.invert(value(x).astype(np.int64))


OPERATIONS["bitwise_invert"] = OPERATIONS["bitwise_not"] = op("x:t", _same, _invert)

# arithmetic between two tensors that NumPy has by the same name, broadcast; booleans as Keras takes them
_BOOLEAN = {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or, "minimum": np.logical_and}
for _name in "add subtract multiply floor_divide mod power maximum minimum fmax fmin".split():
    OPERATIONS[_name] = _binary(getattr(anp, _name), bools=_BOOLEAN.get(_name))
for _name in "divide true_divide arctan2 hypot logaddexp logaddexp2".split():
    OPERATIONS[_name] = _binary(getattr(anp, _name), floats_only=True)
for _name in "gcd lcm".split():
    OPERATIONS[_name] = _binary(getattr(np, _name), ints_only=True)
for _name in "bitwise_and bitwise_or bitwise_xor left_shift right_shift".split():
    OPERATIONS[_name] = _binary(getattr(np, _name), "x:t, y:t", ints_only=True)
OPERATIONS.update({
    "fmod": _binary(_fmod),
    "heaviside": _binary(lambda x1, x2: _choose(value(x1) > 0, 1.0, _choose(value(x1) < 0, 0.0, x2)),
                         floats_only=True),
    "divide_no_nan": _binary(_divide_no_nan, floats_only=True),
    "ldexp": op("x1:t, x2:t", lambda x1, x2: _broadcast(shape_of(x1), shape_of(x2)), _ldexp),
    "bitwise_left_shift": _binary(np.left_shift, "x:t, y:t", ints_only=True),
    "bitwise_right_shift": _binary(np.right_shift, "x:t, y:t", ints_only=True),
})
# comparisons and logic
for _name in "equal not_equal greater greater_equal less less_equal".split():
    OPERATIONS[_name] = _comparison(getattr(np, _name))
for _name in "logical_and logical_or logical_xor".split():
    OPERATIONS[_name] = _logical(getattr(np, _name))
OPERATIONS.update({
    "isclose": op("x1:t, x2:t, rtol:num=1e-05, atol:num=1e-08, equal_nan:bool=False",
                  lambda x1, x2, **o: _broadcast(shape_of(x1), shape_of(x2)),
                  lambda x1, x2, **o: np.isclose(value(x1), value(x2), **o)),
    "allclose": op("x1:t, x2:t, rtol:num=1e-05, atol:num=1e-08, equal_nan:bool=False",
                   lambda x1, x2, **o: _broadcast(shape_of(x1), shape_of(x2))[:0],
                   lambda x1, x2, **o: np.asarray(np.allclose(value(x1), value(x2), **o))),
    "isin": op("x1:t, x2:t, assume_unique:bool=False, invert:bool=False", lambda x1, x2, **o: shape_of(x1),
               lambda x1, x2, assume_unique=False, invert=False: np.isin(value(x1), value(x2), invert=invert),
               work=lambda x1, x2, **o: size_of(x1) * max(size_of(x2), 1)),
    "where": op("condition:t, x1:t?=None, x2:t?=None", _where_shape, _where),
    "clip": op("x:t, x_min:t, x_max:t", lambda x, x_min, x_max: _broadcast(shape_of(x), shape_of(x_min),
                                                                          shape_of(x_max)), _clip),
    "select": op("condlist:ts, choicelist:ts, default:raw=0", _select_shape, _select),
})

# reductions over axes
OPERATIONS.update({
    "sum": _reduction(_sum), "nansum": _reduction(lambda x, a, k: anp.sum(_nan_filled(x, 0.0), axis=a, keepdims=k)),
    "mean": _reduction(lambda x, a, k: anp.mean(x, axis=a, keepdims=k), "float"),
    "nanmean": _reduction(_nanmean, "float"),
    "max": _reduction(_extreme(True), "same", "x:t, axis:axes=None, keepdims:bool=False, initial:num?=None"),
    "min": _reduction(_extreme(False), "same", "x:t, axis:axes=None, keepdims:bool=False, initial:num?=None"),
    "amax": _reduction(_extreme(True), "same"), "amin": _reduction(_extreme(False), "same"),
    "nanmax": _reduction(_nanextreme(True), "same"), "nanmin": _reduction(_nanextreme(False), "same"),
    "prod": _reduction(_prod, spec="x:t, axis:axes=None, keepdims:bool=False, dtype:dtype=None"),
    "nanprod": _reduction(lambda x, a, k: anp.prod(_nan_filled(x, 1.0), axis=a, keepdims=k)),
    "any": _reduction(lambda x, a, k: np.any(x, axis=a, keepdims=k), "bool"),
    "all": _reduction(lambda x, a, k: np.all(x, axis=a, keepdims=k), "bool"),
    "std": _reduction(lambda x, a, k: anp.sqrt(anp.var(x, axis=a, keepdims=k)), "float"),
    "var": _reduction(lambda x, a, k: anp.var(x, axis=a, keepdims=k), "float"),
    "nanstd": _reduction(lambda x, a, k: anp.sqrt(_nanvar(x, a, k)), "float"),
    "nanvar": _reduction(_nanvar, "float"),
    "ptp": _reduction(lambda x, a, k: _extreme(True)(x, a, k) - _extreme(False)(x, a, k)),
    "logsumexp": _reduction(_logsumexp, "float"),
    "median": _median(False), "nanmedian": _median(True),
    "quantile": _quantile(1.0), "nanquantile": _quantile(1.0, True),
    "percentile": _quantile(100.0), "nanpercentile": _quantile(100.0, True),
    "argmax": _arg(True), "argmin": _arg(False), "nanargmax": _arg(True, True), "nanargmin": _arg(False, True),
    "count_nonzero": op("x:t, axis:axes=None", lambda x, axis=None: _reduced(shape_of(x), axis, False),
                        _count_nonzero),
    "average": op("x:t, axis:int?=None, weights:t?=None", _average_shape, _average),
    "norm": op("x:t, ord:raw=None, axis:axes=None, keepdims:bool=False", _norm_shape, _norm,
               work=lambda x, **o: 20 * size_of(x) * max(shape_of(x)[-1:] or [1])),
    "trace": op("x:t, offset:int=0, axis1:int=0, axis2:int=1", _trace_shape, _trace),
    "moments": op("x:t, axes:axes, keepdims:bool=False, synchronized:bool=False",
                  lambda x, axes, keepdims=False, **o: [_reduced(shape_of(x), axes, keepdims)] * 2, _moments,
                  multi=True),
    # scans
    "cumsum": op("x:t, axis:int?=None, dtype:dtype=None", _scan_shape, _cumsum),
    "nancumsum": op("x:t, axis:int?=None, dtype:dtype=None", _scan_shape,
                    lambda x, axis=None, dtype=None: _cumsum(x, axis, dtype, nan=True)),
    "cumprod": op("x:t, axis:int?=None, dtype:dtype=None", _scan_shape, _cumprod, work=_scan_work),
    "nancumprod": op("x:t, axis:int?=None, dtype:dtype=None", _scan_shape,
                     lambda x, axis=None, dtype=None: _cumprod(x, axis, dtype, nan=True), work=_scan_work),
    "diff": op("a:t, n:int=1, axis:int=-1", _diff_shape, _diff, work=lambda a, n=1, axis=-1: size_of(a) * max(n, 1)),
    "trapezoid": op("y:t, x:t?=None, dx:num=1.0, axis:int=-1",
                    lambda y, x=None, dx=1.0, axis=-1: _reduced(shape_of(y), axis, False), _trapezoid),
})

# activations (keras.ops' and keras.activations', with their own defaults), normalisations, losses
_OPS_ACTIVATIONS = {
    "relu": "x:t", "relu6": "x:t", "sigmoid": "x:t", "softplus": "x:t", "softsign": "x:t", "silu": "x:t",
    "swish": "x:t", "log_sigmoid": "x:t", "leaky_relu": "x:t, negative_slope:num=0.2", "hard_sigmoid": "x:t",
    "hard_silu": "x:t", "hard_swish": "x:t", "elu": "x:t, alpha:num=1.0", "selu": "x:t",
    "gelu": "x:t, approximate:bool=True", "celu": "x:t, alpha:num=1.0", "glu": "x:t, axis:int=-1",
    "hard_tanh": "x:t", "hard_shrink": "x:t, threshold:num=0.5", "soft_shrink": "x:t, threshold:num=0.5",
    "tanh_shrink": "x:t", "threshold": "x:t, threshold:num, default_value:num", "squareplus": "x:t, b:num=4",
    "sparse_plus": "x:t", "sparse_sigmoid": "x:t", "softmax": "x:t, axis:axes=-1",
    "log_softmax": "x:t, axis:axes=-1",
}
_KERAS_ACTIVATIONS = dict(_OPS_ACTIVATIONS, relu="x:t, negative_slope:num=0.0, max_value:num?=None, threshold:num=0.0",
                          gelu="x:t, approximate:bool=False", linear="x:t", exponential="x:t", mish="x:t",
                          tanh="x:t")
for _name, _spec in _OPS_ACTIVATIONS.items():
    OPERATIONS[_name] = _activation(_name, _spec)
for _name, _spec in _KERAS_ACTIVATIONS.items():
    OPERATIONS[f"activations.{_name}"] = _activation(_name, _spec)
for _name in ("sparsemax", "activations.sparsemax"):
    OPERATIONS[_name] = op("x:t, axis:int=-1", _same, _sparsemax)
OPERATIONS.update({
    "normalize": op("x:t, axis:axes=-1, order:int=2, epsilon:num?=None", _normalize_shape, _normalize),
    "layer_normalization": op("x:t, gamma:t?=None, beta:t?=None, axis:axes=-1, epsilon:num?=None, **kwargs",
                              _layer_normalization_shape, _layer_normalization),
    "rms_normalization": op("x:t, scale:t?=None, axis:axes=-1, epsilon:num?=None", _rms_normalization_shape,
                            _rms_normalization),
    "batch_normalization": op("x:t, mean:t, variance:t, axis:int, offset:t?=None, scale:t?=None, epsilon:num=0.001",
                              _batch_normalization_shape, _batch_normalization),
    "binary_crossentropy": op("target:t, output:t, from_logits:bool=False",
                              lambda target, output, **o: shape_of(output), _binary_crossentropy),
    "categorical_crossentropy": op("target:t, output:t, from_logits:bool=False, axis:int=-1",
                                   lambda target, output, axis=-1, **o: _reduced(shape_of(output), axis, False),
                                   _categorical_crossentropy),
    "sparse_categorical_crossentropy": op("target:t, output:t, from_logits:bool=False, axis:int=-1", _sparse_shape,
                                          _sparse_categorical_crossentropy),
    "psnr": op("x1:t, x2:t, max_val:num", lambda x1, x2, max_val: (), _psnr),
    "dot_product_attention": op("query:t, key:t, value:t, bias:t?=None, mask:t?=None, scale:num?=None, "
                                "is_causal:bool=False, flash_attention:raw=None, attn_logits_soft_cap:num?=None",
                                _attention_shape, _dot_product_attention, work=_attention_work,
                                space=lambda query, key, **o: 4 * _attention_work(query, key) // 8
                                if len(shape_of(query)) == 4 else 0),
    "one_hot": op("x:t, num_classes:int, axis:int=-1, dtype:dtype=None, sparse:bool=False", _one_hot_shape, _one_hot),
    "multi_hot": op("inputs:t, num_classes:int?=None, axis:int=-1, dtype:dtype=None, sparse:bool=False, **kwargs",
                    _multi_hot_shape, _multi_hot,
                    space=lambda inputs, num_classes=None, kwargs=None, **o: size_of(inputs) * _multi_hot_classes(
                        num_classes, kwargs)),
})

# casts, copies and constants
OPERATIONS.update({
    "cast": op("x:t, dtype:dtype", _same, cast),
    "saturate_cast": op("x:t, dtype:dtype", _same, _saturate_cast),
    "convert_to_tensor": op("x:t, dtype:dtype=None, sparse:raw=None, ragged:raw=None", _same,
                            lambda x, dtype=None, sparse=None, ragged=None: x if dtype is None else cast(x, dtype)),
    "array": op("x:t, dtype:dtype=None", _same, lambda x, dtype=None: x if dtype is None else cast(x, dtype)),
    "stop_gradient": op("variable:t", _same, _stop_gradient),
    "size": op("x:t", lambda x: (), lambda x: np.asarray(size_of(x), dtype=np.int64)),
    "full": op("shape:ints, fill_value:t, dtype:dtype=None", _full_shape, _full),
    "full_like": op("x:t, fill_value:t, dtype:dtype=None", _full_like_shape, _full_like),
    "ones": op("shape:ints, dtype:dtype=None", lambda shape, dtype=None: _sizes(shape),
               lambda shape, dtype=None: _typed(np.ones(shape), dtype or "float32")),
    "zeros": op("shape:ints, dtype:dtype=None", lambda shape, dtype=None: _sizes(shape),
                lambda shape, dtype=None: _typed(np.zeros(shape), dtype or "float32")),
    "ones_like": op("x:t, dtype:dtype=None", _same,
                    lambda x, dtype=None: _typed(np.ones(shape_of(x)), dtype or _dtype_of(x))),
    "zeros_like": op("x:t, dtype:dtype=None", _same,
                     lambda x, dtype=None: _typed(np.zeros(shape_of(x)), dtype or _dtype_of(x))),
    "arange": op("start:num, stop:num?=None, step:num?=None, dtype:dtype=None",
                 lambda start, stop=None, step=None, dtype=None: (_arange_length(start, stop, step),), _arange),
    "linspace": op("start:t, stop:t, num:int=50, endpoint:bool=True, retstep:bool=False, dtype:dtype=None, axis:int=0",
                   _space_shape, _linspace, multi=lambda retstep=False, **o: retstep),
    "logspace": op("start:t, stop:t, num:int=50, endpoint:bool=True, base:num=10, dtype:dtype=None, axis:int=0",
                   lambda start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0:
                   _space_shape(start, stop, num, axis=axis), _logspace),
    "geomspace": op("start:t, stop:t, num:int=50, endpoint:bool=True, dtype:dtype=None, axis:int=0",
                    lambda start, stop, num=50, endpoint=True, dtype=None, axis=0:
                    _space_shape(start, stop, num, axis=axis), _geomspace),
    "eye": op("N:int, M:int?=None, k:int=0, dtype:dtype=None", _eye_shape,
              lambda N, M=None, k=0, dtype=None: _typed(np.eye(N, M, k), dtype or "float32")),
    "identity": op("n:int, dtype:dtype=None", lambda n, dtype=None: _sizes((n, n)),
                   lambda n, dtype=None: _typed(np.identity(n), dtype or "float32")),
    "tri": op("N:int, M:int?=None, k:int=0, dtype:dtype=None", _eye_shape,
              lambda N, M=None, k=0, dtype=None: _typed(np.tri(N, M, k), dtype or "float32")),
    "bartlett": _window(np.bartlett), "blackman": _window(np.blackman), "hamming": _window(np.hamming),
    "hanning": _window(np.hanning),
    "kaiser": op("x:int, beta:num", lambda x, beta: (_sizes((x,))[0],),
                 lambda x, beta: np.asarray(np.kaiser(x, beta), dtype=np.float64)),
})

# shapes, joins and splits, indexing and gathering, sorting
OPERATIONS.update({
    "getitem": op("x:t, key:raw", _getitem_shape, _getitem),
    "get_item": op("x:t, key:raw", _getitem_shape, _getitem),
    "reshape": op("x:t, newshape:ints", lambda x, newshape: _reshape_target(shape_of(x), newshape), _reshape),
    "ravel": op("x:t", lambda x: (size_of(x),), lambda x: _reshape(x, (-1,))),
    "expand_dims": op("x:t, axis:axes", _expand_dims_shape, lambda x, axis: _reshape(x, _expand_dims_shape(x, axis))),
    "squeeze": op("x:t, axis:axes=None", _squeeze_shape, lambda x, axis=None: _reshape(x, _squeeze_shape(x, axis))),
    "transpose": op("x:t, axes:axes=None", lambda x, axes=None: tuple(
        shape_of(x)[i] for i in _permutation(axes, len(shape_of(x)))), _transpose),
    "moveaxis": op("x:t, source:axes, destination:axes",
                   lambda x, source, destination: shape_of(_moveaxis(_dummy(shape_of(x)), source, destination)),
                   _moveaxis),
    "swapaxes": op("x:t, axis1:int, axis2:int",
                   lambda x, axis1, axis2: shape_of(_swapaxes(_dummy(shape_of(x)), axis1, axis2)), _swapaxes),
    "flip": op("x:t, axis:axes=None", _same_along, _flip),
    "fliplr": op("x:t", lambda x: _same_along(x, 1), lambda x: _flip(x, 1)),
    "flipud": op("x:t", lambda x: _same_along(x, 0), lambda x: _flip(x, 0)),
    "roll": op("x:t, shift:ints, axis:axes=None", lambda x, shift, axis=None: _same_along(x, axis), _roll),
    "rot90": op("array:t, k:int=1, axes:axes=(0, 1)", _rot90_shape, _rot90),
    "tile": op("x:t, repeats:ints", _tile_shape, _tile),
    "repeat": op("x:t, repeats:t, axis:int?=None", _repeat_shape, _repeat),
    "broadcast_to": op("x:t, shape:ints", _broadcast_to_shape, _broadcast_to),
    "pad": op("x:t, pad_width:raw, mode:str='constant', constant_values:num?=None", _pad_shape, _pad),
    "concatenate": op("xs:ts, axis:int?=0", _concatenate_shape, _concatenate),
    "stack": op("x:ts, axis:int=0", _stack_shape, _stack),
    "hstack": op("xs:ts", _hstack_shape, _hstack),
    "vstack": op("xs:ts", lambda xs: _concatenate_shape(xs, 0), _vstack),
    "dstack": op("xs:ts", _dstack_shape, _dstack),
    "append": op("x1:t, x2:t, axis:int?=None", lambda x1, x2, axis=None: _concatenate_shape([x1, x2], axis), _append),
    "split": op("x:t, indices_or_sections:raw, axis:int=0", _split_shapes, _split, multi=True),
    "array_split": op("x:t, indices_or_sections:raw, axis:int=0",
                      lambda x, indices_or_sections, axis=0: _split_shapes(x, indices_or_sections, axis, False),
                      lambda x, indices_or_sections, axis=0: _split(x, indices_or_sections, axis, False), multi=True),
    "hsplit": _split_along(1, 1), "vsplit": _split_along(0, 2), "dsplit": _split_along(2, 3),
    "unstack": op("x:t, num:int?=None, axis:int=0", _unstack_shape, _unstack, multi=True),
    "tril": _triangle(_tril), "triu": _triangle(_triu),
    "diag": op("x:t, k:int=0", _diag_shape, _diag),
    "diagflat": op("x:t, k:int=0", _diagflat_shape, _diagflat),
    "diagonal": op("x:t, offset:int=0, axis1:int=0, axis2:int=1", _diagonal_shape, _diagonal),
    "meshgrid": op("*x:t, indexing:str='xy'", _meshgrid_shapes, _meshgrid, multi=True),
    "slice": op("inputs:t, start_indices:ints, shape:ints", lambda inputs, start_indices, shape: tuple(
        b - a for a, b in _slice_bounds(inputs, start_indices, shape)), _slice),
    "slice_update": op("inputs:t, start_indices:ints, updates:t", _slice_update_shape, _slice_update),
    "take": op("x:t, indices:t, axis:int?=None", _take_shape, _take),
    "take_along_axis": op("x:t, indices:t, axis:int?=None", _take_along_axis_shape, _take_along_axis,
                          space=lambda x, indices, axis=None: (len(shape_of(x)) + 1) * size_of(indices)),
    "scatter": op("indices:t, values:t, shape:ints", _scatter_shape, _scatter),
    "scatter_update": op("inputs:t, indices:t, updates:t, reduction:str=None", _scatter_update_shape,
                         _scatter_update),
    "sort": op("x:t, axis:int=-1", _same_along, _sort, space=lambda x, axis=-1: 3 * size_of(x)),
    "argsort": op("x:t, axis:int=-1", lambda x, axis=-1: _same_along(x, axis if shape_of(x) else None), _argsort),
    "top_k": op("x:t, k:int, sorted:bool=True", _top_k_shape, _top_k, multi=True,
                space=lambda x, k, sorted=True: 3 * size_of(x)),
    "in_top_k": op("targets:t, predictions:t, k:int", _in_top_k_shape, _in_top_k),
    "searchsorted": op("sorted_sequence:t, values:t, side:str='left'",
                       lambda sorted_sequence, values, side="left": shape_of(values), _searchsorted),
    "digitize": op("x:t, bins:t", lambda x, bins: shape_of(x), _digitize),
    "unravel_index": op("indices:t, shape:ints", _unravel_shapes, _unravel_index, multi=True),
    "segment_sum": _segment("sum"), "segment_max": _segment("max"), "segment_min": _segment("min"),
    "segment_prod": _segment("prod"),
    "correlate": op("x1:t, x2:t, mode:str='valid'", _correlate_shape, _correlate,
                    space=lambda x1, x2, mode="valid": 3 * (size_of(x1) + size_of(x2)) ** 2),
    "vander": op("x:t, N:int?=None, increasing:bool=False", _vander_shape, _vander),
    "cross": op("x1:t, x2:t, axisa:int=-1, axisb:int=-1, axisc:int=-1, axis:int?=None", _cross_shape, _cross),
    "cdist": op("x:t, y:t", _cdist_shape, _cdist,
                space=lambda x, y: math.prod(_cdist_shape(x, y)) * (shape_of(x)[-1] if shape_of(x) else 1)),
    "corrcoef": op("x:t", _corrcoef_shape, _corrcoef,
                   work=lambda x: size_of(x) * (shape_of(x)[0] if shape_of(x) else 1)),
    "extract_sequences": op("x:t, sequence_length:int, sequence_stride:int", _frames_shape, _frames),
    "depth_to_space": op("x:t, block_size:int, data_format:str='channels_last'", _depth_to_space_shape,
                         _depth_to_space),
    "space_to_depth": op("x:t, block_size:int, data_format:str='channels_last'", _space_to_depth_shape,
                         _space_to_depth),
    "histogram": op("x:t, bins:int=10, range:raw=None", _histogram_shapes, _histogram, multi=True,
                    work=lambda x, bins=10, range=None: size_of(x) * 8),
})

# products and linear algebra
OPERATIONS.update({
    "matmul": _matmul_like(_matmul_parts, np.matmul, anp.matmul),
    "dot": _matmul_like(_dot_parts, np.dot, anp.dot),
    "inner": _matmul_like(_inner_parts, np.inner, anp.inner),
    "tensordot": op("x1:t, x2:t, axes:raw=2", lambda x1, x2, axes=2: _tensordot_parts(shape_of(x1), shape_of(x2),
                                                                                        axes)[0],
                    _product(lambda a, b, axes=2: anp.tensordot(a, b, _tensordot_axes(shape_of(a), shape_of(b), axes)),
                             lambda a, b, axes=2: np.tensordot(a, b, _tensordot_axes(a.shape, b.shape, axes))),
                    work=lambda x1, x2, axes=2: _tensordot_parts(shape_of(x1), shape_of(x2), axes)[1]),
    "outer": op("x1:t, x2:t", lambda x1, x2: (size_of(x1), size_of(x2)),
                _product(lambda a, b: anp.reshape(a, (-1, 1)) * anp.reshape(b, (1, -1)), np.outer)),
    "vdot": op("x1:t, x2:t", _vdot_shape,
               _product(lambda a, b: anp.sum(anp.reshape(a, (-1,)) * anp.reshape(b, (-1,))),
                        lambda a, b: np.sum(a.reshape(-1) * b.reshape(-1)))),
    "kron": op("x1:t, x2:t", _kron_shape, _product(anp.kron, np.kron)),
    "einsum": op("subscripts:str, *operands:t, **kwargs",
                 lambda subscripts, operands, kwargs: _einsum_plan(subscripts, [shape_of(o) for o in operands])[0],
                 _einsum,
                 work=lambda subscripts, operands, kwargs: _einsum_plan(subscripts,
                                                                        [shape_of(o) for o in operands])[1]),
    "det": op("x:t", lambda x: _square_matrix(x, "det()")[:-2], lambda x: anp.linalg.det(floats(x)),
              work=_matrices_work),
    "inv": op("x:t", lambda x: _square_matrix(x, "inv()"), lambda x: anp.linalg.inv(floats(x)), work=_matrices_work),
    "solve": op("a:t, b:t", _solve_shapes, _solve, work=lambda a, b: _matrices_work(a) + size_of(b) * shape_of(a)[-1]),
    "solve_triangular": op("a:t, b:t, lower:bool=False", lambda a, b, lower=False: _solve_shapes(a, b),
                           _solve_triangular, work=lambda a, b, **o: _matrices_work(a) + size_of(b) * shape_of(a)[-1]),
    "cholesky": op("x:t, upper:bool=False", lambda x, upper=False: _square_matrix(x, "cholesky()"), _cholesky,
                   work=_matrices_work),
    "cholesky_inverse": op("x:t, upper:bool=False", lambda x, upper=False: _square_matrix(x, "cholesky_inverse()"),
                           _cholesky_inverse, work=_matrices_work),
    "pinv": op("x:t, rcond:num?=None", _pinv_shape, _pinv, work=_matrices_work),
    "lstsq": op("a:t, b:t, rcond:num?=None", _lstsq_shape, _lstsq, work=lambda a, b, **o: _matrices_work(a) + size_of(b)
                * shape_of(a)[-1]),
    "logdet": op("x:t", lambda x: _square_matrix(x, "logdet()")[:-2], lambda x: anp.linalg.slogdet(floats(x))[1],
                 work=_matrices_work),
    "slogdet": op("x:t", lambda x: [_square_matrix(x, "slogdet()")[:-2]] * 2, _slogdet, multi=True,
                  work=_matrices_work),
    "matrix_rank": op("x:t, tol:num?=None", lambda x, tol=None: shape_of(x)[:-2], _matrix_rank, work=_matrices_work),
})


# --------------------------------------------------------------------------- what the replay does not follow

_CONTROL = ("it runs a function of yours through Keras's own control flow, whose steps the grader does not record: "
            "write those steps as operations on tensors")
_COMPLEX = "it works with complex numbers, which the grader's replay does not follow"
_FACTORS = ("its factors are unique only up to signs or pivots that each library chooses its own way, so the grader "
            "cannot compare them")
_DATA_SHAPED = ("the shape of its result depends on the values, and the grader replays the layer on other values "
                "(other weights, other padding)")
_WINDOWS = ("convolutions and pooling windows are not part of the grader's replay, and no layer of this chapter "
            "needs one (Keras's GlobalAveragePooling1D is followed)")
_BITS = "its result depends on the bits of a float32, which the grader's float64 replay does not have"

EXCLUDED: dict[str, str] = {
    **{name: _CONTROL for name in ("cond", "switch", "fori_loop", "while_loop", "scan", "associative_scan", "map",
                                   "vectorized_map", "vectorize", "custom_gradient", "jvp")},
    **{name: "a Fourier transform works with complex numbers, which the grader's replay does not follow"
       for name in ("fft", "fft2", "ifft2", "rfft", "irfft", "stft", "istft")},
    **{name: _COMPLEX for name in ("view_as_complex", "view_as_real", "polar", "eig")},
    **{name: _FACTORS for name in ("svd", "qr", "eigh", "lu_factor")},
    **{name: _DATA_SHAPED for name in ("nonzero", "unique", "bincount")},
    "argpartition": "the order of the values on each side of its partition is each library's own choice",
    **{name: "its values are whatever the memory held, so nothing computed from them can be checked"
       for name in ("empty", "empty_like")},
    **{name: _BITS for name in ("view", "nextafter")},
    **{name: _WINDOWS for name in ("conv", "conv_transpose", "depthwise_conv", "separable_conv", "average_pool",
                                   "max_pool", "adaptive_average_pool", "adaptive_max_pool", "fold", "unfold")},
    **{name: "connectionist temporal classification (CTC) is not part of the grader's replay, and no layer of this "
             "chapter needs it"
       for name in ("ctc_decode", "ctc_loss")},
    "rearrange": "the grader does not read einops patterns: keras.ops.reshape and keras.ops.transpose say the same",
    "convert_to_numpy": ("it takes the values out of Keras as a NumPy array: gradients stop there, and what is "
                         "computed from them is not recorded"),
}
# families the tape records under a prefix: keras.ops.image.*, keras.random.*, and TensorFlow calls whose
# arguments have no keras.ops counterpart
EXCLUDED_FAMILIES: dict[str, str] = {
    "image.": "an image operation is not part of the grader's replay, and no layer of this chapter needs one",
    "random.": "its values are random, so the grader cannot recompute them",
    "tf.": "the grader follows TensorFlow functions only where they do what a keras.ops function does, and with "
           "these arguments this one does not",
}
VALUES = keras_ops.VALUES  # functions whose result is a plain Python value, which the tape carries as a value


def excluded(name: str) -> str | None:
    """The sentence that says why the replay does not follow ``name``, if it is one it leaves out."""
    if name in EXCLUDED:
        return EXCLUDED[name]
    for prefix, sentence in EXCLUDED_FAMILIES.items():
        if name.startswith(prefix):
            return sentence
    return None
