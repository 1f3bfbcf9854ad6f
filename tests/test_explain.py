"""`grade explain exercise3`: experiments on the encoder, judged by the parent, rendered at a fixed width.

Two real runs, shared by fixtures and with a small plan: a shared-norm
submission (the reference encoder becomes the subject, and the submission is
recognised as sharing its norm) and the solution (the student's encoder is
the subject). Both run the same encoder code with the same seed, so their
measurements must be identical. Everything else is checked on synthetic
numbers: each verdict rule can give each verdict, malformed records are
refused, and the report reads at 80 columns.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from rich.console import Console

from grader import cli, exercises
from grader.explain import run as explain_module
from grader.explain.run import Explanation, Plan, explain, read_run
from grader.explain.claims import (
    CLAIMS, INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, RecordError, all_claims, inputs_differ,
    parameter_count, parameters_diverge, shared_couples, sharing_cost, validate_seed, validate_structure,
)
from grader.explain.report import render, sparkline
from grader.api import Settings
from grader.sandbox.evidence import ChildRun

from .catalog import catalog

EXERCISE = exercises.get("exercise3")
SMALL = Plan(steps=30, train_count=128, test_count=64)
SETTINGS = Settings(seed=5, timeout=900)
CLAIM_IDS = ["inputs_differ", "parameters_diverge", "shared_couples", "sharing_cost", "parameter_count"]


def shared_norm_source() -> str:
    mistakes, _ = catalog("exercise3")
    return next(m.source for m in mistakes if m.name == "shared_norm")


@pytest.fixture(scope="module")
def shared_explanation(tmp_path_factory) -> Explanation:
    path = tmp_path_factory.mktemp("explain") / "shared_norm.py"
    path.write_text(shared_norm_source(), encoding="utf-8")
    return explain("exercise3", path, SETTINGS, SMALL)


@pytest.fixture(scope="module")
def solution_explanation() -> Explanation:
    return explain("exercise3", EXERCISE.solution, SETTINGS, SMALL)


def numbers(value):
    """Every number inside a measured dict."""
    if isinstance(value, dict):
        for item in value.values():
            yield from numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from numbers(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def assert_contract(document: dict):
    assert set(document) == {"exercise", "submission", "subject", "claims"}
    assert document["exercise"] == "exercise3" and document["subject"] in ("student", "reference")
    assert [c["id"] for c in document["claims"]] == CLAIM_IDS
    for claim in document["claims"]:
        assert set(claim) == {"id", "claim", "measured", "verdict", "summary"}
        assert claim["verdict"] in (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE) and claim["summary"] and claim["claim"] == CLAIMS[claim["id"]]
        assert isinstance(claim["measured"], dict) and claim["measured"]["criterion"]
        assert all(math.isfinite(n) for n in numbers(claim["measured"]))


# --------------------------------------------------------------------------- real runs


def test_reference_experiments_give_the_expected_structure_of_results(shared_explanation):
    explanation = shared_explanation
    assert explanation.error is None and explanation.problems == [] and explanation.exit_code == 0
    document = json.loads(json.dumps(explanation.to_json()))  # the JSON form survives a round trip
    assert_contract(document)
    claims = {c["id"]: c for c in document["claims"]}
    # robust at any scale: the residual sums feed the norms very differently scaled inputs, and two norms
    # hold exactly one more gamma and beta
    assert claims["inputs_differ"]["verdict"] == SUPPORTED
    assert claims["parameter_count"]["verdict"] == SUPPORTED
    assert claims["parameter_count"]["measured"]["difference"] == 2 * SMALL.embed_dim
    cost = claims["sharing_cost"]["measured"]
    assert cost["seeds"] == [5, 6, 7]
    assert len(cost["two_norms"]["per_seed_test_loss"]) == 3 == len(cost["shared_norm"]["per_seed_test_loss"])
    coupling = claims["shared_couples"]["measured"]
    assert coupling["equivalence"]["relative_gradient_mismatch"] < 1e-3  # the tied model is a shared norm
    assert len(coupling["first_seed_angles"]) == SMALL.steps
    assert all(0 <= a <= 180 for a in coupling["first_seed_angles"])


def test_a_shared_norm_encoder_is_recognised_and_is_not_the_subject(shared_explanation):
    assert shared_explanation.subject == "reference"
    assert shared_explanation.shared_norm is True
    assert shared_explanation.context["submission_norms"] == {"calls": 2, "distinct": 1}
    assert "weights.two_norms" in shared_explanation.subject_reason
    assert "one norm shared by both places" in shared_explanation.subject_reason
    out = text(shared_explanation)
    assert "Your encoder shares one norm" in out and "the reference encoder" in out


@pytest.mark.slow
def test_an_encoder_that_passes_is_the_subject(solution_explanation):
    assert solution_explanation.subject == "student" and solution_explanation.shared_norm is False
    assert solution_explanation.error is None and solution_explanation.exit_code == 0
    assert "passed every structure check" in solution_explanation.subject_reason
    assert "Your encoder shares one norm" not in text(solution_explanation)


@pytest.mark.slow
def test_the_same_encoder_and_seed_give_the_same_numbers(shared_explanation, solution_explanation):
    """The solution is the reference encoder's code: the two runs differ in subject only."""
    assert solution_explanation.submission == str(EXERCISE.solution)
    ours = [(c.id, c.measured, c.verdict, c.summary) for c in solution_explanation.claims]
    theirs = [(c.id, c.measured, c.verdict, c.summary) for c in shared_explanation.claims]
    assert ours == theirs


