"""Phases that exercise a student's ``build_classifier``."""

from __future__ import annotations

import os

import numpy as np

from ..describe import describe_layer
from ..tracing import CallTracer, Registry, keras_class
from .layer_phases import tensor


def run(build, job: dict, stream, scratch: str) -> None:
    import keras

    dims = job["constructor_arguments"]
    registry = Registry()
    model = None

    with stream.phase("build") as data:
        built = build(**dims)
        data["type"] = type(built).__name__
        data["is_model"] = isinstance(built, keras.Model)
        if data["is_model"]:
            model = built
            data["layers"] = [keras_class(layer) for layer in model._flatten_layers(include_self=False)]
    if model is None:
        return
    from .layer_phases import receive_secrets, warmup_array

    warmup = warmup_array(job["input_shape"], "int32", high=dims["vocab_size"])
    job = receive_secrets(stream, model, registry, lambda model: model(warmup, training=False), job)
    if job is None:
        return
    tokens = np.asarray(job["tokens"], dtype="int32")
    labels = np.asarray(job["labels"], dtype="float32")

    with stream.phase("predict") as data:
        data["output"] = tensor(model(tokens, training=False))

    with stream.phase("mask") as data:
        tracer = CallTracer(model, registry)
        try:
            with tracer:
                before = model(tokens, training=False)
        finally:
            data["events"] = tracer.events
            data["layers"] = {str(registry.layer(sub)): _brief(describe_layer(sub, registry))
                              for sub in registry.layers}
        data["before"] = tensor(before)
        table = _token_table(model, dims["vocab_size"])
        data["token_table_found"] = table is not None
        if table is not None:
            original = np.asarray(table.embeddings)
            changed = original.copy()
            changed[0] = np.random.default_rng(1).normal(0.0, 3.0, size=changed.shape[1])
            table.embeddings.assign(changed)
            try:
                data["after"] = tensor(model(tokens, training=False))
            finally:
                table.embeddings.assign(original)

    with stream.phase("saving") as data:
        path = os.path.join(scratch, "classifier.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        data["before"] = tensor(model(tokens, training=False))
        data["after"] = tensor(loaded(tokens, training=False))

    with stream.phase("training") as data:
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=3e-3), loss="binary_crossentropy")
        data["loss_before"] = float(model.evaluate(tokens, labels, verbose=0))
        for _ in range(job["training_steps"]):
            model.train_on_batch(tokens, labels)
        data["loss_after"] = float(model.evaluate(tokens, labels, verbose=0))


def _token_table(model, vocab_size: int):
    import keras

    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.Embedding) and int(layer.input_dim) == vocab_size:
            return layer
    return None


def _brief(record: dict) -> dict:
    """Layer facts without weight values: the classifier checks need only the structure."""
    return {k: v for k, v in record.items() if not (isinstance(v, dict) and "value" in v)}
