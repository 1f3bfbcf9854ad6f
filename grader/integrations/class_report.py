"""The class report: ``report.html``, a graded class at a glance, and one page per student.

``summarise(results)`` computes every number the pages show from a ``ClassResults``
(``grader.integrations.results``); ``render(results)`` is a pure function from those results to the
class page, a string, and ``render_student`` from one verdict to that student's page. The class
page leads with what an instructor acts on: the score distribution (mean, median, pass rate, a
histogram) and the most common mistakes with the students who made them; then every student with
their score and first problem, linked to their own page (``students/<name>.html``: their verdict
as the terminal report shows it, exported by Rich); then each check's pass rate, the submissions
that could not be graded, the files that were not graded, and at the bottom the run (seed,
versions, sandbox) and the time each grading took.

Pages are self-contained: no script at all, no font, image or style from anywhere (their
Content-Security-Policy forbids every fetch), so they open offline, from a file or an LMS
upload. Charts are hand-made inline SVG (``benchmarks/class_report_speed.py`` measured them
against matplotlib's: a fraction of the size and time), coloured by CSS variables that follow
``prefers-color-scheme`` and print in black on white; every number a chart draws is also in a
table. Every string that comes from a class (ids, names, paths, messages quoting a submission's
code or output) goes through ``html.escape``: a submission's text is only ever text; errors, titles
and messages are bounded as on Gradescope (``grader.protocol.text.shown``). A student's
page is named from their id by ``page_names``, which keeps only letters, digits, ``_`` and ``-``
and adds a digest of the id wherever that changed it, so no id makes a path (``..``, ``/``) and no
two ids share a page, on any file system.

What a *mistake* is: a verdict's causes of failure as the student's own report tells them
(``grader.causes.root_causes``: the checks failed for one reason are one cause, told by its first
check), each cause known by its check, what that check's message observed (numbers aside, which
each submission's seed draws) and the checks it failed besides. Students whose reports tell the
same causes made the same mistake, so each failing student is in one group, and a causal mask
left out and one transposed, which fail the same checks for other reasons, are two mistakes. Each
student's first problem is the first cause their report names.
"""

from __future__ import annotations

import hashlib
import html
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .results import ClassResults
from ..protocol.text import MESSAGE, NAME, REASON, shown, shown_verdict
from ..verdict import TOPICS, CheckResult, Verdict

STUDENTS_FOLDER = "students"


def cause_of(check: dict) -> str | None:
    """The check whose failure kept this one from running, as the JSON verdict says it."""
    from ..verdict import cause_of as pointed_to

    return pointed_to(check.get("status", ""), str(check.get("message", "")), str(check.get("id", "")))


def _number(value) -> float:
    try:
        number = float(value or 0)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def verdict_of(record: dict) -> Verdict:
    """A line of verdicts.jsonl as the Verdict the student's report was drawn from (the check a
    skipped one points to read back from its message, as the judge set it)."""
    from ..verdict import cause_of as pointed_to

    checks = []
    for check in record.get("checks") or []:
        if not isinstance(check, dict):
            continue
        status, message = str(check.get("status", "")), str(check.get("message") or "")
        check_id = str(check.get("id", ""))
        checks.append(CheckResult(check_id, str(check.get("title", "")), str(check.get("topic", "")), status,
                                  _number(check.get("points")), _number(check.get("max_points")), message,
                                  pointed_to(status, message, check_id)))
    error = record.get("error")
    context = {"backend": record.get("backend"), "seed": record.get("seed")}
    return Verdict(str(record.get("exercise") or ""), str(record.get("submission") or ""),
                   str(record.get("status") or ""), _number(record.get("score")), _number(record.get("max_score")),
                   None if error is None else str(error), checks, context)


def causes_of(record: dict, verdict: Verdict | None = None) -> list:
    """The causes of a verdict's failures, as the student's report tells them (``grader.causes``)."""
    from ..causes import root_causes as told

    if record.get("status") == "error":
        return []
    return told((verdict or verdict_of(record)).checks)


