"""Phases that exercise a student's ``TransformerDecoder``."""

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
    warm_x = phases.warmup_array(job["input_shape"])
    warm_encoder = phases.warmup_array(job["encoder_shape"])
    job = phases.receive_secrets(stream, layer, registry, lambda layer: layer(warm_x, warm_encoder, training=False),
                                 job)
    if job is None:
        return

    def arrays(prefix=""):
        return (np.asarray(job[prefix + "inputs"], dtype="float32"),
                np.asarray(job[prefix + "encoder_outputs"], dtype="float32"),
                {"inputs_mask": np.asarray(job[prefix + "target_mask"], dtype=bool),
                 "encoder_outputs_mask": np.asarray(job[prefix + "source_mask"], dtype=bool)})

    x, encoder, masks = arrays()
    future = np.asarray(job["inputs_future_perturbed"], dtype="float32")
    encoder_perturbed = np.asarray(job["encoder_outputs_perturbed"], dtype="float32")

    def plain(layer):
        return layer(x, encoder, training=False)

    forward_ok = phases.traced_forward(stream, layer, registry, plain)
    with stream.phase("causal") as data:
        phases.observe(data, layer, registry, lambda layer: layer(future, encoder, training=False))
        data.pop("_output", None)
    with stream.phase("mask") as data:
        phases.observe(data, layer, registry, lambda layer: layer(x, encoder, training=False, **masks))
        data.pop("_output", None)
    with stream.phase("mask_perturbed") as data:
        phases.observe(data, layer, registry, lambda layer: layer(x, encoder_perturbed, training=False, **masks))
        data.pop("_output", None)
    with stream.phase("lengths") as data:
        other_x, other_encoder, other_masks = arrays("lengths_")
        phases.observe(data, layer, registry, lambda layer: layer(other_x, other_encoder, training=False,
                                                                  **other_masks))
        data.pop("_output", None)
    with stream.phase("functional") as data:
        # the book's translation model: both sequence lengths unknown when the model is built
        f_x, f_encoder, f_masks = arrays("functional_")
        e = f_x.shape[-1]
        target = keras.Input(shape=(None, e))
        source = keras.Input(shape=(None, e))
        target_mask = keras.Input(shape=(None,), dtype="bool")
        source_mask = keras.Input(shape=(None,), dtype="bool")
        outputs = layer(target, source, inputs_mask=target_mask, encoder_outputs_mask=source_mask)
        model = keras.Model([target, source, target_mask, source_mask], outputs)
        phases.observe(data, model, registry, lambda model: model(
            [f_x, f_encoder, f_masks["inputs_mask"], f_masks["encoder_outputs_mask"]], training=False))
        data.pop("_output", None)
    phases.config_round_trip(stream, layer, plain)
    phases.saving(stream, layer, scratch, [(x.shape[1:], "float32"), (encoder.shape[1:], "float32")], [x, encoder])
    phases.inference(stream, layer, [(x.shape[1:], "float32"), (encoder.shape[1:], "float32")], [x, encoder])
    if forward_ok:
        phases.gradients(stream, layer, registry, plain, job)
