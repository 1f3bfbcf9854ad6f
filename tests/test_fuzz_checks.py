"""No check raises, whatever evidence it is given: every check ends passed, failed or skipped, with
a message, and the grader's own faults are named as the grader's.

The evidence is recorded once — the judge requests of the catalogue's gradings
(``catalog_requests``: every catalogued mistake and variant, each exercise's
solution and stub) — and judged again in this process, as recorded and with
the layer's outputs broken as a wrong layer breaks them: a longer or shorter
sequence, another rank, NaN and infinite values. A broken output must fail the
exercise's output check, and a check kept from observing its fact by that
failure is skipped and points to another check, never to itself.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from grader import exercises
from grader.judging import exchange
from grader.judging.judgment import judge

from .catalog import catalog
from grader.judging.declarations import declared_checks

EXERCISES = list(exercises.EXERCISES)
STATUSES = {"passed", "failed", "skipped"}
RAISED = "The grader could not finish this check"  # what the judge says of a check that raised (plugin.classify)
JUDGE_SECONDS = 3600.0  # the checks' own limit is not what these tests measure: a busy machine must pass
OUTPUT_CHECK = {"exercise5": "api.model"}  # the check that reports a broken output ("api.output_shape" else)
# where a phase's data holds what the student's layer (or model) returned
OUTPUT_KEYS = ("rebuilt_output", "original_output", "before", "after", "layer", "model")


def _longer(a):
    return np.concatenate([a, a[:, -1:]], axis=1) if a.ndim >= 2 else np.concatenate([a, a[-1:]])


def _shorter(a):
    return a[:, :-1] if a.ndim >= 2 else a[:-1]


def _nan(a):
    a = a.copy()
    a.flat[a.size // 2] = np.nan
    return a


def _inf(a):
    a = a.copy()
    a.flat[0] = np.inf
    return a


BREAKS = {  # how a wrong layer's output differs from a right one's
    "longer_sequence": _longer,
    "shorter_sequence": _shorter,
    "extra_axis": lambda a: a[..., None],
    "missing_axis": lambda a: a[..., 0],
    "scalar": lambda a: np.asarray(a.sum(), dtype=a.dtype),
    "one_nan": _nan,
    "one_inf": _inf,
    "all_nan": lambda a: np.full_like(a, np.nan),
    "all_minus_inf": lambda a: np.full_like(a, -np.inf),
}


def _is_output(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.ndim >= 1


def break_outputs(run, change):
    """A copy of ``run`` in which everything the layer returned is ``change``d: every phase's
    observed output, the outputs compared across a rebuild or a .keras file, the repeated calls."""
    run = copy.deepcopy(run)
    for record in run.phases.values():
        data = record.get("data")
        if not isinstance(data, dict):
            continue
        observation = data.get("observation")
        if isinstance(observation, dict) and _is_output(observation.get("output")):
            observation["output"] = change(observation["output"])
        for key in OUTPUT_KEYS:
            value = data.get(key)
            if _is_output(value):
                data[key] = change(value)
            elif isinstance(value, list):
                data[key] = [change(v) if _is_output(v) else v for v in value]
    return run


def poison_everything(value):
    """Every floating-point array anywhere in ``value`` as NaN: the traced layers' tensors, the
    gradients, the outputs."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return np.full_like(value, np.nan)
    if isinstance(value, dict):
        return {k: poison_everything(v) for k, v in value.items()}
    if isinstance(value, list):
        return [poison_everything(v) for v in value]
    return value


def judged(request: bytes, change=None) -> tuple[str, dict]:
    """(exercise id, {check id: result}) of the request's evidence, judged here; ``change(run)``
    alters the evidence first."""
    header, run = exchange.read_request(request)
    if change is not None:
        run = change(run)
    answer = judge(header["exercise"], header["job"], header["secrets"], run, JUDGE_SECONDS)
    assert answer["failed"] is None and answer["overran"] is None and not answer["out_of_memory"], answer
    return header["exercise"], {c["id"]: c for c in answer["checks"]}


