"""What the parent makes of the evidence, from its own numbers.

Each observed call is replayed (``replay``) with the weight values and inputs
the parent drew; a replayed call is *verified*: its output, its steps and the
masks that reached attention are the parent's own numbers. Gradients are the
exact gradients of the replayed computation (autograd), against which the
child's reported gradients are compared. Results are cached on the evidence,
so every check sees the same analysis.

A check that needs a verified call and finds none does not guess: it is not
checked, and says why (the forward check of the exercise names the reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from . import attention, replay


@dataclass
class Observed:
    """One observed call: the child's claim, and what the replay made of it."""

    phase: str
    data: dict
    output: object
    program: replay.Program | None
    failure: str | None
    inputs: dict
    masks: dict
    function: object = None  # values -> output, when identified some other way than a replay
    identified_as: str | None = None  # the reference variant the output was found to be, then
    roles: dict | None = None  # the weights by role, when found by what they do
    pseudo_steps: list = field(default_factory=list)  # the claimed layers such an identification confirmed

    @property
    def verified(self) -> bool:
        return self.program is not None or self.function is not None

    def run(self, values: dict):
        if self.program is not None:
            return self.program.run(values, self.inputs)
        return self.function(values)

    @property
    def through_raw_weights(self) -> bool:
        """Whether the replay followed part of the call through operations on the layer's own weights
        (``add_weight`` and keras.ops): parts the checks read by their Keras layers, and which the
        exercise's identification by roles finds instead (a feed-forward of raw weights)."""
        return self.program is not None and any(step.kind == "ops" and step.params for step in self.program.steps)

    def steps(self, *kinds: str) -> list[replay.Step]:
        if self.program is not None:
            return self.program.of_kind(*kinds)
        return [s for s in self.pseudo_steps if s.kind in kinds] if self.function is not None else []


def values(evidence) -> dict[str, np.ndarray]:
    """The parent's weight values (float64), by variable key."""
    cache = judged_once(evidence)
    if "values" not in cache:
        cache["values"] = {str(k): np.asarray(v, dtype=np.float64)
                           for k, v in (evidence.job.get("values") or {}).items()}
    return cache["values"]


def observed(evidence, phase: str, check_id: str, inputs: dict, masks: dict | None = None,
             values_override: dict | None = None) -> Observed:
    """The replay of the call observed in ``phase`` on the parent's ``inputs`` (cached)."""
    cache = judged_once(evidence)
    key = ("observed", phase)
    if key not in cache:
        data = evidence.phase(phase, check_id)
        observation = data.get("observation") if isinstance(data.get("observation"), dict) else {}
        output = observation.get("output")
        program, failure = None, None
        try:
            program = replay.build(observation, values_override or values(evidence), inputs, masks)
            attention.find(program, values_override or values(evidence), _as_floats(inputs))
        except replay.ReplayFailed as exc:
            program, failure = None, str(exc)
        cache[key] = Observed(phase, data, output, program, failure, dict(inputs), dict(masks or {}))
    return cache[key]


def _as_floats(inputs: dict) -> dict:
    """The call's inputs as the program runs on them: float arrays as float64, others as they are."""
    return {k: np.asarray(v, dtype=np.float64) if np.asarray(v).dtype.kind == "f" else v for k, v in inputs.items()}


def partial_trace(evidence, phase: str) -> list[dict]:
    """The trace a phase recorded, even if the call raised (for messages only: claims)."""
    data = evidence.partial(phase) or {}
    observation = data.get("observation")
    trace = observation.get("trace") if isinstance(observation, dict) else None
    try:
        return replay.validate_trace(trace)
    except replay.ReplayFailed:
        return []


def judged_once(evidence) -> dict:
    """What the checks of one judgment computed from ``evidence`` and share (each check asks once)."""
    if not hasattr(evidence, "analysis_cache"):
        evidence.analysis_cache = {}
    return evidence.analysis_cache


# --------------------------------------------------------------------------- not checked


def not_checked(reason: str, see: str) -> None:
    raise pytest.skip.Exception(f"Not checked: {reason} (see {see}).")


def require_verified(observation: Observed, see: str, what: str = "your layer's computation") -> Observed:
    if not observation.verified:
        if not isinstance(observation.output, np.ndarray):
            not_checked("the call did not return a tensor", "api.output_shape")
        not_checked(f"the grader could not verify {what} from the numbers it chose", see)
    return observation


# --------------------------------------------------------------------------- gradients


def exact_gradients(function, parameters: dict, trainable: list[str], loss) -> dict[str, np.ndarray]:
    """d loss(function(values)) / d values[k] for each k in ``trainable``, exactly (autograd)."""
    from autograd import grad

    fixed = {k: v for k, v in parameters.items() if k not in trainable}
    chosen = {k: parameters[k] for k in trainable if k in parameters}

    def objective(free):
        return loss(function({**fixed, **free}))

    gradients = grad(objective)(chosen)
    return {k: np.asarray(v, dtype=np.float64) for k, v in gradients.items()}


def weighted_sum(weights):
    weights = np.asarray(weights, dtype=np.float64)

    def loss(output):
        from autograd import numpy as anp

        return anp.sum(output * weights)

    return loss


def sgd(function, parameters: dict, trainable: list[str], loss, rate: float, steps: int) -> dict[str, np.ndarray]:
    """The trainable values after ``steps`` plain gradient-descent steps."""
    current = dict(parameters)
    for _ in range(steps):
        gradients = exact_gradients(function, current, trainable, loss)
        current.update({k: current[k] - rate * g for k, g in gradients.items()})
    return {k: current[k] for k in trainable if k in current}


def adam(function, parameters: dict, trainable: list[str], loss, rate: float, steps: int) -> list[float]:
    """The loss before and after each of ``steps`` Adam steps (Keras's defaults), from ``parameters``."""
    beta_1, beta_2, epsilon = 0.9, 0.999, 1e-7
    current = dict(parameters)
    moments = {k: np.zeros_like(current[k]) for k in trainable}
    second = {k: np.zeros_like(current[k]) for k in trainable}
    losses = [float(loss(function(current)))]
    for step in range(1, steps + 1):
        gradients = exact_gradients(function, current, trainable, loss)
        for k, g in gradients.items():
            moments[k] = beta_1 * moments[k] + (1 - beta_1) * g
            second[k] = beta_2 * second[k] + (1 - beta_2) * g * g
            corrected = rate * np.sqrt(1 - beta_2 ** step) / (1 - beta_1 ** step)
            current[k] = current[k] - corrected * moments[k] / (np.sqrt(second[k]) + epsilon)
        losses.append(float(loss(function(current))))
    return losses


def gradients_agree(reported, exact, scale: float = 0.0) -> bool:
    """Float32 gradients against exact ones. ``scale`` is the size of the largest gradient of the whole
    layer: a gradient that is exactly zero (an attention key bias) arrives as float32 noise."""
    reported, exact = np.asarray(reported, dtype=np.float64), np.asarray(exact, dtype=np.float64)
    if reported.shape != exact.shape or not np.all(np.isfinite(reported)):
        return False
    own = float(np.max(np.abs(exact))) if exact.size else 0.0
    return bool(np.allclose(reported, exact, rtol=2e-3, atol=2e-3 * max(own, 1e-3 * scale, 1e-9)))
