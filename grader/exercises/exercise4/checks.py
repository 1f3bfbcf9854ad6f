"""Checks for exercise 4, the Transformer decoder: causal self-attention, cross-attention,
feed-forward, three norms, explicit masks.

Every computed check judges calls the parent replayed with its own inputs and
weight values (``analysis``), at several target and source lengths.
"""

from __future__ import annotations

import numpy as np

from ...judge import analysis, contract
from ...judge.framework import CheckFailed, check, fail
from ...judge.reference import decoder_variants, resolve
from ...judge.shared.fixtures import (  # noqa: F401  (fixtures are used by name)
    config, config_phase, dims, forward, job, values,
)
from ...judge.shared.forward import assert_matches_reference
from ...judge.shared.gradients import assert_norm_gradients_differ, gradient_report
from ...judge.shared.mask import (
    assert_attention_mask_shape, assert_masks_keys, assert_unchanged, effective_mask, explain_raised,
    raised_call_diagnosis, raw_attention_arguments,
)
from ...judge.shared.numbers import close
from ...judge.shared.structure import (
    Call, Structure, assert_mixes_positions, claimed_roles, explain_unverified, ffn_roles_by_shape, identified,
    identify_by_roles, observed_call, pseudo_steps_of, trace_leaves,
)
from ...judge.shared.weights import (
    assert_norms_over_features,
    assert_distinct_norms, assert_trainable_shapes, attention_hints, attention_shapes, shared_norm_reason,
    written_attention_slip,
)
from ...judge.budget import ReplayFailed
from ...judge.advice import in_words, parts_of
from ...judge.evidence import format_student_error
from .job import DIMS

CLASS = "TransformerDecoder"
SEE = "forward.decoder"
NORM_POSITIONS = "after the self-attention, the cross-attention and the feed-forward residuals"
DECODER = (
    "h1 = norm1(x + attention_1(x, x, causal mask)); h2 = norm2(h1 + attention_2(h1, encoder_outputs)); "
    "output = norm3(h2 + ffn(h2))."
)
CAUSAL_WHY = ("At generation time the decoder predicts each token from the earlier ones only; a decoder "
              "that looks ahead learns to copy the answer in training and fails when it is not there.")
# phase -> (prefix of its arrays in the job, masked, what the messages call it)
CALLS = {
    "forward": ("", False, "the plain call"),
    "causal": ("", False, "the call with later target positions changed"),
    "mask": ("", True, "the masked call"),
    "mask_perturbed": ("", True, "the masked call with padded encoder outputs changed"),
    "lengths": ("lengths_", True, "the call at other lengths"),
    "functional": ("functional_", True, "the functional model with lengths left open"),
}


def _arrays(job, phase):
    prefix, masked, _ = CALLS[phase]
    x = np.asarray(job[prefix + "inputs"], dtype=np.float64)
    encoder = np.asarray(job[prefix + "encoder_outputs"], dtype=np.float64)
    if phase == "causal":
        x = np.asarray(job["inputs_future_perturbed"], dtype=np.float64)
    if phase == "mask_perturbed":
        encoder = np.asarray(job["encoder_outputs_perturbed"], dtype=np.float64)
    masks = {"inputs_mask": np.asarray(job[prefix + "target_mask"], dtype=bool),
             "encoder_outputs_mask": np.asarray(job[prefix + "source_mask"], dtype=bool)} if masked else None
    return x, encoder, masks


def _observe(evidence, job, phase, check_id):
    x, encoder, masks = _arrays(job, phase)
    observed = analysis.observed(evidence, phase, check_id, {"inputs": x, "encoder_outputs": encoder}, masks)
    if not observed.verified and observed.output is not None:
        _identify(evidence, observed, x, encoder)
    return observed


def _identify(evidence, observed, x, encoder) -> None:
    """A feed-forward of raw weights: find its parts by shape, then see whether the output is a
    decoder (or a known mistaken one) computed from them."""
    leaves = trace_leaves(evidence, observed.phase)
    attentions, norms, claimed = claimed_roles(leaves)
    dims = evidence.job["dims"]
    parameters = analysis.values(evidence)
    ffn = ffn_roles_by_shape(evidence.partial("forward") or {}, parameters, claimed, dims["embed_dim"],
                             dims["dense_dim"])
    if len(attentions) != 2 or len(norms) != 3 or ffn is None:
        return
    first, second = dict(attentions[0]), dict(attentions[1])
    self_mask, cross_mask = first.pop("mask", None), second.pop("mask", None)
    causal = first.pop("causal", False)
    second.pop("causal", None)
    roles = {"attention_1": first, "attention_2": second, "norm1": norms[0], "norm2": norms[1], "norm3": norms[2],
             **ffn}
    identify_by_roles(observed, roles, lambda parts: decoder_variants(x, encoder, parts, self_mask, cross_mask,
                                                                      causal or self_mask is None),
                      parameters, pseudo_steps_of(leaves))