def assert_every_check_ends_well(checks: dict, where) -> None:
    declared = {c["id"] for c in declared_checks(exercises.get(where[0]))}
    assert set(checks) == declared, where
    for check_id, result in checks.items():
        # a check that raised is the grader's fault, shown on the student's check: never
        assert not result["message"].startswith(RAISED), (where, check_id, result["message"][:500])
        if result["status"] == "error":  # evidence that does not exist, and why (the grading process's end)
            assert result["message"].startswith("Not checked:"), (where, check_id, result["message"][:500])
        else:
            assert result["status"] in STATUSES, (where, check_id, result["status"], result["message"][:500])
        if result["status"] != "passed":
            assert result["message"].strip(), (where, check_id)
        if result["status"] == "skipped":
            assert f"see {check_id})" not in result["message"], (where, check_id, result["message"])
            assert f"see check {check_id})" not in result["message"], (where, check_id, result["message"])
            cause = result.get("cause")
            if cause is not None:  # points to a check that reports the cause, not to one that passed
                assert cause != check_id and cause in checks, (where, check_id, cause)
                assert checks[cause]["status"] != "passed", (where, check_id, cause, result["message"])


def _names(exercise_id: str) -> list[str]:
    mistakes, variants = catalog(exercise_id)
    return ["solution", "stub"] + [f"mistake_{m.name}" for m in mistakes] + [f"variant_{v.name}" for v in variants]


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_no_check_raises_on_the_catalogues_evidence(catalog_requests, exercise_id):
    """Every catalogued mistake and variant as recorded, and again with one of the broken outputs
    (a different one for each submission, in turn)."""
    judged_any = 0
    breaks = sorted(BREAKS)
    for position, name in enumerate(_names(exercise_id)):
        request = catalog_requests.get((exercise_id, name))
        if request is None:
            continue  # ended before its checks (a syntax error, a refusal): nothing to judge
        _, checks = judged(request)
        assert_every_check_ends_well(checks, (exercise_id, name))
        broken = breaks[position % len(breaks)]
        _, checks = judged(request, lambda run: break_outputs(run, BREAKS[broken]))
        assert_every_check_ends_well(checks, (exercise_id, name, broken))
        judged_any += 1
    assert judged_any >= len(_names(exercise_id)) - 2, "the catalogue's evidence was not recorded"


@pytest.mark.parametrize("exercise_id", EXERCISES)
@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_a_broken_output_is_one_failure_of_the_output_check(catalog_requests, exercise_id, broken):
    """The solution's evidence with its outputs broken: the output check fails, and it alone; the
    checks that cannot observe their fact on such an output are skipped and point to it."""
    exercise, checks = judged(catalog_requests[(exercise_id, "solution")],
                              lambda run: break_outputs(run, BREAKS[broken]))
    assert_every_check_ends_well(checks, (exercise_id, broken))
    output_check = OUTPUT_CHECK.get(exercise, "api.output_shape")
    failed = [k for k, c in checks.items() if c["status"] == "failed"]
    assert failed == [output_check], {k: checks[k]["message"][:300] for k in failed}
    skipped = {k: c.get("cause") for k, c in checks.items() if c["status"] == "skipped"}
    assert skipped and set(skipped.values()) == {output_check}, skipped
    if "nan" in broken or "inf" in broken:
        message = checks[output_check]["message"].lower()
        assert "nan" in message or "inf" in message, message


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_no_check_raises_when_every_number_is_nan(catalog_requests, exercise_id):
    def poisoned(run):
        run = copy.deepcopy(run)
        for record in run.phases.values():
            if record.get("phase") not in ("runtime", "load") and isinstance(record.get("data"), dict):
                record["data"] = poison_everything(record["data"])
        return run

    _, checks = judged(catalog_requests[(exercise_id, "solution")], poisoned)
    assert_every_check_ends_well(checks, (exercise_id, "nan everywhere"))
    assert all(c["status"] != "passed" or c["topic"] not in ("weights", "gradients", "mask", "forward")
               for c in checks.values()), {k: c["status"] for k, c in checks.items()}


@pytest.mark.parametrize("exercise_id", [e for e in EXERCISES if e != "exercise5"])
def test_a_nan_output_is_one_failure_that_the_config_checks_point_to(catalog_requests, exercise_id):
    _, checks = judged(catalog_requests[(exercise_id, "solution")], lambda run: break_outputs(run, _nan))
    assert checks["api.output_shape"]["status"] == "failed"
    for check_id in ("config.from_config", "config.keras_file"):
        assert checks[check_id]["status"] == "skipped", (check_id, checks[check_id]["message"])
        assert checks[check_id]["cause"] == "api.output_shape", checks[check_id]
