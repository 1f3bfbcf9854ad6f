"""Typed, validated access to what the child returned, phase by phase.

A check asks for a phase; it gets the phase's data, or the right ending: the
student's own error (a failure that names it), a skip when an earlier step
never let the phase run, a timeout, or an error when the child died.
"""

from __future__ import annotations

import numpy as np

import pytest

from ..causes import STILL_THE_STUB
from ..protocol.text import cut
from ..sandbox.evidence import ChildRun
from ..sandbox.process import looks_out_of_memory
from . import budget
from .advice import parts_of, shape_mismatch
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


class Evidence:
    """The evidence of one child run, for one exercise."""

    def __init__(self, run, prerequisites: dict[str, tuple[str, str]], job: dict, secrets=None, prepare=None):
        """``run`` is a ChildRun, or a running sandbox.Child to wait for on first use;
        ``secrets()`` gives the secret part of the job the parent chose (once the child is done);
        ``prepare(run)`` is applied once to the finished run (a notebook's cell names)."""
        budget.reset(job)  # the parent's work on this submission's replays starts from zero
        self._run = run
        self._prepare = prepare
        self._public_job = job
        self._secrets = secrets
        self._prerequisites = prerequisites
        self._reported: dict[str, str] = {}
        self.current_check = ""  # the check running now (set by the plugin)
        self._decoded: dict[str, dict] = {}

    @property
    def public_job(self) -> dict:
        """What the child knew from the start: sizes and shapes."""
        return self._public_job

    @property
    def random_at_inference(self) -> bool:
        """Whether the layer, or a model holding it, called twice on one input without ``training``,
        returned different outputs: whatever else compares its outputs then fails for that reason."""
        record = self.run.phases.get("inference")
        data = record.get("data") if isinstance(record, dict) and record.get("ok") else None
        if not isinstance(data, dict):
            return False
        for outputs in (data.get("layer"), data.get("model")):
            if isinstance(outputs, list) and len(outputs) == 2 and all(isinstance(o, np.ndarray) for o in outputs):
                if outputs[0].dtype.kind not in "biuf" or outputs[1].dtype.kind not in "biuf":
                    continue
                first, second = (np.asarray(o, dtype=np.float64) for o in outputs)
                if first.shape != second.shape or not np.array_equal(first, second, equal_nan=True):
                    return True
        return False

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
                if name != "forward" and self._returns_nothing():
                    raise pytest.skip.Exception(
                        "Not checked: your call() returns no tensor, so Keras fails when it uses the layer "
                        "(see check api.output_shape).")
                raise CheckFailed(self._student_error(name, error, check_id))
            return self._data(name, record)
        self._raise_missing(name, check_id)

    def _returns_nothing(self) -> bool:
        record = self.run.phases.get("forward")
        data = record.get("data") if isinstance(record, dict) and record.get("ok") else None
        observation = data.get("observation") if isinstance(data, dict) else None
        output = observation.get("output") if isinstance(observation, dict) else None
        return isinstance(output, dict) and output.get("not_a_tensor") == "NoneType"

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
            self._decoded[name] = data  # arrays are NumPy already: the wire decoded them, bounds checked
        return self._decoded[name]

    def _raise_missing(self, name: str, asking: str = ""):
        blocker = self._blocked_by(name)
        if blocker:
            phase, check_id = blocker
            if check_id == (self.current_check or asking):  # this check names the failure; the others point to it
                raise CheckFailed(self._student_error(phase, self.error(phase) or {}, check_id))
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
        raise Unavailable("error", f"Not checked: {describe_end(self.run)}")

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
        reporter = self.current_check or check_id or "above"
        if phase in self._reported and self._reported[phase] != reporter:
            raise pytest.skip.Exception(f"Not checked: your code raised {kind} {where} "
                                        f"(see check {self._reported[phase]}).")
        self._reported[phase] = reporter
        return format_student_error(f"Your code raised {kind} {where}", error, parts_of(self._public_job))


def internal_error_message(phase: str, error: dict) -> str:
    where = PHASE_WORDS.get(phase, f"in phase {phase}")
    return (f"Not checked: the grader itself failed {where} ({error.get('type', 'Error')}: "
            f"{_first_lines(error.get('message', ''), 2)}). This is a fault of the grader, not of your code.")


def format_student_error(headline: str, error: dict, parts: set[str] | None = None) -> str:
    """The student's error, once: the line of their file it happened on, the error without
    TensorFlow's internals, and — where the pattern is known — what it means in the grader's words."""
    message = clean_message(str(error.get("message", "")))
    frames = [f for f in error.get("student_frames") or [] if isinstance(f, dict)]
    lines = [f"{headline}:", f"  {error.get('type', 'Error')}: {_first_lines(message)}"]
    for frame in frames[-3:]:
        place = frame.get("where") or f"line {frame.get('line')}"
        lines.append(f"  at {place}, in {frame.get('function')}: {str(frame.get('code', '')).strip()}")
    if len(frames) > 3:
        lines.insert(2, f"  ({len(frames) - 3} earlier line(s) of your file in the traceback not shown)")
    advice = explain_error(str(error.get("type", "")), message, frames, parts)
    if advice:
        lines.append(advice)
    return "\n".join(lines)


