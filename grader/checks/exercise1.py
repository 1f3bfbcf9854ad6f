"""Checks for exercise 1, the positional embedding: token embedding + position embedding, mask = tokens != 0."""

from __future__ import annotations

import numpy as np

from . import check, fail
from .common import (  # noqa: F401  (fixtures are used by name)
    assert_all_gradients, assert_config_base, assert_config_own_keys, assert_constructor, assert_from_config,
    assert_keras_file, assert_matches_reference, assert_output_shape, assert_trainable_shapes, config,
    config_phase, dims, forward, gradients, job, structure,
)

CLASS = "PositionalEmbedding"
SUM = "token_embeddings(tokens) + position_embeddings(arange(seq)), shape (batch, seq, output_dim)."


def _tokens(job) -> np.ndarray:
    return np.asarray(job["tokens"])


def _tables(structure, dims) -> tuple[dict | None, dict | None]:
    """The token table (input_dim rows) and the position table (sequence_length rows), by shape."""
    token = position = None
    for event in structure.of("Embedding"):
        layer = structure.layer(event)
        if layer["input_dim"] == dims["input_dim"] and token is None:
            token = layer
        elif layer["input_dim"] == dims["sequence_length"] and position is None:
            position = layer
    return token, position


@check("api.constructor", "Builds from sequence_length, input_dim and output_dim", "api")
def check_constructor(evidence, dims):
    assert_constructor(evidence, CLASS, dims)


@check("api.output_shape", "Returns (batch, seq, output_dim) for (batch, seq) token ids", "api")
def check_output_shape(forward, job, dims):
    batch, seq = _tokens(job).shape
    assert_output_shape(forward, (batch, seq, dims["output_dim"]), "(batch, seq, output_dim)")


@check("weights.two_tables", "Two embedding tables: tokens and positions", "weights", points=2)
def check_two_tables(structure, dims):
    calls = structure.of("Embedding")
    instances = list(dict.fromkeys(e["layer"] for e in calls))
    token, position = _tables(structure, dims)
    if len(instances) == 2 and token is not None and position is not None:
        return
    shapes = [(structure.layer(e)["input_dim"], structure.layer(e)["output_dim"]) for e in calls]
    fail(
        f"{len(calls)} Embedding call(s) on {len(instances)} layer(s), with tables of shapes {shapes or 'none'}.",
        f"two Embedding layers: tokens ({dims['input_dim']}, {dims['output_dim']}) = (input_dim, output_dim) "
        f"and positions ({dims['sequence_length']}, {dims['output_dim']}) = (sequence_length, output_dim).",
        "A token's vector says what it is; a position's vector says where it is. Attention itself "
        "ignores order, so the model only knows positions through the second table.",
    )


@check("weights.trainable_list", "Trainable weights are exactly the two tables", "weights")
def check_trainable_list(forward, dims):
    d = dims["output_dim"]
    assert_trainable_shapes(forward, [(dims["input_dim"], d), (dims["sequence_length"], d)],
                            "the token table and the position table", [])


VARIANTS = {
    "tokens_only": "the position embeddings are not added",
    "positions_only": "the token embeddings are not added",
    "positions_from_one": "positions are numbered from 1 instead of 0",
}


@check("forward.sum", "Adds token and position embeddings", "forward", points=3)
def check_sum(forward, structure, job, dims):
    token, position = _tables(structure, dims)
    if token is None or position is None:
        fail(
            f"the tables could not be told apart by shape (calls: {structure.describe()}).",
            "a token table of input_dim rows and a position table of sequence_length rows.",
            "See weights.two_tables.",
        )
    tokens = _tokens(job)
    seq = tokens.shape[1]
    tok, pos = token["embeddings"]["value"], position["embeddings"]["value"]
    variants = {
        "correct": tok[tokens] + pos[np.arange(seq)][None],
        "tokens_only": tok[tokens],
        "positions_only": np.broadcast_to(pos[np.arange(seq)][None], tok[tokens].shape),
        "positions_from_one": tok[tokens] + pos[np.arange(1, seq + 1) % pos.shape[0]][None],
    }
    assert_matches_reference(
        forward["output"], variants, VARIANTS, SUM,
        "The sum carries both what each token is and where it stands; sequences shorter than "
        "sequence_length use the first positions.",
    )


@check("mask.values", "compute_mask is True exactly where the token id is not 0", "mask", points=2)
def check_mask_values(evidence, job):
    data = evidence.phase("mask", "mask.values")
    tokens = _tokens(job)
    expected = tokens != 0
    mask = data["mask"]
    if isinstance(mask, dict):
        fail(
            f"compute_mask returned {mask.get('not_a_tensor')}.",
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


@check("mask.functional", "Works in a functional model built on keras.Input", "mask")
def check_functional(evidence):
    data = evidence.phase("functional", "mask.functional")
    if data["symbolic_mask_shape"] is None:
        fail(
            "the layer's output in a functional model carries no mask.",
            "compute_mask returning keras.ops.not_equal(inputs, 0), so the mask follows the output.",
            "In keras.Model(inputs, outputs) the mask travels with the symbolic tensors; the "
            "encoder after the embedding only gets it that way.",
        )
    a, b = data["output"], data["eager_output"]
    if isinstance(a, dict) or isinstance(b, dict) or a.shape != b.shape or not np.allclose(a, b, atol=1e-6):
        fail(
            "the functional model computes something other than the layer called directly.",
            "the same output.",
            "A layer must behave the same on symbolic and on real tensors.",
        )


@check("gradients.all_variables", "Both tables get gradients", "gradients")
def check_all_gradients(gradients, forward):
    assert_all_gradients(gradients, forward, set(), "2 trainable tables.")


@check("gradients.used_rows", "Only the rows that were looked up learn", "gradients")
def check_used_rows(gradients, structure, job, dims):
    token, position = _tables(structure, dims)
    if token is None or position is None:
        fail("the two tables could not be found.", "a token table and a position table.", "See weights.two_tables.")
    grads = dict(zip(gradients["variables"], gradients["gradients"]))
    tokens = _tokens(job)
    problems = []
    for table, used, what in (
        (token, np.unique(tokens), "token"),
        (position, np.arange(tokens.shape[1]), "position"),
    ):
        grad = grads.get(table["embeddings"]["id"])
        if grad is None:
            problems.append(f"the {what} table gets no gradient")
            continue
        moved = np.flatnonzero(np.abs(grad).sum(axis=1) > 1e-12)
        unused = sorted(set(moved) - set(used))
        silent = sorted(set(used) - set(moved))
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


@check("config.base_keys", "get_config keeps the base config and is JSON-serialisable", "config")
def check_config_base(evidence, config):
    assert_config_base(evidence, config, CLASS)


@check("config.own_keys", "get_config holds sequence_length, input_dim and output_dim", "config")
def check_config_own_keys(config, dims):
    assert_config_own_keys(config, dims, CLASS)


@check("config.from_config", "from_config rebuilds an identical layer", "config")
def check_from_config(config_phase):
    assert_from_config(config_phase)


@check("config.keras_file", "A model holding the layer survives .keras save and load", "config")
def check_keras_file(evidence):
    assert_keras_file(evidence)
