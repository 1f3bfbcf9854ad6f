"""Renders a Verdict as Rich renderables. Pure: verdict in, renderable out.

Only this module imports Rich for grading output; the CLI prints what it returns.
"""

from __future__ import annotations

import dataclasses
import re

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .verdict import TOPICS, Verdict

STATUS_STYLE = {
    "passed": ("✓", "green"),
    "failed": ("✗", "red"),
    "error": ("!", "magenta"),
    "timeout": ("⏱", "yellow"),
    "skipped": ("–", "dim"),
}

TOPIC_TITLES = {
    "api": "API — names, signatures and shapes",
    "weights": "Weights — which variables exist",
    "gradients": "Gradients — what learns",
    "config": "Config — rebuilding and saving",
    "mask": "Mask — padding stays invisible",
    "forward": "Forward pass — what is computed",
}


# Control characters other than newline and tab: a submission's output or error message could
# otherwise clear the screen, move the cursor or rewrite earlier lines of the report.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab shown as an escape (\\x1b), and
    the bytes of a file name that are not UTF-8 (kept by Python as surrogates) as \\udcXX."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # a file name's bytes that are not UTF-8
    return CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def _printable_value(value):
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {key: _printable_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_printable_value(item) for item in value)
    return value


def displayed(verdict: Verdict) -> Verdict:
    """A copy of the verdict fit for a terminal: the texts a submission could have shaped made
    printable (the verdict's JSON keeps them as they were)."""
    checks = [dataclasses.replace(c, title=printable(c.title), message=printable(c.message)) for c in verdict.checks]
    return dataclasses.replace(verdict, submission=printable(verdict.submission),
                               error=printable(verdict.error) if verdict.error else verdict.error,
                               checks=checks, context=_printable_value(verdict.context))


def render(verdict: Verdict) -> RenderableType:
    verdict = displayed(verdict)
    parts: list[RenderableType] = [header(verdict)]
    if verdict.status == "error":
        parts.append(
            Panel(
                Text(verdict.error or "The submission could not be graded.", style="bold"),
                title="Could not grade this submission",
                title_align="left",
                border_style="magenta",
            )
        )
    else:
        caused = caused_by(verdict.checks)
        shown = Shown()
        for topic in TOPICS:
            checks = [c for c in verdict.checks if c.topic == topic and not _collapsed(c, caused)]
            if checks:
                parts.append(topic_table(topic, checks, shown, caused))
    if verdict.context.get("output"):
        parts.append(
            Panel(Text(verdict.context["output"], style="dim"), title="What your code printed",
                  title_align="left", border_style="dim")
        )
    parts.append(summary(verdict))
    return Group(*parts)


def header(verdict: Verdict) -> RenderableType:
    ctx = verdict.context
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("Exercise", Text(f"{verdict.exercise} — {ctx.get('title', '')}".rstrip(" —")))
    grid.add_row("Submission", Text(verdict.submission))
    settings = f"seed {ctx.get('seed')}, time limit {ctx.get('timeout'):g} s, memory limit {ctx.get('memory_mb')} MiB"
    grid.add_row("Settings", settings)
    versions = ", ".join(
        f"{name} {ctx[key]}" for name, key in (("Python", "python"), ("TensorFlow", "tensorflow"), ("Keras", "keras"))
        if ctx.get(key)
    )
    if versions:
        grid.add_row("Versions", Text(versions))
    if ctx.get("sandbox"):
        grid.add_row("Sandbox", Text(ctx["sandbox"]))
    return Panel(grid, title="Transformer exercises", title_align="left", border_style="blue")


def caused_by(checks) -> dict[str, list]:
    """Checks that could not run, grouped under the check whose failure explains them (followed
    through chains: a check skipped because of a skipped check goes to the root)."""
    by_id = {c.id: c for c in checks}
    groups: dict[str, list] = {}
    for check in checks:
        root, seen = check.cause, set()
        while root in by_id and by_id[root].cause and root not in seen:
            seen.add(root)
            root = by_id[root].cause
        if check.status == "skipped" and root in by_id and by_id[root].status != "passed":
            groups.setdefault(root, []).append(check)
    return groups


def _collapsed(check, caused: dict) -> bool:
    return any(check in group for group in caused.values())


class Shown:
    """What the report already said: a repeated skip reason or explanation is not said again."""

    def __init__(self):
        self.skips: set[str] = set()
        self.why: dict[str, str] = {}


def topic_table(topic: str, checks, shown: Shown, caused: dict | None = None) -> RenderableType:
    """One topic's checks: a row each (status, title, id — never wrapped — and points), and under a
    check that did not pass, its message and the checks it kept from running, across the full width."""
    from rich.padding import Padding

    caused = caused or {}
    parts: list[RenderableType] = [Text(TOPIC_TITLES.get(topic, topic), style="bold")]
    for c in checks:
        symbol, style = STATUS_STYLE.get(c.status, ("?", "white"))
        row = Table.grid(expand=True, padding=(0, 1))
        row.add_column(width=1, no_wrap=True)
        row.add_column(ratio=1)
        row.add_column(no_wrap=True, style="dim")
        row.add_column(justify="right", no_wrap=True)
        row.add_row(Text(symbol, style=style), Text(c.title), c.id,
                    Text(f"{_num(c.points)}/{_num(c.max_points)}", style=style))
        parts.append(Padding(row, (0, 0, 0, 1)))
        if c.status != "passed" and c.message:
            if c.status == "skipped":
                if c.message not in shown.skips:
                    parts.append(Padding(Text(c.message, style="dim"), (0, 0, 0, 4)))
                shown.skips.add(c.message)
            else:
                parts.append(Padding(message_text(c.message, style, shown, c.id), (0, 0, 0, 4)))
        if caused.get(c.id):
            group = caused[c.id]
            lost = sum(g.max_points for g in group)
            names = ", ".join(g.id for g in group)
            parts.append(Padding(Text(f"Not checked because of this ({len(group)} check(s), {_num(lost)} "
                                      f"point(s)): {names}.", style="dim"), (0, 0, 0, 4)))
    return Group(*parts)


