"""``grade explain exercise3``: measure why the encoder needs two LayerNormalization layers.

The API is ``explain(exercise_id, submission, settings) -> Explanation``. It
grades the submission first; an encoder that passes every structure check
(api, weights, gradients, mask, forward) is the subject of the experiments,
otherwise the reference encoder is, and the explanation says why (and, from
the student's own encoder, whether it shares one norm between both places).
The experiments run in a grading child (``grader.sandbox.process.Child``, the probe
``grader/explain/phases.py``): the same scratch copy, time and memory
limits, Landlock allow-list of readable files and closed submission folder as
grading. A child holds one encoder's code and the grader's experiments, whose
classifier is built of Keras's own layers: a child running the student's
encoder holds nothing of a reference, and the child running the reference
encoder holds nothing of the student's. When the reference is the subject, the
student's encoder is observed in a child of its own, which sends back two
counts (its norm calls and its distinct norms). The parent never imports
TensorFlow; it checks the form of every number a child sends and decides
each claim's verdict itself (``grader.explain.claims``). An explanation is
information, never a score.
"""

from __future__ import annotations

import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..sandbox import confinement
from .. import exercises
from ..exercises.reads import policy as grading_reads
from .claims import Claim, RecordError, all_claims, validate_seed, validate_structure
from ..api import Settings, grade
from ..exercises.exercise5.job import DIMS as CLASSIFIER_DIMS
from ..protocol.job import child_job
from ..sandbox.evidence import ChildRun
from ..sandbox.process import STARTUP_SECONDS, Child
from ..submission import SubmissionError, read_submission
from ..verdict import EXIT_ERROR, EXIT_PASSED, Verdict

EXPLAINABLE = ("exercise3",)
DEFAULT_SEED = 0
EXPLAIN_TIMEOUT = 600.0  # the command's default limit for each child: training takes longer than grading
STRUCTURE_TOPICS = ("api", "weights", "gradients", "mask", "forward")


