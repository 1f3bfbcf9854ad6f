"""The grading API: one submission in, one Verdict out.

The parent never imports TensorFlow nor the student's code. It sends the
submission to a child process, then runs the exercise's pytest checks over the
plain data the child returned and computes the verdict.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from . import exercises
from .sandbox import Child, ChildRun
from .submission import SubmissionError, read_source
from .verdict import Verdict, error_verdict, summarise

DEFAULT_SEED = 0
DEFAULT_TIMEOUT = 120.0
DEFAULT_MEMORY_MB = 4096


@dataclass(frozen=True)
class Settings:
    """Everything that can change a verdict besides the submission, resolved once."""

    seed: int = DEFAULT_SEED
    timeout: float = DEFAULT_TIMEOUT
    memory_mb: int = DEFAULT_MEMORY_MB


def grade(exercise_id: str, submission: Path, settings: Settings = Settings()) -> Verdict:
    exercise = exercises.get(exercise_id)
    path = Path(submission).resolve()
    max_score = max_points(exercise_id)
    context = {
        "title": exercise.title,
        "seed": settings.seed,
        "timeout": settings.timeout,
        "memory_mb": settings.memory_mb,
        "python": platform.python_version(),
    }
    try:
        source = read_source(path)
    except SubmissionError as exc:
        return error_verdict(exercise.id, str(path), str(exc), max_score, context)
    job = dict(exercise.job(settings.seed), exercise=exercise.id, class_name=exercise.class_name, seed=settings.seed)
    child = Child(job, source, settings.timeout, settings.memory_mb)
    # pytest starts up and collects the checks while the child imports TensorFlow;
    # the first check to need evidence waits for the child.
    from .checks.evidence import Evidence
    from .checks.plugin import run_checks

    evidence = Evidence(child, exercises.PREREQUISITES[exercise.id], job)
    try:
        checks = run_checks(exercise.checks, evidence)
    finally:
        run = child.wait()
    context["seconds"] = round(run.seconds, 2)
    runtime = run.phases.get("runtime")
    if runtime and runtime.get("ok"):
        context.update({k: runtime["data"].get(k) for k in ("tensorflow", "keras")})
    problem = _ungradable(run, exercise)
    if problem:
        return error_verdict(exercise.id, str(path), problem, max_score, context)
    return summarise(exercise.id, str(path), checks, context)


def _ungradable(run: ChildRun, exercise) -> str | None:
    """Why the submission could not be graded at all, or None."""
    from .checks.evidence import describe_death, format_student_error

    if run.protocol_error:
        return f"The submission could not be graded: {run.protocol_error}."
    runtime = run.phases.get("runtime")
    if runtime is None:
        if run.timed_out:
            return "The grading process ran out of time while importing TensorFlow; try a longer --timeout."
        return f"The grading process could not start: {describe_death(run)}"
    if not runtime.get("ok"):
        return format_student_error("TensorFlow could not be imported in the grading process", runtime["error"] or {})
    load = run.phases.get("load")
    if load is None:
        if run.timed_out:
            return (
                f"Importing your file did not finish within the time limit ({run.seconds:.0f} s). "
                "Look for code at the top level of your file that loops or waits (training runs, "
                "input(), sleeps): put it under `if __name__ == \"__main__\":`."
            )
        return f"Your file could not be imported: {describe_death(run)}"
    if not load.get("ok"):
        error = load.get("error") or {}
        if error.get("type") in ("SyntaxError", "IndentationError", "TabError"):
            where = f" at line {error.get('lineno')}, column {error.get('offset')}" if error.get("lineno") else ""
            return f"Your file has a {error['type']}{where}: {error.get('message', '').splitlines()[0] if error.get('message') else ''}"
        return format_student_error("Importing your file raised an error", error)
    data = load.get("data") or {}
    if not data.get("class_found"):
        defined = ", ".join(data.get("defined_names") or []) or "no classes"
        return (
            f"Your file has no {exercise.class_name}; it defines {defined}. "
            f"Keep the class name {exercise.class_name} from the exercise file."
        )
    if not data.get("is_class"):
        return f"{exercise.class_name} in your file is not a class."
    return None


def max_points(exercise_id: str) -> float:
    """Total points of an exercise's checks, read from the check markers without running them."""
    import ast

    tree = ast.parse(exercises.get(exercise_id).checks.read_text(encoding="utf-8"))
    total = 0.0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check":
            points = [k.value for k in node.keywords if k.arg == "points"]
            total += float(ast.literal_eval(points[0])) if points else 1.0
    return total
