"""Records what one call of a layer computes: every Keras layer it runs, with its tensors.

The tracer patches ``keras.layers.Layer.__call__`` (every layer goes through it)
for the duration of one call. Each layer call becomes an event: its parent
call, the Keras kind of layer it is (found with ``isinstance``, so a subclass of
``Embedding`` or ``MultiHeadAttention`` counts as one), the variables it uses in
each role, its settings, and — unless it runs inside a layer the grader
replays whole — its input and output tensors. For attention, the mask that
actually reaches the attention scores is captured where Keras applies it
(``_compute_attention``), however it was delivered: ``attention_mask=``,
``query_mask``/``value_mask``/``key_mask``, a mask riding on the tensors, or
``use_causal_mask``. Layers are identified by object identity, never by
attribute names. A layer of the student's own that runs no Keras layer (a
pooling, a helper layer, a ``Lambda``) also gets the tensor operations its call
ran (``op_tape``). The parent replays the events (``grader.judge.replay``); it
trusts none of them.
"""

from __future__ import annotations

import inspect

import keras

from .runtime import is_symbolic
from .op_tape import OpRecorder, OpTape
from .tensors import array, is_tensor, to_numpy  # noqa: F401  (the probes take them from here)

_Layer = keras.layers.Layer
_L = keras.layers

IDENTITY = tuple(c for c in (
    getattr(_L, name, None) for name in ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                                         "GaussianDropout", "GaussianNoise", "AlphaDropout", "Identity",
                                         "ActivityRegularization")) if c is not None)
_BASE_COMPUTE_ATTENTION = inspect.signature(_L.MultiHeadAttention._compute_attention)
_BASE_COMPUTE_ATTENTION = _BASE_COMPUTE_ATTENTION.replace(
    parameters=list(_BASE_COMPUTE_ATTENTION.parameters.values())[1:])  # without self
MASK_ARGUMENTS = ("mask", "attention_mask", "query_mask", "value_mask", "key_mask")


