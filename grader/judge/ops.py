"""Keras's layers, recomputed in NumPy (float64) and differentiable with autograd.

These are the grader's own versions of what Keras computes, written from
Keras 3's definitions: the replay (``replay``) uses them to recompute a
student's layer from the weights the parent chose, the references
(``reference``) to compute what a correct layer gives, and autograd to get
exact gradients of either. Where Keras has two code paths that differ (a
fully masked attention row: uniform weights on the fused dot-product path,
zeros on the masked-softmax path), both are reproduced.

The weights' shapes come from the child's report of the layer, so each layer
here checks them against their role before using them (a bias is the layer's
output width, a gamma the normalised axis, a projection kernel fits its
input) and raises ``ReplayFailed`` otherwise; every array is charged to the
budget from its shape before it is made (``budget``).
"""

from __future__ import annotations

import math

import autograd.numpy as anp
import numpy as np

from . import budget

MASKED = -1e9


def _sigmoid(x):
    return 1.0 / (1.0 + anp.exp(-x))


def _softplus(x):
    return anp.logaddexp(x, 0.0)


def _erf(x):
    from autograd.scipy.special import erf  # autograd's erf is SciPy's, with its derivative

    return erf(x)


def _gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1.0 + anp.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _elu(x, alpha=1.0):
    return anp.where(x > 0, x, alpha * (anp.exp(anp.minimum(x, 0.0)) - 1.0))


def _relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    if negative_slope == 0.0 and max_value is None and threshold == 0.0:
        return anp.maximum(x, 0.0)
    return relu_layer(x, max_value, negative_slope, threshold)


def _relu6(x):
    return anp.minimum(anp.maximum(x, 0.0), 6.0)


def _hard_sigmoid(x):
    return _relu6(x + 3.0) / 6.0


def _glu(x, axis=-1):
    a, b = anp.split(x, 2, axis=axis)
    return a * _sigmoid(b)


def _log_softmax(x, axis=-1):
    shifted = x - anp.max(x, axis=axis, keepdims=True)
    return shifted - anp.log(anp.sum(anp.exp(shifted), axis=axis, keepdims=True))


# every activation of keras.activations (sparsemax excepted), with Keras 3's definitions and defaults
ACTIVATION_FUNCTIONS = {
    "linear": lambda x: x,
    "relu": _relu,
    "relu6": _relu6,
    "leaky_relu": lambda x, negative_slope=0.2: anp.where(x > 0, x, negative_slope * x),
    "gelu": _gelu,
    "sigmoid": _sigmoid,
    "tanh": anp.tanh,
    "softmax": lambda x, axis=-1: softmax(x, axis),
    "log_softmax": _log_softmax,
    "silu": lambda x: x * _sigmoid(x),
    "swish": lambda x: x * _sigmoid(x),
    "elu": _elu,
    "celu": lambda x, alpha=1.0: anp.maximum(x, 0.0) + anp.minimum(
        0.0, alpha * (anp.exp(anp.minimum(x, 0.0) / alpha) - 1.0)),
    "selu": lambda x: 1.0507009873554805 * _elu(x, 1.6732632423543772),
    "softplus": _softplus,
    "softsign": lambda x: x / (1.0 + anp.abs(x)),
    "log_sigmoid": lambda x: -_softplus(-x),
    "exponential": anp.exp,
    "hard_sigmoid": _hard_sigmoid,
    "hard_silu": lambda x: x * _hard_sigmoid(x),
    "hard_swish": lambda x: x * _hard_sigmoid(x),
    "hard_tanh": lambda x: anp.clip(x, -1.0, 1.0),
    "tanh_shrink": lambda x: x - anp.tanh(x),
    "soft_shrink": lambda x, threshold=0.5: anp.where(x > threshold, x - threshold,
                                                      anp.where(x < -threshold, x + threshold, 0.0 * x)),
    "hard_shrink": lambda x, threshold=0.5: anp.where(anp.abs(x) > threshold, x, 0.0 * x),
    "threshold": lambda x, threshold, default_value: anp.where(x > threshold, x, default_value + 0.0 * x),
    "mish": lambda x: x * anp.tanh(_softplus(x)),
    "sparse_plus": lambda x: anp.where(x <= -1.0, 0.0 * x, anp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4.0)),
    "sparse_sigmoid": lambda x: anp.where(x <= -1.0, 0.0 * x, anp.where(x >= 1.0, 1.0 + 0.0 * x, (x + 1.0) / 2.0)),
    "squareplus": lambda x, b=4: (x + anp.sqrt(x * x + b)) / 2.0,
    "glu": _glu,
}
ACTIVATIONS = tuple(ACTIVATION_FUNCTIONS)


