"""The parent's work on one submission's replays is counted before each step runs."""

from __future__ import annotations

import numpy as np
import pytest

from grader.checks import budget, ops


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
    from grader.checks.plugin import classify

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
