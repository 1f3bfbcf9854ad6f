"""Phases that exercise a student's ``TransformerDecoder``. ``KerasMasks`` is how the second
edition's decoder takes its masks; the third edition's (``grader.exercises.ch15_decoder``) takes
them another way, through the same phases."""

from __future__ import annotations

import numpy as np

from ...probe.tracing import Registry
from ...probe import layer_phases as phases


class KerasMasks:
    """``call(inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None)``: both padding
    masks by keyword; the plain call passes none."""

    @staticmethod
    def plain(layer, x, encoder, masks):
        return layer(x, encoder, training=False)

    @staticmethod
    def masked(layer, x, encoder, masks):
        return layer(x, encoder, training=False, **masks)

    @staticmethod
    def symbolic(keras, layer, target, source, target_mask, source_mask):
        """A functional model's output and its inputs, for the masks as symbolic inputs."""
        outputs = layer(target, source, inputs_mask=target_mask, encoder_outputs_mask=source_mask)
        return outputs, [target, source, target_mask, source_mask]

    @staticmethod
    def model_inputs(x, encoder, masks):
        return [x, encoder, masks["inputs_mask"], masks["encoder_outputs_mask"]]

    @staticmethod
    def saved(x, encoder, masks):
        """What a saved model takes: (specs, arrays)."""
        return [(x.shape[1:], "float32"), (encoder.shape[1:], "float32")], [x, encoder]


def run(cls, job: dict, stream, scratch: str, calls=KerasMasks) -> None:
    import keras

    registry = Registry()
    layer = phases.construct(stream, cls, job["constructor_arguments"])
    if layer is None:
        return
    warm_x = phases.warmup_array(job["input_shape"])
    warm_encoder = phases.warmup_array(job["encoder_shape"])
    warm_masks = {"inputs_mask": np.ones(warm_x.shape[:2], dtype=bool),
                  "encoder_outputs_mask": np.ones(warm_encoder.shape[:2], dtype=bool)}
    job = phases.receive_secrets(stream, layer, registry,
                                 lambda layer: calls.plain(layer, warm_x, warm_encoder, warm_masks), job)
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
    unmasked = {"inputs_mask": np.ones(x.shape[:2], dtype=bool),
                "encoder_outputs_mask": np.ones(encoder.shape[:2], dtype=bool)}

    def plain(layer):
        return calls.plain(layer, x, encoder, unmasked)

    forward_ok = phases.traced_forward(stream, layer, registry, plain)
    with stream.phase("causal") as data:
        phases.observe(data, layer, registry, lambda layer: calls.plain(layer, future, encoder, unmasked))
        data.pop("_output", None)
    with stream.phase("mask") as data:
        phases.observe(data, layer, registry, lambda layer: calls.masked(layer, x, encoder, masks))
        data.pop("_output", None)
    with stream.phase("mask_perturbed") as data:
        phases.observe(data, layer, registry, lambda layer: calls.masked(layer, x, encoder_perturbed, masks))
        data.pop("_output", None)
    with stream.phase("lengths") as data:
        other_x, other_encoder, other_masks = arrays("lengths_")
        phases.observe(data, layer, registry, lambda layer: calls.masked(layer, other_x, other_encoder, other_masks))
        data.pop("_output", None)
    with stream.phase("functional") as data:
        # the book's translation model: both sequence lengths unknown when the model is built
        f_x, f_encoder, f_masks = arrays("functional_")
        e = f_x.shape[-1]
        target = keras.Input(shape=(None, e))
        source = keras.Input(shape=(None, e))
        target_mask = keras.Input(shape=(None,), dtype="bool")
        source_mask = keras.Input(shape=(None,), dtype="bool")
        outputs, inputs = calls.symbolic(keras, layer, target, source, target_mask, source_mask)
        model = keras.Model(inputs, outputs)
        phases.observe(data, model, registry, lambda model: model(calls.model_inputs(f_x, f_encoder, f_masks),
                                                                  training=False))
        data.pop("_output", None)
    phases.config_round_trip(stream, layer, plain)
    specs, feed = calls.saved(x, encoder, unmasked)  # the plain call's inputs: inference is compared with its replay
    model = phases.saving(stream, layer, scratch, specs, feed)
    phases.inference(stream, layer, specs, feed, model)
    if forward_ok:
        phases.gradients(stream, layer, registry, plain, job)
