"""Records the tensor operations a custom layer's own call() runs: what the tracer cannot see as layers.

A layer the grader does not know as a whole (a hand-written pooling, a helper
layer, a ``Lambda``) computes with operations on tensors. While such a layer's
call runs (and no Keras layer inside it), every public ``keras.ops`` function
(reached as ``keras.ops.X`` or through ``keras.ops.numpy``, ``.nn``,
``.linalg``; ``keras.ops.image`` and ``keras.random`` under their prefix),
every ``keras.activations`` function and the arithmetic, comparison and
indexing operators of the backend's tensors are wrapped: each call becomes an
op record — the operation's name, its arguments (a tensor as a reference to
the layer's input, to an earlier op's output or to one of the tensors it gave,
a variable of the layer, its sublayers' included, as a reference to that weight
by the registry's key — however it is taken: passed, by its own operators or a
tensor's, read with ``.value`` — anything else as a plain value), its output
(or outputs), and the student's line that called it. Operations nested inside a recorded one
(``keras.ops.softmax`` multiplying tensors) are not recorded again. The records
are claims; the parent recomputes every op from its own numbers
(``grader.judge.tape``).

On the TensorFlow backend the TensorFlow functions a Keras 2 style layer calls
(``grader.keras_ops.TF_FUNCTIONS``: ``tf.reduce_sum``, ``tf.concat``,
``tf.nn.softmax``, ``tf.sequence_mask``, ...) are wrapped too, wherever
TensorFlow's modules hold them, when the student's own code calls them: each
call is recorded as the keras.ops call (or the few calls) it is, with the
arguments mapped, after the keras.ops calls have been run beside it and found
to give the same tensor; a call whose arguments have no counterpart is
recorded under its TensorFlow name, which the parent does not follow. The child
on another backend never imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import linecache
import os
import sys

import keras
import numpy as np

from .. import keras_ops
from ..protocol import limits
from ..protocol.records import WEIGHT_SOURCE
from . import runtime

# functions whose result is a plain value the tape carries as one, and keras.activations' lookups
_NOT_OPERATIONS = keras_ops.VALUES | {"serialize", "deserialize", "get", "SeedGenerator"}
_TF_MODULES = ("", "math", "nn", "linalg", "dtypes")  # where TensorFlow's public functions live
_OPERATORS = {  # tensor operator -> op name (the arguments swapped for the reflected ones)
    "__add__": ("add", False), "__radd__": ("add", True), "__sub__": ("subtract", False),
    "__rsub__": ("subtract", True), "__mul__": ("multiply", False), "__rmul__": ("multiply", True),
    "__truediv__": ("divide", False), "__rtruediv__": ("divide", True), "__pow__": ("power", False),
    "__rpow__": ("power", True), "__gt__": ("greater", False), "__ge__": ("greater_equal", False),
    "__lt__": ("less", False), "__le__": ("less_equal", False), "__and__": ("logical_and", False),
    "__rand__": ("logical_and", True), "__or__": ("logical_or", False), "__ror__": ("logical_or", True),
    "__neg__": ("negative", False), "__invert__": ("logical_not", False), "__abs__": ("absolute", False),
    "__getitem__": ("getitem", False), "__matmul__": ("matmul", False), "__floordiv__": ("floor_divide", False),
    "__mod__": ("mod", False),
}


@functools.lru_cache(maxsize=1)
def _package_folders() -> tuple[str, ...]:
    """Folders whose frames are never the student's: Keras, NumPy, the backend, the grader."""
    modules = [keras, np, sys.modules.get("tensorflow"), sys.modules.get("jax"), sys.modules.get("torch")]
    folders = [os.path.dirname(os.path.realpath(m.__file__)) + os.sep
               for m in modules if m is not None and getattr(m, "__file__", None)]
    return tuple(folders) + (os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep,)


