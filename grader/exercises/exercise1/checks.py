"""Checks for exercise 1, the positional embedding: token embedding + position embedding, mask = tokens != 0.

The two tables are found by what they do — which rows the call looks up in
them — not by their class: an ``Embedding``, a subclass of it, or a weight made
with ``add_weight`` all count. Every computed check judges calls the parent
replayed with its own token ids and table values (``analysis``).
"""

from __future__ import annotations

import numpy as np
import pytest

from ...judge import analysis, contract
from ...judge.framework import check, fail
from ...judge.reference import embedding_variants, resolve
from ...judge.shared.api import assert_output_shape
from ...judge.shared.fixtures import (  # noqa: F401  (fixtures are used by name)
    config, config_phase, dims, forward, job, values,
)
from ...judge.shared.forward import assert_matches_reference
from ...judge.shared.gradients import assert_all_gradients, gradient_report
from ...judge.shared.numbers import close
from ...judge.shared.structure import (
    identified, identify_by_roles, pseudo_steps_of, trace_leaves, trainable_keys,
)
from ...judge.shared.weights import assert_trainable_shapes
from .job import DIMS

CLASS = "PositionalEmbedding"
SEE = "forward.sum"
SUM = "token_embeddings(tokens) + position_embeddings(arange(seq)), shape (batch, seq, output_dim)."
TABLES_WHY = ("A token's vector says what it is; a position's vector says where it is. Attention itself "
              "ignores order, so the model only knows positions through the second table.")


def _tokens(job) -> np.ndarray:
    return np.asarray(job["tokens"])


def _identify(evidence, observed, tokens) -> None:
    """Tables read with raw operations (a weight made with add_weight, ops.take): find them by shape
    — (input_dim, output_dim) for tokens, (sequence_length, output_dim) for positions — and see
    whether the output is the sum (or a known mistaken one) computed from them."""
    dims = evidence.job["dims"]
    parameters = analysis.values(evidence)
    forward = evidence.partial("forward") or {}
    by_shape: dict[tuple, list[str]] = {}
    for key in trainable_keys(forward):
        if key in parameters:
            by_shape.setdefault(tuple(np.shape(parameters[key])), []).append(key)
    token_shape = (dims["input_dim"], dims["output_dim"])
    position_shape = (dims["sequence_length"], dims["output_dim"])
    if token_shape == position_shape or len(by_shape.get(token_shape, [])) != 1 \
            or len(by_shape.get(position_shape, [])) != 1:
        return
    roles = {"tokens": {"embeddings": by_shape[token_shape][0]}, "positions": {"embeddings": by_shape[position_shape][0]}}
    identify_by_roles(observed, roles, lambda parts: embedding_variants(tokens, parts), parameters,
                      pseudo_steps_of(trace_leaves(evidence, observed.phase)))


def _observe(evidence, job, phase, check_id):
    tokens = _tokens(job)
    observed = analysis.observed(evidence, phase, check_id, {"tokens": tokens})
    if (not observed.verified or observed.through_raw_weights) and observed.output is not None and \
            phase == "forward":
        _identify(evidence, observed, tokens)
    return observed


def _tables(observed, tokens, dims, parameters) -> tuple[str | None, str | None]:
    """(token table, position table) keys: the table looked up with the token ids, and the table
    looked up with positions. From the replayed steps, or from the roles found by shape."""
    if observed.roles:
        return observed.roles["tokens"]["embeddings"], observed.roles["positions"]["embeddings"]
    token = position = None
    for step in observed.steps("embedding"):
        ids = next(iter(step.inputs.values()))
        ids = ids[1] if isinstance(ids, tuple) else None
        key = step.params.get("embeddings")
        if ids is None or key not in parameters:
            continue
        if ids.shape == tokens.shape and np.array_equal(ids, tokens) and token is None:
            token = key
        elif position is None and ids.ndim <= 2 and ids.shape[-1] == tokens.shape[1]:
            position = key
    return token, position


@pytest.fixture
def plain(evidence, job):
    return _observe(evidence, job, "forward", "api.output_shape")


@pytest.fixture
def layer(plain, job, dims, values):
    """The verified plain call that looks the token ids up in a table; else not checked."""
    analysis.require_verified(plain, SEE)
    token, _ = _tables(plain, _tokens(job), dims, values)
    if token is None:
        analysis.not_checked("the verified call looks up no table with the token ids", SEE)
    return plain


check_constructor = contract.constructor(CLASS, DIMS)


