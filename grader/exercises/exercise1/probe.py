"""Phases that exercise a student's ``PositionalEmbedding``."""

from __future__ import annotations

import numpy as np

from ...probe.tracing import Registry
from ...probe import layer_phases as phases


def run(cls, job: dict, stream, scratch: str) -> None:
    import keras

    registry = Registry()
    layer = phases.construct(stream, cls, job["constructor_arguments"])
    if layer is None:
        return
    warmup = phases.warmup_array(job["input_shape"], "int32", high=job["dims"]["input_dim"])
    job = phases.receive_secrets(stream, layer, registry, lambda layer: layer(warmup), job)
    if job is None:
        return
    tokens = np.asarray(job["tokens"], dtype="int32")

    def plain(layer):
        return layer(tokens)

    forward_ok = phases.traced_forward(stream, layer, registry, plain)

    with stream.phase("mask") as data:
        # by position, as Keras itself calls it: a layer without its own compute_mask has Layer's
        # compute_mask(inputs, previous_mask), which gives the previous mask (here none)
        data["mask"] = phases.tensor(layer.compute_mask(tokens, None))
        data["supports_masking"] = bool(getattr(layer, "supports_masking", False))

    with stream.phase("functional") as data:
        # the mask must follow the output symbolically, to a pooling layer that uses it
        inputs = keras.Input(shape=(None,), dtype="int32")
        embedded = layer(inputs)
        symbolic_mask = getattr(embedded, "_keras_mask", None)
        data["symbolic_mask_shape"] = None if symbolic_mask is None else [
            None if d is None else int(d) for d in symbolic_mask.shape]
        model = keras.Model(inputs, keras.layers.GlobalAveragePooling1D()(embedded))
        phases.observe(data, model, registry, lambda model: model(tokens, training=False))
        data.pop("_output", None)

    phases.config_round_trip(stream, layer, plain)
    phases.saving(stream, layer, scratch, [((tokens.shape[1],), "int32")], [tokens])
    if forward_ok:
        phases.gradients(stream, layer, registry, plain, job)
