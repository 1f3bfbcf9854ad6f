"""The data that crosses between the grader and its child process: JSON lines with arrays in base64.

Both directions use it: the parent's secret inputs and weight values going down,
the child's evidence coming up. Decoding is strict and bounded, because what the
child sends may be forged or malformed: nesting depth, sizes, dtypes and shapes
are checked, and anything else raises ``WireError``. The bounds are the grader's
own (``grader.protocol.limits``), the same on both sides. Every decoder here is
total: whatever the bytes, it returns or raises ``WireError``, never another
error. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math

import numpy as np

from . import limits

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
    comma or opens a container (array data is base64, one string). Counted before parsing: a 3-byte
    "[]" becomes a 56-byte list, so a bound on bytes alone lets a line of empty lists take gigabytes."""
    return line.count(b",") + line.count(b"[") + line.count(b"{") + 1


def loads(line: bytes, max_bytes: int | None = limits.MAX_RECORD_BYTES,
          max_values: int | None = limits.MAX_RECORD_VALUES):
    """One JSON line, decoded strictly: arrays become NumPy arrays. ``max_bytes`` and ``max_values``
    bound the line (None: its reader bounded the whole it came in). Raises WireError, and nothing else."""
    with only(WireError, "data the grader cannot decode", nested=NESTED):
        if not isinstance(line, (bytes, bytearray)):
            raise WireError("a record is not bytes")
        if max_bytes is not None and len(line) > max_bytes:
            raise WireError(f"a record is too long ({len(line):,} bytes; the grader reads at most {max_bytes:,} "
                            "in one record)")
        if max_values is not None and tokens(line) > max_values:
            raise WireError(f"too many values in one record (more than the {max_values:,} the grader reads)")
        try:
            raw = json.loads(line.decode("utf-8"), parse_constant=_no_constants)
        except (UnicodeDecodeError, ValueError) as exc:
            if isinstance(exc, WireError):
                raise
            raise WireError(f"not valid JSON ({str(exc)[:100]})") from None
        return _decode(raw, 0)


NESTED = f"the data is nested too deeply (more than {limits.MAX_DEPTH} levels)"


@contextlib.contextmanager
def only(error: type[Exception], what: str, nested: str | None = None):
    """A decoder's boundary: whatever its input provokes ends in ``error`` and nothing else, an
    exception of another type told as ``what (its type)``, too deep a nesting as ``nested`` where given."""
    try:
        yield
    except error:
        raise
    except RecursionError:
        raise error(nested or f"{what} (RecursionError)") from None
    except Exception as exc:  # noqa: BLE001 - whatever else the input provokes is still its fault
        raise error(f"{what} ({type(exc).__name__})") from None


def _no_constants(name: str):
    raise WireError(f"{name} is not a number the grader accepts")


def decode(value):
    """Plain JSON data (as ``json.loads`` gives it), checked and with its arrays as NumPy arrays.
    Raises WireError, and nothing else."""
    with only(WireError, "data the grader cannot decode", nested=NESTED):
        return _decode(value, 0)


def _decode(value, depth: int):
    if depth > limits.MAX_DEPTH:
        raise WireError(f"the data is nested too deeply (more than {limits.MAX_DEPTH} levels)")
    if isinstance(value, dict):
        if "__array__" in value:
            return decode_array(value)
        if len(value) > limits.MAX_ITEMS:
            raise WireError(f"too many entries (more than {limits.MAX_ITEMS:,} in one list or object)")
        if any(not isinstance(k, str) or len(k) > limits.MAX_KEY for k in value):
            raise WireError(f"a field name is too long (more than {limits.MAX_KEY:,} characters)")
        return {k: _decode(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > limits.MAX_ITEMS:
            raise WireError(f"too many entries (more than {limits.MAX_ITEMS:,} in one list or object)")
        return [_decode(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise WireError("a number is not finite")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise WireError(f"a value of type {type(value).__name__} is not JSON")


ARRAY_FIELDS = frozenset({"__array__", "shape", "data"})


def decode_array(record: dict) -> np.ndarray:
    """An array's record as a NumPy array, its dtype, shape and size checked before any of its data is
    decoded. Raises WireError, and nothing else."""
    with only(WireError, "malformed array"):
        return _decode_array(record)


def _decode_array(record) -> np.ndarray:
    if not isinstance(record, dict) or set(record) != ARRAY_FIELDS:
        raise WireError("malformed array")
    dtype, shape, data = record["__array__"], record["shape"], record["data"]
    if not isinstance(dtype, str) or dtype not in DTYPES or not isinstance(shape, list) or not isinstance(data, str):
        raise WireError("malformed array")
    if len(shape) > limits.MAX_RANK:
        raise WireError(f"an array has {len(shape)} axes (the grader reads at most {limits.MAX_RANK})")
    if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape):
        raise WireError("malformed array shape")
    if any(d > limits.MAX_ARRAY_ELEMENTS for d in shape):  # before the product: beside a zero it is zero
        raise WireError(f"an array with an axis of {max(shape):,} is too large (the grader reads at most "
                        f"{limits.MAX_ARRAY_ELEMENTS:,} values in one array)")
    count = math.prod(shape)
    if count > limits.MAX_ARRAY_ELEMENTS:
        raise WireError(f"an array of {count:,} values is too large (the grader reads at most "
                        f"{limits.MAX_ARRAY_ELEMENTS:,} in one array)")
    kind = np.dtype(DTYPES[dtype])
    if len(data) != limits.encoded_bytes(count, kind.itemsize):  # before decoding any of it
        raise WireError("array size does not match its shape")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise WireError("malformed array data") from None
    if len(raw) != count * kind.itemsize:
        raise WireError("array size does not match its shape")
    return np.frombuffer(raw, dtype=kind).reshape(shape).copy()
