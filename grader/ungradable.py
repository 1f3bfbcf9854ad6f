"""Why a submission could not be graded, in the student's words: a syntax error found before anything
runs, a grading process that could not start, import the framework or confine itself, a file whose
import failed or ran out of time, a target missing or of the wrong kind. ``grader.api`` asks these
before any check is judged; a submission they pass goes on to the checks.
"""

from __future__ import annotations

from pathlib import Path

from .sandbox.evidence import ChildRun
from .sandbox.process import STARTUP_SECONDS
from .settings import DEFAULT_BACKEND
from .submission import Source


def syntax_problem(text: str, path: Path, source: Source) -> str | None:
    """A syntax error in the submission, found by compiling it (nothing runs): where it is, the
    line itself and a caret under the place, or None."""
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno or 0
        place = source.where(line) if source.cells else f"line {line}"
        lines = text.splitlines()
        code = lines[line - 1] if 0 < line <= len(lines) else ""
        shown = code.expandtabs(4)
        column = max(1, min(exc.offset or 1, len(shown) + 1))
        kind = type(exc).__name__
        message = (exc.msg or "invalid syntax").strip()
        return (f"Your file {path.name} has a {kind} at {place}, column {column}: {message}.\n"
                f"    {shown.rstrip()}\n    {' ' * (column - 1)}^")
    except (ValueError, RecursionError) as exc:  # NUL bytes, absurd nesting
        return f"Your file {path.name} cannot be read as Python ({exc})."
    return None


def name_cells(run: ChildRun, source: Source) -> None:
    """For a notebook: say in which code cell each line of an error is."""
    for record in run.phases.values():
        error = record.get("error") if isinstance(record, dict) else None
        if not isinstance(error, dict):
            continue
        for frame in error.get("student_frames") or []:
            if isinstance(frame, dict):
                frame["where"] = source.where(frame.get("line"))
        if isinstance(error.get("lineno"), int):
            error["where"] = source.where(error["lineno"])


def why(run: ChildRun, exercise, backend: str = DEFAULT_BACKEND) -> str | None:
    """Why the submission could not be graded at all, or None."""
    from .backends import title
    from .judge.evidence import describe_end, format_student_error

    if run.protocol_error:
        return f"The submission could not be graded: {run.protocol_error}."
    runtime = run.phases.get("runtime")
    library = "TensorFlow" if backend == "tensorflow" else f"Keras on {title(backend)}"
    if runtime is None:
        if run.startup_timed_out:
            return (f"The submission could not be graded: the grading process did not get ready within "
                    f"{STARTUP_SECONDS:.0f} s (starting Python, importing {library} and confining itself), "
                    "before any of the submission ran. The machine is probably overloaded: grade again.")
        if run.timed_out:
            return f"The grading process was stopped while importing {library}, before any of the submission ran."
        return f"The grading process could not start: {describe_end(run)}"
    if not runtime.get("ok"):
        error = runtime.get("error") or {}
        if error.get("type") in ("GraderMismatch", "RuntimeError") and str(error.get("message", "")).startswith(
                ("the grader at ", "a job of format")):
            return ("The submission could not be graded: the grader and its grading process are not the same "
                    f"installation ({str(error.get('message', '')).splitlines()[0][:600]}). Run grade from the "
                    "environment the grader is installed in, not from a folder holding another copy of it.")
        if "sandbox_error" in runtime["data"]:
            return ("The submission could not be graded: the grading process could not confine itself "
                    f"({runtime['data']['sandbox_error']}), so none of the submission ran.")
        return format_student_error(f"{library} could not be imported in the grading process",
                                    runtime["error"] or {})
    if runtime["data"].get("backend", DEFAULT_BACKEND) != backend:
        return (f"The submission could not be graded: the grading process ran Keras on "
                f"{str(runtime['data'].get('backend'))[:40]!r}, not on {title(backend)} as asked.")
    load = run.phases.get("load")
    if load is None:
        if run.timed_out:
            cell = next((name for name in reversed(run.started) if name.startswith("load:cell ")), None)
            if cell:
                return (
                    f"Running your notebook did not finish within the time limit ({_limit(run)}): code "
                    f"{cell.split(':', 1)[1]} was still running. Look in it for code that loops or waits (a "
                    "training run, input(), a sleep)."
                )
            return (
                f"Importing your file did not finish within the time limit ({_limit(run)}). "
                "Look for code at the top level of your file that loops or waits (training runs, "
                "input(), sleeps): put it under `if __name__ == \"__main__\":`."
            )
        return f"Your file could not be imported: {describe_end(run)}"
    if not load.get("ok"):
        error = load.get("error") or {}
        if error.get("type") in ("SyntaxError", "IndentationError", "TabError"):
            place = error.get("where") or f"line {error.get('lineno')}"
            where = f" at {place}, column {error.get('offset')}" if error.get("lineno") else ""
            return f"Your file has a {error['type']}{where}: {error.get('message', '').splitlines()[0] if error.get('message') else ''}"
        return format_student_error("Importing your file raised an error", error)
    data = load.get("data") or {}
    target = exercise.target
    if not data.get("class_found"):
        defined = ", ".join(data.get("defined_names") or []) or "nothing"
        what = "function" if exercise.kind == "function" else "class"
        return (
            f"Your file has no {target}; it defines {defined}. "
            f"Keep the {what} name {target} from the exercise file."
        )
    if exercise.kind == "function":
        if not data.get("is_callable") or data.get("is_class"):
            return f"{target} in your file is not a function."
    else:
        if not data.get("is_class"):
            return f"{target} in your file is not a class."
        if not data.get("is_layer_subclass"):
            bases = ", ".join(data.get("bases") or []) or "nothing"
            return (
                f"{target} is not a Keras layer: it derives from {bases}. "
                f"Write class {target}(keras.layers.Layer): only a Layer gets Keras's "
                "weight tracking, masking, config and saving, which the checks examine."
            )
    if data.get("signature_error"):
        return (
            f"{target} cannot be called with the exercise's arguments "
            f"({data['signature_error']}); its signature is {data.get('signature')}. "
            "Keep the signature from the exercise file."
        )
    return None


def _limit(run: ChildRun) -> str:
    seconds = run.time_limit if run.time_limit is not None else run.seconds
    return f"{seconds:g} s"


def student_output(stdout: str, max_lines: int = 20, max_chars: int = 2000) -> str:
    """What the submission printed, trimmed for the report."""
    lines = stdout.strip("\n").splitlines()
    shown = "\n".join(line[:200] for line in lines[:max_lines])[:max_chars]
    if len(lines) > max_lines or len(stdout) > max_chars:
        shown += f"\n[... {len(lines)} lines in all; the rest is not shown ...]"
    return shown
