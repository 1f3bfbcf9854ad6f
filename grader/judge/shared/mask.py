"""The mask topic's shared checks: the attention masks, padding kept invisible, the mask passed on."""

from __future__ import annotations

import numpy as np

from .. import analysis
from ..framework import fail, output_cause


PADDING_WHY = "Attention to padding lets the amount of padding in a batch change how real tokens are encoded."


IGNORED_MASK = (
    "no mask reached MultiHeadAttention's scores: every position attends to padding as if it were text"
)
IGNORED_MASK_CAUSAL = (
    "no mask reached MultiHeadAttention's scores: every position attends to the positions after it, "
    "padding included"
)


def effective_mask(step) -> np.ndarray | None:
    """The verified mask a replayed attention step applied to its scores (causal included), as
    (batch or 1, queries or 1, keys) booleans — or None when it applied none."""
    mask = step.constants.get("mask")
    causal = bool(step.constants.get("causal"))
    if mask is None and not causal:
        return None
    recorded = step.event.get("inputs") or {}
    query = recorded.get("query")
    value = recorded.get("key", recorded.get("value"))
    if not isinstance(query, np.ndarray) or not isinstance(value, np.ndarray) or query.ndim != 3 or value.ndim != 3:
        return None
    batch, queries, keys = query.shape[0], query.shape[1], value.shape[1]
    if isinstance(mask, np.ndarray) and mask.ndim > 4:
        return None
    from ..ops import full_attention_mask

    try:
        full = full_attention_mask(mask, batch, queries, keys, causal)  # (B or 1, H or 1, T, S)
    except ValueError:
        return None
    return np.asarray(full).all(axis=1) if full.shape[1] > 1 else np.asarray(full)[:, 0]


def raw_attention_arguments(evidence, phase: str) -> list[dict]:
    """The mask arguments attention calls received in a phase (claims, for the messages), even if
    the call raised."""
    events = [e for e in analysis.partial_trace(evidence, phase) if e.get("kind") == "attention"
              and isinstance(e.get("arguments"), dict)]
    return [dict(e["arguments"], _constants=e.get("constants") or {}, _inputs=e.get("inputs") or {}) for e in events]


def raised_call_diagnosis(evidence, phase: str, key_lengths: list[int], batch: int,
                          padding: np.ndarray | None = None) -> tuple[str, int, tuple] | None:
    """Why a call with masks raised, from what it recorded before raising (claims are enough to
    explain a failure): (kind, attention index, (observed, expected, why)), or None if it did not raise.

    ``key_lengths[i]`` is the number of keys attention call ``i`` should see."""
    error = evidence.error(phase)
    if error is None:
        return None
    message = error.get("message", "")
    if error.get("type") == "TypeError" and "unexpected keyword argument" in message:
        return "signature", 0, (
            f"call() does not accept the mask argument (TypeError: {message.splitlines()[0] if message else ''}).",
            "a call signature that takes the padding mask(s) as keyword arguments, with None as default.",
            "Keras hands padding masks to call as keyword arguments; a layer that cannot take "
            "them cannot keep padding out of attention.",
        )
    for index, arguments in enumerate(raw_attention_arguments(evidence, phase)):
        raw = arguments.get("attention_mask")
        keys = key_lengths[index] if index < len(key_lengths) else None
        queries = arguments.get("_inputs", {}).get("query")
        queries = queries.shape[1] if isinstance(queries, np.ndarray) and queries.ndim == 3 else None
        if not isinstance(raw, np.ndarray) or keys is None:
            continue
        if list(raw.shape) == [batch, raw.shape[-1]] and batch != queries:
            picture = ""
            if padding is not None and padding.shape[1] == keys:
                expected = np.broadcast_to(padding[:, None, :], (batch, padding.shape[1], keys))
                picture = "\n" + mask_picture(None, expected, padding, note=" — yours raised before attention")
            return "unexpanded", index, (
                f"attention_mask of shape {tuple(raw.shape)}, the padding mask unexpanded — MultiHeadAttention "
                "raised on it." + picture,
                f"shape ({batch}, 1, {keys}): mask[:, None, :], one row of keys for every query.",
                "MultiHeadAttention's scores have shape (batch, heads, queries, keys); a 2-D mask is "
                "read as (queries, keys) and cannot line up with a batch axis.",
            )
        if raw.shape[-1] != keys:
            return "keys", index, (
                f"an attention mask with {raw.shape[-1]} keys (shape {tuple(raw.shape)}) for an attention over "
                f"{keys} positions — MultiHeadAttention raised on it.",
                f"a mask with one entry per key: ({batch}, 1, {keys}).",
                "The mask's last axis lists the keys a query may look at, so it must have as many entries as "
                "the sequence attended to.",
            )
    return "error", 0, None