class OpTape:
    """The op records of one layer call, and how its tensors are referred to."""

    def __init__(self, sources: dict, weights: dict | None = None):
        """``sources``: name -> the tensor argument the layer received (its inputs, its mask);
        ``weights``: the registry's key -> each variable the layer may compute with, named
        ``weight:<key>`` wherever an operation takes it (the variable, or the backend's variable it
        holds: what an operator of a tensor receives)."""
        self.records: list[dict] = []
        self.truncated = False
        self._refs: dict[int, dict] = {}
        self._alive: list = []  # every tensor referred to stays alive, so no id is reused during the call
        for name, value in sources.items():
            if value is not None:
                self._refs.setdefault(id(value), {"source": name})
                self._alive.append(value)
        for key, variable in (weights or {}).items():
            for held in (variable, getattr(variable, "_value", None)):
                if held is not None:
                    self._refs.setdefault(id(held), {"source": f"{WEIGHT_SOURCE}{key}"})
                    self._alive.append(held)

    def alias(self, value, variable) -> None:
        """``value`` (what reading ``variable`` gave) is referred to as the variable is, if it is one
        of the layer's weights."""
        known = self._refs.get(id(variable))
        if known is not None and id(value) not in self._refs:
            self._refs[id(value)] = known
            self._alive.append(value)

    def reference(self, value, depth: int = 0):
        """An argument as it travels: a reference to a known tensor, a small constant, or a value."""
        from .tensors import array, is_tensor

        if depth > 4:
            return {"value": repr(value)[:60]}
        known = self._refs.get(id(value))
        if known is not None:
            return known
        if isinstance(value, (list, tuple)):
            # one item past the limit at most: the replay sees a list longer than it follows, never a cut one
            return {"list": [self.reference(v, depth + 1) for v in value[:limits.MAX_OP_ITEMS + 1]]}
        if isinstance(value, slice):
            return {"slice": [_plain_scalar(value.start), _plain_scalar(value.stop), _plain_scalar(value.step)]}
        if value is Ellipsis:
            return {"ellipsis": True}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"value": value if not isinstance(value, float) or np.isfinite(value) else repr(value)}
        if isinstance(value, np.generic):
            return self.reference(value.item(), depth)
        if is_tensor(value) or isinstance(value, np.ndarray):
            data = array(value)
            if data is None:
                return {"unknown": "a tensor the grader cannot read"}
            if data.size <= limits.MAX_CONSTANT:
                return {"constant": data}
            return {"unknown": [int(d) for d in data.shape]}
        name = _dtype_name(value)
        if name is not None:
            return {"value": name}
        return {"value": repr(value)[:60]}

    def record(self, name: str, args: tuple, kwargs: dict, output, via: str | None = None) -> None:
        from .tensors import array, is_tensor

        if len(self.records) >= limits.MAX_OPS:
            self.truncated = True
            return
        line, code = _student_line()
        record = {"op": name, "args": [self.reference(a) for a in args],
                  "kwargs": {str(k): self.reference(v) for k, v in kwargs.items()},
                  "line": line, "code": code}
        if via:
            record["via"] = via
        position = len(self.records)
        if isinstance(output, (tuple, list)) and output and len(output) <= limits.MAX_OP_ITEMS and all(
                is_tensor(part) for part in output):
            parts = [array(part) for part in output]
            if all(part is not None for part in parts):
                record["outputs"] = parts
                for k, part in enumerate(output):
                    self._refs.setdefault(id(part), {"part": [position, k]})
                    self._alive.append(part)
        else:
            result = array(output)
            if result is not None:
                record["output"] = result
                self._refs[id(output)] = {"op": position}
                self._alive.append(output)
        self.records.append(record)

    def known(self, value, reference: dict) -> None:
        """Refer to ``value`` (a sublayer's output) as ``reference`` from now on."""
        if value is not None and id(value) not in self._refs:
            self._refs[id(value)] = reference
            self._alive.append(value)

    def producer(self, value) -> dict | None:
        """The op record that made ``value``, as a reference, if one of this tape's did."""
        known = self._refs.get(id(value))
        return known if known is not None and ("op" in known or "part" in known) else None

    def result(self, output):
        """How the layer's output is referred to."""
        return self.reference(output)


