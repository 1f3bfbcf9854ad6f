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

from .causes import Cause, first_problem, root_causes
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


def render(verdict: Verdict, details: bool = False, all_checks: bool = False, next_step: str = "",
           notebook_call: str = "") -> RenderableType:
    """The report: a short header (``details``: the full one, with seed, versions and every sandbox
    measure), one line per topic, each cause of failure once with the checks it also fails, and
    what to do next. ``all_checks`` lists every check, passed ones included; ``next_step`` is what a
    passing report tells the student to do next (``grader.exercises.tracks.next_step``);
    ``notebook_call`` is the call that checks a notebook again (``grader.in_notebook``), which the
    advice then names instead of the command line."""
    verdict = displayed(verdict)
    parts: list[RenderableType] = [full_header(verdict) if details else header(verdict)]
    causes = root_causes(verdict.checks)
    if verdict.status == "error":
        parts.append(
            Panel(
                Text(verdict.error or "The submission could not be graded.", style="bold"),
                title="Could not grade this submission",
                title_align="left",
                border_style="magenta",
            )
        )
    elif all_checks:
        shown = Shown()
        for topic in TOPICS:
            checks = [c for c in verdict.checks if c.topic == topic]
            if checks:
                parts.append(topic_table(topic, checks, shown, causes))
    else:
        parts.append(topics_view(verdict, causes))
    if verdict.context.get("output"):
        parts.append(
            Panel(Text(verdict.context["output"], style="dim"), title="What your code printed",
                  title_align="left", border_style="dim")
        )
    parts.append(summary(verdict, causes, next_step, notebook_call))
    return Group(*parts)


BACKEND_TITLES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}


def sandbox_word(context: dict) -> str | None:
    """The sandbox in a word for the short header: every measure applied, or not (the full header
    lists them). None when no grading process reported its confinement."""
    described = context.get("sandbox")
    if not described:
        return None
    if context.get("confinement") and "not applied:" not in described:
        return "sandboxed"
    return "partly sandboxed: see --details"


def header(verdict: Verdict) -> RenderableType:
    """At most three lines: the exercise, the score and the sandbox in a word; the file."""
    ctx = verdict.context
    title = Text(f"{verdict.exercise} — {ctx.get('title', '')}".rstrip(" —"), style="bold")
    right = Text()
    if verdict.status != "error" or verdict.max_score:
        style = {"passed": "bold green", "failed": "bold red"}.get(verdict.status, "bold magenta")
        right.append(f"Score {_num(verdict.score)}/{_num(verdict.max_score)}", style=style)
    backend = ctx.get("backend")
    if backend and backend != "tensorflow":  # TensorFlow is the default; another backend is said
        right.append(f"  ·  on {BACKEND_TITLES.get(backend, printable(str(backend)))}", style="bold cyan")
    word = sandbox_word(ctx)
    if word:
        right.append(f"  ·  {word}", style="dim" if word == "sandboxed" else "yellow")
    grid = Table.grid(expand=True)
    grid.add_column(ratio=1)
    grid.add_column(justify="right", no_wrap=True)
    grid.add_row(title, right)
    path = Text(verdict.submission, style="dim", overflow="fold")
    return Group(grid, path, Text(""))


def full_header(verdict: Verdict) -> RenderableType:
    ctx = verdict.context
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("Exercise", Text(f"{verdict.exercise} — {ctx.get('title', '')}".rstrip(" —")))
    grid.add_row("Submission", Text(verdict.submission))
    settings = f"seed {ctx.get('seed')}, time limit {ctx.get('timeout'):g} s, memory limit {ctx.get('memory_mb')} MiB"
    grid.add_row("Settings", settings)
    versions = ", ".join(
        f"{name} {ctx[key]}" for name, key in (("Python", "python"), ("TensorFlow", "tensorflow"), ("JAX", "jax"),
                                               ("PyTorch", "torch"), ("Keras", "keras"))
        if ctx.get(key)
    )
    if ctx.get("backend"):
        grid.add_row("Backend", Text(BACKEND_TITLES.get(ctx["backend"], str(ctx["backend"]))))
    if versions:
        grid.add_row("Versions", Text(versions))
    if ctx.get("sandbox"):
        grid.add_row("Sandbox", Text(ctx["sandbox"]))
    return Panel(grid, title="Transformer exercises", title_align="left", border_style="blue")


TOPIC_NAMES = {topic: title.split(" — ")[0] for topic, title in TOPIC_TITLES.items()}


