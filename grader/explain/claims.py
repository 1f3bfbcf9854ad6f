"""From the experiments' plain numbers to claims with verdicts (``grade explain exercise3``).

Pure NumPy, no TensorFlow. Everything the child sent is first checked for form
(``validate_structure``, ``validate_seed``): types, shapes, finite numbers. Then
each claim of the accepted answer to "why two LayerNormalization layers?" is
judged by a rule stated in advance, written into its ``measured`` numbers as
``criterion``:

- ``supported``: the numbers show what the claim says, for every seed, and an
  effect measured against the seeds' own spread is larger than it;
- ``not supported``: they show the opposite, as clearly;
- ``inconclusive``: the seeds disagree, the effect is within the noise, or the
  numbers are missing. Its summary says so ("Not shown by this run", "Mixed",
  "Not measured"): a difference smaller than its spread over seeds is never
  stated as a finding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"

# Two-sided 95% quantiles of Student's t by degrees of freedom (beyond the table: the normal's).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


@dataclass(frozen=True)
class Claim:
    id: str
    claim: str
    measured: dict
    verdict: str
    summary: str

    def to_json(self) -> dict:
        return {"id": self.id, "claim": self.claim, "measured": self.measured, "verdict": self.verdict,
                "summary": self.summary}


CLAIMS = {
    "inputs_differ": "The two norms see differently distributed inputs: x + attention(x) and h + ffn(h).",
    "parameters_diverge": "Each norm learns its own gamma and beta: after training they differ from each "
                          "other and from their initial values.",
    "shared_couples": "One shared norm couples the two places: its gamma moves by the sum of two places' "
                      "gradients, which point in different directions.",
    "sharing_cost": "The same classifier trains worse with one shared norm than with two.",
    "parameter_count": "Each norm has its own gamma and beta: two norms hold 2 x embed_dim more parameters "
                       "than one shared norm.",
}


# --------------------------------------------------------------------------- checking the child's records


class RecordError(ValueError):
    """A record that does not have the form the experiments produce."""


def _check(value, spec, where: str):
    if spec == "int":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RecordError(f"{where} is not a count")
        return value
    if spec == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise RecordError(f"{where} is not a finite number")
        return float(value)
    if isinstance(spec, tuple) and spec[0] == "array":
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiu":
            raise RecordError(f"{where} is not a numeric array")
        if tuple(value.shape) != spec[1]:
            raise RecordError(f"{where} has shape {tuple(value.shape)}, not {spec[1]}")
        array = value.astype(np.float64)
        if not np.all(np.isfinite(array)):
            raise RecordError(f"{where} holds numbers that are not finite")
        return array
    if isinstance(spec, tuple) and spec[0] == "list":
        if not isinstance(value, list) or len(value) != spec[1]:
            raise RecordError(f"{where} is not a list of {spec[1]}")
        return [_check(item, spec[2], f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise RecordError(f"{where} is not an object")
        missing = [key for key in spec if key not in value]
        if missing:
            raise RecordError(f"{where} lacks {', '.join(missing)}")
        return {key: _check(value[key], sub, f"{where}.{key}") for key, sub in spec.items()}
    raise AssertionError(f"unknown spec {spec!r}")


def _vector(n: int):
    return ("array", (n,))


def _split_spec(e: int) -> dict:
    return {"gamma_first": _vector(e), "gamma_second": _vector(e), "beta_first": _vector(e),
            "beta_second": _vector(e), "routed_gamma": _vector(e), "routed_beta": _vector(e),
            "output_difference": "float"}


def validate_structure(data, embed_dim: int) -> dict:
    spec = {"norm_calls": "int", "distinct_norms": "int",
            "parameters": {"two_norms": "int", "shared_norm": "int", "per_norm": ("list", 2, "int"),
                           "encoder_two_norms": "int"},
            "equivalence": _split_spec(embed_dim)}
    return _check(data, spec, "structure")


def validate_seed(data, embed_dim: int, steps: int) -> dict:
    half = {"mean": _vector(embed_dim), "std": _vector(embed_dim), "count": "int"}
    stats = ("list", 2, {"even": half, "odd": half})
    values = ("list", 2, {"gamma": _vector(embed_dim), "beta": _vector(embed_dim)})
    test = {"loss": "float", "accuracy": "float"}
    spec = {
        "seed": "int",
        "two_norms": {"inputs_before": stats, "values_before": values, "losses": _vector(steps),
                      "inputs_after": stats, "values_after": values, "test": test},
        "shared_norm": {"losses": _vector(steps), "splits": ("array", (steps, 6)), "test": test,
                        "split_after": _split_spec(embed_dim)},
    }
    return _check(data, spec, "seed")


# --------------------------------------------------------------------------- small helpers


def _r(value: float, digits: int = 4) -> float:
    """A number rounded to ``digits`` significant digits, for reading (and stable JSON)."""
    value = float(value)
    return 0.0 if value == 0 else float(f"{value:.{digits}g}")


def _rl(values) -> list[float]:
    return [_r(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    """Degrees between two vectors (90 when either is zero)."""
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 90.0
    return float(np.degrees(np.arccos(np.clip(np.dot(a, b) / (na * nb), -1.0, 1.0))))


def _combined(halves: dict) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the whole set from its even and odd halves."""
    even, odd = halves["even"], halves["odd"]
    ne, no = even["count"], odd["count"]
    total = max(ne + no, 1)
    mean = (ne * even["mean"] + no * odd["mean"]) / total
    second = (ne * (even["std"] ** 2 + even["mean"] ** 2) + no * (odd["std"] ** 2 + odd["mean"] ** 2)) / total
    return mean, np.sqrt(np.maximum(second - mean ** 2, 0.0))


