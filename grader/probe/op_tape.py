"""Records the tensor operations a custom layer's own call() runs: what the tracer cannot see as layers.

A layer the grader does not know as a whole (a hand-written pooling, a helper
layer, a ``Lambda``) computes with operations on tensors. While such a layer's
call runs (and no Keras layer inside it), every public ``keras.ops`` function,
every ``keras.activations`` function and the arithmetic, comparison and
indexing operators of the backend's tensors are wrapped: each call becomes an
op record — the operation's name, its arguments (a tensor as a reference to
the layer's input or to an earlier op's output, anything else as a plain
value), its output, and the student's line that called it. Operations nested
inside a recorded one (``keras.ops.softmax`` multiplying tensors) are not
recorded again. The records are claims; the parent recomputes every op from
its own numbers (``grader.judge.tape``).

Recording is at the ``keras.ops`` level, which every Keras backend shares;
only the operator hooks (``_OPERATORS``, on the TensorFlow tensor class) are
backend-specific.
"""

from __future__ import annotations

import functools
import linecache
import os
import sys

import keras
import numpy as np

MAX_OPS = 400  # per layer call: a correct pooling or helper layer runs a handful
MAX_CONSTANT = 4  # elements of a tensor made outside the tape that may travel as a value
_NOT_OPERATIONS = {"convert_to_numpy", "shape", "dtype", "is_tensor", "standardize_dtype", "result_type",
                   "core", "nn", "numpy", "image", "linalg", "math", "fft", "random",
                   "serialize", "deserialize", "get"}  # keras.activations' lookups: no tensor in, none out
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


def _tensor_class():
    """The class whose operators the tape hooks: TensorFlow's tensors on the TensorFlow backend; on
    another backend (whose child never imports TensorFlow) keras.ops only."""
    if keras.backend.backend() != "tensorflow":
        return None
    import tensorflow as tf

    return tf.Tensor


class OpTape:
    """The op records of one layer call, and how its tensors are referred to."""

    def __init__(self, sources: dict):
        """``sources``: name -> the tensor argument the layer received (its inputs, its mask)."""
        self.records: list[dict] = []
        self.truncated = False
        self._refs: dict[int, dict] = {}
        self._alive: list = []  # every tensor referred to stays alive, so no id is reused during the call
        for name, value in sources.items():
            if value is not None:
                self._refs.setdefault(id(value), {"source": name})
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
            return {"list": [self.reference(v, depth + 1) for v in value[:64]]}
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
            if data.size <= MAX_CONSTANT:
                return {"constant": data}
            return {"unknown": [int(d) for d in data.shape]}
        name = _dtype_name(value)
        if name is not None:
            return {"value": name}
        return {"value": repr(value)[:60]}

    def record(self, name: str, args: tuple, kwargs: dict, output) -> None:
        from .tensors import array

        if len(self.records) >= MAX_OPS:
            self.truncated = True
            return
        line, code = _student_line()
        record = {"op": name, "args": [self.reference(a) for a in args],
                  "kwargs": {str(k): self.reference(v) for k, v in kwargs.items()},
                  "line": line, "code": code}
        result = array(output)
        if result is not None:
            record["output"] = result
            self._refs[id(output)] = {"op": len(self.records)}
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
        return known if known is not None and "op" in known else None

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


class OpRecorder:
    """Wraps the operations while a tracer runs; each call goes to the tape ``current()`` gives."""

    def __init__(self, current):
        self._current = current  # () -> the OpTape of the running custom layer, or None
        self._busy = False
        self._saved: list[tuple] = []

    def __enter__(self):
        for module, prefix in ((keras.ops, ""), (keras.activations, "activations.")):
            for name in dir(module):
                value = getattr(module, name, None)
                if name.startswith("_") or name in _NOT_OPERATIONS or not callable(value) or isinstance(value, type):
                    continue
                self._patch(module, name, self._wrap(value, prefix + name))
        tensor = _tensor_class()
        if tensor is not None:
            for dunder, (name, reflected) in _OPERATORS.items():
                original = tensor.__dict__.get(dunder) or getattr(tensor, dunder, None)
                if original is not None:
                    self._patch(tensor, dunder, self._wrap_operator(original, name, reflected))
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        return False

    def _patch(self, owner, name, wrapper):
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, wrapper)

    def _wrap(self, function, name):
        recorder = self

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            tape = None if recorder._busy else recorder._current()
            if tape is None:
                return function(*args, **kwargs)
            recorder._busy = True
            try:
                output = function(*args, **kwargs)
            finally:
                recorder._busy = False
            tape.record(name, args, kwargs, output)
            return output

        return wrapper

    def _wrap_operator(self, function, name, reflected):
        recorder = self

        def wrapper(self_, *args):
            tape = None if recorder._busy else recorder._current()
            if tape is None:
                return function(self_, *args)
            recorder._busy = True
            try:
                output = function(self_, *args)
            finally:
                recorder._busy = False
            operands = (args[0], self_) if reflected and args else (self_,) + args
            tape.record(name, operands, {}, output)
            return output

        return wrapper