def message_text(message: str, style: str, shown: Shown | None = None, check_id: str = "") -> Text:
    """A check's message, labels in bold; an explanation already given above is referred to."""
    text = Text()
    lines = message.splitlines()
    for index, line in enumerate(lines):
        if index:
            text.append("\n")
        if line.startswith("Why it matters:") and shown is not None:
            why = line[len("Why it matters:"):].strip()
            if why in shown.why:
                text.append("Why it matters:", style="bold")
                text.append(f" see {shown.why[why]} above.")
                continue
            shown.why[why] = check_id
        for label in ("Observed:", "Expected:", "Why it matters:"):
            if line.startswith(label):
                text.append(label, style=f"bold {style}" if label == "Observed:" else "bold")
                text.append(line[len(label):])
                break
        else:
            text.append(line)
    return text


def summary(verdict: Verdict) -> RenderableType:
    counts = {}
    for c in verdict.checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    line = Text()
    style = {"passed": "bold green", "failed": "bold red"}.get(verdict.status, "bold magenta")
    line.append(f"Score {_num(verdict.score)}/{_num(verdict.max_score)}", style=style)
    for status in ("passed", "failed", "error", "timeout", "skipped"):
        if counts.get(status):
            line.append(f"  ·  {counts[status]} {status}", style=STATUS_STYLE[status][1])
    if verdict.status == "passed":
        advice = "Every check passed. Well done."
    elif verdict.status == "error":
        advice = "Fix the problem above and " + ("save: the grader runs again." if verdict.context.get("watching")
                                                 else "run the grader again.")
    else:
        unfinished = [c for c in verdict.checks if c.status != "passed"]
        first = next((c for c in unfinished if c.status != "skipped"), unfinished[0])
        again = "save: the grader runs again." if verdict.context.get("watching") else "save, and run the grader again."
        advice = f"Start with “{first.title}” ({first.id}), {again}"
    return Panel(Group(line, Text(advice)), border_style=style.split()[-1])


def _num(value: float) -> str:
    return f"{value:g}"


STATE_STYLE = {"passed": "green", "failing": "red", "cannot be graded": "magenta", "not started": "dim",
               "missing": "magenta", "no workspace": "magenta"}


def progress_table(states: list[dict]) -> RenderableType:
    """``grade list``: one row per exercise with its state, score and next step."""
    table = Table(title="Transformer exercises", title_justify="left", expand=True)
    table.add_column("exercise", no_wrap=True)
    # wide enough for the longest word of a title, so titles wrap between words, never inside one
    longest = max((len(word) for row in states for word in str(row["title"]).split()), default=5)
    table.add_column("title", min_width=longest)
    table.add_column("state", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("next", ratio=1, overflow="fold")
    for row in states:
        score = f"{_num(row['score'][0])}/{_num(row['score'][1])}" if row.get("score") else ""
        style = STATE_STYLE.get(row["state"], "white")
        table.add_row(row["id"], row["title"], Text(row["state"], style=style), score, row["next"])
    done = sum(row["state"] == "passed" for row in states)
    return Group(table, Text(f"{done} of {len(states)} exercises passed.", style="bold"))


def batch_summary(results, out) -> RenderableType:
    """``grade batch``: counts, and a row per submission (the failing ones only, past 40)."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.verdict.status] = counts.get(result.verdict.status, 0) + 1
    rows = sorted(results, key=lambda r: r.submission.id)
    shown = rows if len(rows) <= 40 else [r for r in rows if r.verdict.status != "passed"]
    table = Table(title="Batch results" + (" (submissions that did not pass)" if shown is not rows else ""),
                  title_justify="left", expand=True)
    for column in ("id", "status", "score", "seconds"):
        table.add_column(column, no_wrap=True, justify="right" if column in ("score", "seconds") else "left")
    table.add_column("first problem", ratio=1, overflow="fold")
    for result in shown:
        verdict = displayed(result.verdict)
        first = next((c for c in verdict.checks if c.status not in ("passed", "skipped")), None)
        problem = verdict.error.splitlines()[0] if verdict.error else (f"{first.id}: {first.title}" if first else "")
        style = {"passed": "green", "failed": "red"}.get(verdict.status, "magenta")
        table.add_row(Text(printable(result.submission.id)), Text(verdict.status, style=style),
                      f"{_num(verdict.score)}/{_num(verdict.max_score)}", f"{result.seconds:.1f}", Text(problem))
    line = Text(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing graded")
    line.append(f"  ·  results in {out}", style="dim")
    return Group(table, line)
