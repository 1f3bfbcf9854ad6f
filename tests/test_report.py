"""The report is a pure function of the verdict, checked as text at a fixed width."""

from __future__ import annotations

import io

from rich.console import Console

from grader.report import render
from grader.verdict import CheckResult, Verdict, error_verdict, summarise

CONTEXT = {"title": "The Transformer encoder", "seed": 0, "timeout": 120.0, "memory_mb": 4096,
           "python": "3.11.7", "tensorflow": "2.21.0", "keras": "3.15.1"}


def text(verdict, width=100) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(render(verdict))
    return console.file.getvalue()


def check(id, status, points=1, message=""):
    topic = id.split(".")[0]
    return CheckResult(id, f"title of {id}", topic, status, points if status == "passed" else 0, points, message)


def test_failed_check_shows_what_was_observed_expected_and_why():
    verdict = summarise("exercise3", "/work/ex.py", [
        check("api.constructor", "passed"),
        check("weights.two_norms", "failed", 2,
              "Observed: one LayerNormalization instance was called 2 times.\nExpected: two.\nWhy it matters: gamma."),
    ], CONTEXT)
    out = text(verdict)
    assert "exercise3 — The Transformer encoder" in out
    assert "/work/ex.py" in out and "seed 0" in out and "TensorFlow 2.21.0" in out
    assert "✓" in out and "✗" in out
    assert "Observed: one LayerNormalization instance was called 2 times." in out
    assert "Why it matters: gamma." in out
    assert "Score 1/3" in out and "1 passed" in out and "1 failed" in out
    assert "weights.two_norms" in out.split("Score")[1]  # the summary says where to start
    assert out.index("API") < out.index("Weights")


def test_passed_checks_show_no_message_and_praise():
    out = text(summarise("exercise3", "x.py", [check("api.constructor", "passed", message="hidden")], CONTEXT))
    assert "hidden" not in out and "Every check passed" in out and "Score 1/1" in out


def test_repeated_skip_reasons_are_shown_once():
    reason = "Not checked: your code failed earlier (see check api.constructor)."
    verdict = summarise("exercise3", "x.py", [
        check("api.constructor", "failed", message="Observed: x\nExpected: y\nWhy it matters: z"),
        check("weights.two_norms", "skipped", message=reason),
        check("mask.masks_keys", "skipped", message=reason),
    ], CONTEXT)
    out = text(verdict)
    assert out.count("Not checked") == 1
    assert "2 skipped" in out


def test_timeout_and_error_statuses_have_their_own_marks():
    out = text(summarise("exercise3", "x.py", [
        check("mask.masks_keys", "timeout", message="Not checked: the grading time limit ran out."),
        check("forward.post_norm", "error", message="The grader could not finish this check."),
    ], CONTEXT))
    assert "⏱" in out and "1 timeout" in out and "1 error" in out


def test_error_verdict_shows_the_problem_instead_of_checks():
    out = text(error_verdict("exercise3", "x.py", "Your file has a SyntaxError at line 3, column 9.", 23, CONTEXT))
    assert "Could not grade this submission" in out
    assert "SyntaxError at line 3" in out and "Score 0/23" in out


def test_rendering_fits_the_width():
    verdict = summarise("exercise3", "x.py", [check("forward.post_norm", "failed", 3, "Observed: " + "word " * 80)], CONTEXT)
    assert all(len(line) <= 60 for line in text(verdict, width=60).splitlines())


def test_verdict_json_keeps_the_contract_fields_only():
    verdict = summarise("exercise3", "x.py", [check("api.constructor", "passed")], CONTEXT)
    assert set(verdict.to_json()) == {"exercise", "submission", "status", "score", "max_score", "error", "checks"}
    assert isinstance(verdict, Verdict) and verdict.exit_code == 0
