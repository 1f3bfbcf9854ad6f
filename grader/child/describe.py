"""Plain-data descriptions of Keras layers and variables, by Keras class."""

from __future__ import annotations

import keras

from .tracing import Registry, keras_class, to_numpy


def describe_variable(variable, registry: Registry) -> dict:
    return {
        "id": registry.variable(variable),
        "shape": [int(d) for d in variable.shape],
        "dtype": str(variable.dtype),
        "trainable": bool(variable.trainable),
        "path": str(getattr(variable, "path", getattr(variable, "name", ""))),
    }


def describe_layer(layer, registry: Registry, values: bool = True) -> dict:
    """The facts a check may need about one layer, found through Keras's public
    attributes of its built-in class."""
    kind = keras_class(layer)
    record = {
        "class": kind,
        "python_class": type(layer).__name__,
        "trainable": bool(layer.trainable),
        "weights": [registry.variable(v) for v in layer.weights],
        "trainable_weights": [registry.variable(v) for v in layer.trainable_weights],
    }
    if kind == "LayerNormalization":
        record.update(
            epsilon=float(layer.epsilon),
            center=bool(layer.center),
            scale=bool(layer.scale),
            axis=_plain_axis(layer.axis),
            gamma=_var(getattr(layer, "gamma", None), registry, values),
            beta=_var(getattr(layer, "beta", None), registry, values),
        )
    elif kind == "Dense":
        activation = keras.activations.serialize(layer.activation)
        if isinstance(activation, dict):
            activation = activation.get("config", {}).get("name", str(activation))
        record.update(
            units=int(layer.units),
            activation=str(activation),
            kernel=_var(getattr(layer, "kernel", None), registry, values),
            bias=_var(getattr(layer, "bias", None), registry, values),
        )
    elif kind == "Embedding":
        record.update(
            input_dim=int(layer.input_dim),
            output_dim=int(layer.output_dim),
            mask_zero=bool(getattr(layer, "mask_zero", False)),
            embeddings=_var(getattr(layer, "embeddings", None), registry, values),
        )
    elif kind == "MultiHeadAttention":
        record.update(
            num_heads=int(layer.num_heads),
            key_dim=int(layer.key_dim),
            value_dim=int(layer.value_dim) if layer.value_dim else int(layer.key_dim),
            use_bias=bool(layer.use_bias),
            dropout=float(layer.dropout),
            gated=bool(getattr(layer, "_use_gate", False)),
        )
        for role in ("query", "key", "value", "output"):
            dense = getattr(layer, f"_{role}_dense", None)
            record[f"{role}_kernel"] = _var(getattr(dense, "kernel", None), registry, values)
            record[f"{role}_bias"] = _var(getattr(dense, "bias", None), registry, values)
    return record


def _var(variable, registry: Registry, values: bool = True):
    if variable is None:
        return None
    if not values:
        return {"id": registry.variable(variable)}
    return {"id": registry.variable(variable), "value": to_numpy(variable)}


def _plain_axis(axis):
    if isinstance(axis, (list, tuple)):
        return [int(a) for a in axis]
    return int(axis)
