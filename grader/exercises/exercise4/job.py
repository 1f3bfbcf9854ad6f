"""The numbers the parent draws for exercise 4: targets and encoder outputs of several lengths,
each padded, and the targets changed after a position (which a causal decoder never sees)."""

from __future__ import annotations

import numpy as np

from ...protocol.job import layer_job, normal, padding, perturbed

DIMS = {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}
BATCH = 3
TARGET, SOURCE = 5, 7
# other (target, source) lengths the decoder must handle: a plain call, and a functional model
# built on Input(shape=(None, embed_dim)) for both inputs
LENGTHS = {"lengths": (7, 4), "functional": (4, 6)}


def public() -> dict:
    e = DIMS["embed_dim"]
    return layer_job(DIMS, [BATCH, TARGET, e], encoder_shape=[BATCH, SOURCE, e],
                     lengths={name: list(pair) for name, pair in LENGTHS.items()})


def secret(rng: np.random.Generator, seed: int) -> dict:
    e = DIMS["embed_dim"]
    secret = {}
    for name, (target, source) in {"": (TARGET, SOURCE), **LENGTHS}.items():
        prefix = f"{name}_" if name else ""
        target_mask, source_mask = padding(rng, BATCH, target), padding(rng, BATCH, source)
        secret[prefix + "inputs"] = normal(rng, (BATCH, target, e))
        secret[prefix + "encoder_outputs"] = normal(rng, (BATCH, source, e))
        secret[prefix + "target_mask"] = target_mask
        secret[prefix + "source_mask"] = source_mask
    future_from = int(rng.integers(1, TARGET))
    later = np.zeros((BATCH, TARGET), dtype=bool)
    later[:, future_from:] = True
    secret["future_from"] = future_from
    secret["inputs_future_perturbed"] = perturbed(rng, secret["inputs"], later)
    secret["encoder_outputs_perturbed"] = perturbed(rng, secret["encoder_outputs"], ~secret["source_mask"])
    secret["loss_weights"] = normal(rng, secret["inputs"].shape)
    return secret