# --------------------------------------------------------------------------- verdict rules on synthetic numbers

E, STEPS = 4, 12


def halves(mean, std):
    half = {"mean": np.full(E, mean, float), "std": np.full(E, std, float), "count": 40}
    return {"even": half, "odd": {**half, "mean": half["mean"] + 0.001}}


def split(g1, g2):
    g1, g2 = np.asarray(g1, float), np.asarray(g2, float)
    return {"gamma_first": g1, "gamma_second": g2, "beta_first": g1, "beta_second": g2,
            "routed_gamma": g1 + g2, "routed_beta": g1 + g2, "output_difference": 0.0}


def seed_record(seed=0, spreads=(0.05, 1.0), updates=((0.2, 0, 0, 0), (0, 0.2, 0, 0)), gradients=None,
                losses=(0.2, 0.3), accuracies=(0.9, 0.9)):
    g1, g2 = gradients if gradients is not None else ((1.0, 0, 0, 0), (0, 1.0, 0, 0))
    dot = float(np.dot(g1, g2))
    splits = np.tile([np.linalg.norm(g1), np.linalg.norm(g2), dot, np.linalg.norm(g1), np.linalg.norm(g2), dot],
                     (STEPS, 1))
    values_before = [{"gamma": np.ones(E), "beta": np.zeros(E)} for _ in range(2)]
    values_after = [{"gamma": np.ones(E) + np.asarray(u), "beta": np.zeros(E)} for u in updates]
    return {
        "seed": seed,
        "two_norms": {"inputs_before": [halves(0, spreads[0]), halves(0, spreads[1])],
                      "inputs_after": [halves(0, spreads[0]), halves(0, spreads[1])],
                      "values_before": values_before, "values_after": values_after,
                      "losses": np.linspace(0.7, 0.1, STEPS), "test": {"loss": losses[0], "accuracy": accuracies[0]}},
        "shared_norm": {"losses": np.linspace(0.7, 0.1, STEPS), "splits": splits,
                        "test": {"loss": losses[1], "accuracy": accuracies[1]}, "split_after": split(g1, g2)},
    }


STRUCTURE = {"norm_calls": 2, "distinct_norms": 2, "equivalence": split((1, 0, 0, 0), (0, 1, 0, 0)),
             "parameters": {"two_norms": 100, "shared_norm": 92, "per_norm": [8, 8], "encoder_two_norms": 60}}


def test_inputs_differ_rule():
    assert inputs_differ([seed_record(spreads=(0.05, 1.0))]).verdict == SUPPORTED
    assert inputs_differ([seed_record(spreads=(1.0, 1.0))]).verdict == NOT_SUPPORTED
    mixed = [seed_record(0, spreads=(0.05, 1.0)), seed_record(1, spreads=(1.0, 1.0))]
    assert inputs_differ(mixed).verdict == INCONCLUSIVE
    assert inputs_differ([]).verdict == INCONCLUSIVE