def root_causes(record: dict) -> tuple[str, ...]:
    """The checks that tell each cause of a verdict's failures, in the order of the student's report."""
    return tuple(cause.root.id for cause in causes_of(record))


NUMBER = re.compile(r"\d+(?:\.\d+)?")


def observed(message: str) -> str:
    """What a check's message says it observed, without the numbers each seed draws: its first line
    (and, under a headline ending in ':', the line after it)."""
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    if not lines:
        return ""
    head = f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    return NUMBER.sub("#", head[:300])


def plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else words or word + 's'}"


WINDOWS_NAMES = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}
PAGE_NAME = re.compile(r"[A-Za-z0-9_-]+")


def page_names(ids) -> dict[str, str]:
    """Each id's page in ``students/``, without ``.html``: the id itself when it is a plain name
    (letters, digits, _ and -, not a reserved device name), else the plain part of it and a digest
    of the whole; unique whatever the ids, letter case aside (some file systems ignore it)."""
    names, taken = {}, set()
    for identity in sorted(set(ids)):
        text = str(identity)
        plain = "_".join(PAGE_NAME.findall(text))[:60].strip("_-") or "student"
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        name = plain if plain == text and plain.upper() not in WINDOWS_NAMES else f"{plain}-{digest[:10]}"
        count = 1
        while name.casefold() in taken:
            count += 1
            name = f"{plain}-{digest[:10]}-{count}"
        taken.add(name.casefold())
        names[identity] = name
    return names


@dataclass
class CheckRate:
    id: str
    title: str
    topic: str
    counts: dict[str, int]  # status -> submissions

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def rate(self) -> float:
        return self.counts.get("passed", 0) / self.total if self.total else 0.0


@dataclass
class Told:
    """One cause of a mistake, as the report of the group's first student (by id) tells it."""

    check: str  # the check that tells it
    title: str
    message: str
    also: list[str]  # the other checks it fails


@dataclass
class Mistake:
    causes: list[Told]
    students: list[str]

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(told.check for told in self.causes)


@dataclass
class Row:
    id: str
    student: str | None
    status: str
    score: float
    max_score: float
    seconds: float | None
    causes: int  # as many as the student's report names
    problem: str  # the first of them, or the error's first line
    page: str  # students/<page>.html


