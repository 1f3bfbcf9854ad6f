"""Checks for exercise 3, the Transformer encoder.

Every check judges behaviour seen in the child's evidence: which layers the
student's ``call`` runs and in which order, the variables they own, the
numbers they produce. None of them looks at attribute names.
"""

from __future__ import annotations

import numpy as np

from . import check, fail
from .common import (  # noqa: F401  (fixtures are used by name)
    assert_all_gradients, assert_attention_mask_shape, assert_config_base, assert_config_own_keys,
    assert_constructor, assert_distinct_norms, assert_from_config, assert_keras_file, assert_mask_propagates,
    assert_masks_keys, assert_matches_reference, assert_norm_gradients_differ, assert_norm_parameters,
    assert_norms_diverge, assert_output_shape, assert_trainable_shapes, assert_unchanged, attention_hints,
    attention_params, attention_shapes, config, config_phase, dense_params, dims, forward, gradients, job,
    key_biases, mask_event, norm_params, padding, self_attention_inputs, structure,
)
from .reference import encoder_variants

NORM_POSITIONS = "one after the attention residual, one after the feed-forward residual"
POST_NORM = (
    "norm2(h + ffn(h)) with h = norm1(x + attention(x, x)) and "
    "ffn = Dense(embed_dim)(relu(Dense(dense_dim)(h)))."
)


# --------------------------------------------------------------------------- api


@check("api.constructor", "Builds from embed_dim, dense_dim and num_heads", "api")
def check_constructor(evidence, dims):
    assert_constructor(evidence, "TransformerEncoder", dims)


@check("api.output_shape", "Returns a tensor shaped like its input", "api")
def check_output_shape(forward, job):
    assert_output_shape(forward, np.asarray(job["inputs"]).shape, "(batch, seq, embed_dim), like the input")


# --------------------------------------------------------------------------- weights


@check("weights.two_norms", "Two distinct LayerNormalization layers are applied", "weights", points=2)
def check_two_norms(structure):
    assert_distinct_norms(structure, 2, NORM_POSITIONS)


@check("weights.norm_parameters", "Each norm has its own trainable gamma and beta", "weights")
def check_norm_parameters(structure, dims):
    assert_norm_parameters(structure, dims["embed_dim"])


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims):
    e, d = dims["embed_dim"], dims["dense_dim"]
    expected = attention_shapes(e, dims["num_heads"]) + [(e, d), (d,), (d, e), (e,)] + [(e,)] * 4
    summary = ("8 for MultiHeadAttention(num_heads, key_dim=embed_dim), 4 for Dense(dense_dim) and "
               "Dense(embed_dim), 2 for each norm")
    assert_trainable_shapes(forward, expected, summary, attention_hints(structure, dims))


# --------------------------------------------------------------------------- gradients


@check("gradients.all_variables", "Every trainable variable gets a gradient", "gradients")
def check_all_gradients(gradients, forward, structure):
    assert_all_gradients(gradients, forward, key_biases(structure), "16 trainable variables.")


@check("gradients.norms_differ", "The two norms receive different gradients", "gradients")
def check_norm_gradients_differ(gradients, structure):
    assert_norm_gradients_differ(gradients, structure, 2)


@check("gradients.norms_diverge", "After a few training steps the two norms differ", "gradients")
def check_norms_diverge(gradients, structure, job):
    assert_norms_diverge(gradients, structure, job["optimizer_steps"], 2)


# --------------------------------------------------------------------------- config


@check("config.base_keys", "get_config keeps the base config and is JSON-serialisable", "config")
def check_config_base(evidence, config):
    assert_config_base(evidence, config, "TransformerEncoder")


@check("config.own_keys", "get_config holds embed_dim, dense_dim and num_heads", "config")
def check_config_own_keys(config, dims):
    assert_config_own_keys(config, dims, "TransformerEncoder")


@check("config.from_config", "from_config rebuilds an identical layer", "config")
def check_from_config(config_phase):
    assert_from_config(config_phase)


@check("config.keras_file", "A model holding the layer survives .keras save and load", "config")
def check_keras_file(evidence):
    assert_keras_file(evidence)


# --------------------------------------------------------------------------- mask


@check("mask.attention_mask_shape", "The attention mask broadcasts to (batch, queries, keys)", "mask")
def check_attention_mask_shape(evidence, job):
    batch, seq = padding(job).shape
    event = mask_event(evidence, "mask", "mask.attention_mask_shape")
    assert_attention_mask_shape(evidence, event, batch, seq, seq, "mask")


@check("mask.masks_keys", "The attention mask hides padded keys from real queries", "mask", points=2)
def check_masks_keys(evidence, job):
    real = padding(job)
    batch, seq = real.shape
    event = mask_event(evidence, "mask", "mask.masks_keys")
    expected = np.broadcast_to(real[:, None, :], (batch, seq, seq))
    assert_masks_keys(evidence, event, expected, real, "mask")


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


# --------------------------------------------------------------------------- forward


@check("forward.call_order", "Attention, norm, feed-forward, norm — in that order", "forward")
def check_call_order(structure):
    sequence = structure.sequence
    expected = ["attention", "norm", "dense", "dense", "norm"]
    if sequence == expected:
        return
    if sequence[:2] == ["norm", "attention"]:
        why = (
            "Normalising before each sub-block (pre-norm) is a real variant used by many later "
            "models, but this exercise asks for the book's post-norm block: norm(x + sublayer(x))."
        )
    else:
        why = "The post-norm encoder is norm1(x + attention(x)), then norm2(h + ffn(h))."
    fail(structure.describe(), " → ".join(expected), why)


VARIANT_MESSAGES = {
    "no_relu": "the feed-forward projection has no relu between its two Dense layers",
    "no_attention_residual": "the attention output is normalised without adding the inputs (no residual)",
    "no_ffn_residual": "the feed-forward output is normalised without adding its input (no residual)",
    "no_residuals": "neither block adds its input back (no residual connections)",
    "input_residual_in_ffn": "the second residual adds the encoder's original inputs instead of "
    "the first norm's output",
    "pre_norm": "the block is pre-norm: x + attention(norm(x)), then h + ffn(norm(h))",
}


@check("forward.post_norm", "Computes the post-norm encoder", "forward", points=3)
def check_post_norm(structure, forward, job):
    attention_calls = structure.of("MultiHeadAttention")
    norm_calls = structure.norm_calls
    dense_calls = structure.of("Dense")
    if len(attention_calls) != 1 or len(norm_calls) != 2 or len(dense_calls) != 2:
        fail(
            f"{len(attention_calls)} attention, {len(norm_calls)} LayerNormalization and "
            f"{len(dense_calls)} Dense call(s): {structure.describe()}.",
            "one MultiHeadAttention, two LayerNormalization and two Dense calls.",
            "The post-norm encoder is norm1(x + attention(x, x)), then norm2(h + ffn(h)).",
        )
    event = attention_calls[0]
    parts = {
        "attention": attention_params(structure.layer(event)),
        "ffn1": dense_params(structure.layer(dense_calls[0])),
        "ffn2": dense_params(structure.layer(dense_calls[1])),
        "norm1": norm_params(structure.layer(norm_calls[0])),
        "norm2": norm_params(structure.layer(norm_calls[1])),
    }
    variants = encoder_variants(np.asarray(job["inputs"], dtype=np.float64), parts)
    assert_matches_reference(
        forward["output"], variants, VARIANT_MESSAGES, POST_NORM,
        "Residual connections let each block learn a correction to its input and keep "
        "gradients flowing; post-norm normalises each residual sum.",
        correct="post_norm", otherwise=self_attention_inputs(event, "encoder"),
    )
