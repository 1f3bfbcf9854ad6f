"""Phases that exercise a student's third-edition ``TransformerDecoder``: those of exercise 4, for
``call(target, source, source_mask)``, the source's padding mask a required third argument (by
position: its name is the student's)."""

from __future__ import annotations

import numpy as np

from ..exercise4.probe import run as run_decoder


class ExplicitSourceMask:
    @staticmethod
    def plain(layer, x, encoder, masks):
        return layer(x, encoder, np.ones(encoder.shape[:2], dtype=bool), training=False)

    @staticmethod
    def masked(layer, x, encoder, masks):
        return layer(x, encoder, masks["encoder_outputs_mask"], training=False)

    @staticmethod
    def symbolic(keras, layer, target, source, target_mask, source_mask):
        return layer(target, source, source_mask), [target, source, source_mask]

    @staticmethod
    def model_inputs(x, encoder, masks):
        return [x, encoder, masks["encoder_outputs_mask"]]

    @staticmethod
    def saved(x, encoder, masks):
        return ([(x.shape[1:], "float32"), (encoder.shape[1:], "float32"), (encoder.shape[1:2], "bool")],
                [x, encoder, masks["encoder_outputs_mask"]])


def run(cls, job: dict, stream, scratch: str) -> None:
    run_decoder(cls, job, stream, scratch, calls=ExplicitSourceMask)
