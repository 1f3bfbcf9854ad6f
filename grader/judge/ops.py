"""Keras's layers, recomputed in NumPy (float64) and differentiable with autograd.

These are the grader's own versions of what Keras computes, written from
Keras 3's definitions: the replay (``replay``) uses them to recompute a
student's layer from the weights the parent chose, the references
(``reference``) to compute what a correct layer gives, and autograd to get
exact gradients of either. Where Keras has two code paths that differ (a
fully masked attention row: uniform weights on the fused dot-product path,
zeros on the masked-softmax path), both are reproduced.
"""

from __future__ import annotations

import math

import autograd.numpy as anp
import numpy as np

from . import budget

MASKED = -1e9
ACTIVATIONS = ("linear", "relu", "gelu", "sigmoid", "tanh", "softmax", "silu", "swish", "elu", "selu",
               "softplus", "exponential")


def activation(x, name: str):
    if name in ("linear", None):
        return x
    if name == "relu":
        return anp.maximum(x, 0.0)
    if name == "sigmoid":
        return 1.0 / (1.0 + anp.exp(-x))
    if name == "tanh":
        return anp.tanh(x)
    if name == "softmax":
        return softmax(x)
    if name in ("silu", "swish"):
        return x / (1.0 + anp.exp(-x))
    if name == "gelu":  # Keras's gelu is exact by default (approximate=False)
        from autograd.scipy.special import erf

        return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
    if name == "elu":
        return anp.where(x > 0, x, anp.exp(anp.minimum(x, 0.0)) - 1.0)
    if name == "selu":
        alpha, scale = 1.6732632423543772, 1.0507009873554805
        return scale * anp.where(x > 0, x, alpha * (anp.exp(anp.minimum(x, 0.0)) - 1.0))
    if name == "softplus":
        return anp.logaddexp(x, 0.0)
    if name == "exponential":
        return anp.exp(x)
    raise ValueError(f"unknown activation {name!r}")


def relu_layer(x, max_value=None, negative_slope=0.0, threshold=0.0):
    """keras.layers.ReLU."""
    below = negative_slope * (x - threshold)
    y = anp.where(x >= threshold, x, below)
    if max_value is not None:
        y = anp.minimum(y, max_value)
    return y


def einsum(equation: str, *operands):
    """``anp.einsum``, its cost counted first (``budget``)."""
    operations, elements = budget.einsum_cost(equation, *operands)
    budget.charge(operations, elements)
    return anp.einsum(equation, *operands)


def dense(x, kernel, bias=None, activation_name="linear"):
    rows = int(np.prod(np.shape(x)[:-1])) if np.ndim(x) else 1
    budget.charge(float(np.size(x)) * (np.shape(kernel)[-1] if np.ndim(kernel) else 1),
                  rows * (np.shape(kernel)[-1] if np.ndim(kernel) else 1))
    y = anp.dot(x, kernel)
    if bias is not None:
        y = y + bias
    return activation(y, activation_name)


def einsum_dense(x, kernel, bias, equation: str, bias_axes: str | None, activation_name="linear"):
    y = einsum(equation, x, kernel)
    if bias is not None and bias_axes:
        output_spec = equation.split("->")[1]
        first = min(output_spec.index(axis) for axis in bias_axes)
        shape = [y.shape[first + i] if char in bias_axes else 1 for i, char in enumerate(output_spec[first:])]
        y = y + anp.reshape(bias, shape)
    return activation(y, activation_name)


def layer_norm(x, gamma, beta, epsilon):
    mean = anp.mean(x, axis=-1, keepdims=True)
    variance = anp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    y = (x - mean) / anp.sqrt(variance + epsilon)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


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


def attention(query, value, key, params: dict, mask=None, causal: bool = False, zero_masked: bool = False):
    """Keras's MultiHeadAttention on (B, T, E) query and (B, S, E) value/key.

    ``mask`` is the attention mask that reached the scores (broadcastable to (B, T, S), or 4-D with
    a heads axis); ``zero_masked`` selects Keras's masked-softmax path (dropout > 0), where a fully
    masked row attends to nothing, over the fused path, where it attends uniformly.
    """
    key = value if key is None else key

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
    out = einsum("btnv,nve->bte", context, params["output_kernel"])
    bias = params.get("output_bias")
    return out if bias is None else out + bias


def average_pool(x, mask=None):
    """GlobalAveragePooling1D over axis 1; with a mask, over the kept positions only."""
    if mask is None:
        return anp.mean(x, axis=1)
    weights = np.asarray(mask, dtype=float)[..., None]
    return anp.sum(x * weights, axis=1) / np.sum(weights, axis=1)


def max_pool(x):
    return anp.max(x, axis=1)


def binary_crossentropy(probabilities, labels, epsilon=1e-7):
    p = anp.clip(probabilities, epsilon, 1.0 - epsilon)
    return -anp.mean(labels * anp.log(p) + (1.0 - labels) * anp.log(1.0 - p))
