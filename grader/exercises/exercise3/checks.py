"""Checks for exercise 3, the Transformer encoder.

Every check on weights, gradients, masks and the forward pass judges calls the
parent replayed with its own inputs and weight values (``analysis``): which
layers the student's ``call`` ran and in which order, the variables they use,
the numbers they produce, the masks that reached attention. None of them looks
at attribute names.
"""

from __future__ import annotations

import numpy as np

from ...judge import analysis, contract
from ...judge.advice import in_words
from ...judge.framework import check, fail
from ...judge.reference import encoder_variants
from ...judge.shared.fixtures import (  # noqa: F401  (fixtures are used by name)
    config, config_phase, dims, forward, job, padding, values,
)
from ...judge.shared.forward import assert_matches_reference
from ...judge.shared.gradients import assert_norm_gradients_differ, assert_norms_diverge, gradient_report
from ...judge.shared.structure import (
    Structure, claimed_roles, explain_unverified, fail_no_attention_found, ffn_roles_by_shape, identify_by_roles,
    pseudo_steps_of, self_attention_inputs, trace_leaves,
)
from ...judge.shared.weights import (
    assert_norms_over_features,
    assert_distinct_norms, assert_trainable_shapes, attention_hints, attention_shapes, shared_norm_reason,
    written_attention_slip,
)
from .job import DIMS

CLASS = "TransformerEncoder"
NORM_POSITIONS = "one after the attention residual, one after the feed-forward residual"
POST_NORM = (
    "norm2(h + ffn(h)) with h = norm1(x + attention(x, x)) and "
    "ffn = Dense(embed_dim)(relu(Dense(dense_dim)(h)))."
)
SEE = "forward.post_norm"


def _inputs(job, key="inputs") -> np.ndarray:
    return np.asarray(job[key], dtype=np.float64)


def _observe(evidence, job, phase, check_id, key="inputs", masked=False):
    # a call without padding may still receive a mask that hides nothing (the third edition's call)
    masks = {"mask": padding(job)} if masked else {"mask": np.ones(padding(job).shape, dtype=bool)}
    observed = analysis.observed(evidence, phase, check_id, {"inputs": _inputs(job, key)}, masks)
    if (not observed.verified or observed.through_raw_weights) and observed.output is not None:
        _identify(evidence, observed, _inputs(job, key))
    return observed


def _identify(evidence, observed, x) -> None:
    """A feed-forward written with raw weights: find its kernels and biases by shape, then see whether
    the output is an encoder (or a known mistaken one) computed from them."""
    forward = evidence.partial("forward") or {}
    leaves = trace_leaves(evidence, observed.phase)
    attentions, norms, claimed = claimed_roles(leaves)
    dims = evidence.job["dims"]
    parameters = analysis.values(evidence)
    ffn = ffn_roles_by_shape(forward, parameters, claimed, dims["embed_dim"], dims["dense_dim"])
    if len(attentions) != 1 or len(norms) != 2 or ffn is None:
        return
    attention = dict(attentions[0])
    mask = attention.pop("mask", None)
    roles = {"attention": attention, "norm1": norms[0], "norm2": norms[1], **ffn}
    identify_by_roles(observed, roles, lambda parts: encoder_variants(x, parts, mask), parameters,
                      pseudo_steps_of(leaves))


plain, layer, computed, structure, norms = contract.plain_call(_observe, SEE)


# --------------------------------------------------------------------------- api


check_constructor = contract.constructor(CLASS, DIMS)


check_output_shape = contract.output_shape("Returns a tensor shaped like its input",
                                           "(batch, seq, embed_dim), like the input")


# --------------------------------------------------------------------------- weights


@check("weights.two_norms", "Two distinct LayerNormalization layers are applied", "weights", points=2)
def check_two_norms(norms):
    assert_distinct_norms(norms, 2, NORM_POSITIONS)
    norms.confirm()


check_norm_parameters = contract.norm_parameters()


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims, values):
    e, d = dims["embed_dim"], dims["dense_dim"]
    expected = attention_shapes(e, dims["num_heads"]) + [(e, d), (d,), (d, e), (e,)] + [(e,)] * 4
    summary = ("8 for MultiHeadAttention(num_heads, key_dim=embed_dim), 4 for Dense(dense_dim) and "
               "Dense(embed_dim), 2 for each norm")
    shared, why = shared_norm_reason(structure)
    assert_trainable_shapes(forward, values, expected, summary, shared + attention_hints(structure, dims, values),
                            why, structure.role_shapes())
    structure.confirm()


# --------------------------------------------------------------------------- gradients


def _report(evidence, layer, forward, job):
    return gradient_report(evidence, layer, forward, job["loss_weights"])


check_all_gradients = contract.all_gradients("16 trainable variables.")


@check("gradients.norms_differ", "The two norms receive different gradients", "gradients")
def check_norm_gradients_differ(evidence, computed, forward, norms, job):
    assert_norm_gradients_differ(_report(evidence, computed, forward, job), norms, 2)