def keras_class(obj) -> str:
    """The first Keras-defined class in the object's MRO (a student subclass of
    LayerNormalization is a LayerNormalization)."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("keras."):
            return cls.__name__
    return type(obj).__name__


class Registry:
    """Stable small integers for layers and variables seen in one probe."""

    def __init__(self):
        self._layers: dict[int, int] = {}
        self._layer_objects: list = []
        self._variables: dict[int, int] = {}
        self._variable_objects: list = []

    def layer(self, layer) -> int:
        key = id(layer)
        if key not in self._layers:
            self._layers[key] = len(self._layer_objects)
            self._layer_objects.append(layer)
        return self._layers[key]

    def variable(self, variable) -> int:
        key = id(variable)
        if key not in self._variables:
            self._variables[key] = len(self._variable_objects)
            self._variable_objects.append(variable)
        return self._variables[key]

    @property
    def layers(self) -> list:
        return list(self._layer_objects)

    def param(self, variable) -> int | None:
        return None if variable is None else self.variable(variable)


# kinds computed position by position along the last axis: a TimeDistributed of one computes what the
# layer itself computes on the whole sequence
POSITION_WISE = ("dense", "conv", "norm", "identity", "activation", "relu")


def computing_layer(layer):
    """The layer whose computation a call of ``layer`` is: the layer a TimeDistributed wraps (it
    calls the wrapped layer's call() once per position, never through __call__), else itself."""
    wrapped = getattr(layer, "layer", None)
    if isinstance(layer, _L.TimeDistributed) and isinstance(wrapped, _Layer) and \
            _own_kind(wrapped) in POSITION_WISE:
        return wrapped
    return layer


def kind_of(layer) -> str:
    """What the grader can replay of this layer: a kind of leaf, a container of other layers,
    or opaque (decided after the call when a container ran no layer at all)."""
    return _own_kind(computing_layer(layer))


def _own_kind(layer) -> str:
    if isinstance(layer, _L.MultiHeadAttention):
        return "attention"
    if isinstance(layer, _L.EinsumDense):
        return "einsum_dense"
    if isinstance(layer, _L.Dense):
        return "dense"
    if isinstance(layer, _L.Conv1D):
        return "conv"
    if isinstance(layer, _L.LayerNormalization):
        return "norm"
    if isinstance(layer, _L.Embedding):
        return "embedding"
    if IDENTITY and isinstance(layer, IDENTITY):
        return "identity"
    if isinstance(layer, _L.Activation):
        return "activation"
    if isinstance(layer, _L.ReLU):
        return "relu"
    if isinstance(layer, _L.Add):
        return "add"
    if isinstance(layer, _L.GlobalAveragePooling1D):
        return "average_pool"
    if isinstance(layer, _L.GlobalMaxPooling1D):
        return "max_pool"
    if isinstance(layer, _L.Flatten):
        return "flatten"
    if isinstance(layer, (keras.Sequential, keras.Model)) or not type(layer).__module__.startswith("keras."):
        return "container"
    return "opaque"


def _activation_name(function) -> str:
    try:
        name = keras.activations.serialize(function)
    except Exception:
        return "unknown"
    if isinstance(name, dict):
        name = name.get("config", {}).get("name", str(name))
    return str(name)


def describe_call(layer, registry: Registry, kind: str, arguments: dict) -> tuple[dict, dict]:
    """(params, constants) of one layer call: the variables it uses by role, and its settings."""
    p, c = {}, {}
    if computing_layer(layer) is not layer:
        c["wrapped_by"] = keras_class(layer)
        layer = computing_layer(layer)
    if kind == "attention":
        for role in ("query", "key", "value", "output"):
            dense = getattr(layer, f"_{role}_dense", None)
            p[f"{role}_kernel"] = registry.param(getattr(dense, "kernel", None))
            p[f"{role}_bias"] = registry.param(getattr(dense, "bias", None))
        unsupported = []
        if getattr(layer, "_use_gate", False):
            unsupported.append("a gate")
        if getattr(layer, "_attention_axes", None) not in (None, (1,), [1]):
            unsupported.append("custom attention axes")
        if unsupported:
            c["unsupported"] = ", ".join(unsupported)
        c["zero_masked"] = bool(float(getattr(layer, "_dropout", 0.0) or 0.0) > 0.0
                                or arguments.get("return_attention_scores"))
        c["num_heads"] = int(getattr(layer, "num_heads", 0) or 0)
        c["key_dim"] = int(getattr(layer, "key_dim", 0) or 0)
    elif kind == "dense":
        p["kernel"] = registry.param(getattr(layer, "kernel", None))
        p["bias"] = registry.param(getattr(layer, "bias", None))
        c["activation"] = _activation_name(layer.activation)
        c["units"] = int(getattr(layer, "units", 0) or 0)
    elif kind == "conv":
        p["kernel"] = registry.param(getattr(layer, "kernel", None))
        p["bias"] = registry.param(getattr(layer, "bias", None))
        c["activation"] = _activation_name(layer.activation)
        for name in ("kernel_size", "strides", "dilation_rate"):
            c[name] = [int(v) for v in getattr(layer, name, ()) or ()]
        c["padding"] = str(getattr(layer, "padding", ""))
        c["data_format"] = str(getattr(layer, "data_format", ""))
        c["groups"] = int(getattr(layer, "groups", 1) or 1)
    elif kind == "einsum_dense":
        p["kernel"] = registry.param(getattr(layer, "kernel", None))
        p["bias"] = registry.param(getattr(layer, "bias", None))
        c["equation"] = str(getattr(layer, "equation", ""))
        c["bias_axes"] = getattr(layer, "bias_axes", None)
        c["activation"] = _activation_name(getattr(layer, "activation", None))
    elif kind == "norm":
        p["gamma"] = registry.param(getattr(layer, "gamma", None))
        p["beta"] = registry.param(getattr(layer, "beta", None))
        c["epsilon"] = float(layer.epsilon)
        axis = layer.axis if isinstance(layer.axis, (list, tuple)) else [layer.axis]
        rank = len(arguments["inputs"].shape) if "inputs" in arguments and hasattr(arguments["inputs"], "shape") \
            else None
        if rank is not None and "wrapped_by" in c:
            rank -= 1  # the wrapped norm sees one position at a time
        c["last_axis"] = len(axis) == 1 and (axis[0] == -1 or (rank is not None and axis[0] == rank - 1))
        if rank is not None and all(isinstance(a, int) and -rank <= a < rank for a in axis):
            c["axes"] = sorted({a % rank for a in axis})  # which axes it normalises over, from 0
        c["rms_scaling"] = bool(getattr(layer, "rms_scaling", False))
    elif kind == "embedding":
        p["embeddings"] = registry.param(getattr(layer, "embeddings", None))
        if arguments.get("reverse"):
            c["reverse"] = True
    elif kind == "activation":
        c["activation"] = _activation_name(layer.activation)
    elif kind == "relu":
        c["max_value"] = None if layer.max_value is None else float(layer.max_value)
        c["negative_slope"] = float(layer.negative_slope)
        c["threshold"] = float(layer.threshold)
    elif kind in ("average_pool", "max_pool"):
        c["channels_last"] = getattr(layer, "data_format", "channels_last") == "channels_last"
        c["keepdims"] = bool(getattr(layer, "keepdims", False))
    return p, c


class CallTracer:
    """Context manager tracing every layer call made under ``root``'s call."""

    def __init__(self, root, registry: Registry):
        self.root = root
        self.registry = registry
        self.events: list[dict] = []
        self._stack: list[dict] = []
        self._hooked: list = []

    def __enter__(self):
        self._original_call = _Layer.__call__
        tracer = self

        def traced_call(layer, *args, **kwargs):
            if (not tracer._stack and layer is not tracer.root) or is_symbolic((args, kwargs)):
                # symbolic calls (Keras building a layer by tracing it) are not the computation
                return tracer._original_call(layer, *args, **kwargs)
            if not tracer._stack:
                # the layer's own call() then sees the very tensors its tape starts from: Keras would
                # turn a NumPy argument into a new tensor the tape has never seen
                args, kwargs = _as_tensors(args), _as_tensors(kwargs)
            return tracer._record(layer, args, kwargs)

        _Layer.__call__ = traced_call
        self._recorder = OpRecorder(self._current_tape)
        self._recorder.__enter__()
        return self

    def _current_tape(self):
        return self._stack[-1].get("_tape") if self._stack else None

    def __exit__(self, *exc):
        self._recorder.__exit__(*exc)
        _Layer.__call__ = self._original_call
        for layer in self._hooked:
            layer.__dict__.pop("_compute_attention", None)
        self._hooked.clear()
        return False

    def _inside_leaf(self) -> bool:
        return any(e["kind"] not in ("container",) for e in self._stack)

    def _record(self, layer, args, kwargs):
        inside = self._inside_leaf()
        kind = kind_of(layer)
        event = {
            "index": len(self.events),
            "layer": self.registry.layer(layer),
            "class": keras_class(layer),
            "python_class": type(layer).__name__[:100],
            "kind": kind,
            "parent": self._stack[-1]["index"] if self._stack else None,
        }
        self.events.append(event)
        arguments = _bind(layer, args, kwargs)
        enclosing = self._current_tape()
        if not inside:
            event["inputs"] = _tensor_arguments(arguments, kind)
            if enclosing is not None:
                # which of its arguments the enclosing layer's own operations made (glue between sublayers):
                # a Keras layer's inputs, and every tensor a layer of the student's own receives, masks too
                made = {name: enclosing.producer(value) for name, value in _tensor_objects(arguments).items()
                        if name in event["inputs"] or kind in ("container", "opaque")}
                if any(made.values()):
                    event["input_ops"] = {name: ref for name, ref in made.items() if ref is not None}
            params, constants = describe_call(layer, self.registry, kind, arguments)
            event["params"], event["constants"] = params, constants
            if kind == "attention":
                event["arguments"] = _attention_arguments(arguments, args)
                self._hook_attention(layer, event)
            elif kind in ("average_pool", "max_pool"):
                mask = arguments.get("mask")
                if mask is None and "inputs" in arguments:
                    mask = keras.backend.get_keras_mask(arguments["inputs"]) if hasattr(
                        keras.backend, "get_keras_mask") else getattr(arguments["inputs"], "_keras_mask", None)
                event["constants"]["mask"] = array(mask)
            if kind in ("container", "opaque"):
                sources = _tensor_objects(arguments)
                masks = {name: value for name, value in sources.items() if name in MASK_ARGUMENTS}
                if "mask" not in masks and "inputs" in arguments:
                    riding = _keras_mask(arguments["inputs"])
                    if riding is not None:
                        sources["mask"] = masks["mask"] = riding
                event["_tape"] = OpTape(sources, {str(self.registry.variable(v)): v for v in _weights(layer)})
                event["masks"] = {name: array(value) for name, value in masks.items() if array(value) is not None}
        self._stack.append(event)
        try:
            outputs = self._original_call(layer, *args, **kwargs)
        except BaseException as exc:
            event["raised"] = type(exc).__name__
            event.pop("_tape", None)
            raise
        finally:
            self._stack.pop()
        first = outputs[0] if isinstance(outputs, (tuple, list)) and outputs else outputs
        shape = getattr(first, "shape", None)
        event["output_shape"] = None if shape is None else [None if d is None else int(d) for d in shape]
        tape = event.pop("_tape", None)
        if enclosing is not None and not inside:
            enclosing.known(first, {"event": event["index"]})
        if not inside:
            event["output"] = array(first)
            if kind == "container" and not any(e.get("parent") == event["index"] for e in self.events):
                event["kind"] = "opaque"  # a layer of its own that ran no Keras layer: raw operations
            if event["kind"] == "opaque" and tape is not None:
                event["ops"] = tape.records
                event["result"] = tape.result(first)
                event["ops_truncated"] = tape.truncated
            elif tape is not None and (tape.producer(first) is not None or any(
                    e.get("input_ops") and e.get("parent") == event["index"] for e in self.events)):
                # a layer that runs Keras layers and operations between and after them: the operations
                # that made a sublayer's input, or its own output, which the parent follows as it
                # follows a custom layer's
                event["ops"] = tape.records
                event["ops_truncated"] = tape.truncated
                made = tape.producer(first)
                if made is not None:
                    event["output_op"] = made
            else:
                event.pop("masks", None)
        return outputs

    def _hook_attention(self, layer, event: dict) -> None:
        """Capture the mask that reaches the scores: the arguments of this layer's _compute_attention."""
        original = type(layer)._compute_attention.__get__(layer)

        def compute_attention(*args, **kwargs):
            bound = {}
            # Keras calls _compute_attention as MultiHeadAttention declares it, whatever a subclass's
            # override is named (an override of (*args, **kwargs) names nothing)
            for signature in (_BASE_COMPUTE_ATTENTION, inspect.signature(original)):
                try:
                    bound = signature.bind(*args, **kwargs).arguments
                    break
                except (TypeError, ValueError):
                    continue
            event["constants"]["mask"] = array(bound.get("attention_mask"))
            event["constants"]["causal"] = bool(bound.get("use_causal_mask", False)) and \
                bound.get("attention_mask") is None
            event["constants"]["scores_reached"] = True
            return original(*args, **kwargs)

        layer.__dict__["_compute_attention"] = compute_attention
        self._hooked.append(layer)


def _as_tensors(value):
    """``value`` with every NumPy array in it (in lists, tuples and dicts) as a backend tensor."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return keras.ops.convert_to_tensor(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_as_tensors(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_tensors(v) for k, v in value.items()}
    return value


def _bind(layer, args, kwargs) -> dict:
    try:
        return dict(inspect.signature(type(layer).call).bind(layer, *args, **kwargs).arguments)
    except (TypeError, ValueError):
        arguments = {f"arg{i}": a for i, a in enumerate(args)}
        arguments.update(kwargs)
        return arguments


def _tensor_arguments(arguments: dict, kind: str) -> dict:
    """The tensor arguments of a call (lists flattened as name.0, name.1, ...), masks excluded."""
    found = {}
    for name, value in arguments.items():
        if name in ("self", "training") or name in MASK_ARGUMENTS:
            continue
        if kind == "attention" and name not in ("query", "value", "key"):
            continue
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if is_tensor(item):
                    found[f"{name}.{i}"] = array(item)
        elif isinstance(value, dict) and name == "kwargs":
            for key, item in value.items():
                if key not in MASK_ARGUMENTS and key != "training" and is_tensor(item):
                    found[str(key)] = array(item)
        elif is_tensor(value):
            found[name] = array(value)
    return {k: v for k, v in found.items() if v is not None}


def _weights(layer) -> list:
    """The variables a layer holds, its sublayers' included; none if it cannot say."""
    try:
        return list(layer.weights)
    except Exception:  # a layer whose weights property raises: its operations use none the tape can name
        return []


def _keras_mask(value):
    if hasattr(keras.backend, "get_keras_mask"):
        try:
            return keras.backend.get_keras_mask(value)
        except Exception:
            return None
    return getattr(value, "_keras_mask", None)


def _tensor_objects(arguments: dict) -> dict:
    """The tensor arguments of a call as objects, named as ``_tensor_arguments`` names them, masks
    included: what the operations of a custom layer may start from."""
    found = {}
    for name, value in arguments.items():
        if name in ("self", "training"):
            continue
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if is_tensor(item):
                    found[f"{name}.{i}"] = item
        elif isinstance(value, dict) and name == "kwargs":
            for key, item in value.items():
                if key != "training" and is_tensor(item):
                    found[str(key)] = item
        elif is_tensor(value):
            found[name] = value
    return found


def _attention_arguments(arguments: dict, positional: tuple) -> dict:
    """What the student passed to attention, for the messages: mask arguments and how many
    arguments went by position."""
    record = {name: array(arguments.get(name)) for name in ("attention_mask", "query_mask", "value_mask", "key_mask")}
    record["use_causal_mask"] = bool(arguments.get("use_causal_mask", False))
    record["positional"] = len(positional)
    query = arguments.get("query")
    record["query_keras_mask"] = array(getattr(query, "_keras_mask", None)) if query is not None else None
    return record
