"""Typed, validated access to what the child returned, phase by phase.

A check asks for a phase; it gets the phase's data, or the right ending: the
student's own error (a failure that names it), a skip when an earlier step
never let the phase run, a timeout, or an error when the child died.
"""

from __future__ import annotations

import numpy as np
import pytest

from ..sandbox import ChildRun, looks_out_of_memory
from .framework import CheckFailed, Unavailable

PHASE_WORDS = {
    "construct": "while being constructed",
    "variables": "when first called on a batch of inputs (which builds its weights)",
    "values": "while the grader set its weights",
    "forward": "when called on a batch of inputs",
    "mask": "when called with a padding mask",
    "config": "in the get_config / from_config round trip",
    "saving": "while saving to or loading from a .keras file",
    "gradients": "while computing gradients",
    "causal": "when called on inputs with changed later positions",
    "functional": "when used in a functional model on keras.Input",
    "build": "when build_classifier was called",
    "predict": "when the model was called on token ids",
    "training": "while the model was trained",
}


class ProtocolError(Exception):
    """The child's data does not have the expected form."""


def decode(value):
    """Arrays arrive as tagged records; everything else as plain JSON."""
    if isinstance(value, dict):
        if value.get("__array__") is True:
            return _array(value)
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def _array(record: dict) -> np.ndarray:
    dtype = bool if record.get("dtype") == "bool" else np.float64
    try:
        array = np.array(record["values"], dtype=dtype)
    except (TypeError, ValueError, KeyError) as exc:
        raise ProtocolError(f"malformed array: {exc}") from None
    if list(array.shape) != list(record.get("shape", [])):
        raise ProtocolError("array shape does not match its values")
    return array


class Evidence:
    """The evidence of one child run, for one exercise."""

    def __init__(self, run, prerequisites: dict[str, tuple[str, str]], job: dict, secrets=None, prepare=None):
        """``run`` is a ChildRun, or a running sandbox.Child to wait for on first use;
        ``secrets()`` gives the secret part of the job the parent chose (once the child is done);
        ``prepare(run)`` is applied once to the finished run (a notebook's cell names)."""
        self._run = run
        self._prepare = prepare
        self._public_job = job
        self._secrets = secrets
        self._prerequisites = prerequisites
        self._reported: dict[str, str] = {}
        self._decoded: dict[str, dict] = {}

    @property
    def job(self) -> dict:
        """The whole job: its public part and the secret inputs and values the parent drew."""
        self.run  # the secrets are final once the child has ended
        secrets = self._secrets() if callable(self._secrets) else (self._secrets or {})
        return dict(self._public_job, **(secrets or {}))

    @property
    def run(self) -> ChildRun:
        if not isinstance(self._run, ChildRun):
            self._run = self._run.wait()
            if self._prepare is not None:
                self._prepare(self._run)
        return self._run

    def phase(self, name: str, check_id: str = "") -> dict:
        record = self.run.phases.get(name)
        if record is not None:
            if not record.get("ok"):
                error = record.get("error") or {}
                if error.get("internal") and not error.get("student_frames"):
                    raise Unavailable("error", internal_error_message(name, error))
                raise CheckFailed(self._student_error(name, error, check_id))
            return self._data(name, record)
        self._raise_missing(name, check_id)

    def partial(self, name: str) -> dict | None:
        """What a phase recorded before it stopped, whether or not it succeeded."""
        record = self.run.phases.get(name)
        return None if record is None else self._data(name, record)

    def error(self, name: str) -> dict | None:
        record = self.run.phases.get(name)
        if record is None or record.get("ok"):
            return None
        return record.get("error") or {}

    def _data(self, name: str, record: dict) -> dict:
        if name not in self._decoded:
            data = record.get("data")
            if not isinstance(data, dict):
                raise ProtocolError(f"phase {name!r} carries no data")
            self._decoded[name] = decode(data)
        return self._decoded[name]

    def _raise_missing(self, name: str, asking: str = ""):
        blocker = self._blocked_by(name)
        if blocker:
            phase, check_id = blocker
            if check_id == asking:  # this check names the failure; the others point to it
                raise CheckFailed(self._student_error(phase, self.error(phase) or {}, asking))
            raise pytest.skip.Exception(
                f"Not checked: your code failed earlier, {PHASE_WORDS.get(phase, phase)} "
                f"(see check {check_id})."
            )
        if self.run.timed_out:
            raise Unavailable(
                "timeout",
                f"Not checked: the grading time limit ran out {describe_running(self.run)}. "
                "Look for an endless loop or a very slow computation in your layer.",
            )
        raise Unavailable("error", f"Not checked: {describe_death(self.run)}")

    def _blocked_by(self, name: str):
        seen = set()
        while name in self._prerequisites and name not in seen:
            seen.add(name)
            phase, check_id = self._prerequisites[name]
            record = self.run.phases.get(phase)
            if record is not None and not record.get("ok"):
                return phase, check_id
            name = phase
        return None

    def _student_error(self, phase: str, error: dict, check_id: str) -> str:
        where = PHASE_WORDS.get(phase, f"in phase {phase}")
        kind = error.get("type", "an error")
        if phase in self._reported:
            return f"Your code raised {kind} {where} (the details are under check {self._reported[phase]})."
        self._reported[phase] = check_id or "above"
        return format_student_error(f"Your code raised {kind} {where}", error)


