"""Checks for exercise 2, the self-attention block: norm(x + attention(x, x)) with a padding mask.

As for the encoder, every computed check judges calls the parent replayed
with its own inputs and weight values (``analysis``).
"""

from __future__ import annotations

import numpy as np

from ...judge import analysis, contract
from ...judge.framework import check, fail
from ...judge.reference import attention_block_variants, resolve
from ...judge.shared.fixtures import (  # noqa: F401  (fixtures are used by name)
    config, config_phase, dims, forward, job, padding, values,
)
from ...judge.shared.forward import assert_matches_reference
from ...judge.shared.structure import (
    Structure, claimed_roles, identified, identify_by_roles, pseudo_steps_of,
    self_attention_inputs, trace_leaves, trainable_keys,
)
from ...judge.shared.weights import (
    assert_norms_over_features,
    ONE_NORM_WHY, assert_distinct_norms, assert_norm_parameters, assert_trainable_shapes, attention_hints,
    attention_shapes, written_attention_slip,
)
from .job import DIMS

CLASS = "SelfAttentionBlock"
SEE = "forward.residual_norm"
EXPECTED = "layernorm(inputs + attention(inputs, inputs))."


def _inputs(job, key="inputs") -> np.ndarray:
    return np.asarray(job[key], dtype=np.float64)


def _observe(evidence, job, phase, check_id, key="inputs", masked=False):
    masks = {"mask": padding(job)} if masked else None
    observed = analysis.observed(evidence, phase, check_id, {"inputs": _inputs(job, key)}, masks)
    if (not observed.verified or observed.through_raw_weights) and observed.output is not None:
        leaves = trace_leaves(evidence, phase)
        attentions, norms, _ = claimed_roles(leaves)
        if len(attentions) == 1 and len(norms) == 1:
            attention = dict(attentions[0])
            mask = attention.pop("mask", None)
            x = _inputs(job, key)
            identify_by_roles(observed, {"attention": attention, "norm": norms[0]},
                              lambda parts: attention_block_variants(x, parts, mask), analysis.values(evidence),
                              pseudo_steps_of(leaves))
    return observed


plain, layer, computed, structure, norms = contract.plain_call(_observe, SEE)


check_constructor = contract.constructor(CLASS, DIMS)


check_output_shape = contract.output_shape("Returns a tensor shaped like its input",
                                           "(batch, seq, embed_dim), like the input")


@check("weights.one_norm", "One LayerNormalization with trainable gamma and beta", "weights")
def check_one_norm(norms, dims, forward, values):
    assert_distinct_norms(norms, 1, "after the residual sum")
    assert_norm_parameters(norms, dims["embed_dim"], trainable_keys(forward), values, why=ONE_NORM_WHY)
    norms.confirm()


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims, values):
    e = dims["embed_dim"]
    expected = attention_shapes(e, dims["num_heads"]) + [(e,), (e,)]
    assert_trainable_shapes(forward, values, expected, "8 for MultiHeadAttention(num_heads, key_dim=embed_dim), "
                            "2 for the norm", attention_hints(structure, dims, values),
                            roles=structure.role_shapes())
    structure.confirm()


check_all_gradients = contract.all_gradients("10 trainable variables.")


(check_config_base, check_config_own_keys, check_from_config,
 check_keras_file) = contract.config(CLASS, DIMS)


(check_attention_mask_shape, check_masks_keys, check_padding_invariance,
 check_mask_propagates) = contract.self_attention_mask(_observe, SEE, shape_points=2)


MISTAKES = {
    "no_residual": "the attention output is normalised without adding the inputs (no residual)",
    "no_norm": "the residual sum is returned without the LayerNormalization",
    "pre_norm": "the inputs are normalised before attention (pre-norm) instead of after the sum",
}
WHY = ("The residual connection lets the block learn a correction to its input and keeps gradients "
       "flowing; the norm keeps the sum at a stable scale.")
WHYS = {
    "pre_norm": "Pre-norm is a real variant used by many later models, but it is a different function: this "
                "exercise asks for norm(x + attention(x, x)).",
}


@check("forward.residual_norm", "Computes norm(inputs + attention(inputs, inputs))", "forward", points=2)
def check_residual_norm(plain, job, values):
    if identified(plain, EXPECTED, np.asarray(job["inputs"]).shape, MISTAKES, WHY, WHYS):
        return
    structure = Structure(plain)
    attention, norms = structure.of("attention"), structure.norm_steps
    x = _inputs(job)
    if len(attention) == 1 and not norms:
        from ...judge.ops import attention as attend

        step = attention[0]
        params = {role: values[key] if key else None for role, key in step.params.items()}
        unnormed = x + attend(x, x, None, params, None, False, False)
        if isinstance(plain.output, np.ndarray) and np.allclose(plain.output, unnormed, atol=2e-4, rtol=1e-3):
            fail(f"your output matches a layer in which {MISTAKES['no_norm']}.", EXPECTED,
                 "The norm keeps the residual sum at a stable scale, block after block.")
    if len(attention) != 1 or len(norms) != 1:
        fail(
            f"{len(attention)} attention and {len(norms)} LayerNormalization call(s): {structure.describe()}.",
            "one MultiHeadAttention call and one LayerNormalization call.",
            "The block is norm(x + attention(x, x)).",
        )
    roles = {
        "attention": dict(attention[0].params, zero_masked=bool(attention[0].constants.get("zero_masked"))),
        "norm": {"gamma": norms[0].params.get("gamma"), "beta": norms[0].params.get("beta"),
                 "epsilon": float(norms[0].constants["epsilon"])},
    }
    assert_norms_over_features(structure)
    variants = attention_block_variants(x, resolve(roles, values))
    assert_matches_reference(np.asarray(plain.output, dtype=np.float64), variants, MISTAKES, EXPECTED, WHY,
                             otherwise=lambda: (written_attention_slip(attention),
                                                self_attention_inputs(attention[0], plain.program, "block")()),
                             whys=WHYS)


check_inference = contract.inference()