def mean_difference(m1, s1, m2, s2) -> float:
    """Root mean square over features of the difference of means, in units of the features' spread."""
    scale = np.sqrt((s1 ** 2 + s2 ** 2) / 2) + 1e-12
    return float(np.sqrt(np.mean(((m1 - m2) / scale) ** 2)))


def spread_ratio(s1, s2) -> float:
    """Geometric mean over features of max(s1, s2) / min(s1, s2): 1 when the spreads agree."""
    return float(np.exp(np.mean(np.abs(np.log((s1 + 1e-12) / (s2 + 1e-12))))))


def paired(differences: list[float]) -> dict:
    """Mean of paired differences with its 95% confidence interval (Student's t)."""
    d = np.asarray(differences, dtype=np.float64)
    n = len(d)
    mean = float(d.mean()) if n else 0.0
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    half = T95.get(n - 1, 1.96) * sd / math.sqrt(n) if n > 1 else math.inf
    return {"mean": mean, "sd": sd, "low": mean - half, "high": mean + half, "n": n}


def _aggregate(flags: list[str]) -> str:
    """supported / not supported when every seed says so, inconclusive otherwise."""
    if flags and all(f == SUPPORTED for f in flags):
        return SUPPORTED
    if flags and all(f == NOT_SUPPORTED for f in flags):
        return NOT_SUPPORTED
    return INCONCLUSIVE


def _missing(claim_id: str, why: str, measured: dict | None = None) -> Claim:
    return Claim(claim_id, CLAIMS[claim_id], dict(measured or {}, missing=why), INCONCLUSIVE,
                 f"Not measured: {why}.")


# --------------------------------------------------------------------------- the claims

NOISE_FACTOR = 3.0
MIN_MEAN_DIFFERENCE = 0.1
MIN_SPREAD_RATIO = 1.1


