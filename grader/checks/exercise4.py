"""Checks for exercise 4, the Transformer decoder: causal self-attention, cross-attention,
feed-forward, three norms, explicit masks."""

from __future__ import annotations

import numpy as np

from . import check, fail
from .common import (  # noqa: F401  (fixtures are used by name)
    assert_all_gradients, assert_attention_mask_shape, assert_config_base, assert_config_own_keys,
    assert_constructor, assert_distinct_norms, assert_from_config, assert_keras_file, assert_masks_keys,
    assert_matches_reference, assert_norm_gradients_differ, assert_norm_parameters, assert_output_shape,
    assert_trainable_shapes, assert_unchanged, attention_hints, attention_params, attention_shapes, config,
    config_phase, dense_params, dims, forward, gradients, job, key_biases, mask_event, norm_params, structure,
)
from .reference import decoder_variants

CLASS = "TransformerDecoder"
NORM_POSITIONS = "after the self-attention, the cross-attention and the feed-forward residuals"
DECODER = (
    "h1 = norm1(x + attention_1(x, x, causal mask)); h2 = norm2(h1 + attention_2(h1, encoder_outputs)); "
    "output = norm3(h2 + ffn(h2))."
)


def _masks(job):
    return np.asarray(job["target_mask"], dtype=bool), np.asarray(job["source_mask"], dtype=bool)


@check("api.constructor", "Builds from embed_dim, dense_dim and num_heads", "api")
def check_constructor(evidence, dims):
    assert_constructor(evidence, CLASS, dims)


@check("api.output_shape", "Returns (batch, target_len, embed_dim)", "api")
def check_output_shape(forward, job):
    assert_output_shape(forward, np.asarray(job["inputs"]).shape, "(batch, target_len, embed_dim), like inputs")


@check("weights.three_norms", "Three distinct LayerNormalization layers are applied", "weights", points=2)
def check_three_norms(structure):
    assert_distinct_norms(structure, 3, NORM_POSITIONS)


@check("weights.norm_parameters", "Each norm has its own trainable gamma and beta", "weights")
def check_norm_parameters(structure, dims):
    assert_norm_parameters(structure, dims["embed_dim"])


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims):
    e, d = dims["embed_dim"], dims["dense_dim"]
    expected = 2 * attention_shapes(e, dims["num_heads"]) + [(e, d), (d,), (d, e), (e,)] + [(e,)] * 6
    assert_trainable_shapes(
        forward, expected,
        "8 for each of the two MultiHeadAttention layers, 4 for the feed-forward Dense layers, 2 per norm",
        attention_hints(structure, dims),
    )


@check("gradients.all_variables", "Every trainable variable gets a gradient", "gradients")
def check_all_gradients(gradients, forward, structure):
    assert_all_gradients(gradients, forward, key_biases(structure), "26 trainable variables.")


@check("gradients.norms_differ", "The three norms receive different gradients", "gradients")
def check_norm_gradients_differ(gradients, structure):
    assert_norm_gradients_differ(gradients, structure, 3)


@check("config.base_keys", "get_config keeps the base config and is JSON-serialisable", "config")
def check_config_base(evidence, config):
    assert_config_base(evidence, config, CLASS)


@check("config.own_keys", "get_config holds embed_dim, dense_dim and num_heads", "config")
def check_config_own_keys(config, dims):
    assert_config_own_keys(config, dims, CLASS)


@check("config.from_config", "from_config rebuilds an identical layer", "config")
def check_from_config(config_phase):
    assert_from_config(config_phase)


@check("config.keras_file", "A model holding the layer survives .keras save and load", "config")
def check_keras_file(evidence):
    assert_keras_file(evidence)


@check("mask.causal", "Later target positions cannot change earlier outputs", "mask", points=2)
def check_causal(evidence, job):
    data = evidence.phase("causal", "mask.causal")
    earlier = np.zeros(np.asarray(job["inputs"]).shape[:2], dtype=bool)
    earlier[:, : job["future_from"]] = True
    assert_unchanged(
        data["output"], data["output_future_perturbed"], earlier,
        f"target positions {job['future_from']} and later",
        "At generation time the decoder predicts each token from the earlier ones only; a decoder "
        "that looks ahead learns to copy the answer in training and fails when it is not there.",
    )


