"""The checks every layer exercise shares: a Keras layer's contract, in the spirit of Keras's
own ``run_layer_test``. It builds from its constructor's arguments, and ``get_config`` /
``from_config`` and the ``.keras`` file rebuild it.

An exercise's check module declares them once each, in its own words:

    check_constructor = contract.constructor(CLASS, DIMS)
    check_config_base, check_config_own_keys, check_from_config, check_keras_file = contract.config(CLASS, DIMS)

The layer exercises over a sequence (a block, the encoder, the decoder) also share the fixtures of
the layer's plain call (``plain_call``) and the checks of its output's shape, of every variable's
gradient, of padding and of inference without randomness, each declared once here; the layers whose
one attention is a self-attention over a padded input (the block, the encoder) share the checks of
its masked call (``self_attention_mask``).

Each call makes new check functions, so a check module owns what it declares (its marks, its
order among its other checks); the judge runs them, and the registry counts their points, as it
does the module's own.
"""

from __future__ import annotations

import numpy as np
import pytest

from .advice import in_words
from .framework import check
from .shared.api import assert_constructor, assert_output_shape
from .shared.config import assert_config_base, assert_config_own_keys, assert_from_config, assert_keras_file
from .shared.fixtures import padding
from .shared.forward import assert_inference
from .shared.gradients import assert_all_gradients, gradient_report, key_biases
from .shared.mask import (
    assert_attention_mask_shape, assert_mask_propagates, assert_masks_keys, assert_unchanged, explain_raised_mask,
    raw_attention_arguments,
)
from .shared.structure import (
    Structure, assert_mixes_positions, computed_layer, explain_unverified, layer_structure, norm_structure,
    observed_call, trainable_keys, verified_layer,
)
from .shared.weights import assert_norm_parameters


