"""Phases that exercise a student's ``TransformerEncoder``.

Each phase is independent where it can be, so one broken method does not hide
what the others do. Inputs come from the job the parent sent.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..describe import describe_layer, describe_variable
from ..tracing import CallTracer, Registry, to_numpy

LAYER_NAME = "encoder_under_test"


def run(cls, job: dict, stream, scratch: str) -> None:
    import keras
    import tensorflow as tf

    dims = job["dims"]
    embed_dim, dense_dim, num_heads = dims["embed_dim"], dims["dense_dim"], dims["num_heads"]
    x = np.asarray(job["inputs"], dtype="float32")
    x_perturbed = np.asarray(job["inputs_perturbed"], dtype="float32")
    mask = np.asarray(job["mask"], dtype=bool)
    loss_weights = np.asarray(job["loss_weights"], dtype="float32")
    registry = Registry()
    layer = None

    with stream.phase("construct") as data:
        data["positional_error"] = None
        try:
            cls(embed_dim, dense_dim, num_heads)
        except Exception as exc:
            data["positional_error"] = stream.describe_error(exc)
        data["kwargs_error"] = None
        sizes = {"embed_dim": embed_dim, "dense_dim": dense_dim, "num_heads": num_heads}
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
    if layer is None:
        return

    forward_ok = False
    with stream.phase("forward") as data:
        layer(x, training=False)  # builds the layer, so the traced call shows only the computation
        tracer = CallTracer(layer, registry)
        output = tracer.trace(x, training=False)
        data["output_type"] = type(output).__name__
        data["output"] = _tensor(output)
        data["events"] = tracer.events
        data["layers"] = {str(registry.layer(sub)): describe_layer(sub, registry) for sub in registry.layers}
        data["variables"] = [describe_variable(v, registry) for v in layer.weights]
        data["trainable"] = [registry.variable(v) for v in layer.trainable_weights]
        forward_ok = True

    with stream.phase("mask") as data:
        tracer = CallTracer(layer, registry)
        try:
            output = tracer.trace(x, mask=mask, training=False)
        finally:
            data["events"] = [e for e in tracer.events if e["class"] == "MultiHeadAttention"]
        data["output"] = _tensor(output)
        data["supports_masking"] = bool(getattr(layer, "supports_masking", False))
        data["output_mask"] = _tensor(getattr(output, "_keras_mask", None))  # what Keras passes on
        data["output_perturbed"] = _tensor(layer(x_perturbed, mask=mask, training=False))

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
        rebuilt(x, training=False)
        data["rebuilt_shapes"] = [[int(d) for d in v.shape] for v in rebuilt.weights]
        data["original_shapes"] = [[int(d) for d in v.shape] for v in layer.weights]
        rebuilt.set_weights(layer.get_weights())
        data["rebuilt_output"] = _tensor(rebuilt(x, training=False))
        data["original_output"] = _tensor(layer(x, training=False))

    with stream.phase("saving") as data:
        inputs = keras.Input(shape=x.shape[1:])
        model = keras.Model(inputs, layer(inputs))
        path = os.path.join(scratch, "encoder.keras")
        model.save(path)
        loaded = keras.models.load_model(path, custom_objects={type(layer).__name__: type(layer)})
        data["before"] = _tensor(model(x, training=False))
        data["after"] = _tensor(loaded(x, training=False))

    if not forward_ok:
        return
    with stream.phase("gradients") as data:
        variables = list(layer.trainable_weights)
        data["variables"] = [registry.variable(v) for v in variables]
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.convert_to_tensor(layer(x, training=False)) * loss_weights)
        gradients = tape.gradient(loss, variables)
        data["gradients"] = [None if g is None else to_numpy(_dense(g)) for g in gradients]
        optimizer = keras.optimizers.SGD(learning_rate=0.05)
        for _ in range(job["optimizer_steps"]):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.convert_to_tensor(layer(x, training=False)) * loss_weights)
            gradients = tape.gradient(loss, variables)
            pairs = [(g, v) for g, v in zip(gradients, variables) if g is not None]
            optimizer.apply([g for g, _ in pairs], [v for _, v in pairs])
        data["after_steps"] = {str(registry.variable(v)): to_numpy(v) for v in layer.weights}


def _dense(gradient):
    import tensorflow as tf

    if isinstance(gradient, tf.IndexedSlices):
        return tf.convert_to_tensor(gradient)
    return gradient


def _tensor(value):
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
