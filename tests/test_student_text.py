"""Every text a student is shown, by every writer, is bounded and stays text.

A verdict is made with every text a submission can shape at its maximum or beyond: the error (some
200 000 characters, as a syntax error quoting a huge line gives), each check's message (as long as a
judge lets one through),
each title, what the code printed, the submission's path and the id, each with many lines, line
breaks of every kind Python reads, control characters, characters that reorder text, and markup of
Rich, HTML and Markdown (``[bold]``, ``<script>``, fences, headings, underlines, tables). Each writer
that shows a student anything is fed it: Gradescope's results (as ``grade`` and ``grade batch``
write them), PrairieLearn's, the outputs of nbgrader's test cells, a student's page and the class
page of the class report.

The fields are not listed here: every string of each writer's JSON is walked (and a page's whole
text), so a field added later is checked too. Each source is written as units that name their source,
line and place (``zqe0003u012q``): whatever a writer does to the text around them (escapes, wraps,
prefixes, quoting it twice), the units a field holds say how much of each source it reveals, which
must be within that source's budget (``grader.protocol.text``): as many lines, and on each as many
units as its width holds. A Markdown field is rendered (CommonMark with tables and strikethrough) and
may hold only the elements the grader writes itself; no field holds a control character or a
character that reorders text; a page holds no element of the submission's.
"""

from __future__ import annotations

import html.parser
import itertools
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from grader.integrations import class_report, gradebook, platforms
from grader.integrations.discovery import Submission
from grader.integrations.outputs import Outputs, Result, refused_result
from grader.integrations.results import ClassResults
from grader.judging import exchange
from grader.judging.declarations import declared_checks
from grader import exercises
from grader.protocol import text
from grader.verdict import TOPICS, CheckResult, error_verdict, summarise

MARKUP = " [bold]<script>alert(1)</script> ```x``` ~~s~~ |a| **b** _c_ &amp; \x1b[31m\x07\x00\x9b\u202e\u2066\t"
LINE_STARTS = ["", "# ", "=== ", "- ", "1. ", "> ", "```", "~~~ ", "| --- | ", "    ", "<div onclick=x>", "***", "[x]: /y "]
BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
UNIT = re.compile(r"zq([a-z])(\d{4})u(\d{3})q")
UNIT_LENGTH = len(f"zqa0000u000q{MARKUP}")
# what no field may hold: control characters but the line break, and those that reorder text
HIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
# the elements the grader's own Markdown makes: bold labels, line breaks, code spans, the printed output
MARKDOWN_ELEMENTS = {"p", "strong", "br", "code", "pre"}
RENDER = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def source(key: str, lines: int, units: int | list[int], prefix: str = "") -> str:
    """A text of ``lines`` lines of ``units`` units each (or a count per line), its lines broken by
    every kind of line break in turn, some starting with markup."""
    counts = units if isinstance(units, list) else [units] * lines
    made = []
    for line, count in enumerate(counts[:lines]):
        start = LINE_STARTS[line % len(LINE_STARTS)]
        made.append(start + "".join(f"zq{key}{line:04d}u{unit:03d}q{MARKUP}" for unit in range(count)))
        made.append(BREAKS[line % len(BREAKS)])
    return prefix + "".join(made[:-1])


ERROR = source("e", 80, 34, "Your file has a SyntaxError at line 1, column 9: invalid syntax.\n")
OUTPUT = source("o", 40, 30)
PATH = "/class/" + source("f", 3, 40) + ".py"
IDENTITY = source("i", 2, 2)
REFUSED_PATH = "/class/" + source("r", 6, 30) + ".py"
KEYS = {"e": text.REASON, "o": text.PRINTED, "f": text.NAME, "i": text.NAME, "r": text.REASON}


def message(key: str, check: CheckResult) -> str:
    """A check's message as long as a judge lets one through: its labelled parts, lines wider than
    the budget, then more lines than it."""
    body = source(key, 1200, [20] * 10 + [1] * 1190)
    labelled = f"Expected: {source(key.upper(), 1, 3)}\nWhy it matters: it does.\nObserved: {body}"
    (sent,) = exchange.answer([replace(check, message=labelled)])["checks"]
    assert len(sent["message"]) < len(labelled)
    return sent["message"]


def verdicts() -> dict:
    declared = declared_checks(exercises.get("exercise3"))
    chosen = [next(d for d in declared if d["topic"] == topic) for topic in ("api", "weights", "mask", "forward")]
    checks = []
    for index, (declaration, status) in enumerate(zip(chosen, ("failed", "error", "timeout", "failed"))):
        message_key, title_key = "abcd"[index], "wxyz"[index]
        KEYS[message_key] = text.MESSAGE
        KEYS[message_key.upper()] = text.MESSAGE
        KEYS[title_key] = text.NAME
        check = CheckResult(declaration["id"], source(title_key, 3, 60), declaration["topic"], status, 0.0,
                            float(declaration["points"]), "")
        checks.append(replace(check, message=message(message_key, check)))
    context = {"title": "The Transformer encoder", "seed": 1, "output": OUTPUT}
    return {
        "failed": summarise("exercise3", PATH, checks, context, 23.0),
        "error": error_verdict("exercise3", PATH, ERROR, 23.0, dict(context)),
        "refused": refused_result("exercise3", Submission("r", Path(REFUSED_PATH), None, "is a symbolic link")).verdict,
    }


def strings(value, parent=None, key=None, root=None):
    """Every string of a writer's JSON, with the dict that holds it and its key."""
    root = value if root is None else root
    if isinstance(value, str):
        yield value, parent, key, root
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from strings(item, value, name, root)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item, parent, key, root)