@check("gradients.norms_diverge", "Training moves each norm along its own gradient", "gradients")
def check_norms_diverge(evidence, computed, norms, job):
    assert_norms_diverge(evidence, computed, norms, job, 2)


# --------------------------------------------------------------------------- config


(check_config_base, check_config_own_keys, check_from_config,
 check_keras_file) = contract.config(CLASS, DIMS)


# --------------------------------------------------------------------------- mask


(check_attention_mask_shape, check_masks_keys, check_padding_invariance,
 check_mask_propagates) = contract.self_attention_mask(_observe, SEE)


# --------------------------------------------------------------------------- forward


@check("forward.call_order", "Attention, norm, feed-forward, norm — in that order", "forward")
def check_call_order(plain, structure):
    layer = plain
    if layer.identified_as == "post_norm":
        return  # a feed-forward of raw weights: the order is the computation's, which is right
    sequence = structure.sequence
    expected = ["attention", "norm", "dense", "dense", "norm"]
    if sequence == expected:
        structure.confirm()
        return
    if sequence[:2] == ["norm", "attention"] or layer.identified_as == "pre_norm":
        why = (
            "Normalising before each sub-block (pre-norm) is a real variant used by many later "
            "models, but this exercise asks for the book's post-norm block: norm(x + sublayer(x))."
        )
    else:
        why = "The post-norm encoder is norm1(x + attention(x)), then norm2(h + ffn(h))."
    if sequence != expected:
        fail(structure.describe(), " → ".join(expected), why)
    structure.confirm()


VARIANT_MESSAGES = {
    "no_relu": "the feed-forward projection has no relu between its two Dense layers",
    "no_attention_residual": "the attention output is normalised without adding the inputs (no residual)",
    "no_ffn_residual": "the feed-forward output is normalised without adding its input (no residual)",
    "no_residuals": "neither block adds its input back (no residual connections)",
    "input_residual_in_ffn": "the second residual adds the encoder's original inputs instead of "
    "the first norm's output",
    "pre_norm": "the block is pre-norm: x + attention(norm(x)), then h + ffn(norm(h))",
}
WHY = ("Residual connections let each block learn a correction to its input and keep gradients flowing; "
       "post-norm normalises each residual sum.")
WHYS = {
    "no_relu": "Without a nonlinearity between them, the two Dense layers collapse into one linear map: the "
               "feed-forward could compute nothing a single Dense cannot.",
    "pre_norm": "Pre-norm is a real variant used by many later models, but it is a different function: this "
                "exercise asks for the book's post-norm block, norm(x + sublayer(x)).",
    "input_residual_in_ffn": "The second block must correct the first block's result: adding the original "
                             "inputs skips what the attention block computed.",
}


@check("forward.post_norm", "Computes the post-norm encoder", "forward", points=2)
def check_post_norm(plain, job, values):
    expected = in_words(POST_NORM, job)  # in this exercise's own names of its sizes
    if not plain.verified:
        explain_unverified(plain, expected, shape=np.asarray(job["inputs"]).shape)
    if plain.identified_as is not None:  # found by the roles of its weights
        if plain.identified_as == "post_norm":
            return
        fail(f"your output matches a layer in which {VARIANT_MESSAGES[plain.identified_as]}.", expected,
             WHYS.get(plain.identified_as, WHY))
    structure = Structure(plain)
    attention, norms, dense = structure.of("attention"), structure.norm_steps, structure.dense_steps
    if not attention:
        fail_no_attention_found(structure.describe(), expected)
    if len(attention) != 1 or len(norms) != 2 or len(dense) != 2:
        fail(
            f"{len(attention)} attention, {len(norms)} LayerNormalization and {len(dense)} Dense "
            f"call(s): {structure.describe()}.",
            "one MultiHeadAttention, two LayerNormalization and two Dense calls.",
            "The post-norm encoder is norm1(x + attention(x, x)), then norm2(h + ffn(h)).",
        )
    roles = {
        "attention": dict(attention[0].params, zero_masked=bool(attention[0].constants.get("zero_masked"))),
        "ffn1": {"kernel": dense[0].params["kernel"], "bias": dense[0].params.get("bias")},
        "ffn2": {"kernel": dense[1].params["kernel"], "bias": dense[1].params.get("bias")},
        "norm1": {"gamma": norms[0].params.get("gamma"), "beta": norms[0].params.get("beta"),
                  "epsilon": float(norms[0].constants["epsilon"])},
        "norm2": {"gamma": norms[1].params.get("gamma"), "beta": norms[1].params.get("beta"),
                  "epsilon": float(norms[1].constants["epsilon"])},
    }
    from ...judge.reference import resolve

    assert_norms_over_features(structure)

    variants = encoder_variants(_inputs(job), resolve(roles, values))

    def otherwise():
        written_attention_slip(attention)
        self_attention_inputs(attention[0], plain.program, "encoder")()

    assert_matches_reference(
        np.asarray(plain.output, dtype=np.float64), variants, VARIANT_MESSAGES, expected, WHY,
        correct="post_norm", otherwise=otherwise, whys=WHYS,
    )


check_inference = contract.inference()