def _plain_scalar(value):
    if value is None or isinstance(value, (bool, int, float)):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return repr(value)[:40]


def _dtype_name(value):
    try:
        if isinstance(value, type) or hasattr(value, "as_numpy_dtype") or isinstance(value, np.dtype):
            return keras.backend.standardize_dtype(value)
    except (TypeError, ValueError, AttributeError):
        return None
    return None


def _student_line():
    """(line, code) of the innermost frame outside Keras, NumPy and the grader: the student's call."""
    frame = sys._getframe(2)
    skip = _package_folders()
    for _ in range(40):
        if frame is None:
            break
        filename = os.path.realpath(frame.f_code.co_filename)
        if not filename.startswith(skip) and not filename.startswith("<frozen"):
            return frame.f_lineno, linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()[:160]
        frame = frame.f_back
    return None, ""


def _package_frame(frame) -> bool:
    """Whether ``frame`` runs code of Keras, NumPy, the backend or the grader (not the student's)."""
    filename = os.path.realpath(frame.f_code.co_filename) if frame is not None else ""
    return filename.startswith(_package_folders()) or filename.startswith("<frozen")


def _grader_frame(frame) -> bool:
    """Whether ``frame`` runs the grader's own code (which reads tensors with keras.ops too)."""
    filename = os.path.realpath(frame.f_code.co_filename) if frame is not None else ""
    return filename.startswith(_package_folders()[-1])


_RUNNING: list = []  # the recorders entered and not yet left, the innermost last
_WRAPPERS: dict = {}  # (id of owner, attribute) -> (owner, function wrapped, its wrapper), kept for the process


def _tape_now():
    """(the innermost recorder running, the tape an operation called now goes to), or (None, None)."""
    recorder = _RUNNING[-1] if _RUNNING else None
    return (recorder, recorder.tape()) if recorder is not None else (None, None)


class OpRecorder:
    """Wraps the operations while a tracer runs; each call goes to the tape ``current()`` gives.

    The wrappers ask which recorder runs, so each is made once per function and process and put in
    place again by every later recorder (a grading traces its layer's calls about ten times, each
    with some nine hundred functions wrapped)."""

    def __init__(self, current):
        self._current = current  # () -> the OpTape of the running custom layer, or None
        self._busy = False
        self._saved: list[tuple] = []

    def __enter__(self):
        _RUNNING.append(self)
        try:
            self._wrap_all()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wrap_all(self):
        modules = [(keras.ops, ""), (keras.activations, "activations."), (getattr(keras, "random", None), "random.")]
        modules += [(getattr(keras.ops, sub, None), "") for sub in ("numpy", "nn", "linalg")]
        modules += [(getattr(keras.ops, "image", None), "image.")]
        for module, prefix in modules:
            if module is None:
                continue
            for name in dir(module):
                value = getattr(module, name, None)
                if name.startswith("_") or name in _NOT_OPERATIONS or not callable(value) or isinstance(value, type) \
                        or inspect.ismodule(value):
                    continue
                self._patch(module, name, value, functools.partial(_wrap, name=prefix + name))
        # the backend's tensors, and Keras's variables (a weight's own operators: self.gamma * x)
        for tensor in (*runtime.tensor_classes(), *_variable_classes()):
            for dunder, (name, reflected) in _OPERATORS.items():
                original = tensor.__dict__.get(dunder) or getattr(tensor, dunder, None)
                if original is not None:
                    self._patch(tensor, dunder, original,
                                functools.partial(_wrap_operator, name=name, reflected=reflected))
        # a weight's value read in the student's code (self.gamma.value * x) is that weight too
        variable = _variable_class()
        read = variable.__dict__.get("value")
        if isinstance(read, property) and read.fget is not None:
            self._patch(variable, "value", read, _wrap_value_read)
        if keras.backend.backend() == "tensorflow":
            for module, attribute, function, path, where in tensorflow_functions():
                self._patch(module, attribute, function, functools.partial(_wrap_tensorflow, path=path, where=where))

    def __exit__(self, *exc):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        if self in _RUNNING:
            _RUNNING.remove(self)
        return False

    def _patch(self, owner, name, function, make):
        """Put ``make(function)`` in ``owner.name``: the one made before for this very function, if any."""
        key = (id(owner), name)
        kept = _WRAPPERS.get(key)
        if kept is None or kept[0] is not owner or kept[1] is not function:
            kept = _WRAPPERS[key] = (owner, function, make(function))
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, kept[2])

    def tape(self):
        """The tape an operation called now goes to: None while another operation records (its inner
        operations are not recorded again) or while no custom layer of the tracer runs."""
        return None if self._busy else self._current()

    @contextlib.contextmanager
    def recording(self):
        """While one operation runs to be recorded: the operations inside it are not recorded again."""
        self._busy = True
        try:
            yield
        finally:
            self._busy = False


