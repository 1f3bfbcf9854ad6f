"""Plain-data descriptions of Keras layers and variables: what the checks' messages can name.

Layers are described by the kind of Keras layer they are (``tracing.kind_of``:
``isinstance``, so subclasses count) and the variables they own, by id. No
values travel: the parent chose every weight's value itself.
"""

from __future__ import annotations

from .tracing import Registry, describe_call, keras_class, kind_of


def describe_variable(variable, registry: Registry) -> dict:
    return {
        "id": registry.variable(variable),
        "shape": [int(d) for d in variable.shape],
        "dtype": str(variable.dtype),
        "trainable": bool(variable.trainable),
        "path": str(getattr(variable, "path", getattr(variable, "name", "")))[:200],
    }


def describe_layer(layer, registry: Registry) -> dict:
    """The facts a message may need about one layer."""
    kind = kind_of(layer)
    record = {
        "class": keras_class(layer),
        "python_class": type(layer).__name__[:100],
        "kind": kind,
        "trainable": bool(layer.trainable),
        "weights": [registry.variable(v) for v in layer.weights],
        "trainable_weights": [registry.variable(v) for v in layer.trainable_weights],
    }
    try:
        params, constants = describe_call(layer, registry, kind, {})
    except Exception:  # a half-built layer: describe what there is
        params, constants = {}, {}
    record["params"] = params
    record.update({k: v for k, v in constants.items() if isinstance(v, (int, float, str, bool)) or v is None})
    if kind == "embedding":
        record["input_dim"] = int(getattr(layer, "input_dim", 0) or 0)
        record["output_dim"] = int(getattr(layer, "output_dim", 0) or 0)
        record["mask_zero"] = bool(getattr(layer, "mask_zero", False))
    if kind == "norm":
        record["center"] = bool(getattr(layer, "center", True))
        record["scale"] = bool(getattr(layer, "scale", True))
    return record