def clean_message(message: str) -> str:
    """An error message without ANSI codes and TensorFlow's node, device and op decorations."""
    import re

    message = re.sub(r"\x1b\[[0-9;]*m", "", message)
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)
    message = re.sub(r"\s*\[Op:[A-Za-z0-9_]+\]( name: ?[^\n]*)?", "", message)
    message = re.sub(r"Exception encountered when calling [^\n]*\n?", "", message)
    message = re.sub(r"\n\s*Arguments received by [\s\S]*$", "", message)
    return message.strip()


def explain_error(kind: str, message: str, frames: list[dict], parts: set[str] | None = None) -> str | None:
    """What a known error means, in the student's terms and the parts of the exercise (``advice``)."""
    import re

    code = str(frames[-1].get("code", "")) if frames else ""
    if kind == "NotImplementedError" and "NotImplementedError" in code:
        return STILL_THE_STUB
    if _out_of_memory({"type": kind, "message": message}):
        return ("That is the memory limit of the grading process (--memory): look for a tensor far "
                "larger than the layer needs.")
    if "multiple values for argument 'query_mask'" in message:
        return ("In Keras 3, MultiHeadAttention's fourth positional argument is query_mask (in Keras 2 it was "
                "attention_mask). Pass the mask by keyword: attention(query, value, attention_mask=...).")
    if "forgot to call `super().__init__()`" in message or "super().__init__()" in message and \
            "subclass" in message.lower():
        return ("Call super().__init__(**kwargs) as the first line of __init__: a Keras layer sets up its "
                "tracking of weights and sublayers there, before any attribute is assigned.")
    if "deserialization of a `Lambda` layer whose `function` is a Python lambda" in message:
        return ("A Lambda layer of a Python lambda is saved as bytecode, which Keras refuses to load unless told "
                "the file is trusted (safe_mode=False): nobody who loads your model should have to. Give the "
                "Lambda a named function registered with @keras.saving.register_keras_serializable(), or "
                "write the computation as a layer of your own (a class with call(); supports_masking = True "
                "if the mask must pass through it).")
    if "KerasTensor cannot be used as input to a TensorFlow function" in message:
        return ("In a functional model your layer receives symbolic KerasTensors, which TensorFlow functions "
                "(tf.*) cannot take: use keras.ops instead (keras.ops.not_equal, keras.ops.expand_dims, ...).")
    shapes = re.search(r"Incompatible shapes: \[([0-9,]+)\] vs\. \[([0-9,]+)\]", message) or \
        re.search(r"Dimensions must be equal, but are (\d+) and (\d+)", message) or \
        re.search(r"Incompatible shapes for broadcasting: shapes=\[\(([0-9, ]+)\), \(([0-9, ]+)\)\]", message)
    if shapes:
        return shape_mismatch(shapes.group(1).replace(" ", ""), shapes.group(2).replace(" ", ""), code, parts)
    if kind == "AttributeError" and "'NoneType' object has no attribute" in message:
        return "A value was None where a tensor was expected: does every function you call end with `return`?"
    return None


def _out_of_memory(error: dict) -> bool:
    return looks_out_of_memory(f"{error.get('type', '')} {error.get('message', '')}")


def _first_lines(text: str, limit: int = 6) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    shown = "\n    ".join(cut(line, 300) for line in lines[:limit])  # each line after a word
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


# what the signals a grading process may end by mean, in a report
SIGNAL_MEANINGS = {
    "SIGKILL": "killed", "SIGTERM": "asked to stop", "SIGSEGV": "a crash: segmentation fault",
    "SIGBUS": "a crash: bus error", "SIGFPE": "a crash: arithmetic fault", "SIGILL": "a crash: illegal instruction",
    "SIGABRT": "aborted", "SIGXFSZ": "a file grew past the size limit", "SIGXCPU": "the CPU time limit",
    "SIGSYS": "a forbidden system call", "SIGPIPE": "a write to a closed pipe",
}


def describe_end(run: ChildRun) -> str:
    """How the grading process ended, in words: whatever its status, real-time signals included."""
    where = describe_running(run)
    if run.protocol_error:
        return f"the grading process could not be trusted: {run.protocol_error}."
    if run.memory_exceeded:
        return f"your code ran out of memory {where} (the memory limit was reached)."
    if run.timed_out:
        return f"the time limit ran out {where}."
    if run.signal_name:
        name = run.signal_name
        meaning = SIGNAL_MEANINGS.get(name) or ("a real-time signal" if name.startswith("SIGRT") else "a signal")
        return f"the grading process was ended by {name} ({meaning}) {where}."
    if run.returncode is None:
        return f"the grading process ended without a status {where}."
    return f"the grading process stopped unexpectedly (exit code {run.returncode}) {where}."
