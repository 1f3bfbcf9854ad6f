"""Independent NumPy versions of the layers a Transformer encoder is made of.

Used by the forward checks to recompute, from the student's own weights, what
a correct layer must output. Float64 throughout.
"""

from __future__ import annotations

import numpy as np

MASKED = -1e9


def dense(x, kernel, bias=None, activation=None):
    y = x @ kernel
    if bias is not None:
        y = y + bias
    return np.maximum(y, 0.0) if activation == "relu" else y


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(variance + epsilon)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def softmax(scores, axis=-1):
    shifted = scores - scores.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def attention(query, value, params, attention_mask=None):
    """Keras's MultiHeadAttention on (B, T, E) / (B, S, E) inputs, mask (B, T, S)."""

    def project(x, role):
        y = np.einsum("bse,enk->bsnk", x, params[f"{role}_kernel"])
        bias = params.get(f"{role}_bias")
        return y if bias is None else y + bias

    q, k, v = project(query, "query"), project(value, "key"), project(value, "value")
    scores = np.einsum("btnk,bsnk->bnts", q, k) / np.sqrt(q.shape[-1])
    if attention_mask is not None:
        scores = np.where(attention_mask[:, None, :, :], scores, MASKED)
    weights = softmax(scores)
    context = np.einsum("bnts,bsnv->btnv", weights, v)
    out = np.einsum("btnv,nve->bte", context, params["output_kernel"])
    bias = params.get("output_bias")
    return out if bias is None else out + bias


def encoder_variants(x, parts, attention_mask=None) -> dict[str, np.ndarray]:
    """The post-norm encoder and the common ways of getting it wrong.

    ``parts`` holds ``attention`` (MHA params), ``norm1``/``norm2``
    (gamma, beta, epsilon) and ``ffn1``/``ffn2`` (kernel, bias).
    """

    def norm(which, z):
        p = parts[which]
        return layer_norm(z, p["gamma"], p["beta"], p["epsilon"])

    def ffn(z, relu=True):
        hidden = dense(z, parts["ffn1"]["kernel"], parts["ffn1"]["bias"], "relu" if relu else None)
        return dense(hidden, parts["ffn2"]["kernel"], parts["ffn2"]["bias"])

    def attend(z):
        return attention(z, z, parts["attention"], attention_mask)

    h = norm("norm1", x + attend(x))
    variants = {"post_norm": norm("norm2", h + ffn(h))}
    variants["no_relu"] = norm("norm2", h + ffn(h, relu=False))
    h_no_res = norm("norm1", attend(x))
    variants["no_attention_residual"] = norm("norm2", h_no_res + ffn(h_no_res))
    variants["no_ffn_residual"] = norm("norm2", ffn(h))
    variants["no_residuals"] = norm("norm2", ffn(h_no_res))
    variants["input_residual_in_ffn"] = norm("norm2", x + ffn(h))
    pre = x + attention(norm("norm1", x), norm("norm1", x), parts["attention"], attention_mask)
    variants["pre_norm"] = pre + ffn(norm("norm2", pre))
    return variants


def attention_block_variants(x, parts, attention_mask=None) -> dict[str, np.ndarray]:
    """norm(x + attention(x, x)) and the common ways of getting it wrong."""
    p = parts["norm"]

    def norm(z):
        return layer_norm(z, p["gamma"], p["beta"], p["epsilon"])

    def attend(z):
        return attention(z, z, parts["attention"], attention_mask)

    return {
        "correct": norm(x + attend(x)),
        "no_residual": norm(attend(x)),
        "no_norm": x + attend(x),
        "pre_norm": x + attend(norm(x)),
    }


def decoder_variants(x, encoder, parts) -> dict[str, np.ndarray]:
    """The post-norm decoder block (causal self-attention, cross-attention,
    feed-forward) and the common ways of getting it wrong."""

    def norm(which, z):
        p = parts[which]
        return layer_norm(z, p["gamma"], p["beta"], p["epsilon"])

    def ffn(z):
        return dense(dense(z, parts["ffn1"]["kernel"], parts["ffn1"]["bias"], "relu"),
                     parts["ffn2"]["kernel"], parts["ffn2"]["bias"])

    length = x.shape[1]
    causal = np.broadcast_to(np.tril(np.ones((length, length), dtype=bool)), (x.shape[0], length, length))

    def block(causal_self=True, cross_query=None, cross_value=None, self_residual=True, cross_residual=True,
              ffn_residual=True):
        a1 = attention(x, x, parts["attention_1"], causal if causal_self else None)
        h1 = norm("norm1", x + a1 if self_residual else a1)
        query = h1 if cross_query is None else cross_query
        a2 = attention(query, encoder if cross_value is None else cross_value(h1), parts["attention_2"])
        h2 = norm("norm2", h1 + a2 if cross_residual else a2)
        return norm("norm3", h2 + ffn(h2) if ffn_residual else ffn(h2))

    return {
        "correct": block(),
        "not_causal": block(causal_self=False),
        "cross_query_from_inputs": block(cross_query=x),
        "cross_attends_to_decoder": block(cross_value=lambda h1: h1),
        "no_self_residual": block(self_residual=False),
        "no_cross_residual": block(cross_residual=False),
        "no_ffn_residual": block(ffn_residual=False),
    }
