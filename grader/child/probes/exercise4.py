"""Phases that exercise a student's ``TransformerDecoder``."""

from __future__ import annotations

import numpy as np

from ..tracing import Registry
from . import layer_phases as phases


def run(cls, job: dict, stream, scratch: str) -> None:
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
    x = np.asarray(job["inputs"], dtype="float32")
    encoder = np.asarray(job["encoder_outputs"], dtype="float32")
    future = np.asarray(job["inputs_future_perturbed"], dtype="float32")
    encoder_perturbed = np.asarray(job["encoder_outputs_perturbed"], dtype="float32")
    masks = {
        "inputs_mask": np.asarray(job["target_mask"], dtype=bool),
        "encoder_outputs_mask": np.asarray(job["source_mask"], dtype=bool),
    }

    def plain(layer):
        return layer(x, encoder, training=False)

    forward_ok = phases.traced_forward(stream, layer, registry, plain)

    with stream.phase("causal") as data:
        data["output"] = phases.tensor(layer(x, encoder, training=False))
        data["output_future_perturbed"] = phases.tensor(layer(future, encoder, training=False))

    phases.traced_masked(
        stream, layer, registry,
        lambda layer: layer(x, encoder, training=False, **masks),
        {"output_encoder_perturbed": lambda layer: layer(x, encoder_perturbed, training=False, **masks)},
    )
    phases.config_round_trip(stream, layer, plain)
    phases.saving(stream, layer, scratch, [(x.shape[1:], "float32"), (encoder.shape[1:], "float32")], [x, encoder])
    if forward_ok:
        phases.gradients(stream, layer, registry, plain, np.asarray(job["loss_weights"], "float32"),
                         job["optimizer_steps"])