def test_parameters_diverge_rule():
    assert parameters_diverge([seed_record(updates=((0.2, 0, 0, 0), (0, 0.2, 0, 0)))]).verdict == SUPPORTED
    same = parameters_diverge([seed_record(updates=((0.2, 0.1, 0, 0), (0.2, 0.1, 0, 0)))])
    assert same.verdict == NOT_SUPPORTED
    still = parameters_diverge([seed_record(updates=((1e-5, 0, 0, 0), (0, 1e-5, 0, 0)))])
    assert still.verdict == INCONCLUSIVE


def test_shared_couples_rule():
    assert shared_couples(STRUCTURE, [seed_record(gradients=((1, 0, 0, 0), (0, 1, 0, 0)))]).verdict == SUPPORTED
    aligned = shared_couples(STRUCTURE, [seed_record(gradients=((1, 0.1, 0, 0), (1, 0, 0, 0)))])
    assert aligned.verdict == NOT_SUPPORTED
    one_place = shared_couples(STRUCTURE, [seed_record(gradients=((1, 0, 0, 0), (0, 0.01, 0, 0)))])
    assert one_place.verdict == NOT_SUPPORTED
    broken = dict(STRUCTURE, equivalence=dict(STRUCTURE["equivalence"], routed_gamma=np.full(E, 5.0)))
    untrusted = shared_couples(broken, [seed_record()])
    assert untrusted.verdict == INCONCLUSIVE and "Not trusted" in untrusted.summary


def test_sharing_cost_rule_and_no_difference_said_plainly():
    worse = [seed_record(i, losses=(0.20 + 0.01 * i, 0.30 + 0.01 * i)) for i in range(3)]
    assert sharing_cost(worse).verdict == SUPPORTED
    better = [seed_record(i, losses=(0.30 + 0.01 * i, 0.20 + 0.01 * i)) for i in range(3)]
    assert sharing_cost(better).verdict == NOT_SUPPORTED
    noisy = [seed_record(i, losses=pair) for i, pair in enumerate([(0.2, 0.25), (0.3, 0.22), (0.25, 0.26)])]
    claim = sharing_cost(noisy)
    assert claim.verdict == INCONCLUSIVE and claim.summary.startswith("Not shown by this run")
    too_few = sharing_cost(worse[:2])
    assert too_few.verdict == INCONCLUSIVE and "missing" in too_few.measured


@pytest.mark.parametrize("shift, verdict", [(0.0030, SUPPORTED), (0.0008, INCONCLUSIVE),
                                            (-0.0030, NOT_SUPPORTED), (-0.0008, INCONCLUSIVE)])
def test_sharing_cost_is_a_finding_only_when_the_difference_exceeds_its_spread_over_seeds(shift, verdict):
    """Every seed moves the same way (the paired interval excludes 0 in all four cases), but the seeds'
    own test losses spread by 0.001: a difference of 0.0008 is not shown by this run, one of 0.003 is."""
    two = [0.0010, 0.0020, 0.0030]  # sd 0.001 over the seeds
    nudge = [0.0, 0.00001, -0.00001]  # the paired differences are not all equal
    seeds = [seed_record(i, losses=(loss, loss + shift + nudge[i])) for i, loss in enumerate(two)]
    claim = sharing_cost(seeds)
    difference, spread = claim.measured["test_loss_difference"], claim.measured["test_loss_spread"]
    assert difference["low"] > 0 or difference["high"] < 0  # the interval alone would have decided
    assert spread == pytest.approx(0.001, rel=0.05) and difference["mean"] == pytest.approx(shift, rel=0.05)
    assert claim.verdict == verdict
    assert claim.measured["difference_beyond_spread"] is (verdict != INCONCLUSIVE)
    assert "spread over seeds" in claim.measured["criterion"]
    assert f"{shift:+.2g}" in claim.summary and "spread over seeds of 0.001" in claim.summary
    if verdict == INCONCLUSIVE:
        assert claim.summary.startswith("Not shown by this run") and "no larger than the seeds' own spread" \
            in claim.summary


