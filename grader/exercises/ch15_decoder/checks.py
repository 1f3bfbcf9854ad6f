"""Checks for the third edition's decoder: exercise 4's checks, for the book's third-edition
signature, ``TransformerDecoder(hidden_dim, intermediate_dim, num_heads)`` with
``call(target, source, source_mask)``.

The checks judge behaviour, so the decoder of either edition is judged by the same functions:
causality, cross-attention over the source with the source's mask, three distinct norms, the
replayed computation. What differs is declared here: the constructor's names, the attention's
``key_dim = hidden_dim // num_heads``, and a self-attention that is causal only (the job makes
every target position real, so exercise 4's mask checks ask exactly that).
"""

from __future__ import annotations

from ...judge import contract
from ...judge.shared.fixtures import (  # noqa: F401  (fixtures are used by name)
    config, config_phase, dims, forward, job, values,
)
from ...judge.shared.weights import assert_trainable_shapes, attention_hints, attention_shapes, shared_norm_reason
from ...judge.framework import check
from ..exercise4 import checks as decoder
from ..exercise4.checks import computed, layer, norms, plain, structure  # noqa: F401  (fixtures)
from .job import DIMS, KEY_DIM

CLASS = "TransformerDecoder"

check_constructor = contract.constructor(CLASS, DIMS)
check_output_shape = contract.output_shape("Returns (batch, target_len, hidden_dim)",
                                           "(batch, target_len, hidden_dim), like inputs")
check_three_norms = decoder.check_three_norms
check_norm_parameters = decoder.check_norm_parameters


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims, values, job):
    e, d = dims["embed_dim"], dims["dense_dim"]
    expected = 2 * attention_shapes(e, dims["num_heads"], KEY_DIM) + [(e, d), (d,), (d, e), (e,)] + [(e,)] * 6
    shared, why = shared_norm_reason(structure)
    hints = attention_hints(structure, dims, values, (KEY_DIM, "hidden_dim // num_heads"), job)
    assert_trainable_shapes(
        forward, values, expected,
        "8 for each of the two MultiHeadAttention layers, 4 for the feed-forward Dense layers, 2 per norm",
        shared + hints, why, structure.role_shapes(),
    )
    structure.confirm()


check_all_gradients = decoder.check_all_gradients
check_norm_gradients_differ = decoder.check_norm_gradients_differ

(check_config_base, check_config_own_keys, check_from_config,
 check_keras_file) = contract.config(CLASS, DIMS)

check_causal = decoder.check_causal


@check("mask.self_attention_mask", "Self-attention is causal", "mask")
def check_self_attention_mask(evidence, job):
    decoder.check_self_attention_mask(evidence, job)  # every target position is real: causal, and nothing else


check_cross_attention_mask = decoder.check_cross_attention_mask
check_encoder_padding_invariance = decoder.check_encoder_padding_invariance
check_lengths = decoder.check_lengths
check_decoder = decoder.check_decoder
check_inference = decoder.check_inference