@dataclass(frozen=True)
class Plan:
    """The sizes of the experiments: a small classifier on the synthetic task, trained briefly."""

    seeds: int = 3
    steps: int = 150
    batch: int = 32
    learning_rate: float = 0.003
    train_count: int = 512
    test_count: int = 256
    vocab_size: int = CLASSIFIER_DIMS["vocab_size"]
    sequence_length: int = CLASSIFIER_DIMS["sequence_length"]
    embed_dim: int = CLASSIFIER_DIMS["embed_dim"]
    dense_dim: int = CLASSIFIER_DIMS["dense_dim"]
    num_heads: int = CLASSIFIER_DIMS["num_heads"]

    def __post_init__(self):
        for name in ("seeds", "steps", "batch", "train_count", "test_count", "embed_dim", "dense_dim", "num_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.test_count < 4:
            raise ValueError("test_count must be at least 4 (two halves of at least two examples)")

    @property
    def encoder_dims(self) -> dict:
        return {"embed_dim": self.embed_dim, "dense_dim": self.dense_dim, "num_heads": self.num_heads}

    def experiment(self, seed: int) -> dict:
        dims = dict(self.encoder_dims, vocab_size=self.vocab_size, sequence_length=self.sequence_length)
        return {"seeds": [seed + i for i in range(self.seeds)], "steps": self.steps, "batch": self.batch,
                "learning_rate": self.learning_rate, "train_count": self.train_count,
                "test_count": self.test_count, "dims": dims}


@dataclass
class Explanation:
    exercise: str
    submission: str
    subject: str  # "student" or "reference"
    claims: list[Claim]
    subject_reason: str
    shared_norm: bool | None = None  # the submission applies one norm at both places (None: not known)
    error: str | None = None  # why the experiments could not run
    problems: list[str] = field(default_factory=list)  # measurements that were lost, and why
    context: dict = field(default_factory=dict)  # settings, versions, timings: shown, not in the JSON

    @property
    def exit_code(self) -> int:
        """0 when every experiment reported, 2 when the experiments could not run or lost measurements."""
        return EXIT_PASSED if self.error is None and not self.problems else EXIT_ERROR

    def to_json(self) -> dict:
        return {"exercise": self.exercise, "submission": self.submission, "subject": self.subject,
                "claims": [claim.to_json() for claim in self.claims]}


def explain(exercise_id: str, submission: Path, settings: Settings = Settings(), plan: Plan = Plan(),
            on_progress=None) -> Explanation:
    """Grade ``submission``, choose the subject, run the experiments and judge each claim.

    ``settings.seed`` seeds the experiments (default 0, so a run is repeatable; the grading pass
    keeps its own secret seed when none is given). ``on_progress(text)`` hears what is running."""
    exercise = exercises.get(exercise_id)
    if exercise.id not in EXPLAINABLE:
        raise ValueError(f"grade explain measures {', '.join(EXPLAINABLE)} only, not {exercise.id}")
    path = Path(submission).resolve()
    seed = DEFAULT_SEED if settings.seed is None else settings.seed
    say = on_progress or (lambda text: None)
    started = time.perf_counter()

    say(f"Grading {path.name} to choose the encoder to experiment on …")
    verdict = grade(exercise.id, path, settings)
    subject, reason = choose_subject(verdict)
    graded_seconds = time.perf_counter() - started
    student_source = None
    if verdict.status != "error":
        try:
            student_source = read_submission(path).text
        except SubmissionError:
            student_source = None
    if subject == "student" and student_source is None:
        subject, reason = "reference", "Your submission could not be read again after grading."
    context = {"title": exercise.title, "seed": seed, "seed_given": settings.seed is not None, "plan": asdict(plan),
               "timeout": settings.timeout, "memory_mb": settings.memory_mb, "python": platform.python_version(),
               "score": (verdict.score, verdict.max_score), "grading_status": verdict.status,
               "grading_seconds": round(graded_seconds, 2)}

    explanation = _experiment(exercise, path, subject, reason, student_source, settings, plan, seed, say, context)
    if subject == "student" and explanation.context.get("structure_failed"):
        why = explanation.context["structure_failed"]
        say("Your encoder's norms could not be observed; running on the reference encoder …")
        explanation = _experiment(
            exercise, path, "reference",
            f"Your encoder passed the structure checks, but the experiments could not observe its two norms ({why}).",
            student_source, settings, plan, seed, say, context)
    explanation.context["seconds"] = round(time.perf_counter() - started, 2)
    return explanation


def choose_subject(verdict: Verdict) -> tuple[str, str]:
    """("student" or "reference", why) from the grading verdict."""
    if verdict.status == "error":
        first = (verdict.error or "").splitlines()[0] if verdict.error else "it could not be graded"
        return "reference", f"Your submission could not be graded ({first})"
    unfinished = [c for c in verdict.checks if c.topic in STRUCTURE_TOPICS and c.status != "passed"]
    if not verdict.checks or unfinished:
        names = ", ".join(c.id for c in unfinished[:4]) + (" …" if len(unfinished) > 4 else "")
        return "reference", f"Your encoder did not pass every structure check ({names or 'none ran'})"
    return "student", "Your encoder passed every structure check (" + ", ".join(STRUCTURE_TOPICS) + ")"


def _experiment(exercise, path: Path, subject: str, reason: str, student_source: str | None, settings: Settings,
                plan: Plan, seed: int, say, context: dict) -> Explanation:
    """The experiments in one child, on the student's encoder or on the reference's; beside the reference,
    the student's encoder in a child of its own, for its norm counts only."""
    subject_source = student_source if subject == "student" else exercise.solution.read_text(encoding="utf-8")
    say(f"Running the experiments on the {'reference' if subject == 'reference' else 'your'} encoder "
        f"({plan.seeds} seeds x 2 variants x {plan.steps} steps) …")

    def respond(record: dict):
        if record.get("event") == "end" and str(record.get("phase", "")).startswith("seed_"):
            index = record["phase"].removeprefix("seed_")
            say(f"Seed {int(index) + 1 if index.isdigit() else index} of {plan.seeds} done …")
        return None

    started = time.perf_counter()
    norms = None
    if subject == "reference" and student_source is not None:  # started first: it ends well before the training
        norms = Child(experiment_job(exercise, path, "norms", plan, seed, settings), student_source,
                      settings.timeout, settings.memory_mb)
    try:
        run = Child(experiment_job(exercise, path, "experiments", plan, seed, settings), subject_source,
                    settings.timeout, settings.memory_mb, respond=respond).wait()
    except BaseException:
        if norms is not None:
            norms.kill()
            norms.wait()
        raise
    if norms is not None:
        say("Observing how your encoder applies its norms …")
        norms = norms.wait()
    context = dict(context, experiment_seconds=round(time.perf_counter() - started, 2))
    return read_run(run, exercise, path, subject, reason, plan, context, norms=norms)


def experiment_job(exercise, path: Path, mode: str, plan: Plan, seed: int, settings: Settings) -> dict:
    """The job of an experiment child: the plan's sizes and seeds, and what a grading child of ``path``
    may read (the grader's allow-list, with the submission's folder closed as grading closes it).
    Nothing of any reference travels in it: the classifier is built in the child of Keras's own layers."""
    return child_job(
        exercise, settings.memory_mb, reads=grading_reads(), probe="grader.explain.phases",
        public={"constructor_arguments": plan.encoder_dims},
        private=[*settings.private, str(path.parent)],
        mode=mode, experiment=plan.experiment(seed), backend=settings.backend,
    )


def read_run(run: ChildRun, exercise, path: Path, subject: str, reason: str, plan: Plan,
             context: dict, norms: ChildRun | None = None) -> Explanation:
    """The explanation from what the experiment child sent (and, beside a reference subject, the child
    that observed the student's encoder: ``norms``): every record checked for form first."""
    context = dict(context)
    problems: list[str] = []
    error = _run_error(run, subject)
    runtime = run.phases.get("runtime") or {}
    data = runtime.get("data") if runtime.get("ok") and isinstance(runtime.get("data"), dict) else {}
    for key in ("backend", "tensorflow", "jax", "torch", "keras"):
        if key in data:
            context[key] = str(data[key])[:40]
    if data:  # the same line as a grading's header: what confined the child, from its own report
        context["sandbox"] = confinement.describe(data.get("sandbox"))

    structure = None
    record = run.phases.get("structure")
    if record is not None and record.get("ok"):
        try:
            structure = validate_structure(record.get("data"), plan.embed_dim)
        except RecordError as exc:
            problems.append(f"the encoder's structure was reported in a malformed way ({exc})")
    elif record is not None:
        why = _describe(record.get("error"))
        if subject == "student" and error is None:
            context["structure_failed"] = why
        problems.append(f"the encoder's norms could not be observed: {why}")

    seeds = []
    for index in range(plan.seeds):
        record = run.phases.get(f"seed_{index}")
        if record is None:
            if structure is not None and error is None:
                problems.append(f"seed {index + 1} was not reported"
                                + (" (the time limit was reached; try a longer --timeout)" if run.timed_out else ""))
            continue
        if not record.get("ok"):
            problems.append(f"seed {index + 1} failed: {_describe(record.get('error'))}")
            continue
        try:
            seeds.append(validate_seed(record.get("data"), plan.embed_dim, plan.steps))
        except RecordError as exc:
            problems.append(f"seed {index + 1} was reported in a malformed way ({exc})")

    shared_norm = None
    record = norms.phases.get("submission_structure") if norms is not None else None
    if record is not None and record.get("ok") and isinstance(record.get("data"), dict):
        calls, distinct = record["data"].get("norm_calls"), record["data"].get("distinct_norms")
        if all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1000 for v in (calls, distinct)):
            context["submission_norms"] = {"calls": calls, "distinct": distinct}
            shared_norm = distinct < calls
    elif subject == "student" and structure is not None:
        shared_norm = structure["distinct_norms"] < structure["norm_calls"]
    if shared_norm:
        calls = context.get("submission_norms", {}).get("calls", 2)
        distinct = context.get("submission_norms", {}).get("distinct", 1)
        reason += (f". It applies LayerNormalization {calls} times with only {distinct} norm layer(s): one norm "
                   "shared by both places. The experiments compare two norms, so they run on the reference "
                   "encoder; their one-shared-norm variant is what your encoder computes")
    if error is None and structure is None and not seeds:
        error = problems[0] if problems else "the experiments reported nothing"
    try:
        claims = all_claims(structure, seeds, plan.embed_dim, error)
    except Exception as exc:  # the grader's own failure, on numbers that passed the checks of form
        error = f"the grader failed while judging the measurements ({type(exc).__name__}: {exc})"
        claims = all_claims(None, [], plan.embed_dim, error)
    return Explanation(exercise.id, str(path), subject, claims, reason.rstrip(".") + ".", shared_norm, error,
                       problems, context)


