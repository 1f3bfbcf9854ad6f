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

PUBLIC_KEYS = ("dims", "constructor_arguments", "optimizer_steps", "training_steps", "future_from")
# the arrays whose shapes the child needs to build the layer before the secrets arrive
SHAPE_KEYS = {"input_shape": ("inputs", "tokens"), "encoder_shape": ("encoder_outputs",)}
MAX_VARIABLES = 2000
MAX_WEIGHT_ELEMENTS = 20_000_000
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


class BadBuildReport(ValueError):
    """The child's report of the layer's variables is malformed."""


def new_seed() -> int:
    """A seed nobody can guess before the run: what a run uses when none is given."""
    return _system_random.randbits(62)


def public_job(exercise) -> dict:
    full = exercise.job(0)
    job = {key: full[key] for key in PUBLIC_KEYS if key in full}
    for shape_key, sources in SHAPE_KEYS.items():
        for source in sources:
            if source in full:
                job[shape_key] = list(np.asarray(full[source]).shape)
                break
    return job


def secret_job(exercise, seed: int, build: dict) -> dict:
    """The secret part of the job for this run: the exercise's inputs drawn from ``seed``, and
    a value for every floating-point variable the child reported in ``build``."""
    full = exercise.job(seed)
    secret = {key: value for key, value in full.items() if key not in PUBLIC_KEYS}
    secret["values"] = draw_values(np.random.default_rng([seed, 1]), build)
    return secret


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
        if not isinstance(layer, dict):
            continue
        for name in ("gamma", "beta", "kernel", "bias", "embeddings", "output_kernel"):
            param = layer.get(name)
            if isinstance(param, dict) and isinstance(param.get("id"), int):
                roles.setdefault(param["id"], name)
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