def test_the_report_shows_the_difference_and_its_spread():
    """0.0022 against 0.0020 over seeds that spread by 0.001: not a finding, and both numbers are shown."""
    seeds = [seed_record(i, losses=(loss, loss + 0.0002 + 0.00001 * i)) for i, loss in
             enumerate([0.0010, 0.0020, 0.0030])]
    claims = [sharing_cost(seeds) if c.id == "sharing_cost" else c for c in synthetic_explanation().claims]
    explanation = synthetic_explanation(claims=claims)
    flat = " ".join(text(explanation).replace("│", " ").split())
    assert "The classifier trains worse with one shared norm (inconclusive)" in flat
    assert "difference +0.00021, spread over seeds 0.001" in flat
    assert "does not show the classifier training worse" in flat
    detailed = " ".join(text(explanation, details=True).replace("│", " ").split())
    assert "Not shown by this run" in detailed and "is no larger than the test loss's spread over seeds" in detailed
    assert all(len(line) <= 80 for line in text(explanation, details=True).splitlines())


def test_parameter_count_rule():
    claim = parameter_count(STRUCTURE, E)
    assert claim.verdict == SUPPORTED and claim.measured["difference"] == 8
    wrong = dict(STRUCTURE, parameters=dict(STRUCTURE["parameters"], shared_norm=100))
    assert parameter_count(wrong, E).verdict == NOT_SUPPORTED
    assert parameter_count(None, E).verdict == INCONCLUSIVE


# --------------------------------------------------------------------------- malformed records


@pytest.mark.parametrize("damage", [
    lambda r: r.update(seed=True),
    lambda r: r.update(seed="0"),
    lambda r: r["two_norms"].update(losses=np.full(STEPS, np.nan)),
    lambda r: r["two_norms"].update(losses=np.zeros(STEPS + 1)),
    lambda r: r["two_norms"]["test"].update(loss="0.1"),
    lambda r: r["two_norms"]["test"].update(loss=float("inf")),
    lambda r: r["shared_norm"].pop("splits"),
    lambda r: r["shared_norm"].update(splits=np.zeros((STEPS, 5))),
    lambda r: r["two_norms"].update(inputs_before=[halves(0, 1)]),
    lambda r: r["two_norms"]["values_after"][0].update(gamma=np.array(["a"] * E)),
])
def test_malformed_seed_records_are_refused(damage):
    record = seed_record()
    validate_seed(record, E, STEPS)  # the undamaged record is accepted
    damage(record)
    with pytest.raises(RecordError):
        validate_seed(record, E, STEPS)


def test_malformed_structure_is_refused():
    validate_structure(STRUCTURE, E)
    with pytest.raises(RecordError):
        validate_structure(dict(STRUCTURE, parameters=dict(STRUCTURE["parameters"], per_norm=[8])), E)
    with pytest.raises(RecordError):
        validate_structure([], E)


def ended(phase, data, ok=True, error=None):
    return {"event": "end", "phase": phase, "ok": ok, "seconds": 0.1, "data": data, "error": error}


def child_run(**phases) -> ChildRun:
    run = ChildRun(finished=True, returncode=0)
    run.phases = {"runtime": ended("runtime", {"tensorflow": "2.21.0", "sandbox": {"applied": True}}),
                  "load": ended("load", {"class_found": True, "is_layer_subclass": True})}
    run.phases.update({name: ended(name, data) if not isinstance(data, tuple) else ended(name, *data)
                       for name, data in phases.items()})
    return run


PLAN = Plan(seeds=3, steps=STEPS, embed_dim=E)


def read(run, norms=None) -> Explanation:
    return read_run(run, EXERCISE, EXERCISE.solution, "reference", "why", PLAN, {}, norms=norms)


def test_the_header_says_what_confined_the_experiments_as_a_grading_header_does():
    from grader.sandbox import confinement

    assert read(child_run()).context["sandbox"] == confinement.describe({"applied": True})
    report = {"landlock": {"applied": True, "abi": 6, "network": True, "signals": True}, "seccomp": True,
              "namespaces": {"user": False, "pid": True, "mount": True, "network": True, "ipc": True},
              "reaper": "pid-namespace", "own_proc": True, "write_limit": None, "process_limit": 128, "uid": 5,
              "from_root": True, "capabilities": 0, "file_limit": 1, "environment": ["PATH"], "refused": {}}
    run = child_run()
    run.phases["runtime"]["data"]["sandbox"] = report
    line = read(run).context["sandbox"]
    assert line == confinement.describe(report) and "Landlock ABI 6" in line and "seccomp" in line


