"""The judge's reading of layers by what they compute, on its own numbers and without TensorFlow:
a convolution of one position is a Dense, a padding mask is recognised in another shape, and an
attention written with Dense projections is the MultiHeadAttention its kernels' views describe."""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import attention, budget, ops, reference, replay


@pytest.fixture(autouse=True)
def fresh_budget():
    budget.reset()
    yield
    budget.reset()


RNG = np.random.default_rng(7)
ROLES = ("query", "key", "value")


def test_a_convolution_of_one_position_is_the_dense_of_its_only_tap():
    x, kernel, bias = RNG.normal(size=(2, 5, 4)), RNG.normal(size=(1, 4, 3)), RNG.normal(size=(3,))
    assert np.allclose(ops.pointwise_conv(x, kernel, bias, "relu"), ops.dense(x, kernel[0], bias, "relu"))


def test_a_convolution_kernel_of_another_shape_is_refused_for_its_role():
    with pytest.raises(budget.ReplayFailed, match="kernel has the shape"):
        ops.pointwise_conv(np.ones((2, 5, 4)), np.ones((3, 4, 3)))


@pytest.mark.parametrize("settings, says", [
    ({"kernel_size": [3], "strides": [1]}, "kernel wider than one position"),
    ({"kernel_size": [1], "strides": [2]}, "strides"),
    ({"kernel_size": [1], "strides": [1], "data_format": "channels_first"}, "channels first"),
])
def test_only_a_convolution_that_reads_one_position_at_a_time_is_replayed(settings, says):
    constants = {"groups": 1, "data_format": "channels_last", **settings}
    with pytest.raises(budget.ReplayFailed, match=says):
        replay._pointwise(constants, "layer Conv1D (call 3)")
    replay._pointwise({"kernel_size": [1], "strides": [1], "groups": 1, "data_format": "channels_last",
                       "padding": "causal", "dilation_rate": [4]}, "layer Conv1D (call 3)")


def test_a_view_gives_a_variable_in_the_shape_of_its_role_and_is_its_key_everywhere_else():
    values = {"7": np.arange(12.0).reshape(1, 3, 4)}
    view = ops.View("7", (3, 4))
    assert view == "7" and {view: 1}["7"] == 1 and values[view].shape == (1, 3, 4)
    assert ops.viewed(view, values).shape == (3, 4) and ops.role_shape(view, values) == (3, 4)
    with pytest.raises(budget.ReplayFailed):
        ops.viewed(ops.View("7", (5, 4)), values)


def test_a_padding_mask_is_recognised_in_another_shape_and_as_numbers_but_not_inverted():
    padding = np.array([[True, True, False], [True, False, False]])
    masks = {"mask": padding}
    as_floats = padding[:, None, None, :].astype(np.float32)
    found = replay._same_mask(as_floats, masks)
    assert found.shape == (2, 1, 1, 3) and found.dtype == np.float64 and np.array_equal(found, as_floats)
    assert replay._same_mask(padding[:, None, :], masks).dtype == bool
    assert replay._same_mask(1.0 - as_floats, masks) is None
    assert replay._same_mask(padding.T.copy(), masks) is None  # the same values, on the wrong axes
    assert replay._same_mask(as_floats * 0.5, masks) is None


def test_dense_projections_viewed_in_multi_head_attentions_shapes_compute_its_attention():
    """The heads a hand-written attention splits its projections into ((B, T, W) into (B, T, h, W // h))
    are the heads MultiHeadAttention's kernels of the views' shapes make: the reference computed from
    the views is the hand-written attention."""
    batch, length, width, heads = 2, 5, 8, 2
    depth = width // heads
    x = RNG.normal(size=(batch, length, width))
    values = {str(i): RNG.normal(size=(width, width)) for i in range(4)}
    values.update({str(i + 4): RNG.normal(size=(width,)) for i in range(4)})
    visible = np.ones((batch, length, length), dtype=bool)
    visible[0, :, 3:] = False
    q, k, v = (ops.dense(x, values[str(i)], values[str(i + 4)]) for i in range(3))
    by_hand = ops.dense(attention.dot_product_attention(q, k, v, heads, visible), values["3"], values["7"])
    roles = {"attention": {
        **{f"{role}_kernel": ops.View(str(i), (width, heads, depth)) for i, role in enumerate(ROLES)},
        **{f"{role}_bias": ops.View(str(i + 4), (heads, depth)) for i, role in enumerate(ROLES)},
        "output_kernel": ops.View("3", (heads, depth, width)), "output_bias": "7"}}
    keras_like = ops.attention(x, x, None, reference.resolve(roles, values)["attention"], visible)
    assert np.allclose(by_hand, keras_like)


def test_a_slip_of_a_hand_written_attention_gives_another_result_than_the_attention():
    x = RNG.normal(size=(2, 4, 6))
    visible = np.ones((2, 4, 4), dtype=bool)
    exact = attention.dot_product_attention(x, x, x, 2, visible)
    for options in ({"scale": 1.0}, {"scale": "key_dim"}, {"axis": -2}):
        assert not np.allclose(exact, attention.dot_product_attention(x, x, x, 2, visible, **options))


def test_the_attention_finder_charges_its_work_to_the_budget():
    budget.reset()
    x = np.ones((4, 64, 64))
    spent = budget._spent
    attention.dot_product_attention(x, x, x, 8, np.ones((4, 64, 64), dtype=bool))
    assert budget._spent - spent >= 4 * 8 * 64 * 64