def markdown(parent, key, root) -> bool:
    """Whether a platform renders this field as Markdown: its own ``<key>_format``, else the one the
    results give their tests' fields or their own."""
    if not isinstance(parent, dict) or key is None:
        return False
    root = root if isinstance(root, dict) else {}
    formats = [parent.get(f"{key}_format"), root.get(f"test_{key}_format") if parent is not root else None,
               root.get(f"{key}_format")]
    return next((f for f in formats if f), "text") == "md"


class Elements(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = set(), []

    def handle_starttag(self, tag, _attrs):
        self.tags.add(tag)

    def handle_data(self, data):
        self.text.append(data)


def parsed(page: str) -> Elements:
    elements = Elements()
    elements.feed(page)
    elements.close()
    return elements


def within_budgets(where: str, field: str) -> None:
    """The units of each source ``field`` holds are within that source's budget."""
    seen: dict[str, dict[int, set[int]]] = {}
    for found in UNIT.finditer(field):
        key, line, unit = found.group(1), int(found.group(2)), int(found.group(3))
        seen.setdefault(key, {}).setdefault(line, set()).add(unit)
    for key, lines in seen.items():
        budget = KEYS[key]
        assert len(lines) <= budget.lines, f"{where} shows {len(lines)} lines of {key!r}, beyond {budget}"
        for line, units in lines.items():
            assert len(units) <= budget.width // UNIT_LENGTH + 1, \
                f"{where} shows {len(units)} units of line {line} of {key!r}, beyond {budget}"


def shows_as_text(where: str, field: str, is_markdown: bool) -> None:
    assert not HIDDEN.search(field), f"{where} holds {HIDDEN.search(field).group()!r}"
    if is_markdown:
        elements = parsed(RENDER.render(field))
        assert elements.tags <= MARKDOWN_ELEMENTS, f"{where} renders {elements.tags - MARKDOWN_ELEMENTS}"
        if UNIT.search(field):
            assert "<script>alert(1)</script>" in "".join(elements.text), where


def every_field(name: str, written) -> int:
    count = 0
    for value, parent, key, root in strings(written):
        where = f"{name}: {key}"
        within_budgets(where, value)
        shows_as_text(where, value, markdown(parent, key, root))
        count += UNIT.search(value) is not None
    return count


@pytest.mark.parametrize("kind", ["failed", "error", "refused"])
def test_every_field_every_platform_shows_a_student_is_bounded_and_stays_text(kind, tmp_path):
    verdict = verdicts()[kind]
    shown = 0
    shown += every_field("Gradescope", platforms.gradescope_results(verdict, "visible"))
    shown += every_field("PrairieLearn", platforms.prairielearn_results(verdict))
    for topic in TOPICS:  # each test cell's outputs in nbgrader's feedback
        shown += every_field(f"nbgrader {topic}", [dict(output) for output in gradebook.topic_outputs(verdict, topic)])
    with Outputs(tmp_path) as outputs:  # grade batch's Gradescope file
        outputs.write(Result(Submission("alice", Path(verdict.submission)), verdict, 1.0))
    shown += every_field("grade batch's Gradescope file",
                         json.loads((tmp_path / "gradescope" / "alice" / "results.json").read_text(encoding="utf-8")))
    assert shown >= 3  # the submission's text does reach the student, within its bounds


def plain(value):
    """``value`` with every text a submission shaped replaced by plain words on two lines."""
    if isinstance(value, str):
        return "plain words\nmore plain words" if UNIT.search(value) else value
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


@pytest.mark.parametrize("kind", ["failed", "error", "refused"])
def test_a_student_s_page_and_the_class_page_show_the_same_bounds_as_text(kind):
    verdict = verdicts()[kind]
    record = dict(verdict.to_json(), id=IDENTITY, student=IDENTITY, seed=1, grader_version="1", manual_points=0.0,
                  graded_at="2025-01-01T00:00:00+00:00")

    def pages(record):
        return {"student's page": class_report.render_student(record, "exercise3"),
                "class page": class_report.render(ClassResults("/results", [record], {record["id"]: 1.0}, None))}

    plain_pages = pages(plain(record))
    for name, page in pages(record).items():
        assert "<script" not in page.lower() and "<div onclick" not in page.lower(), name
        elements = parsed(page)
        # no element but those the same page has for plain words
        assert elements.tags <= parsed(plain_pages[name]).tags, (name, elements.tags - parsed(plain_pages[name]).tags)
        page_text = "".join(elements.text)
        within_budgets(name, page_text)
        assert not HIDDEN.search(page_text.replace("\t", " ")), (name, HIDDEN.search(page_text).group())
        assert "[bold]" in page_text and "<script>alert(1)</script>" in page_text, name
        assert UNIT.search(page_text), name


def test_the_units_measure_what_a_field_reveals():
    """The measure itself: a field that quotes a source whole fails it, one ``shown`` passes it, and
    the markup check finds what unescaped text would render."""
    with pytest.raises(AssertionError, match="lines of 'e'"):
        within_budgets("whole", ERROR)
    within_budgets("shown", text.shown(ERROR, text.REASON))
    within_budgets("shown twice", text.shown(ERROR, text.REASON) * 2)
    with pytest.raises(AssertionError, match="renders"):
        shows_as_text("raw", "# a heading\n\n|a|b|\n|---|---|\n|c|d|", True)
    with pytest.raises(AssertionError, match="holds"):
        shows_as_text("raw", "\x1b[31m", False)
    shows_as_text("escaped", platforms.markdown_text(text.shown(ERROR, text.REASON)), True)
    assert len(list(itertools.islice(UNIT.finditer(ERROR), 3))) == 3
