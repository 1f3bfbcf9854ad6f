"""One cause, told once: the grouping of failed checks, and every output that lists checks."""

from __future__ import annotations

import pytest

from grader.causes import root_causes, told_once
from grader.notebook import topic_report
from grader.integrations.platforms import gradescope_results, prairielearn_results
from grader.verdict import CheckResult, summarise

CONTEXT = {"title": "The Transformer encoder", "seed": 0, "timeout": 120.0, "memory_mb": 4096}
SHARED = "Why it matters: Each LayerNormalization learns its own scale (gamma) and shift (beta), fitted to its input."
CRASH = ("Your code raised ValueError {where}:\n  ValueError: A KerasTensor cannot be used as input to a TensorFlow "
         "function.\n  at line 56, in compute_mask: return tf.math.not_equal(inputs, 0)")


def check(id, status, points=1.0, message="", cause=None):
    return CheckResult(id, f"title of {id}", id.split(".")[0], status, points if status == "passed" else 0.0,
                       points, message, cause)


def shared_norm_verdict():
    return summarise("exercise3", "x.py", [
        check("api.output_shape", "passed"),
        check("gradients.norms_differ", "failed", 1, "Observed: one gradient.\nExpected: two.\n" + SHARED),
        check("weights.two_norms", "failed", 2, "Observed: one instance called twice.\nExpected: two.\n" + SHARED),
        check("weights.trainable_list", "failed", 1, "Observed: 14 weights.\nExpected: 16.\n" + SHARED),
        check("config.from_config", "failed", 1, "Observed: renamed.\nExpected: the name.\nWhy it matters: names."),
        check("mask.masks_keys", "skipped", 2, "Not checked: your code failed earlier (see check weights.two_norms).",
              "weights.two_norms"),
    ], CONTEXT)


def test_checks_failing_for_one_reason_are_one_cause_rooted_at_the_first_in_report_order():
    causes = root_causes(shared_norm_verdict().checks)
    assert [c.root.id for c in causes] == ["weights.two_norms", "config.from_config"]
    first = causes[0]
    assert [c.id for c in first.also] == ["weights.trainable_list", "gradients.norms_differ"]
    assert [c.id for c in first.unchecked] == ["mask.masks_keys"]
    assert sum(c.max_points - c.points for c in first.checks) == 6


def test_the_same_crash_in_two_checks_and_a_check_named_as_the_reason_join_one_cause():
    checks = [
        check("mask.functional", "failed", 1, CRASH.format(where="when used in a functional model")),
        check("config.keras_file", "failed", 1, "Observed: your layer raised on saving:\n" + CRASH.format(where="")),
        check("forward.sum", "failed", 1, "Observed: wrong.\nExpected: right.\nWhy it matters: See mask.functional."),
        check("forward.other", "failed", 1, "Observed: wrong.\nExpected: right.\nWhy it matters: a different reason."),
    ]
    causes = root_causes(checks)
    # told by the check of the method it crashed in (compute_mask: the mask), not the first in report order
    assert [c.root.id for c in causes] == ["mask.functional", "forward.other"]
    assert [c.id for c in causes[0].also] == ["config.keras_file", "forward.sum"]


def test_a_check_whose_failure_explains_another_tells_their_cause_wherever_it_is_listed():
    checks = [
        check("config.keras_file", "failed", 1, CRASH.format(where="while saving")),
        check("config.own_keys", "failed", 1, "Observed: input_dim is missing.\nExpected: it.\nWhy it matters: x."),
        check("mask.values", "failed", 1, "Observed: inverted.\nExpected: not.\nWhy it matters: y."),
    ]
    causes = root_causes(checks)
    assert [(c.root.id, [a.id for a in c.also]) for c in causes] == [
        ("config.own_keys", ["config.keras_file"]), ("mask.values", [])]


def test_platforms_and_notebook_cells_tell_each_cause_once():
    verdict = shared_norm_verdict()
    told = told_once(verdict.checks)
    assert told["weights.two_norms"].count("learns its own scale") == 1
    assert "Also fails because of this: weights.trainable_list, gradients.norms_differ." in told["weights.two_norms"]
    assert told["gradients.norms_differ"].startswith("Same cause as weights.two_norms")
    assert told["config.from_config"] == verdict.checks[4].message

    gradescope = "\n".join(t["output"] for t in gradescope_results(verdict)["tests"])
    assert gradescope.count("learns its own scale") == 1 and gradescope.count("Same cause as weights") == 2
    prairielearn = "\n".join(t["message"] for t in prairielearn_results(verdict)["tests"])
    assert prairielearn.count("learns its own scale") == 1
    cells = []
    for topic in ("weights", "gradients"):
        lines, failure, _ = topic_report(verdict, topic)
        cells.append("\n".join(lines) + (failure or ""))
    assert "".join(cells).count("learns its own scale") == 1
    assert "Same cause as weights.two_norms" in cells[1]
    # the verdict keeps every check's own message: the grouping is how it is told
    assert [c.message.count("learns its own scale") for c in verdict.checks[1:4]] == [1, 1, 1]
    assert len(verdict.to_json()["checks"]) == 6


