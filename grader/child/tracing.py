"""Records which Keras layers a layer's ``call`` runs, in which order, with what.

The tracer patches ``keras.layers.Layer.__call__`` (every layer goes through
it) and ``MultiHeadAttention._compute_attention_mask`` (the mask attention
really uses) for the duration of one traced call. Layers are identified by
object identity and described by the Keras class they derive from, never by
attribute names, so any correct way of writing a layer is traced alike.
"""

from __future__ import annotations

import inspect

import keras
import numpy as np
import tensorflow as tf

_Layer = keras.layers.Layer
_MHA = keras.layers.MultiHeadAttention


def keras_class(obj) -> str:
    """The first Keras-defined class in the object's MRO (a student subclass of
    LayerNormalization is a LayerNormalization)."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("keras."):
            return cls.__name__
    return type(obj).__name__


def to_numpy(value):
    if value is None:
        return None
    return np.asarray(keras.ops.convert_to_numpy(value))


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


class CallTracer:
    """Context manager tracing every layer call made under ``root``'s call."""

    def __init__(self, root, registry: Registry):
        self.root = root
        self.registry = registry
        self.events: list[dict] = []
        self._stack: list[dict] = []

    def __enter__(self):
        self._original_call = _Layer.__call__
        self._original_mask = _MHA._compute_attention_mask
        tracer = self

        def traced_call(layer, *args, **kwargs):
            if (not tracer._stack and layer is not tracer.root) or not tf.executing_eagerly():
                # symbolic calls (Keras building a layer by tracing it) are not the computation
                return tracer._original_call(layer, *args, **kwargs)
            return tracer._record(layer, args, kwargs)

        def traced_mask(mha, *args, **kwargs):
            mask = tracer._original_mask(mha, *args, **kwargs)
            if tracer._stack and tracer._stack[-1]["layer"] == tracer.registry.layer(mha):
                tracer._stack[-1]["effective_mask"] = to_numpy(mask)
            return mask

        _Layer.__call__ = traced_call
        _MHA._compute_attention_mask = traced_mask
        return self

    def __exit__(self, *exc):
        _Layer.__call__ = self._original_call
        _MHA._compute_attention_mask = self._original_mask
        return False

    def _record(self, layer, args, kwargs):
        if not self._stack:
            self._root_args = list(args)
        event = {
            "index": len(self.events),
            "layer": self.registry.layer(layer),
            "class": keras_class(layer),
            "parent": self._stack[-1]["index"] if self._stack else None,
        }
        self.events.append(event)
        if isinstance(layer, _MHA):
            event.update(self._attention_arguments(layer, args, kwargs))
        self._stack.append(event)
        try:
            outputs = self._original_call(layer, *args, **kwargs)
        except BaseException as exc:
            event["raised"] = type(exc).__name__
            raise
        finally:
            self._stack.pop()
        first = outputs[0] if isinstance(outputs, (tuple, list)) and outputs else outputs
        shape = getattr(first, "shape", None)
        event["output_shape"] = None if shape is None else [None if d is None else int(d) for d in shape]
        return outputs

    def _attention_arguments(self, layer, args, kwargs) -> dict:
        try:
            bound = inspect.signature(type(layer).call).bind(layer, *args, **kwargs)
        except TypeError:
            return {"arguments_unbound": True}
        arguments = bound.arguments
        record = {}
        for name in ("query", "value", "key"):
            tensor = arguments.get(name)
            if name == "key" and tensor is None:
                tensor = arguments.get("value")
            sources = [i for i, arg in enumerate(self._root_args) if _same_tensor(tensor, arg)]
            record[f"{name}_source"] = sources[0] if sources else None  # which argument of the root call
        for name in ("attention_mask", "query_mask", "value_mask", "key_mask"):
            record[name] = to_numpy(arguments.get(name))
        record["use_causal_mask"] = bool(arguments.get("use_causal_mask", False))
        return record

    _root_args: list = []


def _same_tensor(tensor, reference) -> bool | None:
    if tensor is None or reference is None:
        return None
    if tensor is reference:
        return True
    try:
        a, b = to_numpy(tensor), to_numpy(reference)
    except Exception:
        return None
    return bool(a.shape == b.shape and np.array_equal(a, b))
