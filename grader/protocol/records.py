"""The form of the evidence records every exercise shares, checked before anything reads them.

``grader.protocol.wire`` already bounds what a line may hold (nesting depth, sizes,
finite numbers, array shapes). This module checks the meaning of the records
the grader itself reads, whatever the exercise: a phase's end record, the
student's error it may carry, and the data of the ``runtime`` and ``load``
phases. ``problem(record)`` names what is wrong, or returns None. The data of
an exercise's own phases is checked by that exercise's checks. ``arrived(line)``
is a line of evidence as the grader keeps it, and what it costs forwarded: the
parent reads every record with it, and the probe checks its own with it before
sending them, so a record the probe sends is one the parent accepts.
"""

from __future__ import annotations

from . import limits, text, wire

# the source name, in an operation record of a layer's tape, of a variable the operation takes:
# weight:<the key the probe's registry gave it, which the parent's weight values are keyed by>
WEIGHT_SOURCE = "weight:"


def _text(value) -> bool:
    return isinstance(value, str)


def _int_or_none(value) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _texts(value, limit: int) -> bool:
    return isinstance(value, list) and len(value) <= limit and all(isinstance(v, str) for v in value)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# the fields of an error and of one of its frames, as the probe describes them ("where": the notebook
# cell the grader names for a line, ``grader.ungradable.name_cells``)
ERROR_FIELDS = frozenset({"type", "message", "student_frames", "lineno", "offset", "internal", "where"})
FRAME_FIELDS = frozenset({"line", "function", "code", "where"})


def error_problem(error) -> str | None:
    """What is wrong with the description of a student's error, or None."""
    if not isinstance(error, dict):
        return "a failed phase carries no error"
    if not set(error) <= ERROR_FIELDS:
        return "the error has fields an error does not have"
    if not _text(error.get("type", "")) or not _text(error.get("message", "")):
        return "the error's type or message is not text"
    frames = error.get("student_frames", [])
    if not isinstance(frames, list) or len(frames) > limits.MAX_FRAMES or not all(
            isinstance(f, dict) and set(f) <= FRAME_FIELDS and _text(f.get("code", ""))
            and _text(f.get("function", "")) and _int_or_none(f.get("line")) for f in frames):
        return "the error's frames are malformed"
    if not _int_or_none(error.get("lineno")) or not _int_or_none(error.get("offset")):
        return "the error's line or column is not a number"
    return None


# field -> test, for the data of the phases the grader reads itself (a field may be missing
# when the phase stopped early; when present it must have this form)
PHASE_FIELDS = {
    "runtime": {
        "python": _text, "backend": _text, "tensorflow": _text, "jax": _text, "jaxlib": _text, "torch": _text,
        "keras": _text, "numpy": _text, "import_seconds": _number,
        "sandbox": lambda v: isinstance(v, dict), "sandbox_error": _text,
    },
    "tensorflow_calls": {"lines": lambda v: isinstance(v, list) and len(v) <= 10 and all(
        isinstance(n, int) and not isinstance(n, bool) for n in v)},
    "load": {
        "class_name": _text, "class_found": lambda v: isinstance(v, bool), "is_class": lambda v: isinstance(v, bool),
        "is_callable": lambda v: isinstance(v, bool), "is_layer_subclass": lambda v: isinstance(v, bool),
        "bases": lambda v: _texts(v, 10), "defined_names": lambda v: _texts(v, limits.MAX_NAMES),
        "signature_error": lambda v: v is None or _text(v), "signature": _text,
    },
}


def arrived(line: bytes) -> tuple[object, int]:
    """(the record, the bytes it takes forwarded) for a line of evidence: decoded within the wire's
    bounds (``wire.loads``: raises WireError, and nothing else) with every string cut to
    ``limits.MAX_TEXT``, as the grader keeps it; and the bytes of the line the grader writes for it in
    a judge's request, with the room naming a notebook's cells may add to its error (the quantity
    ``limits.MAX_RECORD_BYTES`` and ``limits.MAX_EVIDENCE_BYTES`` bound, as it arrives and as it is
    forwarded)."""
    record = text.bounded(wire.loads(line))
    try:
        forwarded = len(wire.dumps(record))
    except Exception as exc:  # noqa: BLE001 - data that decoded always encodes; if not, it is the data's fault
        raise wire.WireError(f"a record the grader cannot forward ({type(exc).__name__})") from None
    error = record.get("error") if isinstance(record, dict) else None
    if isinstance(error, dict):
        frames = error.get("student_frames")
        forwarded += limits.CELL_NAME_BYTES * (1 + (len(frames) if isinstance(frames, list) else 0))
    return record, forwarded


def problem(record: dict) -> str | None:
    """What is wrong with a phase's end record, or None; whatever the record holds, never an error."""
    try:
        return _problem(record)
    except Exception as exc:  # noqa: BLE001 - a record that breaks the checking of its form is malformed
        return f"its form could not be read ({type(exc).__name__})"


def _problem(record: dict) -> str | None:
    if not isinstance(record, dict):
        return "it is not an object"
    if not isinstance(record.get("ok"), bool):
        return "ok is not true or false"
    data = record.get("data")
    if not isinstance(data, dict):
        return "data is not an object"
    error = record.get("error")
    if record["ok"] and error is not None:
        return "a successful phase carries an error"
    if not record["ok"]:
        found = error_problem(error)
        if found:
            return found
    for field, test in PHASE_FIELDS.get(record.get("phase"), {}).items():
        if field in data and not test(data[field]):
            return f"its {field} has the wrong form"
    return trace_problem(data)


def trace_problem(value) -> str | None:
    """What is wrong with a call trace anywhere in ``value``, or None. The child's tracer numbers
    its events in order and links each to the call it happened in, always an earlier one; a trace
    whose links point elsewhere (forward, out of range, in a cycle) was not made by it."""
    if isinstance(value, dict):
        trace = value.get("trace")
        if "trace" in value and isinstance(trace, list):
            for position, event in enumerate(trace):
                if not isinstance(event, dict) or event.get("index") != position:
                    return "a call trace is not numbered in order"
                parent = event.get("parent")
                if parent is not None and not (isinstance(parent, int) and not isinstance(parent, bool)
                                               and 0 <= parent < position):
                    return "a call trace links an event to one that is not an earlier call"
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return None
    for child in children:
        if isinstance(child, (dict, list)):
            found = trace_problem(child)
            if found:
                return found
    return None
