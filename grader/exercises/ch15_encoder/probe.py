"""Phases that exercise a student's third-edition ``TransformerEncoder``: those of exercise 3, with
the padding mask passed as the call's second argument, ``call(source, source_mask)``."""

from __future__ import annotations

from ...probe.layer_phases import ExplicitMask, run_sequence_layer


def run(cls, job: dict, stream, scratch: str) -> None:
    run_sequence_layer(cls, job, stream, scratch, calls=ExplicitMask)
