"""Phases that exercise a student's ``build_classifier``."""

from __future__ import annotations

import os

import numpy as np

from ...probe.describe import describe_layer
from ...probe.tracing import Registry, keras_class, to_numpy
from ...probe import layer_phases as phases


def run(build, job: dict, stream, scratch: str) -> None:
    import keras

    from ...probe import runtime

    dims = job["constructor_arguments"]
    registry = Registry()
    model = None

    with stream.phase("build") as data:
        built = build(**dims)
        data["type"] = type(built).__name__
        data["is_model"] = isinstance(built, keras.Model)
        if data["is_model"]:
            model = built
            data["layers"] = [keras_class(layer) for layer in phases.sublayers(model)]
    if model is None:
        return
    warmup = phases.warmup_array(job["input_shape"], "int32", high=dims["vocab_size"])
    job = phases.receive_secrets(stream, model, registry, lambda model: model(warmup, training=False), job)
    if job is None:
        return
    tokens = np.asarray(job["tokens"], dtype="int32")
    labels = np.asarray(job["labels"], dtype="float32")

    with stream.phase("predict") as data:
        phases.observe(data, model, registry, lambda model: model(tokens, training=False))
        data.pop("_output", None)
        data["layers"] = {str(registry.layer(sub)): describe_layer(sub, registry) for sub in phases.sublayers(model)}

    with stream.phase("padding") as data:
        # the padding token's embedding changed to the parent's vector: predictions must not move
        table = _token_table(model, dims["vocab_size"])
        data["table"] = None if table is None else registry.variable(table.embeddings)
        if table is not None:
            original = np.asarray(table.embeddings)
            changed = original.copy()
            changed[0] = np.asarray(job["padding_row"], dtype=changed.dtype)
            table.embeddings.assign(changed)
            try:
                phases.observe(data, model, registry, lambda model: model(tokens, training=False))
            finally:
                table.embeddings.assign(original)
            data.pop("_output", None)

    with stream.phase("saving") as data:
        path = os.path.join(scratch, "classifier.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        data["before"] = phases.tensor(model(tokens, training=False))
        data["after"] = phases.tensor(loaded(tokens, training=False))

    with stream.phase("inference") as data:
        # called as code using a trained model calls it: no `training` argument
        data["model"] = [phases.tensor(model(tokens)) for _ in range(2)]

    with stream.phase("gradients") as data:
        variables = list(model.trainable_weights)
        data["variables"] = [registry.variable(v) for v in variables]
        loss_function = keras.losses.BinaryCrossentropy()
        loss, gradients = runtime.gradients(lambda: loss_function(labels, model(tokens, training=False)), variables)
        data["loss"] = float(to_numpy(loss))
        data["gradients"] = [None if g is None else to_numpy(g) for g in gradients]


class _Table:
    def __init__(self, variable):
        self.embeddings = variable


def _token_table(model, vocab_size: int):
    """The token embedding: an Embedding with vocab_size rows, else a 2-D weight with that many rows."""
    import keras

    for layer in phases.sublayers(model):
        if isinstance(layer, keras.layers.Embedding) and int(layer.input_dim) == vocab_size:
            return layer
    for variable in model.weights:
        if len(variable.shape) == 2 and int(variable.shape[0]) == vocab_size:
            return _Table(variable)
    return None
