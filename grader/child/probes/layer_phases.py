"""Phases shared by the probes of layer exercises.

Each takes the layer and a ``call(layer)`` function that runs it on the job's
inputs, so one implementation serves layers with one input (the encoder) or
two (the decoder).
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..describe import describe_layer, describe_variable
from ..tracing import CallTracer, Registry, to_numpy

LAYER_NAME = "layer_under_test"


def run_sequence_layer(cls, job: dict, stream, scratch: str) -> None:
    """Every phase for a layer that maps (batch, seq, embed_dim) to the same shape and
    takes a (batch, seq) padding mask: the self-attention block and the encoder."""
    registry = Registry()
    layer = construct(stream, cls, job["constructor_arguments"])
    if layer is None:
        return
    warmup = warmup_array(job["input_shape"])
    job = receive_secrets(stream, layer, registry, lambda layer: layer(warmup, training=False), job)
    if job is None:
        return
    x = np.asarray(job["inputs"], dtype="float32")
    x_perturbed = np.asarray(job["inputs_perturbed"], dtype="float32")
    mask = np.asarray(job["mask"], dtype=bool)

    def plain(layer):
        return layer(x, training=False)

    forward_ok = traced_forward(stream, layer, registry, plain)
    traced_masked(
        stream, layer, registry,
        lambda layer: layer(x, mask=mask, training=False),
        {"output_perturbed": lambda layer: layer(x_perturbed, mask=mask, training=False)},
    )
    config_round_trip(stream, layer, plain)
    saving(stream, layer, scratch, [(x.shape[1:], "float32")], [x])
    if forward_ok:
        gradients(stream, layer, registry, plain, np.asarray(job["loss_weights"], "float32"), job["optimizer_steps"])


def construct(stream, cls, sizes: dict):
    """Build the layer by keyword (with a name) and positionally; None if it cannot be built."""
    import keras

    layer = None
    with stream.phase("construct") as data:
        data["positional_error"] = None
        try:
            cls(*sizes.values())
        except Exception as exc:
            data["positional_error"] = stream.describe_error(exc)
        data["kwargs_error"] = None
        try:
            layer = cls(**sizes, name=LAYER_NAME)
        except TypeError as exc:
            if "name" not in str(exc):
                raise
            data["kwargs_error"] = stream.describe_error(exc)
            layer = cls(**sizes)
        data["is_layer"] = isinstance(layer, keras.layers.Layer)
        data["name"] = str(getattr(layer, "name", ""))
        data["requested_name"] = LAYER_NAME
    return layer


def warmup_array(shape, dtype="float32", high: int | None = None) -> np.ndarray:
    """A public input of the job's shape, to build the layer before the secret inputs arrive."""
    rng = np.random.default_rng(12345)
    if high is not None:
        return rng.integers(1, high, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def receive_secrets(stream, layer, registry: Registry, build, job: dict) -> dict | None:
    """Build the layer on a public input, report its variables (and which layers own them),
    then read the parent's secret part of the job and set every float weight to the value
    the parent chose. Returns the whole job, or None when there is nothing to go on with."""
    built = False
    with stream.phase("variables") as data:
        build(layer)
        data["variables"] = [describe_variable(v, registry) for v in layer.weights]
        data["layers"] = {str(registry.layer(sub)): describe_layer(sub, registry, values=False)
                          for sub in _sublayers(layer)}
        built = True
    if not built:
        return None
    secrets = stream.receive()
    if not isinstance(secrets, dict):
        return None
    assigned = False
    with stream.phase("values") as data:
        values = secrets.get("values") or {}
        count = 0
        for variable in layer.weights:
            key = str(registry.variable(variable))
            if key in values:
                variable.assign(np.asarray(values[key], dtype=str(variable.dtype)))
                count += 1
        data["assigned"] = count
        assigned = True
    if not assigned:
        return None
    return dict(job, **{k: v for k, v in secrets.items() if k != "values"})


def _sublayers(layer) -> list:
    try:
        return list(layer._flatten_layers(include_self=False))
    except Exception:
        return []


def traced_forward(stream, layer, registry: Registry, call) -> bool:
    """Run ``call`` once to build, then trace it: output, layer calls, variables."""
    ok = False
    with stream.phase("forward") as data:
        call(layer)  # builds the layer, so the traced call shows only the computation
        tracer = CallTracer(layer, registry)
        with tracer:
            output = call(layer)
        data["output"] = tensor(output)
        data["events"] = tracer.events
        data["layers"] = {str(registry.layer(sub)): describe_layer(sub, registry) for sub in registry.layers}
        data["variables"] = [describe_variable(v, registry) for v in layer.weights]
        data["trainable"] = [registry.variable(v) for v in layer.trainable_weights]
        ok = True
    return ok


def traced_masked(stream, layer, registry: Registry, call, perturbed_calls: dict, phase: str = "mask") -> None:
    """Trace a masked call (keeping what reached attention even if it raises), then
    run the same call on inputs whose padded or future positions were changed."""
    with stream.phase(phase) as data:
        tracer = CallTracer(layer, registry)
        try:
            with tracer:
                output = call(layer)
        finally:
            data["events"] = [e for e in tracer.events if e["class"] == "MultiHeadAttention"]
        data["output"] = tensor(output)
        data["supports_masking"] = bool(getattr(layer, "supports_masking", False))
        data["output_mask"] = tensor(getattr(output, "_keras_mask", None))  # what Keras passes on
        for name, perturbed in perturbed_calls.items():
            data[name] = tensor(perturbed(layer))


def config_round_trip(stream, layer, call) -> None:
    with stream.phase("config") as data:
        config = layer.get_config()
        data["config_type"] = type(config).__name__
        try:
            data["config"] = json.loads(json.dumps(config))
            data["json_error"] = None
        except (TypeError, ValueError) as exc:
            data["config"] = {str(k): repr(v)[:200] for k, v in dict(config).items()}
            data["json_error"] = str(exc)[:500]
        rebuilt = type(layer).from_config(config)
        data["rebuilt_name"] = str(rebuilt.name)
        data["rebuilt_trainable"] = bool(rebuilt.trainable)
        call(rebuilt)
        data["rebuilt_shapes"] = [[int(d) for d in v.shape] for v in rebuilt.weights]
        data["original_shapes"] = [[int(d) for d in v.shape] for v in layer.weights]
        rebuilt.set_weights(layer.get_weights())
        data["rebuilt_output"] = tensor(call(rebuilt))
        data["original_output"] = tensor(call(layer))


def saving(stream, layer, scratch: str, input_specs: list[tuple], arrays: list[np.ndarray]) -> None:
    """A functional model around the layer survives .keras save and load."""
    import keras

    with stream.phase("saving") as data:
        inputs = [keras.Input(shape=shape, dtype=dtype) for shape, dtype in input_specs]
        outputs = layer(*inputs)
        model = keras.Model(inputs if len(inputs) > 1 else inputs[0], outputs)
        path = os.path.join(scratch, "layer.keras")
        model.save(path)
        loaded = keras.models.load_model(path, custom_objects={type(layer).__name__: type(layer)})
        feed = arrays if len(arrays) > 1 else arrays[0]
        data["before"] = tensor(model(feed, training=False))
        data["after"] = tensor(loaded(feed, training=False))


def gradients(stream, layer, registry: Registry, call, loss_weights: np.ndarray, steps: int) -> None:
    """Gradients of a seeded loss for every trainable variable, then a few SGD steps."""
    import keras
    import tensorflow as tf

    with stream.phase("gradients") as data:
        variables = list(layer.trainable_weights)
        data["variables"] = [registry.variable(v) for v in variables]

        def loss_and_gradients():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.cast(tf.convert_to_tensor(call(layer)), tf.float32) * loss_weights)
            return tape.gradient(loss, variables)

        gradients = loss_and_gradients()
        data["gradients"] = [None if g is None else to_numpy(_dense(g)) for g in gradients]
        optimizer = keras.optimizers.SGD(learning_rate=0.05)
        for step in range(steps):
            if step:
                gradients = loss_and_gradients()
            pairs = [(g, v) for g, v in zip(gradients, variables) if g is not None]
            optimizer.apply([g for g, _ in pairs], [v for _, v in pairs])
        data["after_steps"] = {str(registry.variable(v)): to_numpy(v) for v in layer.weights}


def _dense(gradient):
    import tensorflow as tf

    if isinstance(gradient, tf.IndexedSlices):
        return tf.convert_to_tensor(gradient)
    return gradient


def tensor(value):
    """An output as a plain numeric array, or a description of what it was instead.
    Whatever the object claims about itself, only its numbers travel on."""
    if isinstance(value, (list, tuple, dict)) or value is None:
        return {"not_a_tensor": type(value).__name__}
    try:
        array = np.array(to_numpy(value), copy=True, subok=False)
    except Exception:
        return {"not_a_tensor": type(value).__name__}
    if array.dtype.kind not in "biuf" or type(array) is not np.ndarray:
        return {"not_a_tensor": type(value).__name__}
    return array