def test_a_malformed_or_failed_seed_is_reported_and_the_rest_is_still_judged():
    run = child_run(structure=STRUCTURE, seed_0=seed_record(0), seed_1={"seed": "nonsense"},
                    seed_2=({}, False, {"type": "ValueError", "message": "boom"}))
    explanation = read(run)
    assert explanation.error is None and explanation.exit_code == 2
    assert any("seed 2 was reported in a malformed way" in p for p in explanation.problems)
    assert any("seed 3 failed: ValueError: boom" in p for p in explanation.problems)
    claims = {c.id: c for c in explanation.claims}
    assert claims["inputs_differ"].verdict == SUPPORTED  # judged on the one good seed
    assert claims["sharing_cost"].verdict == INCONCLUSIVE and "missing" in claims["sharing_cost"].measured


def test_a_run_that_sent_nothing_usable_is_an_error_not_a_crash():
    run = child_run()
    run.protocol_error = "phase 'structure' was reported twice"
    explanation = read(run)
    assert explanation.error and "malformed evidence" in explanation.error and explanation.exit_code == 2
    assert [c.verdict for c in explanation.claims] == [INCONCLUSIVE] * 5
    assert_contract(json.loads(json.dumps(explanation.to_json())))
    garbage = read(child_run(structure={"norm_calls": "2"}), norms=child_run(submission_structure={"norm_calls": True}))
    assert garbage.exit_code == 2 and garbage.shared_norm is None
    assert any("malformed" in p for p in garbage.problems)


def test_a_failure_of_the_grader_while_judging_is_its_own_error(monkeypatch):
    def broken(structure, seeds, embed_dim, why_missing=None):
        if seeds:
            raise ZeroDivisionError("division by zero")
        return all_claims(structure, seeds, embed_dim, why_missing)

    monkeypatch.setattr(explain_module, "all_claims", broken)
    explanation = read(child_run(structure=STRUCTURE, seed_0=seed_record(0)))
    assert explanation.exit_code == 2
    assert explanation.error.startswith("the grader failed while judging the measurements (ZeroDivisionError")
    assert [c.verdict for c in explanation.claims] == [INCONCLUSIVE] * 5


def test_the_reference_subject_recognises_a_shared_submission_from_its_norm_calls():
    run = child_run(structure=STRUCTURE, seed_0=seed_record(0), seed_1=seed_record(1), seed_2=seed_record(2))
    assert read(run).shared_norm is None  # the experiments' own child never observes the student's encoder
    explanation = read(run, norms=child_run(submission_structure={"norm_calls": 2, "distinct_norms": 1}))
    assert explanation.shared_norm is True and explanation.exit_code == 0
    assert "2 times with only 1 norm layer" in explanation.subject_reason


def test_an_experiment_job_carries_no_reference_and_closes_what_grading_closes(tmp_path):
    """Reads as a grading's: the grader's allow-list (no solution, exercise file, check or judge module
    granted; the package and the clone closed) and the submission's folder closed; and nothing of any
    solution's code in the job (tests/test_explain_containment.py looks inside the running child)."""
    import re

    from grader.exercises.reads import policy
    from grader.location import EXERCISES_DIR, PACKAGE_DIR, SOLUTIONS_DIR

    path = tmp_path / "submitted" / "exercise3.py"
    solutions = [exercise.solution.read_text(encoding="utf-8") for exercise in exercises.EXERCISES.values()]
    lines = {line.strip() for text in solutions
             for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", text, flags=re.S)
             for line in block.splitlines() if len(line.strip()) >= 20}
    assert len(lines) > 50
    for mode in ("experiments", "norms"):
        job = explain_module.experiment_job(EXERCISE, path, mode, SMALL, 0, SETTINGS)
        assert job["mode"] == mode and job["probe"] == "grader.explain.phases"
        sent = json.dumps(job)
        assert [line for line in lines if line in sent] == []
        assert job["reads"] == {key: list(value) for key, value in policy().items()}
        assert str(path.parent) in job["private"]
        granted = [os.path.realpath(p) for p in job["reads"]["grant"]]
        for folder in (SOLUTIONS_DIR, EXERCISES_DIR, PACKAGE_DIR / "judge", PACKAGE_DIR / "judging"):
            assert not [p for p in granted if p.startswith(os.path.realpath(folder) + os.sep)]
        assert not [p for p in granted if os.path.basename(p).startswith("checks.")]
        assert os.path.realpath(PACKAGE_DIR) in job["reads"]["closed"]


