"""Phases shared by the probes: building the layer, taking the parent's numbers, observing calls.

A probe constructs the student's layer, builds it on a public warm-up input
and reports its variables; the parent answers with the secret inputs and a
value for every weight, which are set into the layer. Then each phase
*observes* calls of the layer: the call's output and its trace (every Keras
layer it ran, with tensors; ``tracing``). Nothing here decides anything: the
parent replays the observations with its own numbers.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..protocol import limits
from .describe import describe_layer, describe_variable
from .tracing import CallTracer, Registry, array, to_numpy

LAYER_NAME = "layer_under_test"


class KerasMask:
    """The second edition's call: ``call(inputs, mask=None)``, the padding mask by keyword (as
    Keras passes the mask riding on a tensor), and a plain call without one."""

    explicit = False

    @staticmethod
    def plain(layer, x, mask):
        return layer(x, training=False)

    @staticmethod
    def masked(layer, x, mask):
        return layer(x, mask=mask, training=False)


class ExplicitMask:
    """The third edition's call: ``call(source, source_mask)``, the padding mask a required second
    argument (by position: its name is the student's). The plain call passes a mask of all True,
    which hides nothing; a model around the layer takes the mask as its second input."""

    explicit = True

    @staticmethod
    def plain(layer, x, mask):
        return layer(x, np.ones(x.shape[:2], dtype=bool), training=False)

    @staticmethod
    def masked(layer, x, mask):
        return layer(x, mask, training=False)


def run_sequence_layer(cls, job: dict, stream, scratch: str, calls=KerasMask) -> None:
    """Every phase for a layer that maps (batch, seq, embed_dim) to the same shape and
    takes a (batch, seq) padding mask: the self-attention block and the encoder. ``calls`` says
    how the layer takes its mask (``KerasMask``, ``ExplicitMask``)."""
    import keras

    registry = Registry()
    layer = construct(stream, cls, job["constructor_arguments"])
    if layer is None:
        return
    warmup = warmup_array(job["input_shape"])
    job = receive_secrets(stream, layer, registry, lambda layer: calls.plain(layer, warmup, None), job)
    if job is None:
        return
    x = np.asarray(job["inputs"], dtype="float32")
    x_perturbed = np.asarray(job["inputs_perturbed"], dtype="float32")
    mask = np.asarray(job["mask"], dtype=bool)

    def plain(layer):
        return calls.plain(layer, x, mask)

    forward_ok = traced_forward(stream, layer, registry, plain)
    with stream.phase("mask") as data:
        observe(data, layer, registry, lambda layer: calls.masked(layer, x, mask))
        output = data.pop("_output")
        data["supports_masking"] = bool(getattr(layer, "supports_masking", False))
        data["output_mask"] = tensor(getattr(output, "_keras_mask", None))  # what Keras passes on
        # what a next layer that uses masks computes from this output: a masked average over real positions
        data["pooled"] = tensor(keras.layers.GlobalAveragePooling1D()(output))
    with stream.phase("mask_perturbed") as data:
        observe(data, layer, registry, lambda layer: calls.masked(layer, x_perturbed, mask))
        data.pop("_output", None)
    config_round_trip(stream, layer, plain)
    specs, arrays = [(x.shape[1:], "float32")], [x]
    if calls.explicit:  # the plain call's inputs: inference is compared with its replay
        specs, arrays = specs + [(mask.shape[1:], "bool")], arrays + [np.ones(mask.shape, dtype=bool)]
    model = saving(stream, layer, scratch, specs, arrays)
    inference(stream, layer, specs, arrays, model)
    if forward_ok:
        gradients(stream, layer, registry, plain, job)


def construct(stream, cls, sizes: dict):
    """Build the layer by keyword (with a name) and positionally; None if it cannot be built."""
    import keras

    layer = None
    with stream.phase("construct") as data:
        data["positional_error"] = None
        try:
            cls(*sizes.values())
        except Exception as exc:
            data["positional_error"] = stream.describe_error(exc)
        data["kwargs_error"] = None
        try:
            layer = cls(**sizes, name=LAYER_NAME)
        except TypeError as exc:
            if "name" not in str(exc):
                raise
            data["kwargs_error"] = stream.describe_error(exc)
            layer = cls(**sizes)
        data["is_layer"] = isinstance(layer, keras.layers.Layer)
        data["name"] = str(getattr(layer, "name", ""))
        data["requested_name"] = LAYER_NAME
    return layer


def warmup_array(shape, dtype="float32", high: int | None = None) -> np.ndarray:
    """A public input of the job's shape, to build the layer before the secret inputs arrive."""
    rng = np.random.default_rng(12345)
    if high is not None:
        return rng.integers(1, high, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def receive_secrets(stream, layer, registry: Registry, build, job: dict) -> dict | None:
    """Build the layer on a public input, report its variables (and which layers own them),
    then read the parent's secret part of the job and set every float weight to the value
    the parent chose. Returns the whole job, or None when there is nothing to go on with. Variables
    beyond the grader's limits end the phase at once with ``LimitExceeded``, naming the limit: the
    parent would refuse them, and the grading would learn it no sooner."""
    built = False
    with stream.phase("variables") as data:
        build(layer)
        problem = limits.variables_problem([int(d) for d in v.shape] for v in layer.weights)
        if problem:
            raise limits.LimitExceeded(f"{problem}; a correct layer of this exercise has a few thousand values")
        data["variables"] = [describe_variable(v, registry) for v in layer.weights]
        data["layers"] = {str(registry.layer(sub)): describe_layer(sub, registry) for sub in sublayers(layer)}
        built = True
    if not built:
        return None
    secrets = stream.receive()
    if not isinstance(secrets, dict):
        return None
    assigned = False
    with stream.phase("values") as data:
        values = secrets.get("values") or {}
        count = 0
        for variable in layer.weights:
            key = str(registry.variable(variable))
            if key in values:
                variable.assign(np.asarray(values[key], dtype=str(variable.dtype)))
                count += 1
        data["assigned"] = count
        assigned = True
    if not assigned:
        return None
    return dict(job, **{k: v for k, v in secrets.items() if k != "values"})


def sublayers(layer) -> list:
    try:
        return list(layer._flatten_layers(include_self=False))
    except Exception:
        return []


def observe(data: dict, layer, registry: Registry, call) -> None:
    """Run ``call(layer)`` under the tracer: data["observation"] gets the trace (kept even if the
    call raises) and the output; data["_output"] the output itself, for the probe."""
    tracer = CallTracer(layer, registry)
    observation = {"trace": tracer.events}
    data["observation"] = observation
    try:
        with tracer:
            output = call(layer)
    finally:
        observation["trace"] = tracer.events
    observation["output"] = tensor(output)
    data["_output"] = output


def traced_forward(stream, layer, registry: Registry, call) -> bool:
    """Observe the plain call; describe the layers it ran and the layer's variables."""
    ok = False
    with stream.phase("forward") as data:
        observe(data, layer, registry, call)
        data.pop("_output", None)
        data["layers"] = {str(registry.layer(sub)): describe_layer(sub, registry) for sub in sublayers(layer)}
        data["variables"] = [describe_variable(v, registry) for v in layer.weights]
        data["trainable"] = [registry.variable(v) for v in layer.trainable_weights]
        ok = True
    return ok


def config_round_trip(stream, layer, call) -> None:
    with stream.phase("config") as data:
        config = layer.get_config()
        data["config_type"] = type(config).__name__
        try:
            data["config"] = json.loads(json.dumps(config))
            data["json_error"] = None
        except (TypeError, ValueError) as exc:
            data["config"] = {str(k): repr(v)[:200] for k, v in dict(config).items()}
            data["json_error"] = str(exc)[:500]
        rebuilt = type(layer).from_config(config)
        data["rebuilt_name"] = str(rebuilt.name)
        data["rebuilt_trainable"] = bool(rebuilt.trainable)
        call(rebuilt)
        data["rebuilt_shapes"] = [[int(d) for d in v.shape] for v in rebuilt.weights]
        data["original_shapes"] = [[int(d) for d in v.shape] for v in layer.weights]
        rebuilt.set_weights(layer.get_weights())
        data["rebuilt_output"] = tensor(call(rebuilt))
        data["original_output"] = tensor(call(layer))


def saving(stream, layer, scratch: str, input_specs: list[tuple], arrays: list[np.ndarray]):
    """A functional model around the layer survives .keras save and load. Returns that model
    (None if it could not be built), which ``inference`` calls again."""
    import keras

    model = None
    with stream.phase("saving") as data:
        model = functional_model(layer, input_specs)
        path = os.path.join(scratch, "layer.keras")
        model.save(path)
        loaded = keras.models.load_model(path, custom_objects={type(layer).__name__: type(layer)})
        feed = arrays if len(arrays) > 1 else arrays[0]
        data["before"] = tensor(model(feed, training=False))
        data["after"] = tensor(loaded(feed, training=False))
    return model


def functional_model(layer, input_specs: list[tuple]):
    """A functional model whose inputs (``(shape, dtype)`` each, the batch left out) go to the layer."""
    import keras

    inputs = [keras.Input(shape=shape, dtype=dtype) for shape, dtype in input_specs]
    return keras.Model(inputs if len(inputs) > 1 else inputs[0], layer(*inputs))


def inference(stream, layer, input_specs: list[tuple], arrays: list[np.ndarray], model=None) -> None:
    """The layer, and a functional model holding it, each called twice on the same input without
    ``training``, as code using a trained layer calls them (``model(x)``, a layer inside a model
    called that way). Only the outputs travel: the parent compares them with its own numbers.
    ``model``: the functional model ``saving`` built around the layer, else one is built here."""
    with stream.phase("inference") as data:
        data["layer"] = [tensor(layer(*arrays)) for _ in range(2)]
        if model is None:
            model = functional_model(layer, input_specs)
        feed = arrays if len(arrays) > 1 else arrays[0]
        data["model"] = [tensor(model(feed)) for _ in range(2)]


def gradients(stream, layer, registry: Registry, call, job: dict) -> None:
    """Gradients of the parent's loss (the output weighted by its secret loss weights) for every
    trainable variable, then the values after a few plain SGD steps."""
    import keras

    from . import runtime

    loss_weights = np.asarray(job["loss_weights"], "float32")
    with stream.phase("gradients") as data:
        variables = list(layer.trainable_weights)
        data["variables"] = [registry.variable(v) for v in variables]

        def loss_and_gradients():
            return runtime.gradients(lambda: runtime.scalar_sum(call(layer), loss_weights), variables)[1]

        gradients = loss_and_gradients()
        data["gradients"] = [None if g is None else to_numpy(g) for g in gradients]
        rate = float(job["learning_rate"])
        for step in range(int(job["optimizer_steps"])):
            if step:
                gradients = loss_and_gradients()
            for gradient, variable in zip(gradients, variables):
                if gradient is not None:
                    variable.assign_sub(rate * keras.ops.cast(to_numpy(gradient), variable.dtype))
        data["after_steps"] = {str(registry.variable(v)): to_numpy(v) for v in variables}


def tensor(value):
    """An output as a plain numeric array, or a description of what it was instead.
    Whatever the object claims about itself, only its numbers travel on."""
    result = array(value)
    if result is None:
        return {"not_a_tensor": type(value).__name__}
    return result