def _attention_roles(call) -> tuple:
    """(self-attention step, cross-attention step): by where their values come from (by order, in a
    call that is not verified)."""
    program = call.observed.program
    steps = call.attention
    if program is None:
        return (steps[0] if steps else None), (steps[1] if len(steps) > 1 else None)
    self_step = cross_step = None
    for step in steps:
        sources = program.expr_sources(step.inputs["value"]) if "value" in step.inputs else set()
        if "encoder_outputs" in sources and cross_step is None:
            cross_step = step
        elif "encoder_outputs" not in sources and self_step is None:
            self_step = step
    return self_step, cross_step


plain, layer, computed, structure, norms = contract.plain_call(_observe, SEE)


check_constructor = contract.constructor(CLASS, DIMS)


check_output_shape = contract.output_shape("Returns (batch, target_len, embed_dim)",
                                           "(batch, target_len, embed_dim), like inputs")


@check("weights.three_norms", "Three distinct LayerNormalization layers are applied", "weights", points=2)
def check_three_norms(norms):
    assert_distinct_norms(norms, 3, NORM_POSITIONS)
    norms.confirm()


check_norm_parameters = contract.norm_parameters()


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims, values):
    e, d = dims["embed_dim"], dims["dense_dim"]
    expected = 2 * attention_shapes(e, dims["num_heads"]) + [(e, d), (d,), (d, e), (e,)] + [(e,)] * 6
    shared, why = shared_norm_reason(structure)
    assert_trainable_shapes(
        forward, values, expected,
        "8 for each of the two MultiHeadAttention layers, 4 for the feed-forward Dense layers, 2 per norm",
        shared + attention_hints(structure, dims, values), why, structure.role_shapes(),
    )
    structure.confirm()


check_all_gradients = contract.all_gradients("26 trainable variables.")


@check("gradients.norms_differ", "The three norms receive different gradients", "gradients")
def check_norm_gradients_differ(evidence, computed, forward, norms, job):
    assert_norm_gradients_differ(gradient_report(evidence, computed, forward, job["loss_weights"]), norms, 3)


(check_config_base, check_config_own_keys, check_from_config,
 check_keras_file) = contract.config(CLASS, DIMS)


# --------------------------------------------------------------------------- masks


def _verified_call(evidence, job, phase, check_id, explaining: str, needs_attention: bool = True):
    """The verified call of ``phase``; when it cannot be verified, ``explaining`` says why (unless the
    plain call could not be verified either: then forward.decoder does)."""
    _, masked, what = CALLS[phase]
    x, encoder, _ = _arrays(job, phase)
    diagnosis = raised_call_diagnosis(evidence, phase, [x.shape[1], encoder.shape[1]], x.shape[0])
    if diagnosis is not None:
        kind, index, parts = diagnosis
        raw = (_arguments(evidence, phase, 1) or {}).get("attention_mask")
        if kind == "keys" and index == 1 and isinstance(raw, np.ndarray) and raw.shape[-1] == x.shape[1]:
            diagnosis = (kind, index, (
                f"the cross-attention mask has {x.shape[1]} keys (shape {tuple(raw.shape)}): it was built from the "
                "target's padding mask, and MultiHeadAttention raised on it.",
                f"encoder_outputs_mask[:, None, :], shape ({x.shape[0]}, 1, {encoder.shape[1]}): one entry per "
                "source position.",
                "Cross-attention's keys are the encoder outputs, so its mask must describe the source "
                "sentence. The book gets away with the target mask only because its source and target "
                "have the same length.",
            ))
        owner = explaining
        if phase == "mask":
            owner = "mask.cross_attention_mask" if index == 1 else "mask.self_attention_mask"
        explain_raised(evidence, phase, check_id, owner, diagnosis)
    observed = _observe(evidence, job, phase, check_id)
    plain_verified = _observe(evidence, job, "forward", "api.output_shape").verified
    call = observed_call(evidence, observed, explaining if plain_verified else SEE, what, "inputs",
                         needs_attention=needs_attention, structure_see=SEE)
    call.explaining = check_id == explaining and plain_verified
    return call


