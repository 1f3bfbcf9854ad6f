"""The numbers the parent chooses: the public shape of a job, and its secret part.

The public part (sizes, shapes, step counts) goes to the child on start. The
secret part — inputs, padding, perturbations, loss weights and a value for
every floating-point weight of the student's layer — is drawn from a per-run
seed only after the child has loaded the submission, built the layer and
reported its variables, and is sent down the control channel. The checks then
judge outputs and gradients against what the parent computes from these same
numbers, so evidence made up without running the layer cannot agree with them.
"""

from __future__ import annotations

import math
import secrets as _system_random

import numpy as np

MAX_VARIABLES = 2000
MAX_WEIGHT_ELEMENTS = 20_000_000
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
SGD_LEARNING_RATE = 0.05


class BadBuildReport(ValueError):
    """The child's report of the layer's variables is malformed."""


def new_seed() -> int:
    """A seed nobody can guess before the run: what a run uses when none is given."""
    return _system_random.randbits(62)


# --------------------------------------------------------------------------- the exercises' jobs

SEQUENCE_DIMS = {
    "exercise2": {"embed_dim": 8, "num_heads": 2},
    "exercise3": {"embed_dim": 8, "dense_dim": 16, "num_heads": 2},
}
EMBEDDING_DIMS = {"sequence_length": 10, "input_dim": 50, "output_dim": 8}
DECODER_DIMS = {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}
CLASSIFIER_DIMS = {"vocab_size": 40, "sequence_length": 12, "embed_dim": 16, "dense_dim": 32, "num_heads": 2}
BATCH = 3
SEQUENCE = 6
TOKENS = 7
TARGET, SOURCE = 5, 7
# other (target, source) lengths the decoder must handle: a plain call, and a functional model
# built on Input(shape=(None, embed_dim)) for both inputs
DECODER_LENGTHS = {"lengths": (7, 4), "functional": (4, 6)}
CLASSIFIER_BATCH = 8


def public_job(exercise) -> dict:
    """What the child may know before the submission loads: sizes, shapes and step counts."""
    if exercise.id in SEQUENCE_DIMS:
        dims = SEQUENCE_DIMS[exercise.id]
        return {"dims": dims, "constructor_arguments": dims, "input_shape": [BATCH, SEQUENCE, dims["embed_dim"]],
                "optimizer_steps": 3, "learning_rate": SGD_LEARNING_RATE}
    if exercise.id == "exercise1":
        return {"dims": EMBEDDING_DIMS, "constructor_arguments": EMBEDDING_DIMS, "input_shape": [BATCH, TOKENS],
                "optimizer_steps": 3, "learning_rate": SGD_LEARNING_RATE}
    if exercise.id == "exercise4":
        e = DECODER_DIMS["embed_dim"]
        return {"dims": DECODER_DIMS, "constructor_arguments": DECODER_DIMS, "input_shape": [BATCH, TARGET, e],
                "encoder_shape": [BATCH, SOURCE, e], "optimizer_steps": 3, "learning_rate": SGD_LEARNING_RATE,
                "lengths": {name: list(pair) for name, pair in DECODER_LENGTHS.items()}}
    if exercise.id == "exercise5":
        return {"dims": CLASSIFIER_DIMS, "constructor_arguments": CLASSIFIER_DIMS,
                "input_shape": [CLASSIFIER_BATCH, CLASSIFIER_DIMS["sequence_length"]], "training_steps": 15}
    raise KeyError(exercise.id)


def secret_job(exercise, seed: int, build: dict) -> dict:
    """The secret part of the job for this run: the exercise's inputs drawn from ``seed``, and a
    value for every floating-point variable the child reported in ``build``."""
    rng = np.random.default_rng([seed, 0])
    public = public_job(exercise)
    if exercise.id in SEQUENCE_DIMS:
        secret = _sequence_layer(rng, public["dims"])
    elif exercise.id == "exercise1":
        secret = _embedding(rng)
    elif exercise.id == "exercise4":
        secret = _decoder(rng)
    else:
        secret = _classifier(rng, seed)
    secret["values"] = draw_values(np.random.default_rng([seed, 1]), build)
    return secret


def padding(rng: np.random.Generator, batch: int, length: int) -> np.ndarray:
    """A (batch, length) mask of real positions: right-padded rows of random lengths, at least two
    real positions each, one row full and one row padded."""
    lengths = rng.integers(2, length + 1, size=batch)
    lengths[rng.integers(0, batch)] = length
    short = [i for i in range(batch) if lengths[i] == length]
    if len(short) == batch:
        lengths[(short[0] + 1) % batch] = rng.integers(2, length)
    return np.arange(length)[None, :] < lengths[:, None]


def _normal(rng, shape, scale=1.0):
    return rng.normal(0.0, scale, size=shape).astype(np.float32)


def _perturbed(rng, array, where):
    changed = array.copy()
    changed[where] = _normal(rng, changed[where].shape, 3.0)
    return changed


