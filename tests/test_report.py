"""The report is a pure function of the verdict, checked as text at a fixed width."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from grader.report import render
from grader.verdict import CheckResult, Verdict, error_verdict, summarise

CONTEXT = {"title": "The Transformer encoder", "seed": 0, "timeout": 120.0, "memory_mb": 4096,
           "python": "3.11.7", "tensorflow": "2.21.0", "keras": "3.15.1"}


def text(verdict, width=100, **view) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(render(verdict, **view))
    return console.file.getvalue()


def check(id, status, points=1, message=""):
    topic = id.split(".")[0]
    return CheckResult(id, f"title of {id}", topic, status, points if status == "passed" else 0, points, message)


def test_failed_check_shows_what_was_observed_expected_and_why():
    verdict = summarise("exercise3", "/work/ex.py", [
        check("api.constructor", "passed"),
        check("weights.two_norms", "failed", 2,
              "Observed: one LayerNormalization instance was called 2 times.\nExpected: two.\nWhy it matters: gamma."),
    ], CONTEXT)
    out = text(verdict)
    assert "exercise3 — The Transformer encoder" in out and "/work/ex.py" in out
    assert "seed 0" not in out and "TensorFlow" not in out  # the full header is one flag away
    detailed = text(verdict, details=True)
    assert "seed 0" in detailed and "TensorFlow 2.21.0" in detailed
    assert "✓" in out and "✗" in out
    assert "Observed: one LayerNormalization instance was called 2 times." in out
    assert "Why it matters: gamma." in out
    assert "Score 1/3" in out and "1 passed" in out and "1 failed" in out
    assert "weights.two_norms" in out.split("Score")[1]  # the summary says where to start
    assert out.index("API") < out.index("Weights")


def test_passed_checks_show_no_message_and_praise():
    out = text(summarise("exercise3", "x.py", [check("api.constructor", "passed", message="hidden")], CONTEXT))
    assert "hidden" not in out and "Every check passed" in out and "Score 1/1" in out


def test_repeated_skip_reasons_are_shown_once():
    reason = "Not checked: your code failed earlier (see check api.constructor)."
    verdict = summarise("exercise3", "x.py", [
        check("api.constructor", "failed", message="Observed: x\nExpected: y\nWhy it matters: z"),
        check("weights.two_norms", "skipped", message=reason),
        check("mask.masks_keys", "skipped", message=reason),
    ], CONTEXT)
    out = text(verdict)
    assert out.count("Not checked") == 1
    assert "2 skipped" in out


def test_timeout_and_error_statuses_have_their_own_marks():
    out = text(summarise("exercise3", "x.py", [
        check("mask.masks_keys", "timeout", message="Not checked: the grading time limit ran out."),
        check("forward.post_norm", "error", message="The grader could not finish this check."),
    ], CONTEXT))
    assert "⏱" in out and "1 timeout" in out and "1 error" in out


def test_error_verdict_shows_the_problem_instead_of_checks():
    out = text(error_verdict("exercise3", "x.py", "Your file has a SyntaxError at line 3, column 9.", 23, CONTEXT))
    assert "Could not grade this submission" in out
    assert "SyntaxError at line 3" in out and "Score 0/23" in out


def test_rendering_fits_the_width():
    verdict = summarise("exercise3", "x.py", [check("forward.post_norm", "failed", 3, "Observed: " + "word " * 80)], CONTEXT)
    assert all(len(line) <= 60 for line in text(verdict, width=60).splitlines())


def test_verdict_json_keeps_the_contract_fields_only():
    verdict = summarise("exercise3", "x.py", [check("api.constructor", "passed")], CONTEXT)
    assert set(verdict.to_json()) == {"version", "exercise", "submission", "status", "score", "max_score", "error",
                                      "checks", "backend"}
    assert isinstance(verdict, Verdict) and verdict.exit_code == 0


def test_checks_a_failure_kept_from_running_are_one_line_under_it():
    crash = "Your code raised ValueError when first called:\n  ValueError: boom\n  at line 9, in call: x = y"
    verdict = summarise("exercise3", "x.py", [
        check("api.output_shape", "failed", message=crash),
        CheckResult("weights.two_norms", "title of weights.two_norms", "weights", "skipped", 0, 2,
                    "Not checked: your code raised ValueError (see check api.output_shape).", "api.output_shape"),
        CheckResult("mask.masks_keys", "title of mask.masks_keys", "mask", "skipped", 0, 2,
                    "Not checked: your code raised ValueError (see check api.output_shape).", "api.output_shape"),
    ], CONTEXT)
    out = text(verdict, width=80)
    assert out.count("ValueError: boom") == 1
    flat = " ".join(out.split())
    assert "not checked because of this: weights.two_norms, mask.masks_keys (4 more point(s))." in flat
    assert "title of weights.two_norms" not in out  # collapsed, not repeated as rows
    assert "– Weights 0/2" in out and "(see api.output_shape above)" in out.split("Weights")[1].splitlines()[0]


def test_an_explanation_is_given_once_and_referred_to_after():
    why = "Why it matters: each norm learns its own gamma and beta."
    verdict = summarise("exercise3", "x.py", [
        check("weights.two_norms", "failed", 2, "Observed: shared.\nExpected: two.\n" + why),
        check("gradients.norms_differ", "failed", 1, "Observed: one gradient.\nExpected: two.\n" + why),
    ], CONTEXT)
    out = text(verdict, width=80)
    assert out.count("each norm learns its own gamma and beta") == 1
    assert "Observed: one gradient." not in out  # one cause, told once
    assert "Also fails: gradients.norms_differ" in out
    every = text(verdict, width=80, all_checks=True)
    assert every.count("each norm learns its own gamma and beta") == 1
    assert "Same cause as weights.two_norms." in every


def test_check_ids_never_wrap_at_80_columns():
    long_title = "A title long enough to need more than one line at eighty columns of terminal width"
    verdict = summarise("exercise3", "x.py", [
        CheckResult("mask.attention_mask_shape", long_title, "mask", "passed", 1, 1, ""),
        CheckResult("weights.norm_parameters", long_title, "weights", "passed", 1, 1, ""),
    ], CONTEXT)
    out = text(verdict, width=80, all_checks=True)
    lines = out.splitlines()
    assert any("mask.attention_mask_shape 1/1" in line for line in lines)
    assert any("weights.norm_parameters 1/1" in line for line in lines)
    assert all(len(line) <= 80 for line in lines)


def test_error_messages_lose_tensorflow_internals_and_gain_the_graders_words():
    from grader.judge.advice import parts_of
    from grader.judge.evidence import clean_message, format_student_error

    raw = ("{{function_node __wrapped__AddV2_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
           "Incompatible shapes: [3,6,8] vs. [3,6,16] [Op:AddV2] name: ")
    assert clean_message(raw) == "Incompatible shapes: [3,6,8] vs. [3,6,16]"
    shown = format_student_error("Your code raised InvalidArgumentError", {
        "type": "InvalidArgumentError", "message": raw,
        "student_frames": [{"line": 78, "function": "call", "code": "return self.norm(a + b)"}]})
    assert "function_node" not in shown and "job:localhost" not in shown
    assert "at line 78, in call: return self.norm(a + b)" in shown
    assert "(3,6,8) and (3,6,16)" in shown and "embed_dim" not in shown  # no exercise: no part named
    encoder = format_student_error("Your code raised InvalidArgumentError", {
        "type": "InvalidArgumentError", "message": raw,
        "student_frames": [{"line": 78, "function": "call", "code": "return self.norm(a + b)"}]},
        parts_of({"dims": {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}}))
    assert "last Dense of the feed-forward" in encoder and "axes a mask was expanded on" in encoder
    embedding = format_student_error("Your code raised InvalidArgumentError", {
        "type": "InvalidArgumentError", "message": "Incompatible shapes: [3,7,8] vs. [10,8]",
        "student_frames": [{"line": 40, "function": "call", "code": "return a + b"}]},
        parts_of({"dims": {"sequence_length": 10, "input_dim": 50, "output_dim": 8}}))
    assert "positions cover only the input's length" in embedding
    assert "feed-forward" not in embedding and "mask" not in embedding
    keras2 = format_student_error("Your code raised TypeError", {
        "type": "TypeError", "message": "MultiHeadAttention.call() got multiple values for argument 'query_mask'"})
    assert "fourth positional argument is query_mask" in keras2
    no_super = format_student_error("Your code raised RuntimeError", {
        "type": "RuntimeError", "message": "In layer 'X', you forgot to call `super().__init__()` as the first "
                                           "statement in the `__init__()` method. Go add it!"})
    assert "super().__init__(**kwargs) as the first line" in no_super
    keras_tensor = format_student_error("Your code raised ValueError", {
        "type": "ValueError", "message": "A KerasTensor cannot be used as input to a TensorFlow function."})
    assert "keras.ops" in keras_tensor


def test_verdict_json_has_no_field_outside_the_contract():
    verdict = summarise("exercise3", "x.py", [
        CheckResult("weights.two_norms", "t", "weights", "skipped", 0, 2, "Not checked (see check api.x).", "api.x")],
        CONTEXT)
    assert set(verdict.to_json()["checks"][0]) == {"id", "title", "topic", "status", "points", "max_points",
                                                   "message"}


def test_in_watch_mode_the_footer_says_to_save_again():
    verdict = summarise("exercise3", "x.py", [check("api.constructor", "failed", message="Observed: x")],
                        dict(CONTEXT, watching=True))
    out = text(verdict)
    assert "save: the grader runs again." in out and "run the grader again" not in out


def test_grade_list_keeps_whole_words_at_80_columns():
    from grader.report import progress_table

    states = [{"id": "exercise2", "title": "A self-attention block", "state": "failing", "score": (3, 19),
               "next": "weights.one_norm: One LayerNormalization with trainable gamma and beta"}]
    console = Console(file=io.StringIO(), width=80, color_system=None)
    console.print(progress_table(states))
    out = console.file.getvalue()
    assert "self-attention" in out and "…" not in out


def test_what_a_submission_printed_or_raised_cannot_drive_the_terminal():
    from grader.integrations.outputs import Result
    from grader.integrations.discovery import Submission
    from grader.report import batch_summary

    escape = "\x1b[2J\x1b[H\x1b[32mScore 23/23 passed\x1b]0;title\x07"
    failing = summarise("exercise3", "/work/ex.py", [check("forward.post_norm", "failed", 3, f"Observed: {escape}")],
                        dict(CONTEXT, output=f"printed {escape}\n", tensorflow=escape))
    broken = error_verdict("exercise3", "/work/ex.py", f"Importing your file raised an error: {escape} [bold]x[/bold]",
                           23, CONTEXT)
    for verdict in (failing, broken):
        out = text(verdict)
        assert "\x1b" not in out and "\x07" not in out
        assert "\\x1b[2J" in out  # shown, as an escape, not obeyed
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(batch_summary([Result(Submission("m\x1b[2Jallory", Path("/x.py")), broken,
                                        1.0)], "out"))
    out = console.file.getvalue()
    assert "\x1b" not in out and "[bold]x[/bold]" in out  # and Rich markup in it is text
    assert broken.error.startswith("Importing") and "\x1b" in broken.error  # the verdict keeps what was said


def test_markup_in_a_file_name_or_a_version_is_shown_as_text():
    name = "/work/[link=https://example.com]ex[/link][8]hidden.py"
    verdict = summarise("exercise3", name, [check("api.constructor", "passed")],
                        dict(CONTEXT, tensorflow="[blink]2.21[/blink]", sandbox="[red]none[/red]"))
    console = Console(file=io.StringIO(), width=200, force_terminal=True, color_system="standard")
    console.print(render(verdict, details=True))
    out = console.file.getvalue()
    assert "\x1b]8" not in out and "\x1b[8m" not in out and "\x1b[5m" not in out  # no link, no concealed text
    plain = text(verdict, width=200, details=True)
    assert "[link=https://example.com]ex[/link][8]hidden.py" in plain and "[blink]2.21[/blink]" in plain


SANDBOX = {"sandbox": "Landlock ABI 7: writes only in its scratch folder; seccomp: no sockets of any kind",
           "confinement": {"refused": {}}}


def test_the_header_is_three_lines_with_the_sandbox_in_a_word():
    verdict = summarise("exercise3", "/work/exercises/exercise3.py", [check("api.constructor", "passed")],
                        dict(CONTEXT, **SANDBOX))
    for width in (80, 100):
        out = text(verdict, width=width)
        head = out.split("✓ API")[0].splitlines()
        assert len(head) <= 3, head
        assert "Score 1/1" in head[0] and "sandboxed" in head[0] and "partly" not in out
        assert "Landlock" not in out and "seccomp" not in out
    assert "Landlock ABI 7" in text(verdict, details=True)
    partly = summarise("exercise3", "x.py", [check("api.constructor", "passed")],
                       dict(CONTEXT, sandbox="Landlock ABI 7; not applied: seccomp (refused)",
                            confinement={"refused": {"seccomp": "refused"}}))
    assert "partly sandboxed: see --details" in text(partly).splitlines()[0]


def test_a_topic_that_passed_is_one_line_unless_every_check_is_asked_for():
    checks = [check(f"config.c{i}", "passed") for i in range(4)] + [check("mask.m", "failed", 2, "Observed: x")]
    verdict = summarise("exercise3", "x.py", checks, CONTEXT)
    out = text(verdict)
    assert "✓ Config 4/4" in out and "title of config.c0" not in out
    assert "✗ Mask 0/2" in out and "title of mask.m" in out
    every = text(verdict, all_checks=True)
    assert all(f"title of config.c{i}" in every for i in range(4))


CRASH = ("Your code raised ValueError {where}:\n  ValueError: A KerasTensor cannot be used as input to a "
         "TensorFlow function.\n  at line 56, in compute_mask: return tf.math.not_equal(inputs, 0)")


def test_a_crash_that_stops_several_checks_is_told_once_and_started_with():
    verdict = summarise("exercise1", "x.py", [
        check("api.constructor", "passed"),
        check("mask.functional", "failed", 1, CRASH.format(where="when used in a functional model")),
        check("config.keras_file", "failed", 1, CRASH.format(where="while saving to a .keras file")),
    ], CONTEXT)
    for width in (80, 100):
        out = text(verdict, width=width)
        assert out.count("at line 56, in compute_mask") == 1
        flat = " ".join(out.split())
        assert "Also fails: config.keras_file" in flat
        footer = flat.split("Start with")[1]
        # the check of the method that raised (compute_mask), though the save's check is shown first
        assert "(mask.functional)" in footer and "config.keras_file" not in footer
        assert flat.count("Start with") == 1


def test_no_long_line_is_printed_twice():
    why = "Why it matters: " + "each norm learns its own gamma and beta, fitted to its own input. " * 3
    verdict = summarise("exercise3", "x.py", [
        check("weights.two_norms", "failed", 2, "Observed: shared.\nExpected: two.\n" + why),
        check("weights.norm_parameters", "failed", 1, "Observed: same gamma.\nExpected: own.\n" + why),
        check("gradients.norms_differ", "failed", 1, "Observed: one gradient.\nExpected: two.\n" + why),
    ], CONTEXT)
    lines = [line.strip() for line in text(verdict).splitlines() if len(line.strip()) > 40]
    assert len(lines) == len(set(lines))


def test_a_passing_report_says_what_to_do_next():
    from grader.exercises import tracks

    def footer(exercise, **view):
        out = text(summarise(exercise, "x.py", [check("api.constructor", "passed")], CONTEXT), **view)
        return " ".join(out.split("Every check passed")[1].split())

    assert "Well done." in footer("exercise3") and "grade" not in footer("exercise3")  # only the step it is given
    assert "grade explain exercise3" in footer("exercise3", next_step=tracks.next_step("exercise3"))
    for track in tracks.TRACKS:
        for earlier, later in zip(track.exercises, track.exercises[1:]):
            assert f"grade {later}" in footer(earlier, next_step=tracks.next_step(earlier)), (earlier, later)
        last = footer(track.exercises[-1], next_step=tracks.next_step(track.exercises[-1]))
        assert "last exercise" in last and "grade exercise" not in last and "grade ch15" not in last
    assert "encoder" in tracks.next_step(tracks.get("2").exercises[-1])


def test_every_report_a_student_reads_gives_the_next_step(tmp_path, monkeypatch):
    """The terminal's report (``grade``, ``--watch``) and a student's page of the class report."""
    from grader import exercises
    from grader.cli.grading import grade_and_show
    from grader.integrations.class_report import render_student

    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    verdict = summarise("exercise1", "x.py", [check("api.constructor", "passed")], CONTEXT)
    console = Console(file=io.StringIO(), width=100, color_system=None, legacy_windows=False)
    grade_and_show(exercises.get("exercise1"), tmp_path / "x.py", None, console, grader=lambda *args: verdict)
    assert "`grade exercise2`" in console.file.getvalue()
    page = render_student(dict(verdict.to_json(), id="ada"), "exercise1")
    assert "grade exercise2" in page


def test_the_batch_summary_names_each_submission_by_its_first_cause():
    from grader.integrations.outputs import Result
    from grader.integrations.discovery import Submission
    from grader.report import batch_summary

    crash = CRASH.format(where="when used in a functional model")
    verdict = summarise("exercise1", "/x.py", [
        check("mask.functional", "failed", 1, crash),
        check("config.keras_file", "failed", 1, CRASH.format(where="while saving to a .keras file")),
    ], CONTEXT)
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(batch_summary([Result(Submission("alice", Path("/x.py")), verdict, 1.0)], "out"))
    assert "mask.functional: title of mask.functional" in console.file.getvalue()


@pytest.mark.parametrize("error, headline", [
    ("Importing your file raised an error:\n  NameError: name 'x' is not defined\n  at line 12, in <module>: print(x)",
     "NameError: name 'x' is not defined at line 12"),
    ("Importing your file raised an error:\n  ValueError: bad\n  at code cell 2, line 3, in helper: f()\n"
     "  at code cell 2, line 9, in <module>: helper()", "ValueError: bad at code cell 2, line 9"),
    ("Your file exercise3.py has a SyntaxError at line 4, column 13: '(' was never closed.\n    def call(\n    ^",
     "Your file exercise3.py has a SyntaxError at line 4, column 13: '(' was never closed."),
])
def test_an_error_row_of_the_batch_summary_says_what_failed(error, headline):
    from grader.integrations.outputs import Result
    from grader.integrations.discovery import Submission
    from grader.report import batch_summary

    broken = error_verdict("exercise3", "/x.py", error, 23, CONTEXT)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(batch_summary([Result(Submission("alice", Path("/x.py")), broken, 1.0)], "out"))
    row = next(line for line in console.file.getvalue().splitlines() if "alice" in line)
    assert headline in row


def test_a_topic_failing_because_of_a_later_check_points_down_to_it():
    verdict = summarise("exercise1", "x.py", [
        check("gradients.used_rows", "failed", 1, "Observed: row 7.\nExpected: rows 0-6.\nWhy it matters: a."),
        check("forward.sum", "failed", 3, "Observed: numbered from 1.\nExpected: from 0.\nWhy it matters: b."),
    ], CONTEXT)
    out = text(verdict)
    assert "(see forward.sum below)" in out.split("Gradients")[1].splitlines()[0]
    assert "Also fails: gradients.used_rows" in out