def _attention_event(evidence, source: int, check_id: str):
    """The masked call's attention whose value is the call's argument number ``source``."""
    mask_event(evidence, "mask", check_id, mask_argument="inputs_mask / encoder_outputs_mask")
    events = (evidence.partial("mask") or {}).get("events") or []
    chosen = [e for e in events if e.get("value_source") == source]
    if not chosen:
        roles = "self-attention over inputs" if source == 0 else "cross-attention over encoder_outputs"
        evidence.phase("mask", check_id)
        fail(
            f"no MultiHeadAttention call with {'inputs' if source == 0 else 'encoder_outputs'} as its value.",
            f"a {roles}.",
            "The decoder attends to its own earlier positions, then to the source sentence.",
        )
    return chosen[0]


@check("mask.self_attention_mask", "Self-attention is causal", "mask")
def check_self_attention_mask(evidence, job):
    target, _ = _masks(job)
    batch, length = target.shape
    event = _attention_event(evidence, 0, "mask.self_attention_mask")
    expected = np.tril(np.ones((length, length), dtype=bool))[None] & target[:, None, :]
    assert_masks_keys(evidence, event, expected, target, "mask", what="later positions and padded keys")


@check("mask.cross_attention_mask", "Cross-attention hides padded encoder positions", "mask", points=2)
def check_cross_attention_mask(evidence, job):
    target, source = _masks(job)
    batch, length = target.shape
    event = _attention_event(evidence, 1, "mask.cross_attention_mask")
    raw = event.get("attention_mask")
    if raw is not None and raw.ndim == 3 and raw.shape[-1] == length and length != source.shape[1]:
        fail(
            f"the cross-attention mask has {length} keys (shape {tuple(raw.shape)}): it was built from the "
            "target's padding mask.",
            f"encoder_outputs_mask[:, None, :], shape ({batch}, 1, {source.shape[1]}): one entry per source position.",
            "Cross-attention's keys are the encoder outputs, so its mask must describe the source "
            "sentence. The book gets away with the target mask only because its source and target "
            "have the same length.",
        )
    assert_attention_mask_shape(evidence, event, batch, length, source.shape[1], "mask")
    expected = np.broadcast_to(source[:, None, :], (batch, length, source.shape[1]))
    assert_masks_keys(evidence, event, expected, target, "mask", what="padded encoder positions")


@check("mask.encoder_padding_invariance", "Padded encoder positions cannot change the output", "mask", points=2)
def check_encoder_padding_invariance(evidence, job):
    target, _ = _masks(job)
    data = evidence.phase("mask", "mask.encoder_padding_invariance")
    assert_unchanged(
        data["output"], data["output_encoder_perturbed"], target, "the padded encoder outputs",
        "A translation must not depend on how much padding the source sentence's batch needed.",
    )


MISTAKES = {
    "not_causal": "the self-attention is not causal: positions attend to later positions",
    "cross_query_from_inputs": "the cross-attention's query is the decoder's inputs instead of the first norm's output",
    "cross_attends_to_decoder": "the cross-attention attends to the decoder itself instead of encoder_outputs",
    "no_self_residual": "the self-attention output is normalised without adding the inputs (no residual)",
    "no_cross_residual": "the cross-attention output is normalised without adding its query (no residual)",
    "no_ffn_residual": "the feed-forward output is normalised without adding its input (no residual)",
}


@check("forward.decoder", "Computes the post-norm decoder", "forward", points=3)
def check_decoder(structure, forward, job):
    attention_calls = structure.of("MultiHeadAttention")
    norm_calls, dense_calls = structure.norm_calls, structure.of("Dense")
    if len(attention_calls) != 2 or len(norm_calls) != 3 or len(dense_calls) != 2:
        fail(
            f"{len(attention_calls)} attention, {len(norm_calls)} LayerNormalization and {len(dense_calls)} Dense "
            f"call(s): {structure.describe()}.",
            "two MultiHeadAttention, three LayerNormalization and two Dense calls.",
            DECODER,
        )
    parts = {
        "attention_1": attention_params(structure.layer(attention_calls[0])),
        "attention_2": attention_params(structure.layer(attention_calls[1])),
        "ffn1": dense_params(structure.layer(dense_calls[0])),
        "ffn2": dense_params(structure.layer(dense_calls[1])),
    }
    for index, call in enumerate(norm_calls, start=1):
        parts[f"norm{index}"] = norm_params(structure.layer(call))
    variants = decoder_variants(np.asarray(job["inputs"], dtype=np.float64),
                                np.asarray(job["encoder_outputs"], dtype=np.float64), parts)
    assert_matches_reference(
        forward["output"], variants, MISTAKES, DECODER,
        "Each residual block adds a correction to its input; the decoder must read its own past, "
        "then the source, then transform the result.",
    )