def _run_error(run: ChildRun, subject: str) -> str | None:
    """Why the experiment child produced nothing usable, or None."""
    from ..judge.evidence import describe_end

    if run.protocol_error:
        return f"the experiment process sent malformed evidence: {run.protocol_error}"
    runtime = run.phases.get("runtime")
    if runtime is None:
        if run.startup_timed_out:
            return (f"the experiment process did not get ready within {STARTUP_SECONDS:.0f} s (importing TensorFlow "
                    "and confining itself); the machine is probably overloaded: try again")
        if run.timed_out:
            return "the experiment process was stopped while importing TensorFlow"
        return f"the experiment process could not start: {describe_end(run)}"
    if not runtime.get("ok"):
        return f"TensorFlow could not be imported: {_describe(runtime.get('error'))}"
    load = run.phases.get("load")
    who = "your encoder" if subject == "student" else "the reference encoder"
    if load is None or not load.get("ok"):
        return f"{who} could not be loaded for the experiments: {_describe((load or {}).get('error'))}"
    if not (load.get("data") or {}).get("is_layer_subclass"):
        return f"{who} is not a Keras layer class"
    if run.timed_out and run.phases.get("structure") is None:
        return "the experiments did not start within the time limit; try a longer --timeout"
    return None


def _describe(error) -> str:
    if not isinstance(error, dict):
        return "no reason given"
    kind = str(error.get("type") or "Error")[:80]
    message = str(error.get("message") or "").strip().splitlines()
    return f"{kind}: {message[0][:300]}" if message else kind