def inputs_differ(seeds: list[dict]) -> Claim:
    """Per-feature mean and spread of the two norms' inputs, before and after training, against the
    difference between two halves of the same norm's inputs (sampling noise)."""
    claim_id = "inputs_differ"
    criterion = (f"for each seed, before and after training: the inputs differ when their standardised mean "
                 f"difference exceeds max({NOISE_FACTOR:g} x split-half noise, {MIN_MEAN_DIFFERENCE:g}) or their "
                 f"spread ratio exceeds max(split-half noise ratio ^ {NOISE_FACTOR:g}, {MIN_SPREAD_RATIO:g})")
    if not seeds:
        return _missing(claim_id, "no seed's training was reported", {"criterion": criterion})
    rows, flags, profiles = [], [], {}
    for seed in seeds:
        row = {"seed": seed["seed"]}
        for stage in ("before", "after"):
            first, second = seed["two_norms"][f"inputs_{stage}"]
            m1, s1 = _combined(first)
            m2, s2 = _combined(second)
            noise_d = max(mean_difference(h["even"]["mean"], h["even"]["std"], h["odd"]["mean"], h["odd"]["std"])
                          for h in (first, second))
            noise_r = max(spread_ratio(h["even"]["std"], h["odd"]["std"]) for h in (first, second))
            d, r = mean_difference(m1, s1, m2, s2), spread_ratio(s1, s2)
            differ = (d > max(NOISE_FACTOR * noise_d, MIN_MEAN_DIFFERENCE)
                      or r > max(noise_r ** NOISE_FACTOR, MIN_SPREAD_RATIO))
            row[stage] = {"mean_difference": _r(d), "noise_mean_difference": _r(noise_d), "spread_ratio": _r(r),
                          "noise_spread_ratio": _r(noise_r), "spread_first": _r(float(np.mean(s1))),
                          "spread_second": _r(float(np.mean(s2))), "differ": bool(differ)}
            flags.append(SUPPORTED if differ else NOT_SUPPORTED)
            if not profiles.get(stage):
                profiles[stage] = {"first": {"mean": _rl(m1), "std": _rl(s1)},
                                   "second": {"mean": _rl(m2), "std": _rl(s2)}}
        rows.append(row)
    verdict = _aggregate(flags)
    after = [row["after"] for row in rows]
    before = [row["before"] for row in rows]
    spreads = (f"the attention residual's features spread {np.mean([b['spread_first'] for b in before]):.3g} "
               f"before training and {np.mean([a['spread_first'] for a in after]):.3g} after, the feed-forward "
               f"residual's {np.mean([b['spread_second'] for b in before]):.3g} and "
               f"{np.mean([a['spread_second'] for a in after]):.3g} (mean over features and seeds); the spread "
               f"ratio is {min(x['spread_ratio'] for x in before + after):.3g} or more, where halves of the same "
               f"input give at most {max(x['noise_spread_ratio'] for x in before + after):.3g}")
    count = sum(f == SUPPORTED for f in flags)
    summary = {
        SUPPORTED: f"Yes, in all {len(flags)} measurements: {spreads}.",
        NOT_SUPPORTED: f"No: in none of {len(flags)} measurements do the two inputs differ beyond sampling noise.",
        INCONCLUSIVE: f"Mixed: the inputs differ beyond sampling noise in {count} of {len(flags)} measurements.",
    }[verdict]
    measured = {"criterion": criterion, "first_seed": profiles, "per_seed": rows}
    return Claim(claim_id, CLAIMS[claim_id], measured, verdict, summary)


MIN_MOVE = 1e-3
SEPARATE = 0.5
TOGETHER = 0.1