def internal_error_message(phase: str, error: dict) -> str:
    where = PHASE_WORDS.get(phase, f"in phase {phase}")
    return (f"Not checked: the grader itself failed {where} ({error.get('type', 'Error')}: "
            f"{_first_lines(error.get('message', ''), 2)}). This is a fault of the grader, not of your code.")


def format_student_error(headline: str, error: dict) -> str:
    lines = [f"{headline}:", f"  {error.get('type', 'Error')}: {_first_lines(error.get('message', ''))}"]
    for frame in error.get("student_frames") or []:
        place = frame.get("where") or f"line {frame.get('line')}"
        lines.append(f"  at {place}, in {frame.get('function')}: {str(frame.get('code', '')).strip()}")
    if _out_of_memory(error):
        lines.append("That is the memory limit of the grading process (--memory): look for a tensor far "
                     "larger than the layer needs.")
    frames = error.get("student_frames") or []
    if error.get("type") == "NotImplementedError" and frames and "NotImplementedError" in frames[-1].get("code", ""):
        lines.append("This part is still the stub: replace `raise NotImplementedError()` with your code.")
    message = str(error.get("message", ""))
    if error.get("type") == "TypeError" and "multiple values for argument 'query_mask'" in message:
        lines.append("In Keras 3, MultiHeadAttention's fourth positional argument is query_mask (in Keras 2 it was "
                     "attention_mask). Pass the mask by keyword: attention(query, value, attention_mask=...).")
    return "\n".join(lines)


def _out_of_memory(error: dict) -> bool:
    return looks_out_of_memory(f"{error.get('type', '')} {error.get('message', '')}")


def _first_lines(text: str, limit: int = 6) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    shown = "\n    ".join(line[:300] for line in lines[:limit])
    return shown + ("\n    ..." if len(lines) > limit else "")


def describe_running(run: ChildRun) -> str:
    phase = run.unfinished_phase
    if phase is None:
        return "before your layer was exercised"
    if phase == "runtime":
        return "while TensorFlow was being imported"
    if phase == "load":
        return "while your file was being imported"
    return PHASE_WORDS.get(phase, f"in phase {phase}")


def describe_death(run: ChildRun) -> str:
    if run.protocol_error:
        return f"the grading process could not be trusted: {run.protocol_error}."
    if run.memory_exceeded:
        return f"your code ran out of memory {describe_running(run)} (the memory limit was reached)."
    if run.signal_name:
        return f"the grading process was killed by {run.signal_name} {describe_running(run)}."
    return f"the grading process stopped unexpectedly (exit code {run.returncode}) {describe_running(run)}."