def topics_view(verdict: Verdict, causes: list[Cause]) -> RenderableType:
    """One line per topic (its mark, name and points); under the topic of a cause's first check,
    that cause once: the check, its message, and the other checks it fails in one line."""
    parts: list[RenderableType] = []
    shown = Shown()
    rooted: dict[str, list[Cause]] = {}
    for cause in causes:
        rooted.setdefault(cause.root.topic, []).append(cause)
    owner = {c.id: cause.root for cause in causes for c in cause.checks}
    order = [*TOPICS, *sorted({c.topic for c in verdict.checks} - set(TOPICS))]
    for topic in order:
        checks = [c for c in verdict.checks if c.topic == topic]
        if not checks:
            continue
        earned, total = sum(c.points for c in checks), sum(c.max_points for c in checks)
        passed = all(c.status == "passed" for c in checks)
        line = Text()
        if passed:
            line.append("✓", style="green")
        else:
            statuses = [c.status for c in checks if c.status != "passed"]
            status = next((s for s in ("failed", "error", "timeout") if s in statuses), "skipped")
            symbol, style = STATUS_STYLE[status]
            line.append(symbol, style=style)
        line.append(f" {TOPIC_NAMES.get(topic, topic)}", style="bold")
        line.append(f" {_num(earned)}/{_num(total)}")
        line.append(f"  {TOPIC_TITLES.get(topic, topic).partition(' — ')[2]}", style="dim")
        roots = {owner[c.id].id: owner[c.id] for c in checks if c.status != "passed" and c.id in owner}
        elsewhere = [root for key, root in sorted(roots.items()) if root.topic != topic]
        if elsewhere:
            where = "above" if all(order.index(r.topic) < order.index(topic) for r in elsewhere) else \
                "below" if all(order.index(r.topic) > order.index(topic) for r in elsewhere) else ""
            line.append(f"  (see {', '.join(r.id for r in elsewhere)}{' ' + where if where else ''})", style="dim")
        parts.append(line)
        for cause in rooted.get(topic, []):
            parts.append(cause_block(cause, shown))
    return Group(*parts)


def check_row(c) -> Table:
    symbol, style = STATUS_STYLE.get(c.status, ("?", "white"))
    row = Table.grid(expand=True, padding=(0, 1))
    row.add_column(width=1, no_wrap=True)
    row.add_column(ratio=1)
    row.add_column(no_wrap=True, style="dim")
    row.add_column(justify="right", no_wrap=True)
    row.add_row(Text(symbol, style=style), Text(c.title), c.id,
                Text(f"{_num(c.points)}/{_num(c.max_points)}", style=style))
    return row


def cause_block(cause: Cause, shown: "Shown") -> RenderableType:
    """A cause: its check's row, its message, and what else it costs."""
    from rich.padding import Padding

    c = cause.root
    style = STATUS_STYLE.get(c.status, ("?", "white"))[1]
    parts: list[RenderableType] = [Padding(check_row(c), (0, 0, 0, 2))]
    if c.message:
        if c.status == "skipped":
            parts.append(Padding(Text(c.message, style="dim"), (0, 0, 0, 4)))
        else:
            parts.append(Padding(message_text(c.message, style, shown, c.id), (0, 0, 0, 4)))
    also = also_line(cause)
    if also:
        parts.append(Padding(also, (0, 0, 0, 4)))
    return Group(*parts)


def also_line(cause: Cause) -> Text | None:
    if not cause.followers:
        return None
    text = Text()
    if cause.also:
        text.append("Also fails: ", style="bold")
        text.append(", ".join(c.id for c in cause.also))
    if cause.unchecked:
        if cause.also:
            text.append("; ")
        text.append("not checked because of this: ", style="bold" if not cause.also else "")
        text.append(unchecked_words(cause.unchecked))
    text.append(f" ({_num(sum(c.max_points - c.points for c in cause.followers))} more point(s)).", style="dim")
    return text


FOLDED = 6  # past this many, the checks a failure kept from running are counted, not named


def unchecked_words(checks) -> str:
    """The checks one failure kept from running, in one line: their ids, or past ``FOLDED`` their
    number (the topics' lines name where they are)."""
    return f"{len(checks)} other checks" if len(checks) > FOLDED else ", ".join(c.id for c in checks)


class Shown:
    """What the report already said: a repeated skip reason or explanation is not said again."""

    def __init__(self):
        self.skips: set[str] = set()
        self.why: dict[str, str] = {}

    def first_skip(self, reason: str) -> bool:
        """Whether a skipped check's reason is said here for the first time (from now on it is said)."""
        first = reason not in self.skips
        self.skips.add(reason)
        return first