def _confirm(*calls) -> None:
    """Nothing wrong was found: the calls must be verified for the check to pass; the check that
    explains an unverified call says why."""
    for call in calls:
        if not call.verified and getattr(call, "explaining", False):
            explain_unverified(call.observed, "a call recomputed from the same steps as the plain call.")
        call.confirm()


def _earlier(job) -> np.ndarray:
    earlier = np.zeros(np.asarray(job["inputs"]).shape[:2], dtype=bool)
    earlier[:, : job["future_from"]] = True
    return earlier


@check("mask.causal", "Later target positions cannot change earlier outputs", "mask", points=2)
def check_causal(evidence, job, values):
    plain = _verified_call(evidence, job, "forward", "mask.causal", "mask.causal", needs_attention=False)
    changed = _verified_call(evidence, job, "causal", "mask.causal", "mask.causal", needs_attention=False)
    try:
        assert_unchanged(plain.output, changed.output, _earlier(job),
                         f"target positions {job['future_from']} and later", CAUSAL_WHY)
    except CheckFailed as failure:
        if plain.verified and len(plain.attention) > 1 and _attention_roles(plain)[1] is None:
            failure.cause = "mask.cross_attention_mask"  # no attention reads the encoder: the second reads ahead
        raise
    _confirm(plain, changed)
    assert_mixes_positions(plain.observed, values, "inputs", np.ones(_earlier(job).shape, dtype=bool), SEE)


def _arguments(evidence, phase, position):
    found = raw_attention_arguments(evidence, phase)
    return found[position] if len(found) > position else None


@check("mask.self_attention_mask", "Self-attention is causal and hides padded target positions", "mask")
def check_self_attention_mask(evidence, job):
    target = np.asarray(job["target_mask"], dtype=bool)
    batch, length = target.shape
    observed = _verified_call(evidence, job, "mask", "mask.self_attention_mask", "mask.cross_attention_mask")
    self_step, _ = _attention_roles(observed)
    if self_step is None:
        fail("no MultiHeadAttention call with inputs as its value.", "a self-attention over inputs.",
             "The decoder attends to its own earlier positions, then to the source sentence.")
    expected = np.tril(np.ones((length, length), dtype=bool))[None] & target[:, None, :]
    assert_masks_keys(self_step, expected, target, _arguments(evidence, "mask", 0),
                      what="later positions and padded keys", future_why=CAUSAL_WHY)
    _confirm(observed)


@check("mask.cross_attention_mask", "Cross-attention hides padded encoder positions", "mask", points=2)
def check_cross_attention_mask(evidence, job):
    target = np.asarray(job["target_mask"], dtype=bool)
    source = np.asarray(job["source_mask"], dtype=bool)
    batch, length = target.shape
    observed = _verified_call(evidence, job, "mask", "mask.cross_attention_mask", "mask.cross_attention_mask")
    _, cross_step = _attention_roles(observed)
    if cross_step is None:
        fail("no MultiHeadAttention call with encoder_outputs as its value.",
             "a cross-attention over encoder_outputs.",
             "The decoder attends to its own earlier positions, then to the source sentence.")
    raw = (_arguments(evidence, "mask", 1) or {}).get("attention_mask")
    if _cross_mask_from_target(evidence, job):
        fail(
            f"the cross-attention mask has {length} keys (shape {tuple(raw.shape)}): it was built from the "
            "target's padding mask.",
            f"encoder_outputs_mask[:, None, :], shape ({batch}, 1, {source.shape[1]}): one entry per source position.",
            "Cross-attention's keys are the encoder outputs, so its mask must describe the source "
            "sentence. The book gets away with the target mask only because its source and target "
            "have the same length.",
        )
    assert_attention_mask_shape(cross_step, batch, length, source.shape[1], _arguments(evidence, "mask", 1))
    expected = np.broadcast_to(source[:, None, :], (batch, length, source.shape[1]))
    assert_masks_keys(cross_step, expected, target, _arguments(evidence, "mask", 1), what="padded encoder positions",
                      real_keys=source)
    _confirm(observed)