@dataclass
class Summary:
    exercise: str
    statuses: dict[str, int]
    max_score: float
    mean: float
    median: float
    distribution: list[tuple[int, int]]  # (points, rounded down; submissions)
    fractional: bool  # some score is not a whole number of points
    topics: list[tuple[str, float, list[CheckRate]]]  # (topic, pass rate, checks worst first), worst first
    mistakes: list[Mistake]
    ungradable: list[tuple[str, str | None, str]]  # (id, student, reason)
    not_graded: list[tuple[str, str]]  # (path, why): files of the class that are no submission
    seconds: dict[str, float]
    seeds: list[str]
    grader_versions: list[str]
    sandboxes: list[str]
    shard: str | None
    graded_at: tuple[str, str] | None
    rows: list[Row] = field(default_factory=list)
    manual_max: float = 0.0  # the most a written answer graded by hand in nbgrader adds; 0 outside a course
    not_attempted: list[str] = field(default_factory=list)  # ids of the untouched stubs (failed, no mistake)

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    @property
    def pass_rate(self) -> float:
        return self.statuses.get("passed", 0) / self.total if self.total else 0.0


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def summarise(results: ClassResults) -> Summary:
    from ..causes import NOT_ATTEMPTED, error_headline, not_attempted as untouched

    verdicts = results.verdicts
    manifest = results.manifest or {}
    statuses: dict[str, int] = {}
    for verdict in verdicts:
        statuses[str(verdict.get("status"))] = statuses.get(str(verdict.get("status")), 0) + 1
    max_score = max((_number(v.get("max_score")) for v in verdicts), default=0.0)
    scores = [_number(v.get("score")) for v in verdicts]
    top = int(math.floor(max_score)) if max_score else int(max(scores, default=0))
    bins = {points: 0 for points in range(top + 1)}
    for score in scores:
        bins[min(top, max(0, int(math.floor(score))))] += 1

    rates: dict[str, CheckRate] = {}
    for verdict in verdicts:
        for check in verdict.get("checks", []):
            rate = rates.setdefault(check["id"], CheckRate(check["id"], str(check.get("title", "")),
                                                           str(check.get("topic", "")), {}))
            rate.counts[check.get("status")] = rate.counts.get(check.get("status"), 0) + 1
    order = {topic: index for index, topic in enumerate(TOPICS)}
    appearance = {check_id: index for index, check_id in enumerate(rates)}
    topics = []
    for topic in dict.fromkeys(rate.topic for rate in rates.values()):
        checks = sorted((r for r in rates.values() if r.topic == topic), key=lambda r: (r.rate, appearance[r.id]))
        total = sum(r.total for r in checks)
        topics.append((topic, sum(r.counts.get("passed", 0) for r in checks) / total if total else 0.0, checks))
    topics.sort(key=lambda t: (t[1], order.get(t[0], len(order)), t[0]))

    pages = page_names(v["id"] for v in verdicts)
    groups: dict[tuple, Mistake] = {}
    rows = []
    not_attempted = []
    for verdict in verdicts:
        read = verdict_of(verdict)
        causes = causes_of(verdict, read)
        stub = verdict.get("status") == "failed" and untouched(read.checks)
        if stub:  # no mistake: nothing was written yet
            not_attempted.append(verdict["id"])
        elif causes:
            key = tuple((c.root.id, observed(c.root.message), tuple(sorted(a.id for a in c.also))) for c in causes)
            if key not in groups:
                groups[key] = Mistake([Told(c.root.id, c.root.title, c.root.message, [a.id for a in c.also])
                                       for c in causes], [])
            groups[key].students.append(verdict["id"])
        if verdict.get("error"):
            problem = error_headline(str(verdict["error"]))
        elif stub:
            problem = NOT_ATTEMPTED
        else:  # as grader.causes.first_problem tells it
            problem = f"{causes[0].root.id}: {causes[0].root.title}" if causes else ""
        rows.append(Row(verdict["id"], verdict.get("student"), "not attempted" if stub else str(verdict.get("status")),
                        _number(verdict.get("score")), _number(verdict.get("max_score")),
                        results.seconds.get(verdict["id"]), len(causes), problem, pages[verdict["id"]]))
    position = {check_id: index for index, check_id in enumerate(rates)}
    mistakes = [groups[key] for key in sorted(groups, key=lambda k: (
        -len(groups[k].students), [position.get(check, len(position)) for check, _, _ in k], k))]

    ungradable = [(v["id"], v.get("student"), str(v.get("error") or ""))
                  for v in verdicts if v.get("status") == "error"]
    not_graded = [(str(item.get("path", "")), str(item.get("why", "")))
                  for item in manifest.get("not_graded") or [] if isinstance(item, dict)]
    seeds = sorted({str(v["seed"]) for v in verdicts if v.get("seed") is not None}, key=lambda x: (len(x), x))
    versions = sorted({str(v.get("grader_version")) for v in verdicts if v.get("grader_version")})
    if manifest.get("grader_version") and not versions:
        versions = [str(manifest["grader_version"])]
    sandbox = manifest.get("sandbox") or []
    sandboxes = [sandbox] if isinstance(sandbox, str) else [str(s) for s in sandbox]
    shard = None
    if isinstance(manifest.get("shard"), dict) and manifest["shard"].get("n", 1) != 1:
        shard = f"{manifest['shard'].get('k')}/{manifest['shard'].get('n')}"
    times = sorted(str(v["graded_at"]) for v in verdicts if v.get("graded_at"))
    exercise = str(manifest.get("exercise") or next((v.get("exercise") for v in verdicts), "") or "")
    # a written answer is a cell of nbgrader's notebook: only a course's students (nbgrader's ids) have one;
    # manual_points is the earlier name of manual_max_points
    manual_max = max((_number(v.get("manual_max_points", v.get("manual_points"))) for v in verdicts
                      if v.get("student")), default=0.0)
    return Summary(exercise, statuses, max_score, sum(scores) / len(scores) if scores else 0.0, _median(scores),
                   sorted(bins.items()), any(s != int(s) for s in scores), topics, mistakes, ungradable, not_graded,
                   {k: s for k, s in results.seconds.items() if s > 0}, seeds, versions, sandboxes, shard,
                   (times[0], times[-1]) if times else None, rows, manual_max, not_attempted)