@check("api.output_shape", "Returns (batch, seq, output_dim) for (batch, seq) token ids", "api")
def check_output_shape(forward, job, dims):
    batch, seq = _tokens(job).shape
    assert_output_shape(forward, (batch, seq, dims["output_dim"]), "(batch, seq, output_dim)")


@check("weights.two_tables", "Two embedding tables: tokens and positions", "weights", points=2)
def check_two_tables(layer, job, dims, values):
    tokens = _tokens(job)
    token, position = _tables(layer, tokens, dims, values)
    shapes_ok = token is not None and position is not None and token != position and \
        tuple(np.shape(values[token])) == (dims["input_dim"], dims["output_dim"]) and \
        tuple(np.shape(values[position])) == (dims["sequence_length"], dims["output_dim"])
    if shapes_ok:
        return
    steps = layer.steps("embedding")
    instances = list(dict.fromkeys(s.event["layer"] for s in steps))
    shapes = [tuple(np.shape(values[s.params["embeddings"]])) for s in steps if s.params.get("embeddings") in values]
    fail(
        f"{len(steps)} Embedding call(s) on {len(instances)} layer(s), with tables of shapes {shapes or 'none'}.",
        f"two tables: tokens ({dims['input_dim']}, {dims['output_dim']}) = (input_dim, output_dim), looked up with "
        f"the token ids, and positions ({dims['sequence_length']}, {dims['output_dim']}) = (sequence_length, "
        "output_dim), looked up with the positions 0 .. seq-1.",
        TABLES_WHY,
    )


@check("weights.trainable_list", "Trainable weights are exactly the two tables", "weights")
def check_trainable_list(layer, forward, dims, values):
    d = dims["output_dim"]
    assert_trainable_shapes(forward, values, [(dims["input_dim"], d), (dims["sequence_length"], d)],
                            "the token table and the position table", [])


VARIANTS = {
    "tokens_only": "the position embeddings are not added",
    "positions_only": "the token embeddings are not added",
    "positions_from_one": "positions are numbered from 1 instead of 0",
}
WHY = ("The sum carries both what each token is and where it stands; sequences shorter than "
       "sequence_length use the first positions.")


@check("forward.sum", "Adds token and position embeddings", "forward", points=3)
def check_sum(plain, job, dims, values):
    if identified(plain, SUM, _tokens(job).shape + (dims["output_dim"],), VARIANTS, WHY):
        return
    tokens = _tokens(job)
    token, position = _tables(plain, tokens, dims, values)
    if token is None or position is None or token == position:
        fail(
            "no pair of tables looked up with the token ids and with the positions was found "
            f"(the call ran: {', '.join(s.event['class'] for s in plain.steps('embedding')) or 'no embedding'}).",
            "a token table looked up with the token ids and a position table looked up with 0 .. seq-1.",
            "See weights.two_tables.",
        )
    variants = embedding_variants(tokens, resolve({"tokens": {"embeddings": token},
                                                   "positions": {"embeddings": position}}, values))
    assert_matches_reference(np.asarray(plain.output, dtype=np.float64), variants, VARIANTS, SUM, WHY)


@check("mask.values", "compute_mask is True exactly where the token id is not 0", "mask", points=2)
def check_mask_values(evidence, layer, job):
    data = evidence.phase("mask", "mask.values")
    tokens = _tokens(job)
    expected = tokens != 0
    mask = data["mask"]
    if not isinstance(mask, np.ndarray):
        kind = mask.get("not_a_tensor") if isinstance(mask, dict) else type(mask).__name__
        fail(
            f"compute_mask returned {kind}.",
            f"a boolean tensor of shape {expected.shape}: tokens != 0.",
            "Without a mask the layers after the embedding treat padding as text.",
        )
    if mask.shape != expected.shape:
        fail(
            f"a mask of shape {mask.shape}.",
            f"shape {expected.shape} = (batch, seq), the shape of the token ids.",
            "Keras attaches the mask to the output and hands it to the next layer's call as a "
            "(batch, seq) padding mask.",
        )
    got = mask.astype(bool)
    if np.array_equal(got, ~expected):
        fail(
            "the mask is inverted: True on padding, False on real tokens.",
            "True where the token is real (id != 0).",
            "Keras masks mean 'keep': layers attend to and pool over the True positions.",
        )
    if not np.array_equal(got, expected):
        fail(
            f"the mask differs from tokens != 0 at {int(np.sum(got != expected))} position(s).",
            "True exactly where the token id is not 0.",
            "Token 0 is padding; every other id is text.",
        )