def topic_table(topic: str, checks, shown: Shown, causes: list[Cause] | None = None) -> RenderableType:
    """``--all-checks``: one topic's checks, a row each (status, title, id — never wrapped — and
    points); under the first check of a cause, its message and what else it costs; under the others,
    which check above says why."""
    from rich.padding import Padding

    causes = causes or []
    by_root = {cause.root.id: cause for cause in causes}
    owner = {c.id: cause.root.id for cause in causes for c in cause.followers}
    parts: list[RenderableType] = [Text(TOPIC_TITLES.get(topic, topic), style="bold")]
    for c in checks:
        style = STATUS_STYLE.get(c.status, ("?", "white"))[1]
        parts.append(Padding(check_row(c), (0, 0, 0, 1)))
        if c.id in owner:
            parts.append(Padding(Text(f"Same cause as {owner[c.id]}.", style="dim"), (0, 0, 0, 4)))
        elif c.status != "passed" and c.message:
            if c.status == "skipped":
                if shown.first_skip(c.message):
                    parts.append(Padding(Text(c.message, style="dim"), (0, 0, 0, 4)))
            else:
                parts.append(Padding(message_text(c.message, style, shown, c.id), (0, 0, 0, 4)))
        if c.id in by_root and also_line(by_root[c.id]):
            parts.append(Padding(also_line(by_root[c.id]), (0, 0, 0, 4)))
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


def summary(verdict: Verdict, causes: list[Cause] | None = None, next_step: str = "",
            notebook_call: str = "") -> RenderableType:
    causes = root_causes(verdict.checks) if causes is None else causes
    counts = {}
    for c in verdict.checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    line = Text()
    style = {"passed": "bold green", "failed": "bold red"}.get(verdict.status, "bold magenta")
    line.append(f"Score {_num(verdict.score)}/{_num(verdict.max_score)}", style=style)
    for status in ("passed", "failed", "error", "timeout", "skipped"):
        if counts.get(status):
            line.append(f"  ·  {counts[status]} {status}", style=STATUS_STYLE[status][1])
    if verdict.status != "error" and causes:
        line.append(f"  ·  {len(causes)} cause{'s' if len(causes) > 1 else ''}", style="bold")
    if verdict.status == "passed":
        advice = " ".join(filter(None, ["Every check passed. Well done.", next_step]))
    elif verdict.status == "error":
        advice = "Fix the problem above and " + ("save: the grader runs again." if verdict.context.get("watching")
                                                 else "run the grader again.")
        if notebook_call:
            advice = f"Fix the problem above, run the cell again, then `{notebook_call}`."
    else:
        first = causes[0].root if causes else next(c for c in verdict.checks if c.status != "passed")
        again = "save: the grader runs again." if verdict.context.get("watching") else "save, and run the grader again."
        advice = f"Start with “{first.title}” ({first.id}), {again}"
        if notebook_call:
            advice = (f"Start with “{first.title}” ({first.id}): fix it, run your answer cell, then "
                      f"`{notebook_call}` again. Stuck? `{notebook_call[:-1]}, hint=True)` adds a hint.")
        elif not verdict.context.get("watching"):
            advice += f" Stuck? `grade hint {verdict.exercise}`."
    return Panel(Group(line, Text(advice)), border_style=style.split()[-1])


def hint_panel(exercise_id: str, hint, count: int, check_id: str | None = None) -> RenderableType:
    """A hint (``grader.student.hints.Hint``) of the ``count`` an exercise has, for ``check_id``'s cause."""
    from rich.markdown import Markdown

    title = f"{exercise_id} — hint {hint.number} of {count}" + (f", for {check_id}" if check_id else "")
    return Panel(Markdown(hint.text), title=title, title_align="left", border_style="cyan")


def _num(value: float) -> str:
    return f"{value:g}"


STATE_STYLE = {"passed": "green", "failing": "red", "cannot be graded": "magenta", "not started": "dim",
               "missing": "magenta", "no workspace": "magenta"}