# --------------------------------------------------------------------------- rendering


def text(explanation, width=80, details=False, predictions=None) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(render(explanation, details=details, predictions=predictions))
    return console.file.getvalue()


def synthetic_explanation(**changes) -> Explanation:
    seeds = [seed_record(i, losses=(0.2 + 0.01 * i, 0.3 + 0.01 * i)) for i in range(3)]
    fields = dict(exercise="exercise3", submission="/work/exercises/exercise3.py", subject="student",
                  claims=all_claims(STRUCTURE, seeds, E), subject_reason="Your encoder passed every structure check.",
                  shared_norm=False,
                  context={"title": "The Transformer encoder", "seed": 0, "plan": dataclasses.asdict(PLAN),
                           "python": "3.11.7", "tensorflow": "2.21.0", "keras": "3.15.1", "seconds": 40.0,
                           "grading_seconds": 8.0, "experiment_seconds": 32.0})
    fields.update(changes)
    return Explanation(**fields)


def test_report_opens_with_a_plain_answer_from_the_run_and_a_line_or_two_per_claim():
    explanation = synthetic_explanation()
    out = text(explanation)
    assert all(len(line) <= 80 for line in out.splitlines())
    assert out.index("The answer, from this run") < out.index("✓")
    answer = " ".join(out.split("The answer, from this run")[1].split("╰")[0].replace("│", " ").split())
    assert 2 <= answer.count(". ") + 1 <= 3  # two or three sentences
    assert "20-fold" in answer and "90° apart" in answer and "0.31" in answer and "0.21" in answer
    claims = out.split("╯\n")[1].split("╭")[0].strip().splitlines()
    assert len(claims) <= 2 * len(CLAIM_IDS) and sum(line.startswith("✓ ") for line in claims) == len(CLAIM_IDS)
    assert "split-half noise" not in out and "relative gradient mismatch" not in out  # evidence: --details
    assert len(out.splitlines()) <= 30
    detailed = text(explanation, details=True)
    assert "split-half noise" in detailed and "The answer, from this run" in detailed
    inconclusive = dataclasses.replace(explanation, claims=[
        dataclasses.replace(c, verdict=INCONCLUSIVE) if c.id == "sharing_cost" else c for c in explanation.claims])
    assert "does not show the classifier training worse" in " ".join(text(inconclusive).replace("│", " ").split())
    reference = " ".join(text(dataclasses.replace(explanation, subject="reference")).split())
    assert "The reference encoder's two norms" in reference and "Your two norms" not in reference


def test_predictions_asked_first_are_compared_with_the_measurements():
    from grader.explain.report import QUESTIONS, read_predictions

    typed = iter(["y", "No", "maybe", None, "yes"])
    predictions = read_predictions(lambda question: next(typed))
    assert list(predictions) == list(QUESTIONS) == CLAIM_IDS
    assert list(predictions.values()) == ["yes", "no", "?", "?", "yes"]
    out = text(synthetic_explanation(), predictions=predictions)  # every claim supported
    assert all(len(line) <= 80 for line in out.splitlines())
    flat = " ".join(out.split())
    assert "Your predictions: 2 of 3 as measured." in flat
    assert flat.count("as you expected.") == 2 and flat.count("not what you expected.") == 1
    assert "their updates differ by 1.4 times their size. You said no: not what you expected." in flat
    assert flat.count("You were not sure.") == 2
    assert len(out.splitlines()) <= 35
    assert "Your predictions" not in text(synthetic_explanation())