@check("mask.functional", "The mask follows the output in a functional model", "mask")
def check_functional(evidence, layer, job):
    """keras.Model(inputs, GlobalAveragePooling1D()(layer(inputs))) on the token ids: the pooling must
    receive the layer's (verified) output and the mask tokens != 0, and average over real tokens."""
    data = evidence.phase("functional", "mask.functional")
    tokens = _tokens(job)
    observation = data.get("observation") or {}
    pools = [e for e in analysis.partial_trace(evidence, "functional") if e.get("kind") == "average_pool"]
    model_output = observation.get("output")
    if not pools or not isinstance(model_output, np.ndarray):
        fail("the functional model around your layer did not run its pooling layer.",
             "keras.Model(inputs, GlobalAveragePooling1D()(PositionalEmbedding(...)(inputs))) to run.",
             "In a functional model a layer must work on keras.Input as on real tensors.")
    pool = pools[0]
    received = next(iter((pool.get("inputs") or {}).values()), None)
    output = np.asarray(layer.output, dtype=np.float64)
    if not isinstance(received, np.ndarray) or not close(received, output):
        fail(
            "in a functional model your layer computes something other than when it is called directly.",
            "the same output.",
            "A layer must behave the same on symbolic and on real tensors.",
        )
    mask = (pool.get("constants") or {}).get("mask")
    from ...judge.ops import average_pool

    pooled = average_pool(output, mask if isinstance(mask, np.ndarray) and mask.ndim == 2 else None)
    if not close(model_output, pooled):
        fail("the functional model's output is not the average of your layer's output.",
             "GlobalAveragePooling1D's average.", "The grader recomputes the pooling from your layer's output.")
    if mask is None:
        fail(
            "the layer's output in a functional model carries no mask"
            + (" (compute_mask gave none)" if data.get("symbolic_mask_shape") is None else "") + ".",
            "compute_mask returning keras.ops.not_equal(inputs, 0), so the mask follows the output.",
            "In keras.Model(inputs, outputs) the mask travels with the symbolic tensors; the "
            "encoder after the embedding only gets it that way.",
        )
    if np.asarray(mask).shape != tokens.shape or not np.array_equal(np.asarray(mask, dtype=bool), tokens != 0):
        fail(
            "in a functional model, the mask that reaches the next layer is not tokens != 0.",
            "the mask of real tokens.",
            "The layers after the embedding use this mask to ignore padding.",
        )


@check("gradients.all_variables", "Both tables get gradients", "gradients")
def check_all_gradients(evidence, layer, forward, job):
    assert_all_gradients(gradient_report(evidence, layer, forward, job["loss_weights"]), set(),
                         "2 trainable tables.")


@check("gradients.used_rows", "Only the rows that were looked up learn", "gradients")
def check_used_rows(evidence, layer, forward, job, dims, values):
    tokens = _tokens(job)
    token, position = _tables(layer, tokens, dims, values)
    if token is None or position is None or token == position:
        fail("the two tables could not be found.", "a token table and a position table.", "See weights.two_tables.")
    report = gradient_report(evidence, layer, forward, job["loss_weights"])
    problems = []
    for key, used, what in ((token, np.unique(tokens), "token"), (position, np.arange(tokens.shape[1]), "position")):
        if report.reported.get(key) is None:
            problems.append(f"the {what} table gets no gradient")
            continue
        if not report.agrees(key):
            problems.append(f"the {what} table's gradient is not the gradient of the output")
            continue
        moved = np.flatnonzero(np.abs(report.exact[key]).sum(axis=1) > 1e-9)
        unused = sorted(set(moved.tolist()) - set(used.tolist()))
        silent = sorted(set(used.tolist()) - set(moved.tolist()))
        if unused:
            problems.append(f"{what} rows {unused[:6]} get gradients although no input uses them")
        if silent:
            problems.append(f"{what} rows {silent[:6]} are used but get no gradient")
    if problems:
        fail(
            "; ".join(problems) + ".",
            "gradients on exactly the token rows that occur in the batch and the position rows "
            "0 .. seq-1.",
            "An embedding is a lookup: only the looked-up rows take part in the output, so only "
            "they can learn from it.",
        )


(check_config_base, check_config_own_keys, check_from_config,
 check_keras_file) = contract.config(CLASS, DIMS)