def progress_table(states: list[dict], chapter: str | None = None) -> RenderableType:
    """``grade list``: one row per exercise with its state, score and next step; ``chapter`` the
    book's chapter they follow, when they follow one track."""
    title = "Transformer exercises" + (f" — {chapter}" if chapter else "")
    table = Table(title=title, title_justify="left", expand=True)
    table.add_column("exercise", no_wrap=True)
    # wide enough for the longest word of a title, so titles wrap between words, never inside one
    longest = max((len(word) for row in states for word in str(row["title"]).split()), default=5)
    table.add_column("title", width=longest, ratio=1)  # width: the least it gets from the space shared
    table.add_column("state", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    # and the next step's file names whole (a third-edition id is longer), within reason
    step = min(30, max((len(word) for row in states for word in str(row["next"]).split()), default=5))
    table.add_column("next", ratio=2, overflow="fold", width=step)
    for row in states:
        score = f"{_num(row['score'][0])}/{_num(row['score'][1])}" if row.get("score") else ""
        style = STATE_STYLE.get(row["state"], "white")
        table.add_row(row["id"], row["title"], Text(row["state"], style=style), score, row["next"])
    done = sum(row["state"] == "passed" for row in states)
    return Group(table, Text(f"{done} of {len(states)} exercises passed.", style="bold"))


def batch_summary(results, out, not_graded=()) -> RenderableType:
    """``grade batch``: counts, a row per submission (the failing ones only, past 40), and every path
    found beside the submissions and not graded (``batch.Skipped``)."""
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
        problem = first_problem(verdict)
        style = {"passed": "green", "failed": "red"}.get(verdict.status, "magenta")
        table.add_row(Text(printable(result.submission.id)), Text(verdict.status, style=style),
                      f"{_num(verdict.score)}/{_num(verdict.max_score)}", f"{result.seconds:.1f}", Text(problem))
    line = Text(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing graded")
    line.append(f"  ·  results in {out}", style="dim")
    parts: list[RenderableType] = [table, line]
    if not_graded:
        count = len(not_graded)
        parts.append(Text(f"Not graded: {count} {'path' if count == 1 else 'paths'} beside the submissions:",
                          style="yellow"))
        parts += [Text(f"  {printable(str(item.path))}: {printable(item.why)}") for item in not_graded]
    return Group(*parts)


def backends_view(comparison) -> RenderableType:
    """``--all-backends``: each backend's verdict in a line, then whether the layer behaves the same on
    all of them, and where it first does not (the check, the phase and the layer call)."""
    lines = Table.grid(padding=(0, 1))
    lines.add_column(width=1, no_wrap=True)
    lines.add_column(no_wrap=True, style="bold")
    lines.add_column(ratio=1)
    differing = {d.backend: d for d in comparison.differences}
    for name, verdict in comparison.verdicts.items():
        symbol, style = STATUS_STYLE.get(verdict.status, ("?", "white"))
        score = "could not be graded" if verdict.status == "error" else \
            f"{_num(verdict.score)}/{_num(verdict.max_score)} {verdict.status}"
        note = "" if name == comparison.reference else ("  differs" if name in differing else "  the same")
        row = Text(score + note)
        if verdict.status == "error":
            row.append(f"\n{backend_reason(verdict, name)}", style="default")
        lines.add_row(Text(symbol, style=style), BACKEND_TITLES.get(name, name), row)
    for name, why in comparison.skipped.items():
        lines.add_row(Text("-", style="dim"), Text(BACKEND_TITLES.get(name, name), style="dim"),
                      Text(why, style="dim"))
    parts: list[RenderableType] = [lines]
    reference = BACKEND_TITLES.get(comparison.reference, comparison.reference)
    if comparison.portable:
        if len(comparison.verdicts) > 1:
            parts.append(Text(f"Behaves the same on {', '.join(BACKEND_TITLES.get(n, n) for n in comparison.verdicts)}: "
                              "the same verdict, and every output and gradient equal within tolerance.",
                              style="green"))
        else:
            parts.append(Text("Only one backend is installed here: nothing to compare.", style="yellow"))
    for difference in comparison.differences:
        other = BACKEND_TITLES.get(difference.backend, difference.backend)
        text = Text(f"On {other} the layer does not behave as on {reference}:", style="bold red")
        if difference.check or difference.check_detail:
            text.append(f"\n  first check that differs: {difference.check or 'the verdict'}"
                        f"{' (' + printable(difference.check_detail) + ')' if difference.check_detail else ''}",
                        style="default")
        if difference.phase:
            where = PHASE_NAMES.get(difference.phase, difference.phase)
            call = f", {printable(difference.call)}" if difference.call else ""
            text.append(f"\n  first observation that differs: {where}{call}: {printable(difference.detail or '')}",
                        style="default")
        elif difference.detail:
            text.append(f"\n  {printable(difference.detail)}", style="default")
        parts.append(text)
    return Panel(Group(*parts), title="Backends", title_align="left", border_style="cyan")


def backend_reason(verdict: Verdict, backend: str) -> str:
    """Why a backend could not grade the submission, in the words of its single-backend run, without
    the preamble the backend's row already says ("your layer calls TensorFlow directly (tf.shape at
    line 16): ...")."""
    from .backends import title

    reason = printable(first_problem(verdict))
    for preamble in (f"The submission could not be graded on {title(backend)}: ",
                     "The submission could not be graded: "):
        if reason.startswith(preamble):
            return reason[len(preamble):]
    return reason


# the grading process's phases, as a reader of --all-backends knows them
PHASE_NAMES = {
    "construct": "constructing the layer", "variables": "building it", "values": "setting the weights",
    "forward": "the plain call", "mask": "the call with a padding mask",
    "mask_perturbed": "the call with a padding mask and changed padded positions",
    "config": "the config round trip", "saving": "saving and loading", "inference": "calls without training=",
    "gradients": "gradients", "causal": "the causality call", "functional": "the functional model",
    "predict": "the model's call", "padding": "changed padding embeddings", "training": "training",
}
