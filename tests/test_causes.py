"""One cause, told once: the grouping of failed checks, and every output that lists checks."""

from __future__ import annotations

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
    assert [c.root.id for c in causes] == ["config.keras_file", "forward.other"]  # the first in report order
    assert [c.id for c in causes[0].also] == ["mask.functional", "forward.sum"]


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
    from grader.judge.plugin import follow_causes

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