def _wrap_value_read(read: property) -> property:
    def value(self_):
        got = read.fget(self_)
        _, tape = _tape_now()
        if tape is not None:
            tape.alias(got, self_)
        return got

    return property(value, read.fset, read.fdel, read.__doc__)


def _variable_class() -> type:
    """The class that defines Keras's variables' operators (every backend's variable inherits it)."""
    from keras.src.backend.common.variables import Variable

    return Variable


def _variable_classes() -> tuple[type, ...]:
    """Keras's variables, and the backend's variable a Keras variable holds where it has operators of
    its own (TensorFlow's: what ``self.gamma.value * x`` multiplies)."""
    held = (sys.modules["tensorflow"].Variable,) if keras.backend.backend() == "tensorflow" else ()
    return (_variable_class(), *held)


def _wrap(function, name):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        recorder, tape = _tape_now()
        # a call from Keras counts (Lambda(keras.ops.relu) calls it for the student), the grader's own not
        if tape is None or _grader_frame(sys._getframe(1)):
            return function(*args, **kwargs)
        with recorder.recording():
            output = function(*args, **kwargs)
        tape.record(name, args, kwargs, output)
        return output

    return wrapper


def _wrap_operator(function, name, reflected):
    def wrapper(self_, *args):
        recorder, tape = _tape_now()
        if tape is None:
            return function(self_, *args)
        with recorder.recording():
            output = function(self_, *args)
        operands = (args[0], self_) if reflected and args else (self_,) + args
        tape.record(name, operands, {}, output)
        return output

    return wrapper


def _wrap_tensorflow(function, path, where):
    via = where  # how the student reached it: tf.math.reduce_sum is tf.reduce_sum

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        recorder, tape = _tape_now()
        # Keras's TensorFlow backend calls these functions too: only the student's own calls count
        if tape is None or _package_frame(sys._getframe(1)):
            return function(*args, **kwargs)
        with recorder.recording():
            output = function(*args, **kwargs)
            steps = tf_steps(path, function, args, kwargs)
            computed = run_steps(steps) if steps is not None else None
            if computed is None or not same_result(computed[-1], output):
                steps = None
        if steps is None:
            tape.record(via, args, kwargs, output)
            return output
        for (name, step_args, step_kwargs), made in zip(steps, computed[:-1] + [output]):
            tape.record(name, resolve_steps(step_args, computed), resolve_steps(step_kwargs, computed), made,
                        via=via)
        return output

    return wrapper


# --------------------------------------------------------------------------- TensorFlow's functions as keras.ops calls


class Step:
    """An argument of a keras.ops call that is the result of an earlier call of the same TensorFlow call."""

    def __init__(self, index: int):
        self.index = index


