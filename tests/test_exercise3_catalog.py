"""The exercise3 graders catch every named mistake on its topic and accept every correct variant."""

from __future__ import annotations

import pytest

from .exercise3_catalog import MISTAKES, VARIANTS


def _by_id(verdict):
    return {c.id: c for c in verdict.checks}


def test_solution_gets_full_marks(exercise3_verdicts):
    verdict = exercise3_verdicts["solution"]
    failing = {c.id: c.message for c in verdict.checks if c.status != "passed"}
    assert failing == {}
    assert verdict.status == "passed" and verdict.exit_code == 0
    assert verdict.score == verdict.max_score > 0


def test_untouched_stub_scores_zero(exercise3_verdicts):
    verdict = exercise3_verdicts["stub"]
    assert verdict.status == "failed" and verdict.exit_code == 1
    assert verdict.score == 0
    constructor = _by_id(verdict)["api.constructor"]
    assert constructor.status == "failed"
    assert "NotImplementedError" in constructor.message


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.name)
def test_mistake_fails_on_its_topic(exercise3_verdicts, mistake):
    verdict = exercise3_verdicts[f"mistake_{mistake.name}"]
    assert verdict.status == "failed", verdict.error
    checks = _by_id(verdict)
    for check_id in mistake.failing:
        assert checks[check_id].status == "failed", (check_id, checks[check_id].message)
        assert checks[check_id].topic == check_id.split(".")[0]
        assert checks[check_id].points == 0
    first = checks[mistake.failing[0]]
    assert mistake.says in first.message
    assert "Expected:" in first.message and "Why it matters:" in first.message or "raised" in first.message
    assert verdict.score < verdict.max_score


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_correct_variant_passes(exercise3_verdicts, variant):
    verdict = exercise3_verdicts[f"variant_{variant.name}"]
    failing = {c.id: c.message for c in verdict.checks if c.status != "passed"}
    assert failing == {}, verdict.error
    assert verdict.status == "passed"


def test_same_submission_same_verdict(exercise3_verdicts, tmp_path):
    from .conftest import grade_sources
    from .exercise3_catalog import MISTAKES

    mistake = MISTAKES[0]
    again = grade_sources("exercise3", {"again": mistake.source}, tmp_path)["again"]
    first = exercise3_verdicts[f"mistake_{mistake.name}"]
    assert [c for c in again.checks] == [c for c in first.checks]
    assert again.score == first.score
