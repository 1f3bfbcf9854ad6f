"""Checks for exercise 2, the self-attention block: norm(x + attention(x, x)) with a padding mask."""

from __future__ import annotations

import numpy as np

from . import check, fail
from .common import (  # noqa: F401  (fixtures are used by name)
    ATOL, RTOL,
    assert_all_gradients, assert_attention_mask_shape, assert_config_base, assert_config_own_keys,
    assert_constructor, assert_distinct_norms, assert_from_config, assert_keras_file, assert_mask_propagates,
    assert_masks_keys, assert_matches_reference, assert_norm_parameters, assert_output_shape,
    assert_trainable_shapes, assert_unchanged, attention_hints, attention_params, attention_shapes, config,
    config_phase, dims, forward, gradients, job, key_biases, mask_event, norm_params, padding, self_attention_inputs,
    structure,
)
from .reference import attention_block_variants

CLASS = "SelfAttentionBlock"


@check("api.constructor", "Builds from embed_dim and num_heads", "api")
def check_constructor(evidence, dims):
    assert_constructor(evidence, CLASS, dims)


@check("api.output_shape", "Returns a tensor shaped like its input", "api")
def check_output_shape(forward, job):
    assert_output_shape(forward, np.asarray(job["inputs"]).shape, "(batch, seq, embed_dim), like the input")


@check("weights.one_norm", "One LayerNormalization with trainable gamma and beta", "weights")
def check_one_norm(structure, dims):
    assert_distinct_norms(structure, 1, "after the residual sum")
    assert_norm_parameters(structure, dims["embed_dim"])


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims):
    e = dims["embed_dim"]
    expected = attention_shapes(e, dims["num_heads"]) + [(e,), (e,)]
    assert_trainable_shapes(forward, expected, "8 for MultiHeadAttention(num_heads, key_dim=embed_dim), "
                            "2 for the norm", attention_hints(structure, dims))


@check("gradients.all_variables", "Every trainable variable gets a gradient", "gradients")
def check_all_gradients(gradients, forward, structure):
    assert_all_gradients(gradients, forward, key_biases(structure), "10 trainable variables.")


@check("config.base_keys", "get_config keeps the base config and is JSON-serialisable", "config")
def check_config_base(evidence, config):
    assert_config_base(evidence, config, CLASS)


@check("config.own_keys", "get_config holds embed_dim and num_heads", "config")
def check_config_own_keys(config, dims):
    assert_config_own_keys(config, dims, CLASS)


@check("config.from_config", "from_config rebuilds an identical layer", "config")
def check_from_config(config_phase):
    assert_from_config(config_phase)


@check("config.keras_file", "A model holding the layer survives .keras save and load", "config")
def check_keras_file(evidence):
    assert_keras_file(evidence)


@check("mask.attention_mask_shape", "The attention mask broadcasts to (batch, queries, keys)", "mask", points=2)
def check_attention_mask_shape(evidence, job):
    batch, seq = padding(job).shape
    event = mask_event(evidence, "mask", "mask.attention_mask_shape")
    assert_attention_mask_shape(evidence, event, batch, seq, seq, "mask")


@check("mask.masks_keys", "The attention mask hides padded keys from real queries", "mask", points=2)
def check_masks_keys(evidence, job):
    real = padding(job)
    batch, seq = real.shape
    event = mask_event(evidence, "mask", "mask.masks_keys")
    assert_masks_keys(evidence, event, np.broadcast_to(real[:, None, :], (batch, seq, seq)), real, "mask")


@check("mask.padding_invariance", "Padded positions cannot change real positions' outputs", "mask", points=2)
def check_padding_invariance(evidence, job):
    data = evidence.phase("mask", "mask.padding_invariance")
    assert_unchanged(
        data["output"], data["output_perturbed"], padding(job), "the padded positions' input vectors",
        "Otherwise the same sentence encodes differently depending on how much padding its batch needed.",
    )


@check("mask.propagates", "The padding mask passes on to the next layer", "mask")
def check_mask_propagates(evidence, job):
    assert_mask_propagates(evidence.phase("mask", "mask.padding_invariance"), padding(job))


MISTAKES = {
    "no_residual": "the attention output is normalised without adding the inputs (no residual)",
    "no_norm": "the residual sum is returned without the LayerNormalization",
    "pre_norm": "the inputs are normalised before attention (pre-norm) instead of after the sum",
}


@check("forward.residual_norm", "Computes norm(inputs + attention(inputs, inputs))", "forward", points=3)
def check_residual_norm(structure, forward, job):
    attention_calls, norm_calls = structure.of("MultiHeadAttention"), structure.norm_calls
    if len(attention_calls) == 1 and not norm_calls:
        from .reference import attention

        x = np.asarray(job["inputs"], dtype=np.float64)
        unnormed = x + attention(x, x, attention_params(structure.layer(attention_calls[0])))
        output = forward["output"]
        if not isinstance(output, dict) and output.shape == unnormed.shape and np.allclose(output, unnormed,
                                                                                              atol=ATOL, rtol=RTOL):
            fail(f"your output matches a layer in which {MISTAKES['no_norm']}.",
                 "layernorm(inputs + attention(inputs, inputs)).",
                 "The norm keeps the residual sum at a stable scale, block after block.")
    if len(attention_calls) != 1 or len(norm_calls) != 1:
        fail(
            f"{len(attention_calls)} attention and {len(norm_calls)} LayerNormalization call(s): "
            f"{structure.describe()}.",
            "one MultiHeadAttention call and one LayerNormalization call.",
            "The block is norm(x + attention(x, x)).",
        )
    event = attention_calls[0]
    parts = {"attention": attention_params(structure.layer(event)), "norm": norm_params(structure.layer(norm_calls[0]))}
    variants = attention_block_variants(np.asarray(job["inputs"], dtype=np.float64), parts)
    assert_matches_reference(
        forward["output"], variants, MISTAKES, "layernorm(inputs + attention(inputs, inputs)).",
        "The residual connection lets the block learn a correction to its input and keeps gradients "
        "flowing; the norm keeps the sum at a stable scale.",
        otherwise=self_attention_inputs(event, "block"),
    )