def explain_raised(evidence, phase: str, check_id: str, owner: str, diagnosis) -> None:
    """When the call of ``phase`` raised: the owner check fails with why; the others are not checked."""
    if diagnosis is None:
        return
    kind, _, parts = diagnosis
    if check_id != owner:
        error = evidence.error(phase) or {}
        analysis.not_checked(f"your layer raised {error.get('type', 'an error')} on this call", owner)
    if parts is None:
        evidence.phase(phase, check_id)  # the student's own error, in full
    fail(*parts)


def explain_raised_mask(evidence, phase: str, check_id: str, batch: int, keys: int,
                        owner: str = "mask.attention_mask_shape", padding: np.ndarray | None = None) -> None:
    """For the one-attention layers: a masked call that raised is explained once, by ``owner``."""
    explain_raised(evidence, phase, check_id, owner,
                   raised_call_diagnosis(evidence, phase, [keys], batch, padding))


def assert_attention_mask_shape(step, batch: int, queries: int, keys: int, arguments: dict | None) -> None:
    if step is None:
        fail(
            "MultiHeadAttention was not called when a mask was given.",
            "a MultiHeadAttention call that receives the attention mask.",
            "The mask only works where attention is computed.",
        )
    mask = step.constants.get("mask")
    if mask is None and not step.constants.get("causal"):
        fail(
            IGNORED_MASK + ".",
            f"the (batch, seq) padding mask passed on as attention_mask of shape ({batch}, 1, {keys}) — "
            f"or ({batch}, {queries}, {keys}).",
            "Keras gives call() the padding mask, but MultiHeadAttention only sees what you pass it "
            "(or the mask carried by its query and value tensors).",
        )
    if mask is None:
        return
    try:
        shape = np.broadcast_shapes(mask.shape[-3:] if mask.ndim >= 3 else mask.shape, (batch, queries, keys))
        ok = tuple(shape) == (batch, queries, keys) and (mask.ndim <= 3 or mask.shape[0] in (1, batch))
    except ValueError:
        ok = False
    if not ok:
        fail(
            f"an attention mask of shape {tuple(mask.shape)} reached the scores.",
            f"a shape that broadcasts to (batch, queries, keys) = ({batch}, {queries}, {keys}), such as "
            f"({batch}, 1, {keys}).",
            "MultiHeadAttention combines the mask with scores of shape (batch, heads, queries, keys).",
        )


def mask_picture(got: np.ndarray | None, expected: np.ndarray, real_queries: np.ndarray,
                 real_keys: np.ndarray | None = None, note: str = "") -> str:
    """One sequence's attention mask drawn as text, the student's beside the expected one: rows are
    queries, columns keys; ■ attends, · hidden; padded positions marked p. For the report and for
    nbgrader feedback alike."""
    batch, queries, keys = expected.shape
    padded_rows = [b for b in range(batch) if not real_queries[b].all()] or list(range(batch))
    b = padded_rows[0]
    key_real = real_keys[b] if real_keys is not None else np.ones(keys, dtype=bool)
    if real_keys is None and queries == keys:
        key_real = real_queries[b]

    def header(real):
        return " ".join("p" if not r else str(i % 10) for i, r in enumerate(real))

    def row(values):
        return " ".join("■" if v else "·" for v in values)

    width = 2 * keys - 1
    lines = [f"Mask that reached attention for sequence {b + 1} (rows: queries, columns: keys; ■ attends, "
             f"· hidden, p padding){note}:",
             f"  {'':9}{'yours':<{width}}   expected",
             f"  {'keys':9}{header(key_real):<{width}}   {header(key_real)}"]
    for t in range(queries):
        label = f"query {t}" if real_queries[b, t] else f"query {t}p"
        mine = row(got[b, t]) if got is not None else ("(no mask)" if t == 0 else "")
        lines.append(f"  {label:9}{mine:<{width}}   {row(expected[b, t])}")
    return "\n".join(lines)


