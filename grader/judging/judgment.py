"""What a judge does: the exercise's checks over one submission's evidence, as an answer.

``judge`` is the whole of it, and runs in a judge process (``server``) or, for
the grader's own tests, wherever it is called. A check that runs out of memory
makes the whole answer say so: the grader then gives the submission an error
verdict rather than a score computed from what was left.
"""

from __future__ import annotations

from .. import exercises
from ..sandbox.evidence import ChildRun
from . import exchange


def judge(exercise_id: str, job: dict, secrets: dict, run: ChildRun, checks_timeout: float) -> dict:
    """The answer (``exchange.answer``) for this evidence."""
    from ..judge.evidence import Evidence
    from .plugin import OUT_OF_MEMORY, ChecksOverran, Watchdog, run_checks

    exercise = exercises.get(exercise_id)
    watchdog = Watchdog(checks_timeout)
    watchdog.start()
    evidence = Evidence(run, exercise.prerequisites, job, secrets)
    try:
        checks = run_checks(exercise.checks, evidence, watchdog)
    except ChecksOverran as exc:
        return exchange.answer(overran=str(exc))
    except MemoryError:
        return exchange.answer(out_of_memory=True)
    except Exception as exc:  # the grader's own failure: never the student's
        return exchange.answer(failed=f"the grader's checks could not run ({type(exc).__name__}: {str(exc)[:300]})")
    out_of_memory = any(c.status == "error" and c.message == OUT_OF_MEMORY for c in checks)
    return exchange.answer(checks, out_of_memory=out_of_memory)


def judge_request(data: bytes) -> dict:
    """The answer to a whole request (``exchange.request``); a judge that runs out of memory
    reading it answers so itself (``server.run_judge``), and one that cannot read it says why."""
    try:
        header, run = exchange.read_request(data)
    except exchange.BadRequest as exc:
        return exchange.answer(failed=f"the grader's judge could not read the evidence it was given ({exc})")
    return judge(header["exercise"], header["job"], header["secrets"], run, header["checks_timeout"])