def activation(x, name: str, **options):
    """The Keras activation ``name`` (as keras.activations defines it) of x."""
    if name is None:
        return x
    function = ACTIVATION_FUNCTIONS.get(name)
    if function is None:
        raise ValueError(f"unknown activation {name!r}")
    return function(x, **options)


def relu_layer(x, max_value=None, negative_slope=0.0, threshold=0.0):
    """keras.layers.ReLU."""
    below = negative_slope * (x - threshold)
    y = anp.where(x >= threshold, x, below)
    if max_value is not None:
        y = anp.minimum(y, max_value)
    return y


def _shape_of(role: str, value, expected: tuple) -> None:
    """ReplayFailed unless the weight of ``role`` has the ``expected`` shape (None: any size)."""
    shape = tuple(np.shape(value))
    if len(shape) != len(expected) or any(e is not None and s != e for s, e in zip(shape, expected)):
        described = "(" + ", ".join("any" if e is None else str(e) for e in expected) + ("," if len(expected) == 1 else "") + ")"
        raise budget.ReplayFailed(f"its {role} has the shape {shape}, not the {described} of its role in it")


class View(str):
    """A variable's key, with the shape its values have in the role it plays: a Conv1D kernel of
    shape (1, in, out) used position by position is the (in, out) kernel of a Dense; a Dense
    projection of width heads * key_dim is an attention kernel of shape (in, heads, key_dim).
    It is the key wherever a key is used (``values[view]`` is the variable's own value);
    ``viewed`` gives the value in the role's shape."""

    shape: tuple
    columns: tuple | None  # the part of the variable the role is: columns of its last axis, in order
    role: str | None  # which of several roles of one variable this is (a fused projection's query part)

    def __new__(cls, key: str, shape, columns=None, role=None):
        view = super().__new__(cls, key)
        view.shape = tuple(int(d) for d in shape)
        view.columns = None if columns is None else tuple(int(c) for c in columns)
        view.role = role
        return view


def viewed(key, values: dict):
    """The value of ``key`` in ``values``, reshaped to its role's shape if ``key`` is a ``View`` (its
    columns taken first where the role is part of the variable)."""
    value = values[key]
    if isinstance(key, View):
        if key.columns is not None:
            if max(key.columns, default=-1) >= np.shape(value)[-1]:
                raise budget.ReplayFailed(f"a weight of shape {np.shape(value)} has no column {max(key.columns)}")
            value = value[..., list(key.columns)]
        if math.prod(key.shape) != np.size(value):
            raise budget.ReplayFailed(f"a weight of shape {np.shape(value)} cannot play a role of shape {key.shape}")
        return anp.reshape(value, key.shape)
    return value


def role_shape(key, values: dict) -> tuple | None:
    """The shape of ``key``'s value in its role (its own shape unless it is a ``View``)."""
    if isinstance(key, View):
        return key.shape
    return tuple(np.shape(values[key])) if key in values else None


def add(x, y):
    """A sum of two tensors of one shape (a residual), its output charged first: a sum that would
    broadcast either to a larger shape is no residual, and is refused."""
    shape = budget.broadcast_shape(x, y)
    if shape not in (tuple(np.shape(x)), tuple(np.shape(y))):
        raise budget.ReplayFailed(f"a sum of tensors of shapes {np.shape(x)} and {np.shape(y)}")
    return x + y


def einsum(equation: str, *operands):
    """``anp.einsum``, its cost counted first (``budget``)."""
    operations, elements = budget.einsum_cost(equation, *operands)
    budget.charge(operations, elements)
    return anp.einsum(equation, *operands)


def dense(x, kernel, bias=None, activation_name="linear"):
    if np.ndim(x) < 1:
        raise budget.ReplayFailed("a Dense layer called on a scalar")
    _shape_of("kernel", kernel, (np.shape(x)[-1], None))
    units = np.shape(kernel)[-1]
    if bias is not None:
        _shape_of("bias", bias, (units,))
    rows = int(np.prod(np.shape(x)[:-1]))
    budget.charge(float(np.size(x)) * units, rows * units)
    y = anp.dot(x, kernel)
    if bias is not None:
        y = y + bias
    return activation(y, activation_name)