def test_a_check_skipped_because_of_a_skipped_check_points_to_the_failure_at_the_end_of_the_chain():
    from grader.judging.plugin import follow_causes

    nan = "Not checked: your layer's output holds NaN or infinite values (see api.output_shape)."
    unverified = "Not checked: the grader could not verify your layer's computation (see forward.decoder)."
    results = follow_causes([
        check("api.output_shape", "failed", 1, "Observed: NaN.\nExpected: finite numbers.\nWhy it matters: NaNs."),
        check("weights.three_norms", "skipped", 2, unverified, "forward.decoder"),
        check("forward.decoder", "skipped", 2, nan, "api.output_shape"),
        check("mask.causal", "skipped", 2, "Not checked: a loop (see mask.lengths).", "mask.lengths"),
        check("mask.lengths", "skipped", 1, "Not checked: a loop (see mask.causal).", "mask.causal"),
        check("forward.inference", "skipped", 1, "Not checked: nothing failed (see config.keras_file).",
              "config.keras_file"),
        check("config.keras_file", "skipped", 1, "Not checked: the grader's limit."),
    ])
    by_id = {r.id: r for r in results}
    assert [r.id for r in results][:3] == ["api.output_shape", "weights.three_norms", "forward.decoder"]
    assert by_id["weights.three_norms"].cause == "api.output_shape" and by_id["weights.three_norms"].message == nan
    assert by_id["forward.decoder"].message == nan
    # a chain that comes back on itself, or ends at no failure, is left as it was
    assert by_id["mask.causal"].cause == "mask.lengths" and by_id["mask.lengths"].cause == "mask.causal"
    assert by_id["forward.inference"].cause == "config.keras_file"


def test_shapes_that_name_a_swapped_cross_attention_say_so_and_nothing_generic():
    """A tensor of the encoder's length where the target's belongs is the cross-attention's query and
    value swapped, told by the shapes alone: a residual sum of both lengths, or scores whose queries
    are the encoder's. Other mismatches keep the exercise's checklist."""
    from grader.judge.advice import parts_of, shape_mismatch

    decoder = parts_of({"dims": {"embed_dim": 8, "dense_dim": 16, "num_heads": 2},
                        "input_shape": [3, 5, 8], "encoder_shape": [3, 7, 8]})
    residual = shape_mismatch("3,5,8", "3,7,8", "x + crossed", decoder)
    assert "this one's query was the encoder outputs" in residual and "Check the width" not in residual
    scores = shape_mismatch("3,2,7,5", "3,1,1,7", "", decoder)
    assert "scores of 7 queries by 5 keys" in scores and "Check the width" not in scores
    for left, right in (("3,5,8", "3,5,16"), ("3,2,5,7", "3,1,1,5"), ("5", "7")):  # a width; a mask; unclear
        assert "Check the width of the last Dense" in shape_mismatch(left, right, "", decoder)
    encoder = parts_of({"dims": {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}, "input_shape": [3, 5, 8]})
    assert "cross_attention" not in encoder and "query" not in shape_mismatch("3,5,8", "3,7,8", "", encoder)


@pytest.mark.parametrize("exercise_id, residuals", [
    ("exercise3", "the attention residual, the feed-forward residual"),
    ("ch15_encoder", "the attention residual, the feed-forward residual"),
    ("exercise4", "the self-attention residual, the cross-attention residual, the feed-forward residual"),
    ("ch15_decoder", "the self-attention residual, the cross-attention residual, the feed-forward residual"),
])
def test_a_shared_norm_is_explained_by_the_exercises_own_residuals(catalog_verdicts, exercise_id, residuals):
    """The decoder's three residual blocks, not the encoder's two: no sentence about parts the layer lacks."""
    failed = [c for c in catalog_verdicts[(exercise_id, "mistake_shared_norm")].checks if c.status == "failed"]
    assert failed and residuals in failed[0].message


def test_a_lambda_of_a_python_lambda_is_told_why_it_does_not_load_and_what_does(catalog_verdicts):
    """Keras refuses to load a Python lambda's bytecode without safe_mode=False: the student is told so,
    with the two ways that load anywhere; a long error line is cut after a word, never inside one."""
    checks = {c.id: c for c in catalog_verdicts[("exercise5", "mistake_lambda_layer_drops_the_mask")].checks}
    message = checks["config.keras_file"].message
    assert "safe_mode=False" in message and "register_keras_serializable" in message and "a layer of your own" in message
    from grader.judge.evidence import _first_lines

    assert _first_lines("deserialization " * 40).endswith("deserialization [… cut]")  # after a word, not inside


def test_a_cell_tells_the_checks_a_crash_kept_from_running_in_one_line_as_the_terminal_does():
    """After a crash every later check is skipped for one reason: the terminal report says it once,
    and so does each topic's test cell, naming the checks it kept from running in one line."""
    from grader.report import unchecked_words

    reason = "Not checked: your code failed earlier, while being constructed (see check api.constructor)."
    crash = CRASH.format(where="while being constructed")
    kept = [check(f"weights.{name}", "skipped", 1, reason, "api.constructor")
            for name in ("two_norms", "norm_parameters", "trainable_list")]
    verdict = summarise("exercise3", "x.py", [check("api.constructor", "failed", 1, crash), *kept,
                                              check("mask.masks_keys", "skipped", 2, reason, "api.constructor")],
                        CONTEXT)
    lines, failure, points = topic_report(verdict, "weights")
    assert lines == [] and points == 0.0
    assert failure.count("Not checked") == 1
    assert f"weights.two_norms, weights.norm_parameters, weights.trainable_list: {reason}" in failure.splitlines()
    assert unchecked_words(kept) == "weights.two_norms, weights.norm_parameters, weights.trainable_list"
    # every check keeps its own line with its points; a reason of one check is told as before
    assert failure.count("0/1") == 3
    lines, failure, _ = topic_report(verdict, "mask")
    assert f"title of mask.masks_keys (mask.masks_keys, skipped):\n{reason}" in failure