def _listed(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def constructor(class_name: str, dims: dict):
    """``api.constructor``: the layer builds from the exercise's arguments, by position and by name."""

    @check("api.constructor", f"Builds from {_listed(dims)}", "api")
    def check_constructor(evidence):  # the constructor's own names: not the dims fixture's roles
        assert_constructor(evidence, class_name, dims)

    return check_constructor


def config(class_name: str, dims: dict):
    """The four ``config`` checks: the base config kept, the layer's own arguments, ``from_config``
    and a ``.keras`` file."""

    @check("config.base_keys", "get_config keeps the base config and is JSON-serialisable", "config")
    def check_config_base(evidence, config):
        assert_config_base(evidence, config, class_name)

    @check("config.own_keys", f"get_config holds {_listed(dims)}", "config")
    def check_config_own_keys(config):
        assert_config_own_keys(config, dims, class_name)  # the constructor's arguments, in its own names

    @check("config.from_config", "from_config rebuilds an identical layer", "config")
    def check_from_config(config_phase, evidence):
        assert_from_config(config_phase, evidence)

    @check("config.keras_file", "A model holding the layer survives .keras save and load", "config")
    def check_keras_file(evidence):
        assert_keras_file(evidence)

    return check_config_base, check_config_own_keys, check_from_config, check_keras_file


def plain_call(observe, see: str):
    """The fixtures of the layer's call without a mask, ``observe(evidence, job, phase, check_id)``
    giving it: ``plain`` (as observed), ``layer`` (verified), ``computed`` (whatever the grader
    recognised in it), ``structure`` (verified or claimed) and ``norms`` (for the checks of its norms,
    which need the verified call, not its attention); ``see`` is the check that says why one is not."""

    @pytest.fixture
    def plain(evidence, job):
        return observe(evidence, job, "forward", "api.output_shape")

    @pytest.fixture
    def layer(plain):
        """The verified plain call, or not checked."""
        return verified_layer(plain, see, "inputs")

    @pytest.fixture
    def computed(plain, values):
        """The verified plain call, whatever the grader recognised in it (checks of behaviour), or not checked."""
        return computed_layer(plain, see, values)

    @pytest.fixture
    def structure(evidence, plain):
        """What the plain call ran: verified, or claimed (then checks may fail on it, but not pass)."""
        return layer_structure(evidence, plain, "forward", see, "inputs")

    @pytest.fixture
    def norms(evidence, plain, values):
        """What the plain call ran, for the checks of its norms: they need the verified call, not its attention."""
        return norm_structure(evidence, plain, "forward", see, values)

    return plain, layer, computed, structure, norms


def norm_parameters():
    """``weights.norm_parameters``: each LayerNormalization the layer applies has its own trainable
    gamma and beta (for the layers of several norms: the block's one norm says why in its own check)."""

    @check("weights.norm_parameters", "Each norm has its own trainable gamma and beta", "weights")
    def check_norm_parameters(norms, dims, forward, values):
        assert_norm_parameters(norms, dims["embed_dim"], trainable_keys(forward), values)
        norms.confirm()

    return check_norm_parameters


def output_shape(title: str, shape: str):
    """``api.output_shape``: the output is shaped like the layer's input (``shape``, in words)."""

    @check("api.output_shape", title, "api")
    def check_output_shape(forward, job):
        assert_output_shape(forward, np.asarray(job["inputs"]).shape, in_words(shape, job))

    return check_output_shape


def all_gradients(variables: str):
    """``gradients.all_variables``: every trainable variable gets a gradient (``variables``: how many,
    in words); the key projections' biases are exempt (softmax cancels them)."""

    @check("gradients.all_variables", "Every trainable variable gets a gradient", "gradients")
    def check_all_gradients(evidence, computed, forward, job):
        report = gradient_report(evidence, computed, forward, job["loss_weights"])
        assert_all_gradients(report, key_biases(Structure(computed)), variables)

    return check_all_gradients


def padding_invariance(masked, see: str):
    """``mask.padding_invariance``: changing the padded positions' inputs changes no real position's
    output. ``masked(evidence, job, check_id, phase, inputs, needs_attention)`` gives the masked call."""

    @check("mask.padding_invariance", "Padded positions cannot change real positions' outputs", "mask", points=2)
    def check_padding_invariance(evidence, job, values):
        call = masked(evidence, job, "mask.padding_invariance", needs_attention=False)
        perturbed = masked(evidence, job, "mask.padding_invariance", "mask_perturbed", "inputs_perturbed",
                           needs_attention=False)
        assert_unchanged(
            call.output, perturbed.output, padding(job), "the padded positions' input vectors",
            "Otherwise the same sentence encodes differently depending on how much padding its batch needed.",
        )
        call.confirm()
        perturbed.confirm()
        assert_mixes_positions(call.observed, values, "inputs", padding(job), see)

    return check_padding_invariance


def self_attention_mask(observe, see: str, shape_points: float = 1):
    """The ``mask`` checks of a layer whose one attention attends over its own padded input: the
    attention mask's shape (worth ``shape_points``), the padded keys hidden from real queries,
    padding invariance and the mask passed on. ``observe(evidence, job, phase, check_id, key=...,
    masked=...)`` gives a call as ``plain_call``'s does; ``see`` is the check that says why a call
    is not verified. Returns the four checks, in that order."""

    def masked(evidence, job, check_id, phase="mask", key="inputs", needs_attention=True):
        """The masked call, verified or claimed. When it cannot be verified, mask.masks_keys says why
        (unless the plain call could not be verified either: then ``see`` does)."""
        batch, seq = padding(job).shape
        explain_raised_mask(evidence, phase, check_id, batch, seq, padding=padding(job))
        observed = observe(evidence, job, phase, check_id, key=key, masked=True)
        plain_verified = observe(evidence, job, "forward", "api.output_shape").verified
        return observed_call(evidence, observed, "mask.masks_keys" if plain_verified else see,
                             "your layer's masked call", "inputs", needs_attention=needs_attention,
                             structure_see=see)

    def explain_masked(call) -> None:
        """mask.masks_keys, having found no fault in the masked call, says why it is not verified."""
        if not call.verified and call.see == "mask.masks_keys":
            explain_unverified(call.observed, "a masked call the grader can recompute, as the plain call is.")
        call.confirm()

    def attention_step(call, explaining=False):
        """The masked call's attention step; a call that cannot be verified and names no attention layer
        is explained (or not checked) instead of failing as one without attention."""
        if call.unknown:
            explain_masked(call) if explaining else call.confirm()
        return call.attention[0] if call.attention else None

    def arguments(evidence, phase="mask"):
        found = raw_attention_arguments(evidence, phase)
        return found[0] if found else None

    @check("mask.attention_mask_shape", "The attention mask broadcasts to (batch, queries, keys)", "mask",
           points=shape_points)
    def check_attention_mask_shape(evidence, job):
        batch, seq = padding(job).shape
        call = masked(evidence, job, "mask.attention_mask_shape")
        assert_attention_mask_shape(attention_step(call), batch, seq, seq, arguments(evidence))
        call.confirm()

    @check("mask.masks_keys", "The attention mask hides padded keys from real queries", "mask", points=2)
    def check_masks_keys(evidence, job):
        real = padding(job)
        batch, seq = real.shape
        call = masked(evidence, job, "mask.masks_keys")
        expected = np.broadcast_to(real[:, None, :], (batch, seq, seq))
        assert_masks_keys(attention_step(call, explaining=True), expected, real, arguments(evidence))
        explain_masked(call)

    check_padding_invariance = padding_invariance(masked, see)

    @check("mask.propagates", "The padding mask passes on to the next layer", "mask")
    def check_mask_propagates(evidence, job, values):
        call = masked(evidence, job, "mask.propagates", needs_attention=False)
        if isinstance(call.output, np.ndarray):
            assert_mask_propagates(call.observed.data, np.asarray(call.output, dtype=np.float64), padding(job))
        call.confirm()
        assert_mixes_positions(call.observed, values, "inputs", padding(job), see)

    return check_attention_mask_shape, check_masks_keys, check_padding_invariance, check_mask_propagates


def inference():
    """``forward.inference``: called without ``training``, the layer is not random."""

    @check("forward.inference", "Called without `training`, it is not random", "forward")
    def check_inference(evidence, values, request):
        assert_inference(evidence, lambda: request.getfixturevalue("computed"), values)

    return check_inference
