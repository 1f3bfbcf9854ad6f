"""``grade EXERCISE --all-backends``: one submission graded on every installed backend, and compared.

Each backend grades the submission with the same seed, so the parent chooses
the same inputs and weight values for all of them. Beside each verdict the
comparison says whether the layer behaves the same everywhere: the same
verdict (every check's status and points), and the same numbers in what the
grading processes observed — every output, every gradient, every call in a
trace — equal within a tolerance. Where they differ it names the first check
whose result differs and the first observation that does: the phase, and in a
traced call the layer call (its index and Keras class). Everything compared
came from a grading process, so shapes and types are checked before any
arithmetic, and sizes are already bounded by the grader's evidence limits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import backends
from .verdict import Verdict

RTOL = 1e-4  # float32 on different kernels: a few ulps through a transformer block
ATOL = 1e-5
MAX_DEPTH = 12
# what differs by nature between backends, or between two runs: never compared
IGNORED_KEYS = frozenset({"seconds", "import_seconds", "backend", "tensorflow", "jax", "jaxlib", "torch", "keras",
                          "numpy", "python", "sandbox", "sandbox_error", "error", "name", "rebuilt_name",
                          "python_class", "path", "signature"})
PHASES_NOT_COMPARED = frozenset({"runtime", "load", "tensorflow_calls"})


@dataclass
class Difference:
    """Where one backend's grading first differs from the reference backend's."""

    backend: str
    check: str | None = None  # the first check whose status or points differ
    check_detail: str | None = None
    phase: str | None = None  # the first phase whose observations differ
    call: str | None = None  # and in it, the first traced layer call whose numbers differ
    detail: str | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class Comparison:
    reference: str
    verdicts: dict[str, Verdict]
    differences: list[Difference] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # backend -> why it was not graded

    @property
    def portable(self) -> bool:
        return not self.differences

    def to_json(self) -> dict:
        """The reference verdict's JSON with three fields more: each backend's verdict in brief,
        whether the layer behaves the same on all, and where it first does not."""
        data = self.verdicts[self.reference].to_json()
        data["backends"] = [{"backend": name, "status": v.status, "score": v.score, "max_score": v.max_score,
                             "error": v.error} for name, v in self.verdicts.items()]
        data["backends_not_installed"] = dict(self.skipped)
        data["portable"] = self.portable
        data["differences"] = [d.to_json() for d in self.differences]
        return data


def grade_all(exercise_id: str, submission: Path, settings, names: list[str] | None = None) -> Comparison:
    """Grade on each of ``names`` (default: every installed backend), the settings' backend first."""
    from .api import Grading

    names, shared = plan(settings, names)
    verdicts, runs = {}, {}
    for name in names:
        grading = Grading(exercise_id, submission, dataclasses.replace(shared, backend=name))
        verdicts[name] = grading.finish()
        runs[name] = grading.run
    return comparison(names, verdicts, runs, settings)


def plan(settings, names: list[str] | None = None):
    """(the backends to grade on, in order; the settings each grading takes, one seed for all)."""
    from .protocol import job as inputs

    installed = backends.available()
    names = names or [settings.backend, *[n for n in installed if n != settings.backend]]
    seed = settings.seed if settings.seed is not None else inputs.new_seed()
    return names, dataclasses.replace(settings, seed=seed)


def comparison(names: list[str], verdicts: dict[str, Verdict], runs: dict, settings) -> Comparison:
    """The comparison of the gradings ``plan`` asked for: ``verdicts`` and ``runs`` (what each
    grading process sent) by backend. The seed is shown as the student's only if they gave it."""
    for verdict in verdicts.values():
        verdict.context["seed_given"] = settings.seed is not None
    installed = backends.available()
    result = Comparison(names[0], verdicts, skipped={n: "not installed" for n in backends.NAMES if n not in installed})
    for name in names[1:]:
        found = compare(names[0], verdicts[names[0]], runs[names[0]], name, verdicts[name], runs[name])
        if found is not None:
            result.differences.append(found)
    return result


