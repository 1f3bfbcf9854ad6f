"""What the exercises' layers compute, and the common ways of getting them wrong, in NumPy.

Every function takes ``parts``: the weights by role (``resolve`` turns roles —
variable keys plus settings such as a norm's epsilon — into values), so the
same reference serves the forward checks (which variant did the student's
layer compute?) and, through autograd, exact gradients when a layer's parts
were found by what its weights do rather than by replaying its calls.
"""

from __future__ import annotations

import numpy as np

from . import ops


def resolve(roles: dict, values: dict) -> dict:
    """Roles ({part: {name: key or setting}}) with every variable key replaced by its value (in the
    shape of its role, for a key that is an ``ops.View``)."""
    parts = {}
    for part, entries in roles.items():
        parts[part] = {name: (ops.viewed(key, values) if isinstance(key, str) and name not in NOT_KEYS else key)
                       for name, key in entries.items()}
    return parts


NOT_KEYS = ("epsilon", "activation", "mask", "causal", "zero_masked")


def _norm(p, z):
    return ops.layer_norm(z, p.get("gamma"), p.get("beta"), p["epsilon"])


def _ffn(parts, z, relu=True):
    hidden = ops.dense(z, parts["ffn1"]["kernel"], parts["ffn1"].get("bias"), "relu" if relu else "linear")
    return ops.dense(hidden, parts["ffn2"]["kernel"], parts["ffn2"].get("bias"))


def _attend(p, query, value, mask=None, causal=False):
    return ops.attention(query, value, None, p, mask, causal, bool(p.get("zero_masked")))


def encoder_variants(x, parts, mask=None) -> dict:
    """The post-norm encoder and the common ways of getting it wrong. ``mask`` is the attention
    mask that reached the scores."""

    def norm(which, z):
        return _norm(parts[which], z)

    def attend(z):
        return _attend(parts["attention"], z, z, mask)

    h = norm("norm1", ops.add(x, attend(x)))
    variants = {"post_norm": norm("norm2", ops.add(h, _ffn(parts, h)))}
    variants["no_relu"] = norm("norm2", ops.add(h, _ffn(parts, h, relu=False)))
    h_no_res = norm("norm1", attend(x))
    variants["no_attention_residual"] = norm("norm2", ops.add(h_no_res, _ffn(parts, h_no_res)))
    variants["no_ffn_residual"] = norm("norm2", _ffn(parts, h))
    variants["no_residuals"] = norm("norm2", _ffn(parts, h_no_res))
    variants["input_residual_in_ffn"] = norm("norm2", ops.add(x, _ffn(parts, h)))
    normed = norm("norm1", x)
    pre = ops.add(x, _attend(parts["attention"], normed, normed, mask))
    variants["pre_norm"] = ops.add(pre, _ffn(parts, norm("norm2", pre)))
    return variants


def attention_block_variants(x, parts, mask=None) -> dict:
    """norm(x + attention(x, x)) and the common ways of getting it wrong."""

    def norm(z):
        return _norm(parts["norm"], z)

    def attend(z):
        return _attend(parts["attention"], z, z, mask)

    return {
        "correct": norm(ops.add(x, attend(x))),
        "no_residual": norm(attend(x)),
        "pre_norm": ops.add(x, attend(norm(x))),
    }


def decoder_variants(x, encoder, parts, self_mask=None, cross_mask=None, causal=True) -> dict:
    """The post-norm decoder block (causal self-attention, cross-attention, feed-forward) and the
    common ways of getting it wrong. ``self_mask``/``cross_mask`` are the masks that reached the
    scores; with ``causal`` and no self mask, the causal mask alone."""
    length = np.shape(x)[1]
    lower = np.tril(np.ones((length, length), dtype=bool))[None]
    if self_mask is None:
        self_mask = lower if causal else None

    def norm(which, z):
        return _norm(parts[which], z)

    def block(causal_self=True, cross_query=None, cross_value=None, self_residual=True, cross_residual=True,
              ffn_residual=True):
        a1 = _attend(parts["attention_1"], x, x, self_mask if causal_self else None)
        h1 = norm("norm1", ops.add(x, a1) if self_residual else a1)
        query = h1 if cross_query is None else cross_query
        a2 = _attend(parts["attention_2"], query, encoder if cross_value is None else cross_value(h1), cross_mask)
        h2 = norm("norm2", ops.add(h1, a2) if cross_residual else a2)
        return norm("norm3", ops.add(h2, _ffn(parts, h2)) if ffn_residual else _ffn(parts, h2))

    return {
        "correct": block(),
        "not_causal": block(causal_self=False),
        "cross_query_from_inputs": block(cross_query=x),
        "cross_attends_to_decoder": block(cross_value=lambda h1: h1),
        "no_self_residual": block(self_residual=False),
        "no_cross_residual": block(cross_residual=False),
        "no_ffn_residual": block(ffn_residual=False),
    }


def embedding_variants(tokens, parts) -> dict:
    """Token embedding plus position embedding, and the common ways of getting it wrong."""
    tokens = np.asarray(tokens)
    length = tokens.shape[1]
    tok, pos = parts["tokens"]["embeddings"], parts["positions"]["embeddings"]
    rows = np.shape(pos)[0]
    if rows < length:
        raise ops.budget.ReplayFailed(f"its position table has {rows} rows, fewer than the {length} positions")
    embedded = ops.embedding(tok, tokens)
    positions = ops.embedding(pos, np.arange(length))[None]
    shifted = ops.embedding(pos, np.arange(1, length + 1) % rows)[None]
    return {
        "correct": ops.budget.elementwise(np.add, embedded, positions),
        "tokens_only": embedded,
        "positions_only": ops.budget.elementwise(np.add, positions, 0.0 * embedded),
        "positions_from_one": ops.budget.elementwise(np.add, embedded, shifted),
    }