def _cross_mask_from_target(evidence, job) -> bool:
    """Whether the masked call's cross-attention got a mask with one key per target position (the
    target's padding mask) where its keys are the source's positions (of another length)."""
    length = np.asarray(job["target_mask"]).shape[1]
    raw = (_arguments(evidence, "mask", 1) or {}).get("attention_mask")
    return isinstance(raw, np.ndarray) and raw.ndim == 3 and raw.shape[-1] == length and \
        length != np.asarray(job["source_mask"]).shape[1]


@check("mask.encoder_padding_invariance", "Padded encoder positions cannot change the output", "mask", points=2)
def check_encoder_padding_invariance(evidence, job, values):
    target = np.asarray(job["target_mask"], dtype=bool)
    masked = _verified_call(evidence, job, "mask", "mask.encoder_padding_invariance", "mask.cross_attention_mask",
                            needs_attention=False)
    changed = _verified_call(evidence, job, "mask_perturbed", "mask.encoder_padding_invariance",
                             "mask.encoder_padding_invariance", needs_attention=False)
    assert_unchanged(
        masked.output, changed.output, target, "the padded encoder outputs",
        "A translation must not depend on how much padding the source sentence's batch needed.",
    )
    _confirm(masked, changed)
    assert_mixes_positions(masked.observed, values, "encoder_outputs", np.asarray(job["source_mask"], dtype=bool),
                           SEE, outputs=target)


def _same_error_reported(evidence, error: dict) -> None:
    """One cause, one failure: an error another check already reported (a missing mask argument
    raises the same on every masked call) is not reported again."""
    for phase in ("forward", "mask"):
        earlier = evidence.error(phase)
        reporter = getattr(evidence, "_reported", {}).get(phase)
        if earlier and reporter and (earlier.get("type"), earlier.get("message")) == \
                (error.get("type"), error.get("message")):
            analysis.not_checked(f"your layer raised {error.get('type', 'an error')} here too", reporter)


@check("mask.lengths", "The masks follow every length: T ≠ S, and a model with lengths left open", "mask")
def check_lengths(evidence, job):
    for phase in ("lengths", "functional"):
        _, _, what = CALLS[phase]
        x, encoder, masks = _arrays(job, phase)
        target, source = x.shape[1], encoder.shape[1]
        error = evidence.error(phase)
        if error is not None:
            _same_error_reported(evidence, error)
            built = (in_words("keras.Input(shape=(None, embed_dim)) for both inputs", job) if phase == "functional"
                     else f"a target of {target} and a source of {source} positions")
            if _cross_mask_from_target(evidence, job):  # the cross-attention's mask, told by its own check
                fail(f"your layer raised on {what} ({built}): its cross-attention's mask is built from the target's "
                     "padding mask, which has one entry per target position where the keys are the source's.",
                     "encoder_outputs_mask for the cross-attention, at every target and source length.",
                     "Cross-attention's keys are the encoder outputs, so its mask must describe the source "
                     "sentence, whatever the target's length.", cause="mask.cross_attention_mask")
            fail(
                format_student_error(f"your layer raised on {what} ({built})", error, parts_of(evidence.public_job)),
                "a decoder that works for any target and source lengths.",
                "Sentences have many lengths. Build the causal mask in call() from the target's length at run "
                "time — keras.ops.shape(inputs)[1], not inputs.shape[1], which is None in a functional model "
                "— never once in build() or __init__ for one length.",
            )
        observed = _verified_call(evidence, job, phase, "mask.lengths", "mask.lengths")
        self_step, _ = _attention_roles(observed)
        if self_step is None:
            fail(f"no self-attention in {what}.", "a causal self-attention at every length.", CAUSAL_WHY)
        real = masks["inputs_mask"]
        expected = np.tril(np.ones((target, target), dtype=bool))[None] & real[:, None, :]
        effective = effective_mask(self_step)
        if effective is None:
            fail(f"no mask reached the self-attention in {what}.", "the causal mask at every length.", CAUSAL_WHY)
        full = np.broadcast_to(effective, expected.shape)
        if not np.array_equal(full[real], expected[real]):
            fail(
                f"in {what} (target length {target}, source length {source}) the self-attention mask is not "
                "the causal mask of that length combined with the target's padding.",
                "a causal mask built from the length of the inputs at each call.",
                CAUSAL_WHY,
            )
        _confirm(observed)