def pointwise_conv(x, kernel, bias=None, activation_name="linear"):
    """A Conv1D of kernel size 1 (stride 1): at each position, a Dense with the kernel's only tap."""
    if np.ndim(x) != 3:
        raise budget.ReplayFailed(f"a Conv1D called on a tensor of shape {np.shape(x)}, not (batch, steps, channels)")
    _shape_of("kernel", kernel, (1, np.shape(x)[-1], None))
    return dense(x, kernel[0], bias, activation_name)


def einsum_dense(x, kernel, bias, equation: str, bias_axes: str | None, activation_name="linear"):
    y = einsum(equation, x, kernel)
    if bias is not None and bias_axes:
        output_spec = equation.split("->")[1]
        if any(axis not in output_spec for axis in bias_axes) or len(output_spec) != np.ndim(y):
            raise budget.ReplayFailed(f"its bias axes {bias_axes!r} are not axes of its output")
        first = min(output_spec.index(axis) for axis in bias_axes)
        shape = [np.shape(y)[first + i] if char in bias_axes else 1 for i, char in enumerate(output_spec[first:])]
        if np.size(bias) != math.prod(shape):  # Keras keeps the bias axes' sizes, in the output's order
            _shape_of("bias", bias, tuple(np.shape(y)[output_spec.index(axis)] for axis in output_spec[first:]
                                          if axis in bias_axes))
        y = budget.elementwise(anp.add, y, anp.reshape(bias, shape))
    return activation(y, activation_name)


def layer_norm(x, gamma, beta, epsilon, axes: tuple | None = None):
    """Keras's LayerNormalization over the last axis, or over ``axes`` (counted from 0), its gamma
    and beta shaped as those axes of ``x``."""
    if np.ndim(x) < 1:
        raise budget.ReplayFailed("a LayerNormalization called on a scalar")
    axes = (np.ndim(x) - 1,) if axes is None else tuple(axes)
    if any(a >= np.ndim(x) for a in axes):
        raise budget.ReplayFailed(f"a LayerNormalization over axis {max(axes)} of a tensor of rank {np.ndim(x)}")
    own = tuple(np.shape(x)[a] for a in axes)
    broadcast = tuple(np.shape(x)[d] if d in axes else 1 for d in range(np.ndim(x)))
    for role, value in (("gamma", gamma), ("beta", beta)):
        if value is not None:
            _shape_of(role, value, own)
    budget.charge(6 * np.size(x), np.size(x))
    mean = anp.mean(x, axis=axes, keepdims=True)
    variance = anp.mean((x - mean) ** 2, axis=axes, keepdims=True)
    y = (x - mean) / anp.sqrt(variance + epsilon)
    if gamma is not None:
        y = y * anp.reshape(gamma, broadcast)
    if beta is not None:
        y = y + anp.reshape(beta, broadcast)
    return y


def embedding(table, ids):
    """``table[ids]``: each id's row, the output charged from the ids' shape and the rows' width first."""
    if np.ndim(table) != 2:
        raise budget.ReplayFailed(f"its embeddings have the shape {np.shape(table)}, not a (rows, width) table")
    budget.charge(np.size(ids) * np.shape(table)[1] + 1, np.size(ids) * np.shape(table)[1])
    return table[ids]


def softmax(scores, axis=-1):
    shifted = scores - anp.max(scores, axis=axis, keepdims=True)
    e = anp.exp(shifted)
    return e / anp.sum(e, axis=axis, keepdims=True)


def full_attention_mask(mask, batch: int, queries: int, keys: int, causal: bool = False):
    """A boolean (batch, 1 or heads, queries, keys) mask from what reached attention, or None.

    Every size here may be a claim: the shapes are checked against the exercise's sizes, and the
    mask's against the scores it masks (rank 2 to 4, each axis 1 or the scores' own, the heads axis
    bounded), before any array is built; ValueError for a mask that cannot mask these scores."""
    budget.check_axes((batch, queries, keys), "an input of attention")
    full = None
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if not 2 <= mask.ndim <= 4:
            raise ValueError(f"a {mask.ndim}-D attention mask")
        budget.check_axes(mask.shape, "the attention mask")
        if mask.ndim == 2:
            mask = mask[None, None]
        elif mask.ndim == 3:
            mask = mask[:, None]
        target = (batch, mask.shape[1], queries, keys)
        if any(m not in (1, t) for m, t in zip(mask.shape, target)) or batch < 1:
            raise ValueError(f"an attention mask of shape {mask.shape} cannot mask scores of {target}")
        shape = np.broadcast_shapes(mask.shape, (batch, 1, queries, keys))
        budget.charge(math.prod(shape), math.prod(shape))
        full = np.broadcast_to(mask, shape)
    if causal:
        budget.charge(queries * keys, queries * keys)
        lower = np.tril(np.ones((queries, keys), dtype=bool))[None, None]
        full = lower if full is None else full & lower
    return full


