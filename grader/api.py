"""The grading API: one submission in, one Verdict out.

The parent never imports TensorFlow nor the student's code. It sends the
submission to a child process, then has a judge process (``grader.judge``) run
the exercise's pytest checks over the plain data the child returned, and
computes the verdict from the judge's checked answer.
"""

from __future__ import annotations

import platform
from pathlib import Path

from .sandbox import confinement
from . import compiled as compiled_operations, exercises
from .exercises.reads import policy as grading_reads
from . import ahead, ungradable
from .sandbox.evidence import ChildRun
from .sandbox.process import Child
from .submission import Source, SubmissionError, closed_around, read_submission
from .verdict import Verdict, error_verdict, summarise
from .settings import (CHECKS_SECONDS, DEFAULT_BACKEND, DEFAULT_MEMORY_MB, DEFAULT_SEED,  # noqa: F401
                       DEFAULT_TIMEOUT, Settings)
from .judging import declarations
from .judging.declarations import declared_checks


def _default_judges():
    from .judging.client import shared_judges

    return shared_judges()


def _solution_ran(exercise, settings: Settings, runner, judges, compiled: dict) -> bool:
    """Grade ``exercise``'s own solution with ``compiled`` (``grader.compiled`` fills its folder this
    way); whether the run finished cleanly."""
    own = Settings(seed=0, timeout=settings.timeout, memory_mb=settings.memory_mb, backend=settings.backend)
    grading = Grading(exercise.id, exercise.solution, own, runner=runner, judges=judges, compiled=compiled)
    verdict = grading.finish()
    run = grading.run
    return (verdict.status != "error" and run is not None and run.finished and not run.timed_out
            and not run.memory_exceeded)