def _sequence_layer(rng, dims) -> dict:
    e = dims["embed_dim"]
    mask = padding(rng, BATCH, SEQUENCE)
    x = _normal(rng, (BATCH, SEQUENCE, e))
    return {"inputs": x, "mask": mask, "inputs_perturbed": _perturbed(rng, x, ~mask),
            "loss_weights": _normal(rng, x.shape)}


def _embedding(rng) -> dict:
    mask = padding(rng, BATCH, TOKENS)
    tokens = np.where(mask, rng.integers(1, EMBEDDING_DIMS["input_dim"], size=mask.shape), 0).astype(np.int32)
    return {"tokens": tokens, "mask": mask,
            "loss_weights": _normal(rng, (BATCH, TOKENS, EMBEDDING_DIMS["output_dim"]))}


def _decoder(rng) -> dict:
    e = DECODER_DIMS["embed_dim"]
    secret = {}
    for name, (target, source) in {"": (TARGET, SOURCE), **DECODER_LENGTHS}.items():
        prefix = f"{name}_" if name else ""
        target_mask, source_mask = padding(rng, BATCH, target), padding(rng, BATCH, source)
        secret[prefix + "inputs"] = _normal(rng, (BATCH, target, e))
        secret[prefix + "encoder_outputs"] = _normal(rng, (BATCH, source, e))
        secret[prefix + "target_mask"] = target_mask
        secret[prefix + "source_mask"] = source_mask
    future_from = int(rng.integers(1, TARGET))
    later = np.zeros((BATCH, TARGET), dtype=bool)
    later[:, future_from:] = True
    secret["future_from"] = future_from
    secret["inputs_future_perturbed"] = _perturbed(rng, secret["inputs"], later)
    secret["encoder_outputs_perturbed"] = _perturbed(rng, secret["encoder_outputs"], ~secret["source_mask"])
    secret["loss_weights"] = _normal(rng, secret["inputs"].shape)
    return secret


def _classifier(rng, seed: int) -> dict:
    from ..exercises.tasks import contains_token_task

    d = CLASSIFIER_DIMS
    tokens, labels = contains_token_task(int(rng.integers(0, 2 ** 31)), vocab_size=d["vocab_size"],
                                         sequence_length=d["sequence_length"], count=CLASSIFIER_BATCH)
    return {"tokens": tokens, "labels": labels, "padding_row": _normal(rng, (d["embed_dim"],), 3.0)}


# --------------------------------------------------------------------------- weight values


def validated_variables(build: dict) -> list[dict]:
    """The variables of a build report, checked for form and size."""
    variables = build.get("variables") if isinstance(build, dict) else None
    if not isinstance(variables, list) or len(variables) > MAX_VARIABLES:
        raise BadBuildReport("the list of variables is missing or too long")
    seen, total = set(), 0
    for variable in variables:
        if not isinstance(variable, dict):
            raise BadBuildReport("a variable is not described")
        key, shape = variable.get("id"), variable.get("shape")
        if not isinstance(key, int) or isinstance(key, bool) or key < 0 or key in seen:
            raise BadBuildReport("a variable id is missing, negative or repeated")
        seen.add(key)
        if not isinstance(shape, list) or len(shape) > 6 or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape):
            raise BadBuildReport("a variable's shape is malformed")
        if not isinstance(variable.get("dtype"), str) or not isinstance(variable.get("trainable"), bool):
            raise BadBuildReport("a variable's dtype or trainable flag is malformed")
        total += math.prod(shape)
        if total > MAX_WEIGHT_ELEMENTS:
            raise BadBuildReport("the variables are far larger than the exercise needs")
    return variables


def _claimed_roles(build: dict) -> dict[int, str]:
    """What the child says each variable is, used only to pick a natural distribution."""
    roles: dict[int, str] = {}
    layers = build.get("layers") if isinstance(build, dict) else None
    if not isinstance(layers, dict):
        return roles
    for layer in layers.values():
        params = layer.get("params") if isinstance(layer, dict) else None
        if not isinstance(params, dict):
            continue
        for role, key in params.items():
            if isinstance(key, int) and isinstance(role, str):
                roles.setdefault(key, role)
    return roles


def draw_values(rng: np.random.Generator, build: dict) -> dict[str, np.ndarray]:
    """A value for every floating-point variable, by shape (and by the role the child claims,
    which only changes the distribution, never whether a value is drawn)."""
    roles = _claimed_roles(build)
    values = {}
    for variable in validated_variables(build):
        if variable["dtype"] not in FLOAT_DTYPES:
            continue  # seed generator states, step counters
        shape = tuple(variable["shape"])
        role = roles.get(variable["id"])
        if not variable["trainable"]:
            value = rng.uniform(0.5, 1.5, size=shape)  # positive: moving variances and the like stay valid
        elif role == "gamma":
            value = 1.0 + rng.normal(0.0, 0.3, size=shape)
        elif role == "embeddings":
            value = rng.normal(0.0, 1.0, size=shape)
        elif len(shape) <= 1:
            value = rng.normal(0.0, 0.3, size=shape)
        else:
            fan_in = max(1, math.prod(shape[:-1]))
            value = rng.normal(0.0, 1.0 / math.sqrt(fan_in), size=shape)
        values[str(variable["id"])] = np.asarray(value, dtype=np.float32)
    return values