OUTPUT_LETTERS = "efgh"  # the axes of an attention's output projection, after (batch, positions)


def attention(query, value, key, params: dict, mask=None, causal: bool = False, zero_masked: bool = False):
    """Keras's MultiHeadAttention on (B, T, E) query and (B, S, E) value/key.

    ``mask`` is the attention mask that reached the scores (broadcastable to (B, T, S), or 4-D with
    a heads axis); ``zero_masked`` selects Keras's masked-softmax path (dropout > 0), where a fully
    masked row attends to nothing, over the fused path, where it attends uniformly.
    """
    key = value if key is None else key
    for role, x in (("query", query), ("key", key), ("value", value)):
        if np.ndim(x) != 3:
            raise budget.ReplayFailed(f"its {role} is a tensor of shape {np.shape(x)}, not (batch, positions, width)")
        _shape_of(f"{role} kernel", params[f"{role}_kernel"], (np.shape(x)[-1], None, None))
    heads, key_width = np.shape(params["query_kernel"])[1:]
    _shape_of("key kernel", params["key_kernel"], (np.shape(key)[-1], heads, key_width))
    value_width = np.shape(params["value_kernel"])[2]
    _shape_of("value kernel", params["value_kernel"], (np.shape(value)[-1], heads, value_width))
    # the output projection maps each position's heads to the layer's output shape: the query's width,
    # or the ``output_shape`` given (a width, or several axes)
    output_axes = np.ndim(params["output_kernel"]) - 2
    if not 1 <= output_axes <= len(OUTPUT_LETTERS):
        raise budget.ReplayFailed(f"its output kernel has the shape {np.shape(params['output_kernel'])}, not "
                                  f"(heads, width, output axes) with 1 to {len(OUTPUT_LETTERS)} output axes")
    _shape_of("output kernel", params["output_kernel"], (heads, value_width, *[None] * output_axes))
    widths = {"query": key_width, "key": key_width, "value": value_width}
    for role, width in widths.items():
        if params.get(f"{role}_bias") is not None:
            _shape_of(f"{role} bias", params[f"{role}_bias"], (heads, width))
    if params.get("output_bias") is not None:
        _shape_of("output bias", params["output_bias"], tuple(np.shape(params["output_kernel"])[2:]))

    def project(x, role):
        y = einsum("bse,enk->bsnk", x, params[f"{role}_kernel"])
        bias = params.get(f"{role}_bias")
        return y if bias is None else y + bias

    full = full_attention_mask(mask, query.shape[0], query.shape[1], key.shape[1], causal)
    q, k, v = project(query, "query"), project(key, "key"), project(value, "value")
    scores = einsum("btnk,bsnk->bnts", q, k) / np.sqrt(q.shape[-1])
    if full is not None:
        masked = np.broadcast_shapes(np.shape(full), np.shape(scores))
        budget.charge(4 * math.prod(masked), math.prod(masked))  # the where, and the softmax over it
        scores = anp.where(full, scores, MASKED)
    weights = softmax(scores)
    if full is not None and zero_masked:
        weights = anp.where(full, weights, 0.0)
    context = einsum("bnts,bsnv->btnv", weights, v)
    letters = OUTPUT_LETTERS[:output_axes]
    out = einsum(f"btnv,nv{letters}->bt{letters}", context, params["output_kernel"])
    bias = params.get("output_bias")
    return out if bias is None else out + bias


def average_pool(x, mask=None):
    """GlobalAveragePooling1D over axis 1; with a mask, over the kept positions only."""
    if np.ndim(x) < 2:
        raise budget.ReplayFailed(f"a pooling over positions of a tensor of shape {np.shape(x)}")
    budget.charge(2 * np.size(x), np.size(x))
    if mask is None:
        return anp.mean(x, axis=1)
    weights = np.asarray(mask, dtype=float)[..., None]
    return anp.sum(budget.elementwise(anp.multiply, x, weights), axis=1) / np.sum(weights, axis=1)


def max_pool(x):
    if np.ndim(x) < 2:
        raise budget.ReplayFailed(f"a pooling over positions of a tensor of shape {np.shape(x)}")
    return anp.max(x, axis=1)


def binary_crossentropy(probabilities, labels, epsilon=1e-7):
    p = anp.clip(probabilities, epsilon, 1.0 - epsilon)
    return -anp.mean(labels * anp.log(p) + (1.0 - labels) * anp.log(1.0 - p))
