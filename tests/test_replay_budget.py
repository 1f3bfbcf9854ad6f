"""The parent's work on one submission's replays is counted before each step runs."""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import budget, ops


@pytest.fixture(autouse=True)
def fresh_budget():
    budget.reset()
    yield
    budget.reset()


def test_an_einsums_cost_is_the_product_of_its_index_sizes():
    a, b = np.zeros((2, 3, 4)), np.zeros((4, 5))
    assert budget.einsum_cost("abc,cd->abd", a, b) == (2 * 3 * 4 * 5, 2 * 3 * 5)
    assert budget.einsum_cost("abc,de->a", a, np.zeros((6, 7))) == (2 * 3 * 4 * 6 * 7, 2)
    assert budget.einsum_cost("...c,cd->...d", a, b) == (24 * 20, 24 * 20)  # '...': bounded by the sizes


def test_an_einsum_over_every_index_combination_is_refused_before_it_runs():
    # cheap to describe, and hours of one uninterruptible NumPy call if it ran
    x, kernel = np.ones((64, 64, 64)), np.ones((4000, 4000))
    with pytest.raises(budget.TooLarge, match="operations"):
        ops.einsum_dense(x, kernel, None, "abc,de->a", None)


def test_a_step_that_would_make_a_huge_array_is_refused():
    with pytest.raises(budget.TooLarge, match="array"):
        ops.einsum_dense(np.ones((2, 4000)), np.ones((3000, 2000)), None, "ab,cd->abcd", None)


def test_the_budget_is_for_the_whole_submission_and_starts_again_for_the_next():
    x, kernel = np.ones((100, 1000)), np.ones((1000, 1000))
    with pytest.raises(budget.TooLarge):
        for _ in range(10):
            ops.dense(x, kernel)  # 1e8 each
    budget.reset()
    ops.dense(x, kernel)


def test_a_check_stopped_by_the_budget_fails_and_says_why():
    from grader.judging.plugin import classify

    class Info:
        value = budget.TooLarge("recomputing the call would take more than 1 operations")

    status, message = classify(Info())
    assert status == "failed" and "Not verified" in message and "not the exercise's" in message


def test_a_correct_layer_needs_a_small_fraction_of_the_budget():
    # exercise 3's replay at the graded sizes: an attention and a feed-forward
    b, s, e, d, n = 4, 10, 16, 32, 2
    x = np.random.default_rng(0).normal(size=(b, s, e))
    params = {f"{role}_kernel": np.ones((e, n, e)) for role in ("query", "key", "value")}
    params["output_kernel"] = np.ones((n, e, e))
    ops.attention(x, x, None, params)
    ops.dense(ops.dense(x, np.ones((e, d))), np.ones((d, e)))
    assert budget._spent < budget.BUDGET / 1000


def _attention_step(query_shape, mask_shape):
    """A claimed attention step as the checks read it: recorded inputs and the mask at the scores."""
    from grader.judge.replay import Step

    event = {"inputs": {"query": np.zeros(query_shape), "value": np.zeros(query_shape)}}
    return Step(0, event, "attention", {}, {"mask": np.ones(mask_shape, dtype=bool)}, {})


@pytest.mark.parametrize("query_shape, mask_shape, refused", [
    ((1, 20000, 1), (1, 20000, 1, 1), "axis of 20,000"),  # 8e12 booleans once broadcast and reduced
    ((3, 6, 8), (1, 400, 6, 6), "axis of 400"),  # a heads axis no layer of the exercise has
])
def test_a_claimed_mask_larger_than_the_exercise_is_refused_before_any_array_is_made(query_shape, mask_shape,
                                                                                      refused):
    from grader.judge.shared.mask import effective_mask

    budget.reset({"input_shape": [3, 6, 8], "dims": {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}})
    with pytest.raises(budget.TooLarge, match=refused):
        effective_mask(_attention_step(query_shape, mask_shape))
    with pytest.raises(budget.TooLarge, match=refused):
        ops.full_attention_mask(np.ones(mask_shape, dtype=bool), query_shape[0], query_shape[1], query_shape[1])


def test_a_mask_of_five_axes_or_one_that_cannot_mask_the_scores_is_not_a_mask():
    from grader.judge.shared.mask import effective_mask

    budget.reset({"input_shape": [3, 6, 8]})
    for shape in ((1, 2, 6, 6, 6), (3, 1, 6, 5), (2, 6, 6)):
        with pytest.raises(ValueError):
            ops.full_attention_mask(np.ones(shape, dtype=bool), 3, 6, 6)
        assert effective_mask(_attention_step((3, 6, 8), shape)) is None
    # what the exercise's layers make is a mask: (B,1,S), (B,T,S), (T,S), 4-D with a heads axis
    for shape in ((3, 1, 6), (3, 6, 6), (6, 6), (3, 2, 6, 6), (1, 1, 1, 6)):
        assert ops.full_attention_mask(np.ones(shape, dtype=bool), 3, 6, 6).shape[-2:] == (6, 6)


def test_masking_the_scores_is_counted_before_it_runs():
    budget.reset({"input_shape": [3, 6, 8]})
    ops.full_attention_mask(np.ones((3, 2, 6, 6), dtype=bool), 3, 6, 6)
    assert budget._spent >= 3 * 2 * 6 * 6