def assert_masks_keys(step, expected: np.ndarray, real_queries: np.ndarray, arguments: dict | None,
                      what: str = "padded keys", real_keys: np.ndarray | None = None,
                      future_why: str | None = None) -> None:
    """The verified mask at the scores, on real query rows, equals ``expected`` (batch, queries, keys)."""
    batch, queries, keys = expected.shape
    if step is None:
        fail("MultiHeadAttention was not called when a mask was given.", f"{what} masked out.", PADDING_WHY)
    effective = effective_mask(step)
    if effective is None:
        # where later positions must be hidden (a causal self-attention), looking ahead is what is broken
        # first: the padding of a real query's row lies after it too
        told, why = (IGNORED_MASK_CAUSAL, future_why) if future_why else (IGNORED_MASK, PADDING_WHY)
        fail(told + ".\n" + mask_picture(np.ones(expected.shape, dtype=bool), expected, real_queries, real_keys),
             f"{what} masked out for every real query.", why)
    full = np.broadcast_to(effective, (batch, queries, keys))
    picture = mask_picture(full, expected, real_queries, real_keys)
    rows = [(b, t) for b in range(batch) for t in range(queries) if real_queries[b, t]]
    got = np.array([full[b, t] for b, t in rows])
    want = np.array([expected[b, t] for b, t in rows])
    if np.array_equal(got, want):
        return
    if np.array_equal(got, ~want):
        fail(
            "the mask is inverted: real tokens are hidden and padding is attended to.\n" + picture,
            "True for positions to attend to, False for padding, as Embedding(mask_zero=True) gives it.",
            "MultiHeadAttention attends where the mask is True.",
        )
    raw = (arguments or {}).get("attention_mask")
    query_masked = (arguments or {}).get("query_mask") is not None and (arguments or {}).get("positional", 0) >= 4
    if query_masked:
        fail(
            "the padding mask reached MultiHeadAttention as its query_mask, the fourth positional argument, so it "
            "hides padded queries while every query still attends to the padded keys.\n" + picture,
            "attention(query, value, attention_mask=mask[:, None, :]): pass the mask by keyword.",
            "In Keras 2, MultiHeadAttention's fourth argument was attention_mask; in Keras 3 it is query_mask. "
            "Code written for Keras 2 as mha(x, x, x, mask) now masks the wrong thing, silently.",
        )
    # a mask on the query axis: every query row all visible or all hidden, the padded queries hidden
    column = keys > 1 and bool(np.all(full == full[..., :1])) and not bool(np.all(full)) and \
        bool(np.all(~full[~real_queries])) if (~real_queries).any() else False
    if column or (isinstance(raw, np.ndarray) and raw.ndim == 3 and raw.shape[-1] == 1 and keys > 1):
        fail(
            f"the mask was expanded on the wrong axis (shape {tuple((raw if raw is not None else effective).shape)}): "
            "it hides queries, while every query still attends to the padded keys.\n" + picture,
            f"mask[:, None, :] — shape ({batch}, 1, {keys}), broadcast over queries, masking keys.",
            "The mask must say which keys a query may look at; a (batch, seq, 1) mask silently "
            "masks the wrong thing, and MultiHeadAttention does not complain.",
        )
    leaks = int(np.sum(got & ~want))
    hidden = int(np.sum(~got & want))
    future = 0
    if future_why:  # leaks to later positions: causality, not padding, is what is broken
        later = ~np.tril(np.ones((queries, keys), dtype=bool))
        future = int(sum(np.sum(full[b, t] & later[t]) for b, t in rows))
    fail(
        f"for real query positions, {leaks} key(s) that should be hidden are visible"
        + (f" ({future} of them later positions)" if future else "")
        + f" and {hidden} key(s) that should be visible are hidden.\n" + picture,
        f"for every real query, exactly the keys it may attend to visible ({what} hidden).",
        future_why if future else PADDING_WHY,
    )


def assert_unchanged(a, b, where: np.ndarray, changed: str, why: str) -> None:
    """Outputs ``a`` and ``b`` agree at the positions of boolean array ``where``."""
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        fail(
            "a masked call did not return a tensor.",
            "one tensor, with or without a mask.",
            "A layer must return the same kind of output with and without a mask.",
        )
    if a.shape != b.shape or a.shape[:np.ndim(where)] != np.shape(where):
        analysis.not_checked("your layer's output does not have the shape the exercise expects", "api.output_shape")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        analysis.not_checked("your layer's output holds NaN or infinite values", "api.output_shape")
    change = np.abs(a.astype(np.float64) - b.astype(np.float64))[where]
    if change.size and change.max() > 1e-4:
        fail(
            f"changing only {changed} changed the outputs that must not depend on them, by up to "
            f"{change.max():.3g}.",
            "those outputs unchanged.",
            why,
            cause=output_cause(),
        )


def assert_mask_propagates(data: dict, output: np.ndarray, padding_mask: np.ndarray) -> None:
    """The pooled output (a GlobalAveragePooling1D after the layer) equals the masked average of the
    verified output: the padding mask reached the next layer."""
    if output.ndim != 3 or output.shape[:2] != padding_mask.shape:
        analysis.not_checked("your layer's output does not have the shape the exercise expects", "api.output_shape")
    if not np.all(np.isfinite(output)):
        analysis.not_checked("your layer's output holds NaN or infinite values", "api.output_shape")
    pooled = data.get("pooled")
    real = padding_mask.astype(np.float64)[..., None]
    masked_mean = (output * real).sum(axis=1) / real.sum(axis=1)
    if isinstance(pooled, np.ndarray) and pooled.shape == masked_mean.shape and np.allclose(
            pooled, masked_mean, rtol=1e-3, atol=1e-4):
        return
    observed = (
        "supports_masking is False, so Keras drops the mask after your layer (and warns on stderr that "
        "your layer destroys the mask)"
        if not data.get("supports_masking")
        else "the output does not carry the input's padding mask to the next layer"
    )
    fail(
        observed + ".",
        "self.supports_masking = True in __init__: the output keeps the input's padding mask.",
        "In Keras 3 a layer passes the mask on only if it says it supports masking (Keras 2 code often "
        "relied on it being passed anyway). Without it, the layers after yours — another encoder, a "
        "pooling that averages only over real tokens — treat padding as text.",
    )
