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

from . import limits, wire

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
SGD_LEARNING_RATE = 0.05


class BadBuildReport(ValueError):
    """The child's report of the layer's variables is malformed."""


def new_seed() -> int:
    """A seed nobody can guess before the run: what a run uses when none is given."""
    return _system_random.randbits(62)


# --------------------------------------------------------------------------- the exercises' jobs
# Each exercise's ``job`` module (``grader/exercises/<id>/job.py``) says its sizes (``public()``)
# and draws its inputs (``secret(rng, seed)``), with the helpers below.


JOB_FORMAT = 1  # the form of the job below; the child refuses another


def child_job(exercise, memory_mb: int, *, reads: dict, public: dict | None = None, cells=(), private=(),
              probe: str = "", **more) -> dict:
    """The whole job a grading child starts with, the one place it is put together: the exercise's
    public part (or ``public`` instead), what the child needs to load and confine the submission
    (``reads``: what it may read of the grader's installation, ``grader.exercises.reads.policy()``),
    and what a probe of another kind of job (``probe``, a module name) needs besides."""
    job = dict(exercise.public_job() if public is None else public, format=JOB_FORMAT, exercise=exercise.id,
               class_name=exercise.target, kind=exercise.kind, memory_mb=int(memory_mb),
               cells=[list(cell) for cell in cells], private=[str(path) for path in private],
               reads={"grant": list(reads["grant"]), "closed": list(reads["closed"])}, grader=this_grader(), **more)
    if probe:
        job["probe"] = probe
    return job


def this_grader() -> dict:
    """Which grader package this process runs: its version and where it lies. A grading process
    refuses a job from another (a grader imported from a clone's folder while the interpreter's own
    installation is another)."""
    import os

    import grader

    return {"version": grader.__version__, "package": os.path.dirname(os.path.realpath(grader.__file__))}


class GraderMismatch(RuntimeError):
    """The grading process runs another grader package than the one that started it."""


def check_grader(job: dict) -> None:
    """Raise GraderMismatch unless the job comes from the grader package this process runs."""
    theirs, ours = job.get("grader"), this_grader()
    if theirs != ours:
        described = theirs if isinstance(theirs, dict) else {}
        raise GraderMismatch(
            f"the grader at {str(described.get('package'))[:300]} (version {str(described.get('version'))[:40]}) "
            f"started this grading process, which runs the grader at {ours['package']} (version {ours['version']})")


def secret_job(exercise, seed: int, build: dict) -> dict:
    """The secret part of the job for this run: the exercise's inputs drawn from ``seed``, and a
    value for every floating-point variable the child reported in ``build``."""
    secret = exercise.job.secret(np.random.default_rng([seed, 0]), seed)
    secret["values"] = draw_values(np.random.default_rng([seed, 1]), build)
    return secret


def layer_job(dims: dict, input_shape: list[int], **more) -> dict:
    """The public job of a layer exercise: its constructor's arguments, the shape of its inputs and
    a few SGD steps."""
    return {"dims": dims, "constructor_arguments": dims, "input_shape": input_shape,
            "optimizer_steps": 3, "learning_rate": SGD_LEARNING_RATE, **more}


def padding(rng: np.random.Generator, batch: int, length: int) -> np.ndarray:
    """A (batch, length) mask of real positions: right-padded rows of random lengths, at least two
    real positions each, one row full and one row padded."""
    lengths = rng.integers(2, length + 1, size=batch)
    lengths[rng.integers(0, batch)] = length
    short = [i for i in range(batch) if lengths[i] == length]
    if len(short) == batch:
        lengths[(short[0] + 1) % batch] = rng.integers(2, length)
    return np.arange(length)[None, :] < lengths[:, None]


def normal(rng, shape, scale=1.0):
    return rng.normal(0.0, scale, size=shape).astype(np.float32)


def perturbed(rng, array, where):
    """``array`` with the entries at ``where`` drawn again, larger."""
    changed = array.copy()
    changed[where] = normal(rng, changed[where].shape, 3.0)
    return changed


def sequence_inputs(rng, batch: int, length: int, embed_dim: int) -> dict:
    """Inputs of a layer over a padded sequence: the sequence, its mask, the sequence changed at its
    padding, and weights of a loss over the outputs."""
    mask = padding(rng, batch, length)
    x = normal(rng, (batch, length, embed_dim))
    return {"inputs": x, "mask": mask, "inputs_perturbed": perturbed(rng, x, ~mask),
            "loss_weights": normal(rng, x.shape)}


# --------------------------------------------------------------------------- weight values


def validated_variables(build: dict) -> list[dict]:
    """The variables of a build report, checked for form and against the limits the probe applies
    before it reports them (``limits.variables_problem``); raises BadBuildReport, and nothing else."""
    with wire.only(BadBuildReport, "the report cannot be read"):
        return _validated_variables(build)


def _validated_variables(build: dict) -> list[dict]:
    variables = build.get("variables") if isinstance(build, dict) else None
    if not isinstance(variables, list):
        raise BadBuildReport("the list of variables is missing")
    if len(variables) > limits.MAX_VARIABLES:
        raise BadBuildReport(f"the list of variables is longer than the {limits.MAX_VARIABLES:,} the probe reports")
    seen = set()
    for variable in variables:
        if not isinstance(variable, dict):
            raise BadBuildReport("a variable is not described")
        key, shape = variable.get("id"), variable.get("shape")
        if not isinstance(key, int) or isinstance(key, bool) or key < 0 or key in seen:
            raise BadBuildReport("a variable id is missing, negative or repeated")
        seen.add(key)
        if not isinstance(shape, list) or len(shape) > limits.MAX_RANK or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= limits.MAX_ARRAY_ELEMENTS for d in shape):
            raise BadBuildReport("a variable's shape is malformed")
        if not isinstance(variable.get("dtype"), str) or not isinstance(variable.get("trainable"), bool):
            raise BadBuildReport("a variable's dtype or trainable flag is malformed")
    problem = limits.variables_problem(variable["shape"] for variable in variables)
    if problem:
        raise BadBuildReport(f"{problem}, which the probe refuses before reporting")
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