# --------------------------------------------------------------------------- forward

MISTAKES = {
    "not_causal": "the self-attention is not causal: positions attend to later positions",
    "cross_query_from_inputs": "the cross-attention's query is the decoder's inputs instead of the first norm's output",
    "cross_attends_to_decoder": "the cross-attention attends to the decoder itself instead of encoder_outputs",
    "no_self_residual": "the self-attention output is normalised without adding the inputs (no residual)",
    "no_cross_residual": "the cross-attention output is normalised without adding its query (no residual)",
    "no_ffn_residual": "the feed-forward output is normalised without adding its input (no residual)",
}
WHY = ("Each residual block adds a correction to its input; the decoder must read its own past, "
       "then the source, then transform the result.")
WHYS = {
    "not_causal": CAUSAL_WHY,
    "cross_query_from_inputs": "The cross-attention asks the source about the target as understood so far (h1); "
                               "asking with the raw inputs throws away what the self-attention found.",
    "cross_attends_to_decoder": "Cross-attention is how the decoder reads the source sentence; attending to "
                                "itself again, it never sees the encoder's output.",
}


@check("forward.decoder", "Computes the post-norm decoder", "forward", points=2)
def check_decoder(plain, job, values):
    if identified(plain, DECODER, np.asarray(job["inputs"]).shape, MISTAKES, WHY, WHYS):
        return
    structure = Structure(plain)
    attention_steps, norms, dense = structure.of("attention"), structure.norm_steps, structure.dense_steps
    if len(attention_steps) != 2 or len(norms) != 3 or len(dense) != 2:
        fail(
            f"{len(attention_steps)} attention, {len(norms)} LayerNormalization and {len(dense)} Dense "
            f"call(s): {structure.describe()}.",
            "two MultiHeadAttention, three LayerNormalization and two Dense calls.",
            DECODER,
        )
    self_step, cross_step = _attention_roles(Call(plain, plain.steps("attention"), SEE, ""))
    if self_step is None or cross_step is None:
        self_step, cross_step = attention_steps
    roles = {
        "attention_1": dict(self_step.params, zero_masked=bool(self_step.constants.get("zero_masked"))),
        "attention_2": dict(cross_step.params, zero_masked=bool(cross_step.constants.get("zero_masked"))),
        "ffn1": {"kernel": dense[0].params["kernel"], "bias": dense[0].params.get("bias")},
        "ffn2": {"kernel": dense[1].params["kernel"], "bias": dense[1].params.get("bias")},
    }
    for index, step in enumerate(norms, start=1):
        roles[f"norm{index}"] = {"gamma": step.params.get("gamma"), "beta": step.params.get("beta"),
                                 "epsilon": float(step.constants["epsilon"])}
    x, encoder, _ = _arrays(job, "forward")
    assert_norms_over_features(structure)
    parts = resolve(roles, values)
    variants = decoder_variants(x, encoder, parts)

    def otherwise():
        written_attention_slip(attention_steps)
        _own_masks_explain(plain.output, x, encoder, parts, self_step, cross_step)

    assert_matches_reference(np.asarray(plain.output, dtype=np.float64), variants, MISTAKES, DECODER, WHY,
                             otherwise=otherwise, whys=WHYS,
                             causes={"cross_attends_to_decoder": "mask.cross_attention_mask"})


def _own_masks_explain(output, x, encoder, parts, self_step, cross_step) -> None:
    """Fail, naming the mask checks as the cause, when the output is what the correct decoder computes
    with the masks the student's attentions received (their replayed steps): the masks are the mistake,
    the rest of the computation is right."""
    self_mask, cross_mask = (step.constants.get("mask") for step in (self_step, cross_step))
    causal = bool(self_step.constants.get("causal"))
    if self_mask is None and not causal:
        return
    try:
        own = decoder_variants(x, encoder, parts, self_mask=self_mask, cross_mask=cross_mask, causal=causal)["correct"]
    except (ValueError, ReplayFailed):
        return
    if close(np.asarray(output, dtype=np.float64), own):
        fail("your output is what the correct decoder computes with the masks your attentions received, so the "
             "computation is right and a mask is not.",
             DECODER, "The masks decide what each position may read; see the mask checks for which one is wrong.",
             cause="mask.self_attention_mask")


check_inference = contract.inference()
