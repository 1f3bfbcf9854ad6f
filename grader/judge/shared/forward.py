"""The forward topic's shared checks: the computation against the references, inference without randomness."""

from __future__ import annotations

import numpy as np

from .. import analysis
from ..framework import fail, output_cause
from .numbers import close


INFERENCE_WHY = (
    "Code that uses a trained layer calls it without `training` — model(x), a layer inside a model called "
    "that way — and Keras then gives your call() the default of its `training` argument. Dropout (and any "
    "other noise) must be off unless training is True: write call(..., training=None) and pass "
    "training=training on to Dropout, never training=True. Otherwise every prediction is random."
)


def assert_inference(evidence, verified, values: dict, layer_too: bool = True) -> None:
    """The inference check of a layer exercise: its two calls on one input agree, which needs no
    replay (a layer random at inference is told so whatever else the grader could follow, and is the
    cause its other comparisons fail for), then they equal the parent's own output of the verified
    call (``verified()``: the Observed call, or not checked)."""
    assert_not_random(evidence, layer_too)
    assert_deterministic_inference(evidence, verified().run(values), layer_too)


def assert_not_random(evidence, layer_too: bool = True) -> None:
    """The layer (``layer_too``) and a model holding it, called twice on one input without
    ``training``, return the same numbers; which layer of the trace made them differ is named."""
    if not evidence.random_at_inference or evidence.error("inference") is not None:
        return
    data = evidence.phase("inference")
    who = "your layer" if layer_too and _differ(data.get("layer")) else "a model holding it" if layer_too \
        else "your model"
    random = _random_layers(evidence)
    named = f" ({', '.join(random)} changes what passes through it)" if random else ""
    fail(
        f"called twice on the same input without `training`, {who} returned different outputs: something "
        f"random is active at inference{named}.",
        "the same output at every call: with no `training` given, Dropout is off — pass the call's own "
        "`training` on to it (dropout(x, training=training)), never training=True.",
        INFERENCE_WHY,
    )


def _two_tensors(outputs) -> bool:
    return isinstance(outputs, list) and len(outputs) == 2 and all(isinstance(o, np.ndarray) for o in outputs)


def _differ(outputs) -> bool:
    if not _two_tensors(outputs):
        return False
    first, second = (np.asarray(o, dtype=np.float64) for o in outputs)
    return first.shape != second.shape or not np.array_equal(first, second, equal_nan=True)


def _random_layers(evidence) -> list[str]:
    """The layers of the plain call's trace (claims, for the message only) whose output is not their
    input though they compute nothing of their own: a Dropout applied at inference."""
    named = []
    for event in analysis.partial_trace(evidence, "forward"):
        if str(event.get("class")) not in ("Dropout", "GaussianDropout", "GaussianNoise", "AlphaDropout",
                                           "SpatialDropout1D"):
            continue
        inputs = event.get("inputs") if isinstance(event.get("inputs"), dict) else {}
        output, first = event.get("output"), next(iter(inputs.values()), None)
        if isinstance(output, np.ndarray) and isinstance(first, np.ndarray) and (
                output.shape != first.shape or not np.allclose(output, first)):
            named.append(f"layer {str(event['class'])[:40]} (call {int(event.get('index', 0))})")
    return named[:3]


def assert_deterministic_inference(evidence, expected: np.ndarray, layer_too: bool = True) -> None:
    """Called twice on the same input without ``training``, the layer (``layer_too``) and a model
    holding it return the same numbers, and they are the parent's own output of the verified call
    with training=False (``expected``): the child's outputs are compared with the parent's numbers,
    never only with each other."""
    from ..advice import parts_of
    from ..evidence import format_student_error

    error = evidence.error("inference")
    if error is not None and not (error.get("internal") and not error.get("student_frames")):
        from ..framework import CheckFailed

        # the phase calls the layer itself twice, then a functional model holding it: which one raised
        layer_answered = layer_too and _two_tensors((evidence.partial("inference") or {}).get("layer"))
        where = ("in a model holding your layer (keras.Input, then your layer), called without `training` — your "
                 "layer called directly, without `training`, returned its output" if layer_answered
                 else "when called without `training`")
        raise CheckFailed(format_student_error(
            f"Your code raised {error.get('type', 'an error')} {where}", error, parts_of(evidence.public_job)))
    data = evidence.phase("inference")
    calls = ([("your layer", data.get("layer"))] if layer_too else []) + [("a model holding it" if layer_too
                                                                          else "your model", data.get("model"))]
    for who, outputs in calls:
        if not _two_tensors(outputs):
            fail(f"{who}, called without `training`, did not return a tensor.",
                 "one tensor, the same as with training=False.", INFERENCE_WHY)
        first, second = (np.asarray(o, dtype=np.float64) for o in outputs)
        if first.shape != second.shape or not np.array_equal(first, second):
            spread = (f" (they differ by up to {np.abs(first - second).max():.3g})"
                      if first.shape == second.shape and np.all(np.isfinite(first - second)) else "")
            fail(
                f"called twice on the same input without `training`, {who} returned different outputs{spread}: "
                "something random (a Dropout) is active at inference.",
                "the same output at every call: with no `training` given, Dropout is off.",
                INFERENCE_WHY,
            )
    for who, outputs in calls:
        if not close(outputs[0], expected):
            fail(
                f"called without `training`, {who} computes something other than with training=False.",
                "the same output with or without training=False: at inference the layer computes one function.",
                INFERENCE_WHY,
            )


def assert_matches_reference(output, variants: dict, messages: dict, expected: str, why: str,
                             correct: str = "correct", where: np.ndarray | None = None, otherwise=None,
                             whys: dict | None = None, causes: dict | None = None) -> None:
    """``output`` equals ``variants[correct]``; if it equals a known wrong variant instead, say which
    (and why that matters, from ``whys`` when the general ``why`` does not fit it; and which other
    check tells the mistake the variant makes, from ``causes``); else call ``otherwise()`` (which may
    fail with a more specific message) before failing generally."""
    if not isinstance(output, np.ndarray):
        fail("call did not return a tensor.", expected, "The forward pass can only be compared on a tensor.")
    if output.shape != np.shape(variants[correct]):
        analysis.not_checked("your layer's output does not have the shape the exercise expects", "api.output_shape")
    if not np.all(np.isfinite(output)):
        analysis.not_checked("your layer's output holds NaN or infinite values", "api.output_shape")
    if close(output, variants[correct], where):
        return
    for name, text in messages.items():
        if name in variants and close(output, variants[name], where):
            fail(f"your output matches a layer in which {text}.", expected, (whys or {}).get(name, why),
                 cause=(causes or {}).get(name))
    if otherwise is not None:
        otherwise()
    reference_output = np.asarray(variants[correct])
    diff = np.abs(output - reference_output).max() if output.shape == reference_output.shape else float("nan")
    fail(
        f"your output differs from the correct layer computed from the same weights by up to {diff:.3g}.",
        expected,
        why,
        cause=output_cause(),
    )
