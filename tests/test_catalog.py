"""The graders catch every named mistake on its topic and accept every correct variant, for every exercise."""

from __future__ import annotations

import pytest

from grader import exercises
from grader.causes import root_causes

from .catalog import catalog
from grader.judging.declarations import declared_checks

EXERCISES = list(exercises.EXERCISES)
MISTAKES = [(e, m) for e in EXERCISES for m in catalog(e)[0]]
VARIANTS = [(e, v) for e in EXERCISES for v in catalog(e)[1]]


def _by_id(verdict):
    return {c.id: c for c in verdict.checks}


@pytest.mark.parametrize("exercise", EXERCISES)
def test_solution_gets_full_marks(catalog_verdicts, exercise):
    verdict = catalog_verdicts[(exercise, "solution")]
    failing = {c.id: c.message for c in verdict.checks if c.status != "passed"}
    assert failing == {}, verdict.error
    assert verdict.status == "passed" and verdict.exit_code == 0
    assert verdict.score == verdict.max_score > 0


@pytest.mark.parametrize("exercise", EXERCISES)
def test_untouched_stub_scores_zero(catalog_verdicts, exercise):
    verdict = catalog_verdicts[(exercise, "stub")]
    assert verdict.status == "failed" and verdict.exit_code == 1, verdict.error
    assert verdict.score == 0
    messages = "\n".join(c.message for c in verdict.checks)
    assert "NotImplementedError" in messages and "This part is still the stub" in messages


@pytest.mark.parametrize("exercise, mistake", MISTAKES, ids=[f"{e}-{m.name}" for e, m in MISTAKES])
def test_mistake_fails_on_its_topic(catalog_verdicts, exercise, mistake):
    """The first named check fails and says why; every other named check fails too, or — when the
    mistake kept it from observing its fact — is not checked and points to a check that failed."""
    verdict = catalog_verdicts[(exercise, f"mistake_{mistake.name}")]
    assert verdict.status == "failed", verdict.error
    checks = _by_id(verdict)
    failed = {c.id for c in verdict.checks if c.status == "failed"}
    for check_id in mistake.failing:
        check = checks[check_id]
        assert check.topic == check_id.split(".")[0]
        assert check.points == 0
        if check_id == mistake.failing[0] or check.status != "skipped":
            assert check.status == "failed", (check_id, check.status, check.message)
        else:
            assert any(f"see {root}" in check.message for root in failed), (check_id, check.message)
    if mistake.only:
        others = {c.id: (c.status, c.message) for c in verdict.checks
                  if c.id not in mistake.failing and c.status != "passed"}
        assert others == {}, others
    first = checks[mistake.failing[0]]
    assert mistake.says in first.message
    assert ("Expected:" in first.message and "Why it matters:" in first.message) or "raised" in first.message
    assert verdict.score < verdict.max_score
    causes = root_causes(verdict.checks)
    if mistake.causes is not None:
        assert len(causes) == mistake.causes, [(c.root.id, [x.id for x in c.also]) for c in causes]
    if mistake.first is not None:
        assert causes[0].root.id == mistake.first, [(c.root.id, [x.id for x in c.also]) for c in causes]


@pytest.mark.parametrize("exercise, variant", VARIANTS, ids=[f"{e}-{v.name}" for e, v in VARIANTS])
def test_correct_variant_passes(catalog_verdicts, exercise, variant):
    verdict = catalog_verdicts[(exercise, f"variant_{variant.name}")]
    failing = {c.id: c.message for c in verdict.checks if c.status != "passed"}
    assert failing == {}, verdict.error
    assert verdict.status == "passed"


def test_every_check_is_proven_by_a_mistake():
    """A check that no catalogued mistake fails could be a check that cannot fail."""
    for exercise_id in EXERCISES:
        ids = {declared["id"] for declared in declared_checks(exercises.get(exercise_id))}
        proven = {check_id for m in catalog(exercise_id)[0] for check_id in m.failing}
        assert ids <= proven, f"{exercise_id}: no mistake fails {sorted(ids - proven)}"