def parameters_diverge(seeds: list[dict]) -> Claim:
    """Distance of each norm's gamma and beta from its initial value and from the other norm's, after
    the short training run with two norms."""
    claim_id = "parameters_diverge"
    criterion = (f"for each seed: with u1, u2 the two norms' updates (gamma and beta, final minus initial), "
                 f"the norms diverge when |u1 - u2| / mean(|u1|, |u2|) >= {SEPARATE:g} and move together when it "
                 f"is below {TOGETHER:g}; a mean |u| below {MIN_MOVE:g} is no movement")
    if not seeds:
        return _missing(claim_id, "no seed's training was reported", {"criterion": criterion})
    rows, flags = [], []
    for seed in seeds:
        before, after = seed["two_norms"]["values_before"], seed["two_norms"]["values_after"]
        updates = [np.concatenate([after[k]["gamma"] - before[k]["gamma"], after[k]["beta"] - before[k]["beta"]])
                   for k in (0, 1)]
        moves = [float(np.linalg.norm(u)) for u in updates]
        gap = float(np.linalg.norm(updates[0] - updates[1]))
        mean_move = (moves[0] + moves[1]) / 2
        ratio = gap / mean_move if mean_move > 0 else 0.0
        if mean_move < MIN_MOVE:
            flag = INCONCLUSIVE
        else:
            flag = SUPPORTED if ratio >= SEPARATE else NOT_SUPPORTED if ratio < TOGETHER else INCONCLUSIVE
        flags.append(flag)
        rows.append({
            "seed": seed["seed"],
            "gamma_from_initial": [_r(np.linalg.norm(after[k]["gamma"] - before[k]["gamma"])) for k in (0, 1)],
            "beta_from_initial": [_r(np.linalg.norm(after[k]["beta"] - before[k]["beta"])) for k in (0, 1)],
            "gamma_between": _r(np.linalg.norm(after[0]["gamma"] - after[1]["gamma"])),
            "beta_between": _r(np.linalg.norm(after[0]["beta"] - after[1]["beta"])),
            "gamma_between_initially": _r(np.linalg.norm(before[0]["gamma"] - before[1]["gamma"])),
            "update_gap_ratio": _r(ratio),
        })
    first = seeds[0]["two_norms"]["values_after"]
    verdict = _aggregate(flags)
    ratios = [row["update_gap_ratio"] for row in rows]
    summary = {
        SUPPORTED: (f"Yes: after {len(seeds)} short training runs the two norms' gamma and beta moved "
                    f"{_span([m for row in rows for m in row['gamma_from_initial']])} (gamma) from their initial "
                    f"values, and in different directions: the gap between the updates is "
                    f"{_span(ratios)} times their mean size (0 would mean identical updates)."),
        NOT_SUPPORTED: f"No: both norms received nearly the same update (gap / size {_span(ratios)}).",
        INCONCLUSIVE: (f"Mixed or too small to tell: gap / size of the updates {_span(ratios)} over the seeds "
                       f"(criterion: {criterion})."),
    }[verdict]
    measured = {"criterion": criterion, "per_seed": rows,
                "first_seed_after": {"gamma": [_rl(first[0]["gamma"]), _rl(first[1]["gamma"])],
                                     "beta": [_rl(first[0]["beta"]), _rl(first[1]["beta"])]}}
    return Claim(claim_id, CLAIMS[claim_id], measured, verdict, summary)


MIN_SHARE = 0.05
CONFLICT_ANGLE = 30.0
EQUIVALENCE_TOLERANCE = 1e-3


def _relative_mismatch(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.max(np.abs(actual - expected))) / max(float(np.linalg.norm(expected)), 1e-12)


def _split_summary(split: dict) -> dict:
    """One gradient split: each place's gradient of the shared gamma, the angle between them, how far the
    shared update (their sum) goes along each, and how well the tied model matched a routed shared norm."""
    g1, g2 = split["gamma_first"], split["gamma_second"]
    total = g1 + g2
    mismatch = max(_relative_mismatch(split["routed_gamma"], total),
                   _relative_mismatch(split["routed_beta"], split["beta_first"] + split["beta_second"]))
    return {
        "gamma_first": _r(np.linalg.norm(g1)), "gamma_second": _r(np.linalg.norm(g2)),
        "gamma_angle": _r(_angle(g1, g2)),
        "first_served": _r(math.cos(math.radians(_angle(g1, total)))),
        "second_served": _r(math.cos(math.radians(_angle(g2, total)))),
        "beta_angle": _r(_angle(split["beta_first"], split["beta_second"])),
        "routed_mismatch": _r(mismatch),
        "output_difference": _r(split["output_difference"]),
    }


