"""Checks for the third edition's encoder: exercise 3's checks, for the book's third-edition
signature, ``TransformerEncoder(hidden_dim, intermediate_dim, num_heads)`` with
``call(source, source_mask)``.

The checks judge behaviour, so the encoder of either edition is judged by the same functions:
which layers the call runs and in which order, the variables they use, the numbers they produce,
the masks that reach attention. What differs is declared here: the constructor's names (for
``api.constructor`` and ``config.own_keys``), the attention's ``key_dim = hidden_dim // num_heads``
(for ``weights.trainable_list``), and no ``mask.propagates``: the third edition hands the mask to
each layer as an argument, and nothing rides on the output.
"""

from __future__ import annotations

from ...judge import contract
from ...judge.shared.fixtures import (  # noqa: F401  (fixtures are used by name)
    config, config_phase, dims, forward, job, values,
)
from ...judge.shared.weights import assert_trainable_shapes, attention_hints, attention_shapes, shared_norm_reason
from ...judge.framework import check
from ..exercise3 import checks as encoder
from ..exercise3.checks import computed, layer, norms, plain, structure  # noqa: F401  (fixtures)
from .job import DIMS, KEY_DIM

CLASS = "TransformerEncoder"

check_constructor = contract.constructor(CLASS, DIMS)
check_output_shape = encoder.check_output_shape
check_two_norms = encoder.check_two_norms
check_norm_parameters = encoder.check_norm_parameters


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims, values, job):
    e, d = dims["embed_dim"], dims["dense_dim"]
    expected = attention_shapes(e, dims["num_heads"], KEY_DIM) + [(e, d), (d,), (d, e), (e,)] + [(e,)] * 4
    summary = ("8 for MultiHeadAttention(num_heads, key_dim=hidden_dim // num_heads), 4 for "
               "Dense(intermediate_dim) and Dense(hidden_dim), 2 for each norm")
    shared, why = shared_norm_reason(structure)
    hints = attention_hints(structure, dims, values, (KEY_DIM, "hidden_dim // num_heads"), job)
    assert_trainable_shapes(forward, values, expected, summary, shared + hints, why, structure.role_shapes())
    structure.confirm()


check_all_gradients = encoder.check_all_gradients
check_norm_gradients_differ = encoder.check_norm_gradients_differ
check_norms_diverge = encoder.check_norms_diverge

(check_config_base, check_config_own_keys, check_from_config,
 check_keras_file) = contract.config(CLASS, DIMS)

check_attention_mask_shape = encoder.check_attention_mask_shape
check_masks_keys = encoder.check_masks_keys
check_padding_invariance = encoder.check_padding_invariance

check_call_order = encoder.check_call_order
check_post_norm = encoder.check_post_norm
check_inference = encoder.check_inference
