"""A grading process on TensorFlow traces Keras's unset variables as placeholders
(``grader.probe.runtime.trace_unset_variables_as_placeholders``): checked against the installed Keras,
side by side with Keras's own reads, in one process.

The whole catalogue's verdicts are unchanged by it (tests/test_golden_verdicts.py); here, what it
changes and what it must not: the trace no longer computes Keras's initializers, the values the
variables get and the shapes a trace gives are the same, and an initializer that is not Keras's own
pure one (a student's, one drawing from a seed generator) is called exactly as Keras calls it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r'''
import json
import keras
import numpy as np
from keras.src.backend.common import variables
from keras.src.initializers import random_initializers
from grader.probe import runtime

keras_value = variables.Variable.value
runtime.trace_unset_variables_as_placeholders()
placeholder_value = variables.Variable.value
runtime.trace_unset_variables_as_placeholders()  # a second start changes nothing
calls = {"keras": 0, "student": 0}
keras_call = random_initializers.VarianceScaling.__call__


def counted(self, *args, **kwargs):
    calls["keras"] += 1
    return keras_call(self, *args, **kwargs)


random_initializers.VarianceScaling.__call__ = counted


class StudentInitializer(keras.initializers.Initializer):
    def __call__(self, shape, dtype=None):
        calls["student"] += 1
        return keras.ops.ones(shape, dtype=dtype) * 0.5


class Lazy(keras.layers.Layer):
    """No build(): Keras builds it by tracing call, which creates the weights and reads them."""

    def __init__(self, initializers, **kwargs):
        super().__init__(**kwargs)
        self.initializers = initializers
        self.dense = keras.layers.Dense(5, kernel_initializer="zeros")  # Keras's, not random

    def call(self, x):
        if not hasattr(self, "kernels"):
            self.kernels = [self.add_weight(shape=(3, 5), initializer=i) for i in self.initializers]
        out = self.dense(x)
        for kernel in self.kernels:
            out = out + keras.ops.matmul(x, kernel)
        return keras.ops.concatenate([out, keras.ops.sum(x, axis=-1, keepdims=True)], axis=-1)


def run(value, initializers, how):
    variables.Variable.value = value
    for key in calls:
        calls[key] = 0
    keras.utils.set_random_seed(7)
    layer = Lazy(initializers())
    x = np.arange(24, dtype="float32").reshape(2, 4, 3) / 10
    if how == "functional":
        inputs = keras.Input((4, 3))
        spec = layer(inputs)
        model = keras.Model(inputs, spec)
        shape, dtype = [None if d is None else int(d) for d in spec.shape], str(spec.dtype)
        output = model(x)
    else:
        output = layer(x)
        shape, dtype = [int(d) for d in output.shape], str(output.dtype)
    return {"shape": shape, "dtype": dtype, "calls": dict(calls),
            "weights": [np.asarray(w).tolist() for w in layer.get_weights()],
            "output": np.asarray(output).tolist()}


cases = {
    "keras": lambda: ["glorot_uniform", keras.initializers.HeNormal(seed=3)],
    "student": lambda: [StudentInitializer(), "glorot_uniform"],
    "seed_generator": lambda: [keras.initializers.GlorotUniform(seed=keras.random.SeedGenerator(5))],
}
print(json.dumps({
    "patched": placeholder_value is not keras_value,
    "results": {f"{case}/{how}": {"keras": run(keras_value, make, how), "placeholders": run(placeholder_value, make, how)}
                for case, make in cases.items() for how in ("functional", "eager")},
}))
'''


def _results() -> dict:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow"),
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_unset_variables_trace_as_placeholders_and_nothing_else_changes():
    found = _results()
    assert found["patched"]
    for name, pair in found["results"].items():
        keras_run, placeholders = pair["keras"], pair["placeholders"]
        for key in ("shape", "dtype", "weights", "output"):  # the same layer, the same numbers
            assert placeholders[key] == keras_run[key], (name, key)
        # a student's initializer is called as often as Keras calls it
        assert placeholders["calls"]["student"] == keras_run["calls"]["student"], name
    keras_calls = {name: (pair["keras"]["calls"]["keras"], pair["placeholders"]["calls"]["keras"])
                   for name, pair in found["results"].items()}
    # Keras's own unseeded and integer-seeded random initializers: called in the trace and again for
    # the values by Keras; with placeholders only for the values, once per variable
    for how in ("functional", "eager"):
        assert keras_calls[f"keras/{how}"] == (4, 2)
        assert keras_calls[f"student/{how}"] == (2, 1)
        # one drawing from a seed generator (each draw moves its state on) runs in the trace as in Keras
        assert keras_calls[f"seed_generator/{how}"] == (2, 2)