def shared_couples(structure: dict | None, seeds: list[dict]) -> Claim:
    """The shared gamma's gradient split into the two places' contributions at every training step."""
    claim_id = "shared_couples"
    criterion = (f"for each seed, over the training steps of the shared-norm model: the places are coupled when "
                 f"the smaller place's gradient of gamma is at least {MIN_SHARE:g} of the larger (median) and the "
                 f"median angle between them is at least {CONFLICT_ANGLE:g} degrees; not coupled when the smaller "
                 f"is below {MIN_SHARE:g} or the angle below {CONFLICT_ANGLE:g}. Valid only if the tied model "
                 f"reproduces a genuinely shared norm (relative gradient mismatch below {EQUIVALENCE_TOLERANCE:g})")
    if not seeds or structure is None:
        return _missing(claim_id, "the shared-norm training was not reported", {"criterion": criterion})
    checks = [_split_summary(structure["equivalence"])] + [_split_summary(s["shared_norm"]["split_after"])
                                                            for s in seeds]
    mismatch = max(c["routed_mismatch"] for c in checks)
    output_difference = max(c["output_difference"] for c in checks)
    rows, flags = [], []
    for seed in seeds:
        splits = seed["shared_norm"]["splits"]
        n1, n2, dot = splits[:, 0], splits[:, 1], splits[:, 2]
        ok = (n1 > 0) & (n2 > 0)
        cos = np.where(ok, dot / np.where(ok, n1 * n2, 1.0), 0.0)
        angles = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
        share = np.minimum(n1, n2) / np.maximum(np.maximum(n1, n2), 1e-30)
        beta_cos = np.where((splits[:, 3] > 0) & (splits[:, 4] > 0),
                            splits[:, 5] / np.maximum(splits[:, 3] * splits[:, 4], 1e-30), 0.0)
        median_share, median_angle = float(np.median(share)), float(np.median(angles))
        if median_share >= MIN_SHARE and median_angle >= CONFLICT_ANGLE:
            flag = SUPPORTED
        else:
            flag = NOT_SUPPORTED
        flags.append(flag)
        rows.append({
            "seed": seed["seed"],
            "median_gamma_first": _r(np.median(n1)), "median_gamma_second": _r(np.median(n2)),
            "median_share": _r(median_share), "median_angle": _r(median_angle),
            "steps_opposed": int(np.sum(cos < 0)), "steps": int(len(cos)),
            "median_beta_angle": _r(float(np.median(np.degrees(np.arccos(np.clip(beta_cos, -1.0, 1.0)))))),
            "after_training": _split_summary(seed["shared_norm"]["split_after"]),
        })
    equivalent = mismatch < EQUIVALENCE_TOLERANCE
    verdict = _aggregate(flags) if equivalent else INCONCLUSIVE
    first = seeds[0]["shared_norm"]["splits"]
    first_cos = np.where((first[:, 0] > 0) & (first[:, 1] > 0),
                         first[:, 2] / np.maximum(first[:, 0] * first[:, 1], 1e-30), 0.0)
    measured = {
        "criterion": criterion,
        "equivalence": {"relative_gradient_mismatch": _r(mismatch), "output_difference": _r(output_difference)},
        "per_seed": rows,
        "first_seed_angles": _rl(np.degrees(np.arccos(np.clip(first_cos, -1.0, 1.0)))),
        "first_seed_norms": [_rl(first[:, 0]), _rl(first[:, 1])],
    }
    angles = [row["median_angle"] for row in rows]
    shares = [row["median_share"] for row in rows]
    last = rows[0]["after_training"]
    summary = {
        SUPPORTED: (f"Yes: at each step the shared gamma moves by the sum of two different gradients. The median "
                    f"angle between the attention place's and the feed-forward place's gradient is {_span(angles)} "
                    f"degrees, the smaller of the two is {_span(shares)} of the larger; after training (seed "
                    f"{rows[0]['seed']}) the shared update points {last['first_served']:.2f} (cosine) along what the attention place asks for "
                    f"and {last['second_served']:.2f} along what the feed-forward place asks for."),
        NOT_SUPPORTED: (f"No: one place's gradient dominates or both point the same way (median angle "
                        f"{_span(angles)} degrees, smaller share {_span(shares)})."),
        INCONCLUSIVE: (f"Mixed over the seeds (median angle {_span(angles)} degrees, smaller share {_span(shares)})."
                       if equivalent else
                       f"Not trusted: the tied model did not reproduce a shared norm (relative gradient mismatch "
                       f"{mismatch:.3g})."),
    }[verdict]
    return Claim(claim_id, CLAIMS[claim_id], measured, verdict, summary)