class Grading:
    """One submission being graded: its child starts at construction, the
    verdict is computed by ``finish``. ``grade`` does both; ``grade_pairs``
    keeps several children running at once."""

    def __init__(self, exercise_id: str, submission: Path, settings: Settings = Settings(), runner=Child,
                 refusal: str | None = None, judges=None, compiled: dict | None = None):
        """``runner(job, source, timeout, memory_mb, respond=...)`` starts the child and returns
        something whose ``wait()`` gives its ChildRun: a fresh process by default, a fork of a
        pre-imported worker (``grader.workers``). ``judges()`` gives the ``Judges`` that
        judge its evidence (this process's own by default). With ``refusal`` the submission is
        not read: its verdict is an error that says why. ``compiled`` is the folder of compiled
        operations the child uses (``grader.compiled``; by default the grader's own, read only)."""
        from .protocol import job as inputs

        self.exercise = exercises.get(exercise_id)
        given = Path(submission)
        try:
            self.path = given.absolute() if given.is_symlink() else given.resolve()
        except (OSError, RuntimeError):  # a loop of links above it: read_submission says what is wrong
            self.path = given.absolute()
        self.settings = settings
        self.seed = settings.seed if settings.seed is not None else inputs.new_seed()
        self.secrets: dict | None = None
        self.internal_error: str | None = None
        self.context = {
            "title": self.exercise.title,
            "seed": self.seed,
            "seed_given": settings.seed is not None,
            "timeout": settings.timeout,
            "memory_mb": settings.memory_mb,
            "python": platform.python_version(),
            "backend": settings.backend,
        }
        self.child = None
        self.run: ChildRun | None = None
        self._judges = judges if judges is not None else _default_judges
        self._judge = None
        self._verdict: Verdict | None = None
        self.early_error: str | None = refusal
        self.source = Source("")
        if refusal is not None:
            return
        try:
            self.source = read_submission(given)
        except SubmissionError as exc:
            self.early_error = str(exc)
            return
        source = self.source.text
        self.early_error = ungradable.syntax_problem(source, self.path, self.source)
        if self.early_error:
            return  # found without running anything: no child, no TensorFlow
        try:
            if compiled is None:
                compiled = compiled_operations.prepare(
                    self.exercise, settings.backend, lambda entry: _solution_ran(self.exercise, settings, runner,
                                                                                 judges, entry))
            self.job = inputs.child_job(self.exercise, settings.memory_mb, reads=grading_reads(),
                                        cells=self.source.cells,
                                        private=[*settings.private, *closed_around(self.path)],
                                        backend=settings.backend, compiled=compiled)
            self._judges()  # the judge server starts while the child imports TensorFlow
            ahead.start(self.exercise)  # and what this process judges and reports with is imported
            self.child = runner(self.job, source, settings.timeout, settings.memory_mb, respond=self._respond)
        except Exception as exc:  # the grader's own failure, or the machine's: never the student's
            self.early_error = (f"The submission could not be graded: the grader could not start the grading "
                                f"process ({type(exc).__name__}: {exc}).")

    def _respond(self, record: dict) -> bytes | None:
        """Answer the child's report of the built layer with the secret part of the job. A report the
        grader refuses makes the evidence untrusted, and the grading ends at once; when the grader
        itself fails, the control channel is closed empty, so the child never waits for secrets."""
        from .protocol import job as inputs, wire
        from .sandbox.evidence import Untrusted

        if record.get("event") != "end" or record.get("phase") != "variables":
            return None
        if not record.get("ok"):
            self.secrets = self.secrets if self.secrets is not None else {}
            return None
        if self.secrets is not None:
            return None
        try:
            self.secrets = inputs.secret_job(self.exercise, self.seed, record.get("data"))
            return wire.dumps(self.secrets)
        except inputs.BadBuildReport as exc:  # the probe refuses such a layer itself: the report is forged
            self.secrets = {}
            raise Untrusted(f"the grading process sent evidence reporting the layer's variables in a malformed way "
                            f"({exc})") from None
        except Exception as exc:  # the grader's own failure: never the student's
            self.secrets = {}
            self.internal_error = f"the grader failed while choosing the inputs ({type(exc).__name__}: {exc})"
        return b""

    # ----------------------------------------------------------------- the two stages
    # A grading runs its child, then a judge over the child's evidence (``grader.judge``). Each
    # stage is waited for through a descriptor (``sentinel``), so a scheduler keeps many gradings
    # going at once: ``ready()`` says the current stage has ended or run out of time, ``advance()``
    # moves on without blocking for long, and ``finish()`` gives the verdict, waiting if it must.

    @property
    def sentinel(self) -> int | None:
        """A descriptor that becomes readable when the current stage ends (None: nothing to wait for)."""
        if self._verdict is not None:
            return None
        if self._judge is not None:
            return self._judge.sentinel
        return getattr(self.child, "sentinel", None) if self.child is not None else None

    def seconds_left(self) -> float:
        if self._judge is not None:
            return self._judge.seconds_left()
        return getattr(self.child, "seconds_left", lambda: 0.0)() if self.child is not None else 0.0

    def next_look(self) -> float:
        """How long a scheduler may wait on ``sentinel`` before asking ``ready()`` again (a child's
        clock changes when its runtime is ready)."""
        if self._judge is None and self.child is not None and hasattr(self.child, "next_look"):
            return self.child.next_look()
        return self.seconds_left()

    def ready(self) -> bool:
        """Whether ``advance()`` would not wait: the child or the judge has ended or is out of time."""
        if self._verdict is not None or self.child is None:
            return True
        if self._judge is not None:
            return self._judge.ready()
        return self.child.ready()

    def advance(self) -> bool:
        """Take the next step if the current stage is ready: start the judge once the child has
        ended, compute the verdict once the judge has. True when the verdict is known."""
        if self._verdict is not None:
            return True
        if not self.ready():
            return False
        if self._judge is None:
            self._guarded(self._start_judging)
            if self._verdict is None and self._judge is not None and not self._judge.ready():
                return False
        if self._verdict is None:
            self._guarded(self._judged)
        return True

    def finish(self) -> Verdict:
        """The verdict. Whatever the child sent or did, and whatever failed in the grader while
        judging it, there is exactly one, and the child, the judge and the scratch folder are gone after."""
        try:
            if self._verdict is None and self._judge is None:
                self._guarded(self._start_judging)
            if self._verdict is None:
                self._guarded(self._judged)
            return self._verdict
        finally:
            self.close()

    def _guarded(self, step) -> None:
        try:
            step()
        except Exception as exc:  # the grader's own failure: one error verdict, for this submission alone
            self._verdict = error_verdict(
                self.exercise.id, str(self.path),
                f"The submission could not be graded: {MALFORMED} ({type(exc).__name__} in the grader: "
                f"{str(exc)[:300]}).", max_points(self.exercise.id), self.context)
        if self._verdict is not None:
            self.close()

    def close(self) -> None:
        """End the child and the judge, if they still run, and remove the scratch folder."""
        for process in (self.child, self._judge):
            if process is not None:
                try:
                    process.kill()
                except Exception:  # noqa: BLE001 - nothing more can be done for a process that cannot be ended
                    pass

    def _start_judging(self) -> None:
        exercise, path = self.exercise, str(self.path)
        if self.child is None:
            self._verdict = error_verdict(exercise.id, path, self.early_error, max_points(exercise.id), self.context)
            return
        run = self.child.wait()
        ahead.wait()
        if run.protocol_error:  # an untrusted run shows the checks no evidence at all
            run = ChildRun(timed_out=run.timed_out, startup_timed_out=run.startup_timed_out,
                           returncode=run.returncode, signal_name=run.signal_name, seconds=run.seconds,
                           time_limit=run.time_limit, protocol_error=run.protocol_error)
        self.run = run  # what the grading process sent, kept for comparing backends (grader.portability)
        if self.source.cells:
            ungradable.name_cells(run, self.source)
        self.context["seconds"] = round(run.seconds, 2)
        runtime = run.phases.get("runtime")
        if runtime and runtime.get("ok"):
            data = runtime["data"]
            self.context.update({k: str(data[k]) for k in ("tensorflow", "keras", "jax", "torch") if k in data})
            self.context["sandbox"] = confinement.describe(data.get("sandbox"))
            if confinement.valid(data.get("sandbox")):
                self.context["confinement"] = data["sandbox"]
        self.context["output"] = ungradable.student_output(run.stdout)
        problem = ungradable.why(run, exercise, self.settings.backend) or self._direct_calls(run) or (
            f"The submission could not be graded: {self.internal_error}." if self.internal_error else None)
        if problem:  # nothing to judge
            self._verdict = error_verdict(exercise.id, path, problem, max_points(exercise.id), self.context)
            return
        from .judging import exchange
        from .judging.client import JudgeFailed

        request = exchange.request(exercise.id, self.job, self.secrets, run, self.settings.checks_timeout)
        try:
            self._judge = self._judges().start(request, self.settings.checks_timeout)
        except JudgeFailed as exc:
            self._verdict = error_verdict(exercise.id, path, f"The submission could not be graded: {exc}.",
                                          max_points(exercise.id), self.context)

    def _direct_calls(self, run: ChildRun) -> str | None:
        """On a backend other than TensorFlow, the one message for a layer that called TensorFlow itself."""
        from . import backends

        record = run.phases.get("tensorflow_calls")
        if self.settings.backend == backends.DEFAULT or not record or not record.get("ok"):
            return None
        lines = record["data"].get("lines") or []
        where = self.source.where if self.source.cells else None
        message = backends.direct_call_message(self.source.text, lines, self.settings.backend, where)
        return f"The submission could not be graded on {backends.title(self.settings.backend)}: {message}."

    def _judged(self) -> None:
        from .judging import exchange

        exercise, path = self.exercise, str(self.path)
        data, problem = self._judge.wait()
        answer = None
        if data is not None:
            try:
                answer = exchange.read_answer(data, declared_checks(exercise))
            except exchange.BadAnswer as exc:
                problem = f"the grader's judge of this submission's evidence answered nonsense ({exc})"
        if answer is not None:
            if answer["usage"] is not None:
                self.context["judge"] = answer["usage"]
            if answer["out_of_memory"]:
                problem = "the grader could not judge this submission's evidence within its memory limit"
            elif answer["overran"]:
                problem = f"{answer['overran']}; {MALFORMED}, or the grader has a fault"
            elif answer["failed"]:
                problem = answer["failed"]
        if problem is not None:
            self._verdict = error_verdict(exercise.id, path, f"The submission could not be graded: {problem}.",
                                          max_points(exercise.id), self.context)
            return
        self._verdict = summarise(exercise.id, path, answer["checks"], self.context, max_points(exercise.id))


MALFORMED = "the grading process sent malformed evidence"


def grade(exercise_id: str, submission: Path, settings: Settings = Settings()) -> Verdict:
    """Grade one submission of one exercise."""
    return Grading(exercise_id, submission, settings).finish()


def grade_pairs(items, settings: Settings = Settings(), jobs: int = 2, runner=Child):
    """Yield (exercise_id, submission, verdict) for (exercise_id, submission) items, in order,
    with up to ``jobs`` gradings going at once (``runner`` starts each child: a fresh process by
    default, a fork of the batch's warm worker with ``grader.workers.Workers()``)."""
    pending: list[Grading] = []
    queue = list(items)
    while queue or pending:
        while queue and len(pending) < max(1, jobs):
            exercise_id, submission = queue.pop(0)
            pending.append(Grading(exercise_id, submission, settings, runner=runner))
        grading = pending.pop(0)
        yield grading.exercise.id, grading.path, grading.finish()


def max_points(exercise_id: str) -> float:
    """Total points of an exercise's checks, read from their declarations without running them."""
    return declarations.max_points(exercises.get(exercise_id))