def compare(reference: str, ref_verdict: Verdict, ref_run, name: str, verdict: Verdict, run) -> Difference | None:
    """The first difference of ``name``'s grading from ``reference``'s, or None when they agree."""
    difference = Difference(name)
    if ref_verdict.status != verdict.status or (ref_verdict.error is None) != (verdict.error is None):
        difference.check_detail = (f"{backends.title(reference)}: {ref_verdict.status}, "
                                   f"{backends.title(name)}: {verdict.status}")
    theirs = {c.id: c for c in verdict.checks}
    for check in ref_verdict.checks:
        other = theirs.get(check.id)
        if other is None or other.status != check.status or abs(other.points - check.points) > 1e-9:
            difference.check = check.id
            difference.check_detail = (f"{check.status} on {backends.title(reference)}, "
                                       f"{other.status if other else 'not run'} on {backends.title(name)}")
            break
    if ref_run is not None and run is not None:
        found = first_phase_difference(ref_run.phases, run.phases)
        if found is not None:
            difference.phase, difference.call, difference.detail = found
    elif (ref_run is None) != (run is None):
        difference.detail = f"the submission ran on only one of {backends.title(reference)} and {backends.title(name)}"
    if difference.check is None and difference.check_detail is None and difference.phase is None \
            and difference.detail is None:
        return None
    return difference


def first_phase_difference(reference: dict, other: dict) -> tuple[str, str | None, str] | None:
    """(phase, call or None, what differs) for the first phase, in the reference's order, whose
    observations differ; None when every phase agrees."""
    for phase, record in reference.items():
        if phase in PHASES_NOT_COMPARED or phase.startswith("load:"):
            continue
        theirs = other.get(phase)
        if theirs is None:
            return phase, None, "it did not run on the other backend"
        if bool(record.get("ok")) != bool(theirs.get("ok")):
            failing = theirs if record.get("ok") else record
            error = failing.get("error") or {}
            return phase, None, (f"it raised {str(error.get('type', 'an error'))[:60]} on one backend only: "
                                 f"{str(error.get('message', '')).strip().splitlines()[0][:160] if error.get('message') else ''}")
        mine, yours = record.get("data") or {}, theirs.get("data") or {}
        observation, observed = mine.get("observation"), yours.get("observation")
        if isinstance(observation, dict) and isinstance(observed, dict):
            call = first_call_difference(observation.get("trace"), observed.get("trace"))
            found = first_value_difference(observation.get("output"), observed.get("output"), "output")
            if call is not None:
                return phase, call[0], call[1]
            if found is not None:
                return phase, None, found
        found = first_value_difference({k: v for k, v in mine.items() if k != "observation"},
                                       {k: v for k, v in yours.items() if k != "observation"}, "")
        if found is not None:
            return phase, None, found
    for phase in other:
        if phase not in reference and phase not in PHASES_NOT_COMPARED and not phase.startswith("load:"):
            return phase, None, "it ran on the other backend only"
    return None


def first_call_difference(reference, other) -> tuple[str, str] | None:
    """The first traced layer call whose tensors differ: ("call 3, MultiHeadAttention", what differs)."""
    if not isinstance(reference, list) or not isinstance(other, list):
        return None
    differing = []
    for mine, yours in zip(reference, other):
        if not isinstance(mine, dict) or not isinstance(yours, dict):
            return None
        label = f"call {mine.get('index')}, {str(mine.get('python_class') or mine.get('class'))[:60]}"
        if mine.get("class") != yours.get("class"):
            return label, f"the other backend called {str(yours.get('class'))[:60]} here"
        inputs = first_value_difference(mine.get("inputs"), yours.get("inputs"), "inputs")
        found = inputs or first_value_difference(mine.get("constants"), yours.get("constants"), "constants") \
            or first_value_difference(mine.get("output"), yours.get("output"), "output")
        if found is not None:
            differing.append((inputs is None, label, found, mine))
    # where a difference starts: the first call that received the same tensors and gave other ones,
    # and inside which no call did (the calls around it, the layer itself included, differ only
    # because it does)
    starts = [item for item in differing if item[0]]
    for item in starts:
        index = item[3].get("index")
        if not any(index in _ancestors(other[3], reference) for other in starts if other is not item):
            return item[1], item[2]
    if differing:
        return differing[0][1], differing[0][2]
    if len(reference) != len(other):
        return (f"call {min(len(reference), len(other))}",
                f"{len(reference)} layer calls on one backend, {len(other)} on the other")
    return None