MIN_SEEDS = 3


def sharing_cost(seeds: list[dict]) -> Claim:
    """Test loss and accuracy of the same classifier trained with two norms and with one shared norm,
    paired by seed (same data, same initial weights)."""
    claim_id = "sharing_cost"
    criterion = (f"paired by seed (at least {MIN_SEEDS}): supported when the 95% confidence interval of the "
                 "mean difference in test loss (shared minus two) lies above 0 and the difference is larger than "
                 "the test loss's spread over seeds (the larger standard deviation of the two variants); not "
                 "supported when the interval lies below 0 and the difference is larger than that spread; "
                 "inconclusive (not shown by this run) otherwise")
    if len(seeds) < MIN_SEEDS:
        return _missing(claim_id, f"only {len(seeds)} of the {MIN_SEEDS} seeds needed were reported",
                        {"criterion": criterion})
    variants = {}
    spreads = []
    for name in ("two_norms", "shared_norm"):
        losses = np.asarray([s[name]["test"]["loss"] for s in seeds])
        accuracies = np.asarray([s[name]["test"]["accuracy"] for s in seeds])
        curves = np.asarray([s[name]["losses"] for s in seeds])
        spreads.append(float(losses.std(ddof=1)))
        variants[name] = {
            "test_loss": {"mean": _r(losses.mean()), "sd": _r(losses.std(ddof=1))},
            "test_accuracy": {"mean": _r(accuracies.mean()), "sd": _r(accuracies.std(ddof=1))},
            "mean_training_loss": {"mean": _r(curves.mean()), "sd": _r(curves.mean(axis=1).std(ddof=1))},
            "per_seed_test_loss": _rl(losses), "per_seed_test_accuracy": _rl(accuracies),
            "loss_curve": _rl(_downsample(curves.mean(axis=0), 60)),
        }
    loss_difference = paired([s["shared_norm"]["test"]["loss"] - s["two_norms"]["test"]["loss"] for s in seeds])
    accuracy_difference = paired([s["shared_norm"]["test"]["accuracy"] - s["two_norms"]["test"]["accuracy"]
                                  for s in seeds])
    spread = max(spreads)
    beyond = abs(loss_difference["mean"]) > spread
    if loss_difference["low"] > 0 and beyond:
        verdict = SUPPORTED
    elif loss_difference["high"] < 0 and beyond:
        verdict = NOT_SUPPORTED
    else:
        verdict = INCONCLUSIVE
    two, shared = variants["two_norms"], variants["shared_norm"]
    worse = sum(s["shared_norm"]["test"]["loss"] > s["two_norms"]["test"]["loss"] for s in seeds)
    relative = loss_difference["mean"] / two["test_loss"]["mean"] if two["test_loss"]["mean"] else 0.0
    numbers = (f"test loss {shared['test_loss']['mean']:.3g} ± {shared['test_loss']['sd']:.2g} with one shared "
               f"norm against {two['test_loss']['mean']:.3g} ± {two['test_loss']['sd']:.2g} with two "
               f"({relative:+.1%}; higher in {worse} of {len(seeds)} seeds), accuracy "
               f"{shared['test_accuracy']['mean']:.1%} against {two['test_accuracy']['mean']:.1%}")
    against = (f"a difference of {loss_difference['mean']:+.2g} against a spread over seeds of {spread:.2g}")
    saturated = min(two["test_accuracy"]["mean"], shared["test_accuracy"]["mean"]) >= 0.99
    note = " Both variants learn this small task almost perfectly, so the difference is small." if saturated else ""
    if loss_difference["low"] <= 0 <= loss_difference["high"]:
        why = "the 95% interval of the difference contains 0"
    else:
        why = "the difference is no larger than the seeds' own spread"
    summary = {
        SUPPORTED: f"Yes, by more than the seeds' own spread: {numbers}; {against}.{note}",
        NOT_SUPPORTED: f"No: the shared norm did better, by more than the seeds' own spread: {numbers}; {against}.",
        INCONCLUSIVE: f"Not shown by this run: {numbers}; {against}: {why}.{note}",
    }[verdict]
    measured = {
        "criterion": criterion, "seeds": [s["seed"] for s in seeds], "two_norms": two, "shared_norm": shared,
        "test_loss_difference": {k: _r(v) if isinstance(v, float) else v for k, v in loss_difference.items()},
        "test_loss_spread": _r(spread), "difference_beyond_spread": bool(beyond),
        "test_accuracy_difference": {k: _r(v) if isinstance(v, float) else v for k, v in accuracy_difference.items()},
    }
    return Claim(claim_id, CLAIMS[claim_id], measured, verdict, summary)


