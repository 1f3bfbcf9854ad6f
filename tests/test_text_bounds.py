"""A submission's text is bounded once, where it enters the grader, and every writer takes it whole.

Strings a grading process sends are cut to ``MAX_TEXT`` as their record arrives; a check's message is
cut by the judge to the limit the grader accepts; and each writer — the terminal report (Rich),
Gradescope's Markdown, PrairieLearn's JSON, the class page's HTML, the results' CSV and JSON — gets
adversarial text at those bounds (runs of backticks and brackets, markup of every kind, control
characters) and writes it as text. How long each writer takes at the bound, against half the
bound, is measured by benchmarks/text_writers.py (linear: about twice).
"""

from __future__ import annotations

import csv
import io
import json
import random
import re

import pytest
from rich.console import Console

from grader.integrations import platforms
from grader.protocol import limits, text
from grader.sandbox.evidence import ChildRun, RecordParser
from grader.verdict import CheckResult, summarise

# text a student's code can put in a message: an exception's name or message, a config value
ADVERSARIAL = {
    "backticks": "`" * limits.MAX_TEXT,
    "backtick_runs": "".join("`" * (i % 7 + 1) + "x" for i in range(limits.MAX_TEXT // 5)),
    "brackets": "[" * (limits.MAX_TEXT // 2) + "]" * (limits.MAX_TEXT // 2),
    "rich_markup": "[bold red]" * (limits.MAX_TEXT // 10),
    "html": "<script>alert(1)</script><img src=x onerror=alert(2)>" * (limits.MAX_TEXT // 50),
    "markdown": "# *_[x](javascript:alert(3))_* \\" * (limits.MAX_TEXT // 32),
    "control": "\x1b[31m\x1b]8;;http://x\x07link\x1b]8;;\x07\r\x00\x08" * (limits.MAX_TEXT // 30),
    "newlines": "\n" * limits.MAX_TEXT,
    "quotes": "\",'\n\"" * (limits.MAX_TEXT // 6),
}


def test_cut_keeps_within_its_limit_its_marker_included_and_ends_at_a_word():
    rng = random.Random(4)
    for _ in range(500):
        words = " ".join("x" * rng.randint(1, 60) for _ in range(rng.randint(1, 40)))
        limit = rng.randint(0, 400)
        cut = text.cut(words, limit)
        assert len(cut) <= limit and (cut == words or len(words) > limit)
        if len(words) > limit >= len(text.MARKER) + text.WORD_SEARCH:
            assert cut.endswith(text.MARKER)
    assert text.cut("alpha beta gamma delta", 17) == "alpha [… cut]"  # never "alpha bet"
    assert len(text.cut("y" * 50_002, limits.MAX_MESSAGE, "\n[… message cut]")) == limits.MAX_MESSAGE


def test_every_string_a_grading_process_sends_is_cut_where_its_record_arrives():
    record = {"event": "end", "phase": "load", "ok": False, "data": {"names": ["n" * 90_000]},
              "error": {"type": "`" * 60_000, "message": "m" * 60_000,
                        "student_frames": [{"line": 1, "function": "f" * 60_000, "code": "t" * 60_000}]}}
    parser = RecordParser(ChildRun())
    parser.feed(json.dumps(record).encode() + b"\n")
    parser.finish()
    arrived = parser.run.phases["load"]
    strings = [arrived["data"]["names"][0], *arrived["error"].values(), *arrived["error"]["student_frames"][0].values()]
    assert all(len(s) <= limits.MAX_TEXT for s in strings if isinstance(s, str))
    assert arrived["error"]["type"].startswith("`" * 100)


def _spans_by_the_rule(line: str) -> list[tuple[int, int]]:
    """Markdown's rule, written the slow way: a maximal run of backticks opens a span that the next
    run of the same length closes; a run with no such partner is text."""
    runs = [m.span() for m in re.finditer("`+", line)]
    spans, index = [], 0
    while index < len(runs):
        start, end = runs[index]
        partner = next((j for j in range(index + 1, len(runs)) if runs[j][1] - runs[j][0] == end - start), None)
        if partner is None:
            index += 1
        else:
            spans.append((start, runs[partner][1]))
            index = partner + 1
    return spans


def test_code_spans_are_paired_as_markdown_pairs_them_in_linear_time():
    rng = random.Random(7)
    for _ in range(3000):
        line = "".join(rng.choice("``a b") for _ in range(rng.randint(0, 24)))
        assert platforms.code_spans(line) == _spans_by_the_rule(line), line
    # the messages' own code stays code, and a lone backtick stays text
    assert platforms.markdown_text("call `super().__init__(**kwargs)` first") == \
        "call `super().__init__(**kwargs)` first"
    assert platforms.markdown_text("a ` b") == "a \\` b"


def _verdict_quoting(attack: str):
    message = f"Observed: your layer raised {attack}.\nExpected: {attack}\nWhy it matters: {attack}"
    message = text.cut(message, limits.MAX_MESSAGE)
    checks = [CheckResult("api.constructor", "The constructor", "api", "failed", 0.0, 1.0, message),
              CheckResult("config.own_keys", "Own keys", "config", "passed", 1.0, 1.0, "")]
    return summarise("exercise3", "/class/" + attack[:80] + ".py", checks,
                     {"title": "The Transformer encoder", "seed": 1, "timeout": 120.0, "memory_mb": 4096,
                      "output": text.cut(attack, 2000)})


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_every_writer_writes_adversarial_text_at_the_bound_as_text(name, tmp_path):
    from grader.integrations.class_report import e
    from grader.report import render

    attack = ADVERSARIAL[name]
    verdict = _verdict_quoting(attack)
    # Gradescope's Markdown: every character that Markdown or HTML would read is escaped or in a code span
    results = platforms.gradescope_results(verdict, "visible")
    for test in results["tests"]:
        rendered = test["output"]
        assert "<script" not in rendered and "<img" not in rendered
    json.dumps(results)
    # PrairieLearn: plain JSON of the same text
    assert json.loads(json.dumps(platforms.prairielearn_results(verdict)))["score"] == verdict.score / verdict.max_score
    # the class page's HTML: text, never a tag
    assert "<" not in e(attack) and ">" not in e(attack)
    # the terminal report at 80 columns: markup stays text, no escape sequence of the student's reaches it
    console = Console(file=io.StringIO(), width=80, color_system=None, force_terminal=False)
    console.print(render(verdict))
    drawn = console.file.getvalue()
    assert "\x1b" not in drawn and "\x07" not in drawn
    if name == "rich_markup":
        assert "[bold red]" in drawn
    # CSV and JSON round-trip the text unchanged
    buffer = io.StringIO()
    csv.writer(buffer).writerow([verdict.submission, verdict.checks[0].message])
    assert next(csv.reader(io.StringIO(buffer.getvalue()))) == [verdict.submission, verdict.checks[0].message]
    assert json.loads(json.dumps(verdict.to_json()))["checks"][0]["message"] == verdict.checks[0].message
