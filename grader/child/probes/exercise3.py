"""Phases that exercise a student's ``TransformerEncoder``.

Each phase is independent where it can be, so one broken method does not hide
what the others do. Inputs come from the job the parent sent.
"""

from __future__ import annotations

import numpy as np

from ..tracing import Registry
from . import layer_phases as phases


def run(cls, job: dict, stream, scratch: str) -> None:
    x = np.asarray(job["inputs"], dtype="float32")
    x_perturbed = np.asarray(job["inputs_perturbed"], dtype="float32")
    mask = np.asarray(job["mask"], dtype=bool)
    registry = Registry()

    layer = phases.construct(stream, cls, job["constructor_arguments"])
    if layer is None:
        return

    def plain(layer):
        return layer(x, training=False)

    forward_ok = phases.traced_forward(stream, layer, registry, plain)
    phases.traced_masked(
        stream, layer, registry,
        lambda layer: layer(x, mask=mask, training=False),
        {"output_perturbed": lambda layer: layer(x_perturbed, mask=mask, training=False)},
    )
    phases.config_round_trip(stream, layer, plain)
    phases.saving(stream, layer, scratch, [(x.shape[1:], "float32")], [x])
    if forward_ok:
        phases.gradients(stream, layer, registry, plain, np.asarray(job["loss_weights"], "float32"),
                         job["optimizer_steps"])
