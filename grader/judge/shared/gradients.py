"""The gradients topic's shared checks: what learns, and the two norms learning apart."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import analysis
from ..framework import fail
from .structure import Structure
from .weights import assert_norms_over_features, shared_norm_why


@dataclass
class GradientReport:
    """The child's gradients next to the exact gradients of the verified computation."""

    keys: list[str]
    reported: dict  # key -> array or None
    exact: dict  # key -> array
    names: dict  # key -> variable path

    @property
    def scale(self) -> float:
        return max([float(np.max(np.abs(g))) for g in self.exact.values() if np.size(g)] or [0.0])

    def agrees(self, key: str) -> bool:
        grad, exact = self.reported.get(key), self.exact.get(key)
        return isinstance(grad, np.ndarray) and exact is not None and analysis.gradients_agree(grad, exact,
                                                                                               self.scale)


def gradient_report(evidence, observed: analysis.Observed, forward: dict, loss_weights) -> GradientReport:
    cache = analysis.judged_once(evidence)
    if "gradient_report" not in cache:
        data = evidence.phase("gradients", "gradients.all_variables")
        keys = [str(k) for k in data.get("variables") or []]
        reported = dict(zip(keys, data.get("gradients") or []))
        parameters = analysis.values(evidence)
        usable = [k for k in keys if k in parameters]
        exact = analysis.exact_gradients(observed.run, parameters, usable, analysis.weighted_sum(loss_weights))
        names = {str(v["id"]): v.get("path", "") for v in forward.get("variables") or []}
        cache["gradient_report"] = GradientReport(keys, reported, exact, names)
    return cache["gradient_report"]


def assert_all_gradients(report: GradientReport, exempt: set[str], expected: str) -> None:
    if not report.keys:
        fail("the layer has no trainable variables.", expected, "Nothing could be learned.")
    missing, unused, broken, wrong, zero = [], [], [], [], []
    for key in report.keys:
        name = report.names.get(key) or f"variable {key}"
        grad, exact = report.reported.get(key), report.exact.get(key)
        exact_zero = exact is None or not np.any(np.abs(exact) > 1e-6 * max(report.scale, 1e-9))
        if grad is None or not isinstance(grad, np.ndarray):
            (unused if exact_zero and key not in exempt else missing if not exact_zero else []).append(name)
        elif not np.all(np.isfinite(grad)):
            broken.append(name)
        elif not report.agrees(key):
            wrong.append(name)
        elif exact_zero and key not in exempt:
            zero.append(name)
    if missing or unused or broken or wrong or zero:
        parts = []
        if missing:
            parts.append("no gradient for " + _listed(missing) + " although the output depends on it "
                         "(the path is cut, for instance by a NumPy round trip)")
        if unused:
            parts.append("no gradient for " + _listed(unused) + ": the output does not use it")
        if broken:
            parts.append("NaN/inf gradient for " + _listed(broken))
        if wrong:
            parts.append("a gradient for " + _listed(wrong) + " that is not the gradient of what the layer "
                         "computes (part of the computation is hidden from differentiation, e.g. stop_gradient)")
        if zero:
            parts.append("an all-zero gradient for " + _listed(zero))
        fail(
            "; ".join(parts) + ".",
            "for every trainable variable, the gradient of the output (an attention key bias excepted: "
            "softmax ignores a shift shared by all keys).",
            "A variable with no gradient never learns: it is created but not on the path from "
            "inputs to outputs, or the path is cut.",
        )


def _listed(names: list[str], limit: int = 4) -> str:
    """Variable names for a message: the first few, and how many more."""
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit - 1]) + f" and {len(names) - limit + 1} more"


def key_biases(structure: Structure) -> set[str]:
    return {s.params["key_bias"] for s in structure.of("attention") if s.params.get("key_bias")}


def assert_norm_gradients_differ(report: GradientReport, structure: Structure, count: int) -> None:
    assert_norms_over_features(structure)
    norms = structure.norm_steps
    if len(norms) < count:
        fail(f"{len(norms)} LayerNormalization call(s).", f"{count} norms.", shared_norm_why(count))
    for name in ("gamma", "beta"):
        keys = [n.params.get(name) for n in norms[:count]]
        if any(k is None for k in keys):
            fail(f"a norm without {name}.", "gamma and beta in every norm.", shared_norm_why(count))
        if len(set(keys)) < len(keys):
            fail(
                f"several norm positions use one {name} variable, so they receive one gradient: "
                "the sum of what each residual block asks for.",
                f"one {name} variable per norm, each with the gradient of its own position.",
                shared_norm_why(count),
            )
        for key in keys:
            if key not in report.reported or report.reported[key] is None:
                fail(f"no gradient for a norm's {name} (is the norm trainable?).", "a gradient for each norm.",
                     shared_norm_why(count))
            if not report.agrees(key):
                fail(f"a norm's {name} gradient is not the gradient of the layer's output.",
                     "each norm's exact gradient.", "See gradients.all_variables.")
        grads = [report.exact[k] for k in keys]
        for a in range(len(grads)):
            for b in range(a + 1, len(grads)):
                if np.allclose(grads[a], grads[b], rtol=1e-5, atol=1e-9):
                    fail(
                        f"norms {a + 1} and {b + 1} receive identical {name} gradients.",
                        "different gradients: each norm sees a differently distributed input.",
                        shared_norm_why(count),
                    )


def assert_norms_diverge(evidence, observed: analysis.Observed, structure: Structure, job: dict, count: int) -> None:
    data = evidence.phase("gradients", "gradients.all_variables")
    after = {str(k): v for k, v in (data.get("after_steps") or {}).items()}
    assert_norms_over_features(structure)
    norms = structure.norm_steps[:count]
    if len(norms) < count:
        fail(f"{len(norms)} LayerNormalization call(s).", f"{count} norms.", shared_norm_why(count))
    keys = [str(k) for k in data.get("variables") or []]
    parameters = analysis.values(evidence)
    expected = analysis.sgd(observed.run, parameters, [k for k in keys if k in parameters],
                            analysis.weighted_sum(job["loss_weights"]), float(job["learning_rate"]),
                            int(job["optimizer_steps"]))
    steps = job["optimizer_steps"]
    for position, step in enumerate(norms, start=1):
        gamma = step.params.get("gamma")
        if gamma is None:
            fail(f"norm {position} has no gamma.", "a trainable gamma.", shared_norm_why(count))
        if gamma not in after or gamma not in expected:
            fail(
                f"norm {position}'s gamma did not change in {steps} SGD steps.",
                "gamma and beta of every norm move as the layer trains.",
                "A frozen norm (trainable=False) keeps its gamma and beta for ever and cannot adapt "
                "to its input's distribution.",
            )
        if not analysis.gradients_agree(after[gamma], expected[gamma]):
            fail(f"after {steps} SGD steps norm {position}'s gamma is not where the layer's gradients take it.",
                 "each step to follow the gradient of the layer's output.", "See gradients.all_variables.")
    flat = [np.concatenate([np.ravel(expected.get(n.params.get(p), parameters.get(n.params.get(p), np.zeros(1))))
                            for p in ("gamma", "beta")]) for n in norms]
    for a in range(len(flat)):
        for b in range(a + 1, len(flat)):
            if np.allclose(flat[a], flat[b], atol=1e-7, rtol=0):
                fail(
                    f"after {steps} SGD steps norms {a + 1} and {b + 1} still hold identical gamma and beta.",
                    "each norm's parameters following their own gradients apart.",
                    shared_norm_why(count),
                )
