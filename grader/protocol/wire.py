"""The data that crosses between the grader and its child process: JSON lines with arrays in base64.

Both directions use it: the parent's secret inputs and weight values going down,
the child's evidence coming up. Decoding is strict and bounded, because what the
child sends may be forged or malformed: nesting depth, sizes, dtypes and shapes
are checked, and anything else raises ``WireError``. Nothing here imports
TensorFlow.
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np

MAX_DEPTH = 24
MAX_ARRAY_ELEMENTS = 4_000_000
MAX_STRING = 100_000
MAX_KEY = 1_000
MAX_ITEMS = 200_000
# JSON values a line may hold, counted on its bytes before parsing: a 3-byte "[]" becomes a
# 56-byte list, so a bound on bytes alone lets a line of empty lists take gigabytes
MAX_TOKENS = 250_000
MAX_LINE = 8 * 1024 * 1024  # bytes of one record: a correct run's longest is under 200 KB
DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


class WireError(ValueError):
    """Data that does not have the form the grader expects."""


# --------------------------------------------------------------------------- encoding


def encode_array(array) -> dict:
    shape = np.shape(array)  # np.ascontiguousarray makes a 0-d array 1-d
    array = np.ascontiguousarray(array)
    dtype = str(array.dtype)
    if dtype not in DTYPES:
        if array.dtype.kind == "f":
            array, dtype = array.astype(np.float32), "float32"
        elif array.dtype.kind in "iu":
            array, dtype = array.astype(np.int64), "int64"
        elif array.dtype.kind == "b":
            array, dtype = array.astype(np.bool_), "bool"
        else:
            raise WireError(f"cannot send an array of dtype {dtype}")
    return {"__array__": dtype, "shape": [int(d) for d in shape],
            "data": base64.b64encode(array.tobytes()).decode("ascii")}


def plain(value):
    """Arrays and NumPy scalars inside nested containers, made JSON-ready."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return encode_array(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def dumps(value) -> bytes:
    return (json.dumps(plain(value), allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")


# --------------------------------------------------------------------------- decoding


def tokens(line: bytes) -> int:
    """An upper bound on the number of JSON values in ``line``: each one but the first follows a
    comma or opens a container (array data is base64, one string)."""
    return line.count(b",") + line.count(b"[") + line.count(b"{") + 1


def loads(line: bytes, max_tokens: int = MAX_TOKENS):
    """One JSON line, decoded strictly: arrays become NumPy arrays."""
    if len(line) > MAX_LINE:
        raise WireError("a record is too long")
    if tokens(line) > max_tokens:
        raise WireError("too many values in one record")
    try:
        raw = json.loads(line.decode("utf-8"), parse_constant=_no_constants)
    except RecursionError:
        raise WireError("the data is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"not valid JSON ({str(exc)[:100]})") from None
    return decode(raw)


def _no_constants(name: str):
    raise WireError(f"{name} is not a number the grader accepts")


def decode(value, depth: int = 0):
    if depth > MAX_DEPTH:
        raise WireError("the data is nested too deeply")
    if isinstance(value, dict):
        if "__array__" in value:
            return decode_array(value)
        if len(value) > MAX_ITEMS:
            raise WireError("too many entries")
        if any(len(k) > MAX_KEY for k in value):
            raise WireError("a field name is too long")
        return {str(k): decode(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise WireError("too many entries")
        return [decode(v, depth + 1) for v in value]
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise WireError("a text field is too long")
    if isinstance(value, float) and not math.isfinite(value):
        raise WireError("a number is not finite")
    return value


def decode_array(record: dict) -> np.ndarray:
    dtype = record.get("__array__")
    shape = record.get("shape")
    data = record.get("data")
    if dtype not in DTYPES or not isinstance(shape, list) or not isinstance(data, str):
        raise WireError("malformed array")
    if len(shape) > 8 or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape):
        raise WireError("malformed array shape")
    count = math.prod(shape)
    if count > MAX_ARRAY_ELEMENTS:
        raise WireError("array too large")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise WireError("malformed array data") from None
    kind = np.dtype(DTYPES[dtype])
    if len(raw) != count * kind.itemsize:
        raise WireError("array size does not match its shape")
    return np.frombuffer(raw, dtype=kind).reshape(shape).copy()