def seed_line(summary: Summary, manifest: dict | None) -> str:
    """The run's seed: the --seed given, a fresh one per submission, or (a folder without run.json)
    the seeds its verdicts record."""
    manifest = manifest or {}
    if manifest.get("seed") is not None:
        return f"{manifest['seed']} (--seed, the same for every submission)"
    if "seed" in manifest:
        return "a fresh secret seed for each submission (each one is in verdicts.jsonl)"
    if len(summary.seeds) > 3:
        return f"{len(summary.seeds)} different seeds (each one is in verdicts.jsonl)"
    return ", ".join(summary.seeds) or "not recorded"


# --------------------------------------------------------------------------- rendering

STYLE = """
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #ffffff; --muted: #5f6368; --line: #d0d4da;
  --bar: #2f6db5; --good: #237a3b; --bad: #b3261e; --warn: #8a5a00; --zebra: #f4f6f8; --link: #1a5bb5; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e8eaed; --bg: #16181c; --muted: #a6acb5; --line: #3c4149; --bar: #7fb0f0;
    --good: #7ccf8f; --bad: #ff8a80; --warn: #f2c46d; --zebra: #1f2228; --link: #8ab8f5; } }
@media print {
  :root { --fg: #000; --bg: #fff; --muted: #333; --line: #999; --bar: #444; --good: #000; --bad: #000;
    --warn: #000; --zebra: #fff; --link: #000; }
  section, figure, tr { break-inside: avoid; } a { color: inherit; } details > :not(summary) { display: block; } }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); max-width: 70rem; margin: 0 auto; padding: .6rem 1.5rem 3rem; }
a { color: var(--link); }
h1 { font-size: 1.5rem; margin: .3rem 0 .2rem; } h2 { font-size: 1.2rem; margin: 1.6rem 0 .4rem;
  border-bottom: 1px solid var(--line); padding-bottom: .2rem; } h3 { font-size: 1.05rem; margin: 1.2rem 0 .3rem; }
.muted, caption, figcaption { color: var(--muted); } caption { text-align: left; caption-side: top; padding: .2rem 0; }
table { border-collapse: collapse; margin: .4rem 0 1rem; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: .22rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; } td.n, th.n { text-align: right; } tbody tr:nth-child(even) { background: var(--zebra); }
code, .msg { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .88em; }
.msg { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 40rem; }
.passed { color: var(--good); } .failed { color: var(--bad); } .error { color: var(--warn); }
figure { margin: .3rem 0; } svg { max-width: 100%; height: auto; display: block; }
svg text { fill: var(--fg); font: 12px system-ui, sans-serif; } svg .axis { stroke: var(--line); }
svg .bar { fill: var(--bar); } svg .good { fill: var(--good); } svg .bad { fill: var(--bad); }
svg .track { fill: var(--zebra); stroke: var(--line); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; }
.glance { display: flex; flex-wrap: wrap; gap: .5rem 2rem; align-items: flex-start; }
.glance figure { flex: 1 1 24rem; max-width: 34rem; }
dl.stats { grid-template-columns: max-content max-content; font-size: 1.05rem; margin: .4rem 0; }
dl.stats dd { font-weight: 600; font-variant-numeric: tabular-nums; }
.students { max-width: 28rem; overflow-wrap: anywhere; }
.cause + .cause, .msg + .msg, details + .msg { margin-top: .5rem; }
details summary { cursor: pointer; color: var(--muted); }
.terminal { background: #ffffff; color: #000000; border: 1px solid var(--line); padding: .6rem .8rem;
  overflow-x: auto; width: fit-content; max-width: 100%; box-sizing: border-box; font: 13px/1.35 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def e(value) -> str:
    """Text for HTML, quotes included: whatever it holds, it stays text (and bytes of a file name
    that are not UTF-8, kept by Python as surrogates, are written as escapes)."""
    text = str(value)
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name gives
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return html.escape(text, quote=True)


def num(value: float) -> str:
    value = float(value)
    return str(int(value)) if value == int(value) else f"{value:.2f}".rstrip("0").rstrip(".")


def percent(rate: float) -> str:
    return f"{rate * 100:.0f}%"


def column_chart(bars: list[tuple[str, float]], label: str, unit: str = "", width: int = 640,
                 height: int = 220) -> str:
    """Vertical bars: one per (label, value), labelled under the axis, the value above each bar."""
    left, bottom, top = 34, 36, 18
    peak = max((value for _, value in bars), default=0) or 1
    step = (width - left - 8) / max(1, len(bars))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{e(label)}" width="{width}" height="{height}">',
             f'<line class="axis" x1="{left}" y1="{height - bottom}" x2="{width - 4}" y2="{height - bottom}"/>']
    every = max(1, math.ceil(len(bars) / max(1, width // 27)))  # labels that fit
    for index, (name, value) in enumerate(bars):
        h = (height - bottom - top) * value / peak
        x = left + index * step
        y = height - bottom - h
        parts.append(f'<rect class="bar" x="{x + step * 0.12:.1f}" y="{y:.1f}" width="{step * 0.76:.1f}" '
                     f'height="{h:.1f}"><title>{e(name)}: {num(value)}{e(unit)}</title></rect>')
        if value:
            parts.append(f'<text x="{x + step / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">{num(value)}</text>')
        if index % every == 0:
            parts.append(f'<text x="{x + step / 2:.1f}" y="{height - bottom + 16}" text-anchor="middle">'
                         f'{e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def rate_chart(rows: list[tuple[str, float]], label: str) -> str:
    """Horizontal bars of pass rates (0 to 1), one row per check, its rate written beside it."""
    width, row, left, right = 640, 24, 210, 48
    height = row * len(rows) + 8
    span = width - left - right
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{e(label)}" width="{width}" height="{height}">']
    for index, (name, rate) in enumerate(rows):
        y = 4 + index * row
        parts.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{e(name)}</text>'
                     f'<rect class="track" x="{left}" y="{y + 3}" width="{span}" height="{row - 8}"/>'
                     f'<rect class="{"good" if rate >= 0.5 else "bad"}" x="{left}" y="{y + 3}" '
                     f'width="{span * rate:.1f}" height="{row - 8}"><title>{e(name)}: {percent(rate)} passed'
                     f'</title></rect><text x="{left + span + 6}" y="{y + 15}">{percent(rate)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(caption: str, head: list[str], rows: list[list[str]], numeric: set[int] = frozenset(),
           css: str = "") -> str:
    """A table from cells that are already HTML (escaped by the caller)."""
    right = ' class="n"'
    cells = "".join(f'<th scope="col"{right if i in numeric else ""}>{h}</th>' for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td{right if i in numeric else ""}>{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f'<table{f" class={css!r}" if css else ""}><caption>{caption}</caption><thead><tr>{cells}</tr></thead>' \
           f"<tbody>{body}</tbody></table>"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _head(title: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="color-scheme" content="light dark"><title>{e(title)}</title>'
            f'<style>{STYLE}</style></head><body>')


def _message(message: str) -> str:
    """A check's message: its first line, the rest (a picture of a mask, the error's lines) folded."""
    lines = message.strip("\n").splitlines() or [""]
    shown = f'<div class="msg">{e(lines[0])}</div>'
    if len(lines) > 1:
        shown += f'<details><summary>the whole message</summary><div class="msg">{e(chr(10).join(lines[1:]))}' \
                 "</div></details>"
    return shown


def _student_link(identity: str, page: str) -> str:
    return f'<a href="{STUDENTS_FOLDER}/{e(page)}.html">{e(shown(identity, NAME))}</a>'


def render(results: ClassResults) -> str:
    """The class report of ``results``, a whole HTML page."""
    s = summarise(results)
    manifest = results.manifest or {}
    pages = {row.id: row.page for row in s.rows}
    graded = s.total - s.statuses.get("error", 0)
    title = f"{s.exercise or 'Results'}: class report"
    out = [_head(title), f"<h1>{e(title)}</h1>",
           f'<p><strong>{plural(s.total, "submission")}</strong>: <span class="passed">'
           f'{s.statuses.get("passed", 0)} passed</span>, <span class="failed">{s.statuses.get("failed", 0)} '
           f'failed</span>'
           + (f' ({len(s.not_attempted)} of them not attempted: still the stub)' if s.not_attempted else "")
           + f', <span class="error">{s.statuses.get("error", 0)} could not be graded</span>.</p>']

    label = "points, rounded down" if s.fractional else "points"
    stats = [("Mean", f"{num(round(s.mean, 2))} of {num(s.max_score)}"),
             ("Median", f"{num(round(s.median, 2))} of {num(s.max_score)}"),
             ("Pass rate", f"{percent(s.pass_rate)} ({s.statuses.get('passed', 0)} of {s.total})")]
    out.append('<section id="scores"><h2>Scores</h2><div class="glance"><div><dl class="stats">'
               + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in stats) + "</dl>"
               f'<p class="muted">Out of {num(s.max_score)} points; a submission that could not be graded '
               "scores 0.</p>"
               + (f'<p class="muted" id="written-answer">Written answer, graded by hand in nbgrader: up to '
                  f"{num(s.manual_max)} points more, in no score here.</p>" if s.manual_max else "")
               + "</div><figure>"
               + column_chart([(str(points), count) for points, count in s.distribution], "submissions by score",
                              width=520, height=150)
               + f"<figcaption>Submissions by score ({e(label)}).</figcaption></figure></div>"
               + "<details><summary>the scores as a table</summary>"
               + _table("Submissions by score (scores nobody got left out)", [e(label.capitalize()), "Submissions"],
                        [[str(points), str(count)] for points, count in s.distribution if count], {0, 1}, "scores")
               + "</details></section>")

    out.append('<section id="mistakes"><h2>Most common mistakes</h2><p class="muted">Students whose reports '
               "tell the same causes of failure, each cause by its first check, what it observed and the checks it "
               "also fails; most common first.</p>")
    if s.mistakes:
        out.append(_table("Mistakes", ["Students", "Causes", "What the report says", "Who"],
                          [[str(len(m.students)),
                            "".join(f'<div class="cause"><code>{e(t.check)}</code> {e(shown(t.title, NAME))}'
                                    + (f'<br><span class="muted">also fails {", ".join(e(shown(c, NAME)) for c in t.also)}</span>'
                                       if t.also else "") + "</div>" for t in m.causes),
                            "".join(_message(shown(t.message, MESSAGE)) for t in m.causes),
                            '<div class="students">' + ", ".join(_student_link(i, pages[i]) for i in m.students)
                            + "</div>"] for m in s.mistakes], {0}, "mistakes"))
    elif not s.not_attempted:
        out.append("<p>No graded submission failed a check.</p>")
    else:
        out.append("<p>No attempted submission failed a check.</p>")
    if s.not_attempted:
        out.append(f'<p id="not-attempted"><strong>Not attempted</strong> ({plural(len(s.not_attempted), "student")}'
                   "): the file is still the stub (its code raises the stub's NotImplementedError), so no "
                   'mistake is counted for it. <span class="students">'
                   + ", ".join(_student_link(i, pages[i]) for i in s.not_attempted) + "</span></p>")
    out.append("</section>")

    out.append('<section id="students"><h2>Students</h2><p class="muted">Each id opens that student\'s own '
               "report. The first problem is the first cause their report names (or why it could not be "
               "graded).</p>"
               + _table(plural(s.total, "submission"), ["Id", "Student", "Status", "Score", "Causes", "First problem"],
                        [[_student_link(r.id, r.page), e(shown(r.student or "", NAME)),
                          f'<span class="{e(r.status)}">{e(r.status)}</span>',
                          f"{num(r.score)}/{num(r.max_score)}", str(r.causes) if r.status != "error" else "",
                          f'<div class="msg">{e(shown(r.problem, NAME))}</div>'] for r in s.rows], {3, 4}, "submissions")
               + "</section>")

    out.append(f'<section id="checks"><h2>Checks by topic, worst first</h2><p class="muted">Pass rates over the '
               f"{plural(graded, 'submission')} that could be graded. A check skipped because another failed counts "
               "as not passed here; the mistakes above count each cause once.</p>")
    statuses = ["passed", "failed", "error", "timeout", "skipped"]
    for topic, rate, checks in s.topics:
        out.append(f'<h3 id="topic-{e(topic)}">{e(topic)}: {percent(rate)} passed</h3><figure>'
                   + rate_chart([(c.id, c.rate) for c in checks], f"pass rates of the {topic} checks") + "</figure>"
                   + _table(f"Checks of {e(topic)}", ["Check", "Title"] + [w.capitalize() for w in statuses]
                            + ["Pass rate"],
                            [[f"<code>{e(c.id)}</code>", e(shown(c.title, NAME))] + [str(c.counts.get(w, 0)) for w in statuses]
                             + [percent(c.rate)] for c in checks], set(range(2, 8)), "checks"))
    if not s.topics:
        out.append("<p>No submission could be graded, so no check ran.</p>")
    out.append("</section>")

    out.append('<section id="ungradable"><h2>Could not be graded</h2>')
    if s.ungradable:
        out.append(_table(f"{plural(len(s.ungradable), 'submission')} could not be graded",
                          ["Id", "Student", "Reason"],
                          [[_student_link(i, pages[i]), e(shown(student or "", NAME)), f'<div class="msg">{e(shown(reason, REASON))}</div>']
                           for i, student, reason in s.ungradable], set(), "ungradable"))
    else:
        out.append("<p>Every submission could be graded.</p>")
    out.append("</section>")

    out.append('<section id="not-graded"><h2>Files not graded</h2>')
    if s.not_graded:
        out.append(_table(f"{plural(len(s.not_graded), 'file or folder', 'files or folders')} found beside the "
                          "submissions and not graded", ["Path", "Why"],
                          [[f"<code>{e(path)}</code>", e(why)] for path, why in s.not_graded], set(), "not-graded"))
    elif "not_graded" in manifest:
        out.append("<p>Nothing beside the submissions.</p>")
    else:
        out.append("<p>Not recorded for this run.</p>")
    out.append("</section>")

    run = [("Exercise", e(s.exercise)), ("Seed", e(seed_line(s, manifest))),
           ("Grader version", e(", ".join(s.grader_versions) or "not recorded")),
           ("Sandbox", "<br>".join(e(line) for line in s.sandboxes) or "not recorded")]
    if s.shard:
        run.append(("Shard", e(f"{s.shard} of the class (merge every shard for the whole class)")))
    if s.graded_at:
        run.append(("Graded", e(f"{s.graded_at[0]} to {s.graded_at[1]} (UTC)")))
    out.append('<section id="run"><h2>The run</h2><dl>' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in run)
               + "</dl></section>")

    out.append('<section id="time"><h2>Time per grading</h2>')
    times = list(s.seconds.values())
    if times:
        peak = max(times)
        width = max(1, math.ceil(peak / 10))
        bins = [0] * (math.floor(peak / width) + 1)
        for value in times:
            bins[int(value // width)] += 1
        spans = [f"{i * width}–{(i + 1) * width}" for i in range(len(bins))]
        out.append("<figure>" + column_chart(list(zip(spans, bins)), "gradings by seconds")
                   + "<figcaption>Gradings by seconds taken (wall clock, from start to verdict).</figcaption></figure>"
                   + _table("Seconds per grading", ["Gradings", "Median", "Mean", "90th percentile", "Longest",
                                                    "Sum"],
                            [[str(len(times)), f"{_percentile(times, 0.5):.1f}", f"{sum(times) / len(times):.1f}",
                              f"{_percentile(times, 0.9):.1f}", f"{peak:.1f}", f"{sum(times):.1f}"]],
                            set(range(6)), "time")
                   + _table("Gradings by seconds", ["Seconds", "Gradings"],
                            [[span, str(count)] for span, count in zip(spans, bins)], {1}, "time-bins")
                   + '<p class="muted">Gradings run side by side, so the sum is more than the run took.</p>')
    else:
        out.append("<p>No grading time was recorded.</p>")
    out.append("</section>")
    out.append("</body></html>\n")
    return "".join(out)


REPORT_WIDTH = 100  # columns of the terminal report on a student's page


def render_student(record: dict, exercise: str = "") -> str:
    """One student's page: their verdict as ``grade`` shows it in a terminal (``grader.report``,
    exported by Rich as HTML, every text escaped), its texts bounded as on Gradescope
    (``shown_verdict``), under a line back to the class report."""
    from rich.console import Console

    from ..report import render as report

    from .. import exercises
    from ..exercises import tracks

    verdict = shown_verdict(verdict_of(record))
    try:
        verdict.context["title"] = exercises.get(verdict.exercise or exercise).title
    except KeyError:  # an exercise this grader does not know: the header names it without a title
        pass
    console = Console(record=True, width=REPORT_WIDTH, file=io.StringIO(), color_system="truecolor",
                      force_terminal=True, legacy_windows=False)
    console.print(report(verdict, next_step=tracks.next_step(verdict.exercise or exercise)))
    terminal = console.export_html(inline_styles=True, code_format="{code}")
    identity = shown(record.get("id", ""), NAME)
    student = record.get("student")
    title = f"{identity}: {verdict.exercise or exercise} report"
    about = [f'<span class="{e(verdict.status)}">{e(verdict.status)}</span>',
             f"score {num(verdict.score)}/{num(verdict.max_score)}"]
    if student and student != record.get("id"):
        about.insert(0, f"student {e(shown(student, NAME))}")
    return (_head(title) + '<p><a href="../report.html">← the class report</a></p>'
            f"<h1>{e(identity)}</h1><p>{', '.join(about)}. What <code>grade</code> showed for this submission:</p>"
            f'<pre class="terminal">{terminal}</pre></body></html>\n')


def write_report(folder, results: ClassResults | None = None) -> str:
    """Write ``report.html`` and every student's page (``students/``, where pages of ids no longer in
    the results are removed) into a results folder, read from it unless ``results`` are given;
    returns the report's path."""
    from .results import read_results

    folder = Path(folder)
    results = results if results is not None else read_results(folder)
    pages = page_names(v["id"] for v in results.verdicts)
    students = folder / STUDENTS_FOLDER
    if students.is_symlink() or (students.exists() and not students.is_dir()):
        students.unlink()
    students.mkdir(exist_ok=True)
    exercise = str((results.manifest or {}).get("exercise") or "")
    written = set()
    for record in results.verdicts:
        name = f"{pages[record['id']]}.html"
        try:
            page = render_student(record, exercise)
        except Exception as exc:  # noqa: BLE001 - the grader's failure, for this page alone
            page = (_head(f"{shown(record['id'], NAME)}: report") + '<p><a href="../report.html">← the class report</a></p>'
                    f"<h1>{e(shown(record['id'], NAME))}</h1><p>The grader could not draw this report ({e(type(exc).__name__)}: "
                    f"{e(str(exc)[:300])}); the verdict is in verdicts.jsonl.</p></body></html>\n")
        _write(students / name, page)
        written.add(name)
    for stale in students.glob("*.html"):
        if stale.name not in written and PAGE_NAME.fullmatch(stale.stem):
            stale.unlink()
    path = folder / "report.html"
    _write(path, render(results))
    return str(path)


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8", errors="backslashreplace")
    temporary.replace(path)