def _ancestors(event: dict, trace: list) -> set:
    """The indices of the calls ``event`` ran inside (links always point to earlier events)."""
    found, parent = set(), event.get("parent")
    while isinstance(parent, int) and not isinstance(parent, bool) and 0 <= parent < len(trace) \
            and parent not in found:
        found.add(parent)
        parent = trace[parent].get("parent") if isinstance(trace[parent], dict) else None
    return found


def first_value_difference(mine, yours, where: str, depth: int = 0) -> str | None:
    """What first differs between two values of evidence (arrays within tolerance), or None."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(mine, np.ndarray) or isinstance(yours, np.ndarray):
        return _array_difference(mine, yours, where)
    if isinstance(mine, dict) and isinstance(yours, dict):
        for key in mine:
            if key in IGNORED_KEYS:
                continue
            if key not in yours:
                return f"{_at(where, key)} is missing on the other backend"
            found = first_value_difference(mine[key], yours[key], _at(where, key), depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(mine, list) and isinstance(yours, list):
        if len(mine) != len(yours):
            return f"{where or 'a list'} has {len(mine)} items on one backend, {len(yours)} on the other"
        for index, (a, b) in enumerate(zip(mine, yours)):
            found = first_value_difference(a, b, f"{where}[{index}]", depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(mine, float) and isinstance(yours, float):
        if not np.isclose(mine, yours, rtol=RTOL, atol=ATOL, equal_nan=True):
            return f"{where or 'a value'} is {mine:.6g} on one backend, {yours:.6g} on the other"
        return None
    if type(mine) is not type(yours) or mine != yours:
        if isinstance(mine, str) and isinstance(yours, str):
            return f"{where or 'a value'} differs"
        return f"{where or 'a value'} is {str(mine)[:60]} on one backend, {str(yours)[:60]} on the other"
    return None


def _array_difference(mine, yours, where: str) -> str | None:
    if not isinstance(mine, np.ndarray) or not isinstance(yours, np.ndarray):
        return f"{where or 'a value'} is a tensor on one backend only"
    if mine.shape != yours.shape:
        return f"{where or 'a tensor'} has shape {tuple(mine.shape)} on one backend, {tuple(yours.shape)} on the other"
    if mine.dtype.kind == "b" or yours.dtype.kind == "b":
        if not np.array_equal(mine.astype(bool), yours.astype(bool)):
            return f"{where or 'a mask'} differs in {int(np.sum(mine.astype(bool) != yours.astype(bool)))} places"
        return None
    a, b = mine.astype(np.float64), yours.astype(np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        same = np.array_equal(np.isfinite(a), np.isfinite(b)) and np.allclose(
            np.nan_to_num(a), np.nan_to_num(b), rtol=RTOL, atol=ATOL)
        return None if same else f"{where or 'a tensor'} has NaN or infinity on one backend only"
    scale = max(float(np.max(np.abs(a), initial=0.0)), 1.0)
    gap = float(np.max(np.abs(a - b), initial=0.0))
    if gap > ATOL * scale + RTOL * float(np.max(np.abs(b), initial=0.0)):
        return f"{where or 'a tensor'} differs by up to {gap:.3g}"
    return None


def _at(where: str, key) -> str:
    return f"{where}.{key}" if where else str(key)