def tensorflow_functions() -> list[tuple]:
    """(module, attribute, function, path in the table, "tf.module.attribute") for every place
    TensorFlow's modules hold a function of ``TF_FUNCTIONS`` or ``TF_COMPOSITES``; empty unless
    TensorFlow is the backend."""
    if keras.backend.backend() != "tensorflow":
        return []
    return list(_tensorflow_functions())


@functools.lru_cache(maxsize=1)
def _tensorflow_functions() -> tuple:
    import tensorflow as tf

    found = []
    for path in list(keras_ops.TF_FUNCTIONS) + list(keras_ops.TF_COMPOSITES):
        function = _tf_function(tf, path)
        if function is None:
            continue
        attribute = path.rsplit(".", 1)[-1]
        for module_path in _TF_MODULES:
            module = _tf_function(tf, module_path) if module_path else tf
            if module is not None and module.__dict__.get(attribute) is function:
                found.append((module, attribute, function, path,
                              ".".join(part for part in ("tf", module_path, attribute) if part)))
    return tuple(found)


def _tf_function(tf, path: str):
    value = tf
    for part in path.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


@functools.lru_cache(maxsize=None)
def _signature(function):
    return inspect.signature(function)


def _unchanged(given, default) -> bool:
    """Whether an argument of a TensorFlow call is still its default (a flag, a number, a dtype)."""
    if given is default:
        return True
    if isinstance(given, bool) or isinstance(default, bool):
        return isinstance(given, bool) and isinstance(default, bool) and given == default
    plain = (int, float, str, type(None))
    if isinstance(given, plain) and isinstance(default, plain):
        return given == default
    if hasattr(given, "as_numpy_dtype") and hasattr(default, "as_numpy_dtype"):
        return given == default
    return False


def _plain_number(value):
    from .tensors import array

    if isinstance(value, (bool, int, float)):
        return value
    data = array(value)
    if data is None or data.size != 1:
        raise ValueError("not a number")
    return data.reshape(-1)[0].item()