def parameter_count(structure: dict | None, embed_dim: int) -> Claim:
    """Trainable parameters that get a gradient, with two norms and with the second norm's calls routed
    to the first."""
    claim_id = "parameter_count"
    criterion = ("supported when the count with two norms exceeds the count with one shared norm by exactly the "
                 "second norm's gamma and beta")
    if structure is None:
        return _missing(claim_id, "the encoder's structure was not reported", {"criterion": criterion})
    counts = structure["parameters"]
    difference = counts["two_norms"] - counts["shared_norm"]
    own = counts["per_norm"][1]
    verdict = SUPPORTED if difference == own and difference > 0 else NOT_SUPPORTED
    measured = {"criterion": criterion, "two_norms": counts["two_norms"], "shared_norm": counts["shared_norm"],
                "difference": difference, "per_norm": counts["per_norm"], "embed_dim": embed_dim,
                "encoder_two_norms": counts["encoder_two_norms"],
                "fraction_of_classifier": _r(difference / counts["two_norms"]) if counts["two_norms"] else 0.0}
    if verdict == SUPPORTED:
        summary = (f"Yes: {counts['two_norms']} trainable parameters with two norms, {counts['shared_norm']} with "
                   f"one shared norm — {difference} more (= 2 x embed_dim {embed_dim}, gamma and beta), "
                   f"{difference / counts['two_norms']:.1%} of the classifier: the cost of two norms is tiny.")
    else:
        summary = (f"No: the difference is {difference} parameters, not the second norm's {own} "
                   "(gamma and beta).")
    return Claim(claim_id, CLAIMS[claim_id], measured, verdict, summary)


def all_claims(structure: dict | None, seeds: list[dict], embed_dim: int,
               why_missing: str | None = None) -> list[Claim]:
    """Every claim, in the order of the answer's argument."""
    claims = [inputs_differ(seeds), parameters_diverge(seeds), shared_couples(structure, seeds),
              sharing_cost(seeds), parameter_count(structure, embed_dim)]
    if why_missing:
        claims = [c if c.verdict != INCONCLUSIVE or "missing" not in c.measured else
                  _missing(c.id, why_missing, {"criterion": c.measured.get("criterion")}) for c in claims]
    return claims


def _span(values) -> str:
    values = [float(v) for v in values]
    if not values:
        return "n/a"
    low, high = min(values), max(values)
    return f"{low:.2g}" if f"{low:.2g}" == f"{high:.2g}" else f"{low:.2g} to {high:.2g}"


def _downsample(values: np.ndarray, points: int) -> np.ndarray:
    """At most ``points`` values: the means of consecutive chunks."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) <= points:
        return values
    return np.asarray([chunk.mean() for chunk in np.array_split(values, points)])