def test_report_reads_at_80_columns():
    out = text(synthetic_explanation(), details=True)
    assert all(len(line) <= 80 for line in out.splitlines())
    assert "exercise3 — The Transformer encoder" in out and "your encoder" in out and "seeds 0, 1, 2" in out
    for number, claim_id in enumerate(CLAIM_IDS, start=1):
        assert f"{number} · {claim_id}" in out
    assert "✓ supported" in out
    assert "x + attention(x)" in out and "h + ffn(h)" in out
    assert "one shared norm" in out and "95% interval" in out
    assert "5 supported" in out and "0 not supported" in out
    assert "…" not in out  # nothing in a table is cut off


def test_report_shows_errors_lost_measurements_and_a_shared_norm():
    explanation = synthetic_explanation(
        subject="reference", shared_norm=True, error="the experiment process could not start: killed",
        problems=["seed 2 was not reported"],
        claims=all_claims(None, [], E, "the experiment process could not start: killed"))
    out = text(explanation)
    assert all(len(line) <= 80 for line in out.splitlines())
    assert "The experiments could not run" in out and "could not start" in out
    assert "Measurements lost" in out and "seed 2 was not reported" in out
    assert "Your encoder shares one norm" in out and "the reference encoder" in out
    assert "5 inconclusive" in out and "Not measured" in out


def test_sparkline_scales():
    assert sparkline([0, 1, 2], 0, 2) == "▁▅█"
    assert sparkline([1, 1]) == "▅▅" and sparkline([]) == ""
    assert sparkline([-5, 5], -5, 5) == "▁█"


# --------------------------------------------------------------------------- the command


ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="80", GRADE_STATE_DIR=tempfile.mkdtemp())


def grade(*args):
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, env=ENV,
                          timeout=300)


def test_explain_refuses_other_exercises_and_missing_files(tmp_path):
    other = grade("explain", "exercise1")
    assert other.returncode == 2 and "exercise3 only" in other.stderr
    missing = grade("explain", "exercise3", "--submission", str(tmp_path / "nowhere.py"))
    assert missing.returncode == 2 and "is not a file" in missing.stderr
    unknown = grade("explain", "exercise9")
    assert unknown.returncode == 2 and "unknown exercise" in unknown.stderr
    assert "grade explain" in grade("--help").stdout


def test_explain_json_and_exit_codes(monkeypatch, capsys):
    calls = []

    def fake(exercise_id, submission, settings, on_progress=None):
        calls.append((exercise_id, submission, settings))
        return synthetic_explanation(submission=str(submission))

    monkeypatch.setattr(explain_module, "explain", fake)
    monkeypatch.delenv("GRADE_TIMEOUT", raising=False)
    assert cli.main(["explain", "exercise3", "--submission", str(EXERCISE.solution), "--json", "--seed", "3"]) == 0
    document = json.loads(capsys.readouterr().out)  # stdout holds only the JSON
    assert_contract(document)
    assert document["submission"] == str(EXERCISE.solution)
    (exercise_id, submission, settings), = calls
    assert exercise_id == "exercise3" and settings.seed == 3 and settings.timeout == explain_module.EXPLAIN_TIMEOUT

    monkeypatch.setattr(explain_module, "explain", lambda *a, **k: synthetic_explanation(problems=["lost"]))
    assert cli.main(["explain", "exercise3", "--submission", str(EXERCISE.solution), "--json"]) == 2
    capsys.readouterr()
    assert cli.main(["explain", "exercise3", "--submission", str(EXERCISE.solution)]) == 2
    assert "Measurements lost" in capsys.readouterr().out


# --------------------------------------------------------------------------- instructions


def test_instructions_hints_and_written_question_point_to_grade_explain():
    assert "grade explain exercise3" in EXERCISE.instructions.read_text(encoding="utf-8")
    assert "grade explain exercise3" in EXERCISE.hints.read_text(encoding="utf-8")
    assert "grade explain exercise3" in exercises.get("exercise3").notebook.written_answer.question
    notebook = (exercises.PROJECT_ROOT / "solutions" / "nbgrader" / "source" / "exercise3" / "exercise3.ipynb")
    assert "grade explain exercise3" in notebook.read_text(encoding="utf-8")