def _sections(value):
    """TensorFlow's split sizes as NumPy's split points (an int of equal parts stays as it is)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    from .tensors import array

    sizes = array(value) if not isinstance(value, (list, tuple)) else np.asarray(value)
    if sizes is None or sizes.dtype.kind not in "iu" or sizes.ndim != 1 or (sizes < 0).any():
        raise ValueError("sizes the grader does not map")
    return [int(v) for v in np.cumsum(sizes)[:-1]]


def _norm_order(value):
    if value == "euclidean":
        return None
    if value in ("fro", "nuc") or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    raise ValueError("an order the grader does not map")


_TRANSFORMS = {"lower": lambda v: v.lower() if isinstance(v, str) else _raise(),
               "sections": _sections, "sqrt": lambda v: float(np.sqrt(_plain_number(v))), "euclidean": _norm_order,
               "zero": lambda v: None if isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0 else v}


def _raise():
    raise ValueError("a value the grader does not map")


def tf_steps(path: str, function, args: tuple, kwargs: dict) -> list[tuple] | None:
    """The keras.ops calls the TensorFlow call ``function(*args, **kwargs)`` (``path`` under tf) is:
    [(keras.ops name, args, kwargs)], where a ``Step`` argument is an earlier call's result; None
    when it has none with these arguments."""
    try:
        signature = _signature(function)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    bound.apply_defaults()
    given = dict(bound.arguments)
    try:
        if path == "linalg.band_part":
            return _band_part(given)
        if path == "sequence_mask":
            return _sequence_mask(given)
        if path == "matmul" and any(given.get(flag) for flag in ("transpose_a", "transpose_b", "adjoint_a",
                                                                  "adjoint_b")):
            return _transposed_matmul(given, signature)
        return _mapped(path, given, signature)
    except (ValueError, TypeError, KeyError):
        return None


def _mapped(path: str, given: dict, signature) -> list[tuple] | None:
    name, arguments, fixed, ignored, star = keras_ops.tf_call(path)
    mapped = {tf_name for tf_name, *_ in arguments}
    for param, value in given.items():
        if param in mapped or param in ignored or param == "name":
            continue
        if not _unchanged(value, signature.parameters[param].default):
            return None
    call_args, call_kwargs = [], {}
    for tf_name, keras_name, if_none, transform in arguments:
        value = given.get(tf_name)
        if star is not None and tf_name == star:
            call_args.extend(value)
            continue
        if transform and value is not None:
            value = _TRANSFORMS[transform](value)
        if value is None:
            if not if_none:
                continue
            value = if_none[0]
        if star is not None:
            call_args.append(value)
        else:
            call_kwargs[keras_name] = value
    call_kwargs.update(fixed)
    return [(name, call_args, call_kwargs)]


def _band_part(given: dict) -> list[tuple]:
    x, lower, upper = given["input"], int(_plain_number(given["num_lower"])), int(_plain_number(given["num_upper"]))
    if lower < 0 and upper < 0:
        return [("copy", [x], {})]
    if lower < 0:
        return [("tril", [x], {"k": upper})]
    if upper < 0:
        return [("triu", [x], {"k": -lower})]
    return [("triu", [x], {"k": -lower}), ("tril", [Step(0)], {"k": upper})]


def _sequence_mask(given: dict) -> list[tuple]:
    lengths, length, dtype = given["lengths"], given.get("maxlen"), given.get("dtype")
    steps = []
    if length is None:
        steps.append(("max", [lengths], {}))
        length = Step(0)
    steps.append(("arange", [length], {}))
    steps.append(("expand_dims", [lengths], {"axis": -1}))
    steps.append(("less", [Step(len(steps) - 2), Step(len(steps) - 1)], {}))
    if dtype is not None and keras.backend.standardize_dtype(dtype) != "bool":
        steps.append(("cast", [Step(len(steps) - 1)], {"dtype": dtype}))
    return steps


def _transposed_matmul(given: dict, signature) -> list[tuple] | None:
    for param in ("output_type",):
        if not _unchanged(given.get(param), signature.parameters[param].default):
            return None
    steps, operands = [], []
    for operand, flags in (("a", ("transpose_a", "adjoint_a")), ("b", ("transpose_b", "adjoint_b"))):
        chosen = [flag for flag in flags if given.get(flag)]
        if len(chosen) > 1:
            return None
        if chosen:
            steps.append(("swapaxes", [given[operand]], {"axis1": -1, "axis2": -2}))
            operands.append(Step(len(steps) - 1))
        else:
            operands.append(given[operand])
    steps.append(("matmul", operands, {}))
    return steps


def resolve_steps(value, computed: list):
    if isinstance(value, Step):
        return computed[value.index]
    if isinstance(value, list):
        return [resolve_steps(v, computed) for v in value]
    if isinstance(value, dict):
        return {k: resolve_steps(v, computed) for k, v in value.items()}
    return value


def run_steps(steps: list[tuple]) -> list | None:
    """Each keras.ops call of ``steps`` run on the student's tensors; None if one of them raises."""
    computed = []
    try:
        for name, args, kwargs in steps:
            computed.append(getattr(keras.ops, name)(*resolve_steps(args, computed),
                                                     **resolve_steps(kwargs, computed)))
    except Exception:  # the student's tensors may be what keras.ops refuses: then there is no counterpart
        return None
    return computed


def same_result(mine, theirs) -> bool:
    """Whether the keras.ops calls gave the TensorFlow call's tensor (or tensors): same shape, same
    kind, the same values."""
    from .tensors import array

    if isinstance(theirs, (tuple, list)):
        return isinstance(mine, (tuple, list)) and len(mine) == len(theirs) and all(
            same_result(a, b) for a, b in zip(mine, theirs))
    a, b = array(mine), array(theirs)
    if a is None or b is None or a.shape != b.shape:
        return False
    kinds = {a.dtype.kind.replace("u", "i"), b.dtype.kind.replace("u", "i")}
    if len(kinds) != 1:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
