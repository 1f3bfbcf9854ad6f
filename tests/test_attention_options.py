"""Every option of Keras's MultiHeadAttention, traced in a layer and replayed by the parent.

A student may build the attention with any of its constructor's arguments and call it with any of its
call's. For each one (the test enumerates both signatures, so an option a new Keras adds fails here until
it is given a case), the replay either recomputes, from the parent's own weights and inputs, what Keras
computed (and its gradients), or refuses and names the option: never a silent wrong number, which
the checks would blame on the student.
"""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
keras = pytest.importorskip("keras")

from grader.judge import analysis, budget, replay  # noqa: E402
from grader.probe.evidence_stream import to_plain  # noqa: E402
from grader.probe.tracing import CallTracer, Registry  # noqa: E402
from grader.protocol import wire  # noqa: E402

RNG = np.random.default_rng(11)
BATCH, LENGTH, WIDTH = 2, 4, 6
X = RNG.normal(size=(BATCH, LENGTH, WIDTH))
KEY = RNG.normal(size=(BATCH, LENGTH, WIDTH))
PADDING = np.array([[True, True, True, False], [True, True, False, False]])
REQUIRED = {"num_heads": 2, "key_dim": 3}

# Each constructor argument, a value other than its default, and what the replay does with it:
# None follows it (the same numbers as Keras), a text refuses it with a message holding that text.
CONSTRUCTOR = {
    "num_heads": [(3, None)],
    "key_dim": [(5, None)],
    "value_dim": [(4, None)],
    "dropout": [(0.25, None)],  # at inference, Keras's masked-softmax path: a fully masked row attends to nothing
    "use_bias": [(False, None)],
    "output_shape": [(WIDTH, None), ((WIDTH,), None), (9, None), ((2, 3), None)],
    "attention_axes": [((1,), None), ((2,), "custom attention axes")],
    "sliding_window": [(2, None)],  # a band of the attention mask, which the trace captures as Keras applies it
    "flash_attention": [(False, None)],  # True runs only on accelerators
    "kernel_initializer": [("ones", None)],  # the parent sets every weight
    "bias_initializer": [("ones", None)],
    "kernel_regularizer": [("l2", None)],  # losses, not the output
    "bias_regularizer": [("l2", None)],
    "activity_regularizer": [("l2", None)],
    "kernel_constraint": [("non_neg", None)],  # applied by optimizers, after a step
    "bias_constraint": [("non_neg", None)],
    "use_gate": [(True, "a gate")],
    "seed": [(5, None)],  # dropout's seed: no dropout at inference
}

# Each call argument, what the layer passes for it, and what the replay does.
CALL = {
    "key": [("separate", None)],
    "query_mask": [("padding", None)],
    "value_mask": [("padding", None)],
    "key_mask": [("padding", None)],
    "attention_mask": [("padding", None), ("causal_and_padding", None)],
    "return_attention_scores": [(True, None)],
    "training": [(False, None)],
    "use_causal_mask": [(True, None)],
}


def _signature(function) -> set[str]:
    return {name for name, p in inspect.signature(function).parameters.items()
            if name not in ("self", "query", "value") and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def test_every_constructor_and_call_option_has_a_case():
    assert _signature(keras.layers.MultiHeadAttention.__init__) == set(CONSTRUCTOR)
    assert _signature(keras.layers.MultiHeadAttention.call) == set(CALL)


class Block(keras.layers.Layer):
    """A layer holding one attention, called on its input as a student's layer calls it."""

    def __init__(self, options: dict, call: dict, **kwargs):
        super().__init__(**kwargs)
        self.attention = keras.layers.MultiHeadAttention(**{**REQUIRED, **options})
        self.call_options = call

    def call(self, x, other):
        arguments = {}
        for name, how in self.call_options.items():
            if how == "separate":
                arguments[name] = other
            elif how == "padding":
                arguments[name] = PADDING if name != "attention_mask" else PADDING[:, None, :] & PADDING[:, :, None]
            elif how == "causal_and_padding":
                arguments[name] = np.tril(np.ones((LENGTH, LENGTH), dtype=bool))[None] & PADDING[:, None, :]
            else:
                arguments[name] = how
        out = self.attention(x, x, **arguments)
        return out[0] if isinstance(out, tuple) else out


def _replayed(options: dict, call: dict):
    """(Keras's output, the replay's output, the exact and the numeric gradient of one weight)."""
    layer = Block(options, call)
    registry = Registry()
    layer(X.astype("float32"), KEY.astype("float32"))
    values = {}
    for variable in layer.weights:
        value = RNG.normal(size=tuple(variable.shape)) * 0.5
        variable.assign(value.astype("float32"))
        values[str(registry.variable(variable))] = value
    tracer = CallTracer(layer, registry)
    with tracer:
        output = layer(X.astype("float32"), KEY.astype("float32"))
    observation = wire.loads(wire.dumps(to_plain({"trace": tracer.events, "output": np.asarray(output)})))
    inputs = {"x": X, "other": KEY}
    budget.reset()
    program = replay.build(observation, values, inputs, {"padding": PADDING})
    replayed = program.run(values, inputs)
    kernel = next(k for k, v in values.items() if v.ndim == 3)
    loss = analysis.weighted_sum(RNG.normal(size=np.shape(replayed)))
    exact = analysis.exact_gradients(lambda vals: program.run(vals, inputs), values, [kernel], loss)[kernel]
    index = (0,) * values[kernel].ndim
    moved, back = dict(values), dict(values)
    moved[kernel], back[kernel] = values[kernel].copy(), values[kernel].copy()
    moved[kernel][index] += 1e-6
    back[kernel][index] -= 1e-6
    numeric = (loss(program.run(moved, inputs)) - loss(program.run(back, inputs))) / 2e-6
    return observation["output"], replayed, exact[index], numeric


CASES = [("init", name, value, refused) for name, cases in CONSTRUCTOR.items() for value, refused in cases] + \
        [("call", name, value, refused) for name, cases in CALL.items() for value, refused in cases]


@pytest.mark.parametrize("where, name, value, refused", CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_an_attention_option_is_replayed_as_keras_computes_it_or_refused_by_name(where, name, value, refused):
    options, call = ({name: value}, {}) if where == "init" else ({}, {name: value})
    if refused is not None:
        with pytest.raises(replay.ReplayFailed, match=refused):
            _replayed(options, call)
        return
    keras_output, replayed, exact, numeric = _replayed(options, call)
    assert np.shape(replayed) == np.shape(keras_output)
    assert np.allclose(replayed, keras_output, atol=1e-4), np.abs(replayed - keras_output).max()
    assert exact == pytest.approx(numeric, rel=1e-3, abs=1e-6)
