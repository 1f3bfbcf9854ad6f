"""The class report: one static ``report.html`` that shows a graded class at a glance.

``summarise(results)`` computes every number the page shows from a ``ClassResults``
(``grader.integrations.results``); ``render(results)`` is a pure function from those results to the page, a
string. The page is self-contained: no script at all, no font, image or style from anywhere
(its Content-Security-Policy forbids every fetch), so it opens offline, from a file or an LMS
upload. Charts are hand-made inline SVG (``benchmarks/class_report_speed.py`` measured them
against matplotlib's: a fraction of the size and time), coloured by CSS variables that follow
``prefers-color-scheme`` and print in black on white; every number a chart draws is also in a
table. Every string that comes from a class (ids, names, paths, messages quoting a submission's
code or output) goes through ``html.escape``: a submission's text is only ever text.

What a *mistake* is: the set of a verdict's root causes, the checks that did not pass and were
not skipped because another check failed (a skipped check's message names that check, "(see
check X)"). Students with the same set made the same mistake.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

from .results import ClassResults
from ..verdict import TOPICS

NOT_PASSED = ("failed", "error", "timeout", "skipped")


def cause_of(check: dict) -> str | None:
    """The check whose failure kept this one from running, as the JSON verdict says it."""
    from ..judge.plugin import cause_of as pointed_to

    return pointed_to(check.get("status", ""), str(check.get("message", "")), str(check.get("id", "")))


def root_causes(verdict: dict) -> tuple[str, ...]:
    """The checks of a verdict that did not pass on their own account, in the verdict's order."""
    return tuple(c["id"] for c in verdict.get("checks", [])
                 if c.get("status") in NOT_PASSED and not (c.get("status") == "skipped" and cause_of(c)))


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
class Mistake:
    causes: tuple[str, ...]
    message: str  # the first root cause's message, for the first student of the group
    students: list[str]


@dataclass
class Summary:
    exercise: str
    statuses: dict[str, int]
    max_score: float
    distribution: list[tuple[int, int]]  # (points, rounded down; submissions)
    fractional: bool  # some score is not a whole number of points
    topics: list[tuple[str, float, list[CheckRate]]]  # (topic, pass rate, checks worst first), worst first
    mistakes: list[Mistake]
    ungradable: list[tuple[str, str | None, str]]  # (id, student, reason)
    seconds: dict[str, float]
    seeds: list[str]
    grader_versions: list[str]
    sandboxes: list[str]
    shard: str | None
    graded_at: tuple[str, str] | None
    rows: list[dict] = field(default_factory=list)  # id, student, status, score, max_score, seconds


def summarise(results: ClassResults) -> Summary:
    verdicts = results.verdicts
    manifest = results.manifest or {}
    statuses: dict[str, int] = {}
    for verdict in verdicts:
        statuses[verdict.get("status")] = statuses.get(verdict.get("status"), 0) + 1
    max_score = max((float(v.get("max_score") or 0) for v in verdicts), default=0.0)
    scores = [float(v.get("score") or 0) for v in verdicts]
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

    groups: dict[tuple[str, ...], Mistake] = {}
    for verdict in verdicts:
        if verdict.get("status") == "error":
            continue
        causes = root_causes(verdict)
        if not causes:
            continue
        if causes not in groups:
            first = next(c for c in verdict["checks"] if c["id"] == causes[0])
            groups[causes] = Mistake(causes, str(first.get("message", "")), [])
        groups[causes].students.append(verdict["id"])
    mistakes = sorted(groups.values(), key=lambda m: (-len(m.students), m.causes))

    ungradable = [(v["id"], v.get("student"), str(v.get("error") or ""))
                  for v in verdicts if v.get("status") == "error"]
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
    rows = [{"id": v["id"], "student": v.get("student"), "status": v.get("status"),
             "score": float(v.get("score") or 0), "max_score": float(v.get("max_score") or 0),
             "seconds": results.seconds.get(v["id"])} for v in verdicts]
    exercise = str(manifest.get("exercise") or next((v.get("exercise") for v in verdicts), "") or "")
    return Summary(exercise, statuses, max_score, sorted(bins.items()), any(s != int(s) for s in scores), topics,
                   mistakes, ungradable, {k: s for k, s in results.seconds.items() if s > 0}, seeds, versions,
                   sandboxes, shard, (times[0], times[-1]) if times else None, rows)


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
  --bar: #2f6db5; --good: #237a3b; --bad: #b3261e; --warn: #8a5a00; --zebra: #f4f6f8; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e8eaed; --bg: #16181c; --muted: #a6acb5; --line: #3c4149; --bar: #7fb0f0;
    --good: #7ccf8f; --bad: #ff8a80; --warn: #f2c46d; --zebra: #1f2228; } }
@media print {
  :root { --fg: #000; --bg: #fff; --muted: #333; --line: #999; --bar: #444; --good: #000; --bad: #000;
    --warn: #000; --zebra: #fff; }
  section, figure, tr { break-inside: avoid; } a { color: inherit; } }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); max-width: 70rem; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.6rem; margin: .5rem 0; } h2 { font-size: 1.25rem; margin-top: 2.2rem;
  border-bottom: 1px solid var(--line); padding-bottom: .2rem; } h3 { font-size: 1.05rem; margin: 1.2rem 0 .3rem; }
.muted, caption, figcaption { color: var(--muted); } caption { text-align: left; caption-side: top; padding: .2rem 0; }
table { border-collapse: collapse; margin: .4rem 0 1rem; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: .22rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; } td.n, th.n { text-align: right; } tbody tr:nth-child(even) { background: var(--zebra); }
code, .msg { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .88em; }
.msg { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 40rem; }
.passed { color: var(--good); } .failed { color: var(--bad); } .error { color: var(--warn); }
figure { margin: .5rem 0; } svg { max-width: 100%; height: auto; display: block; }
svg text { fill: var(--fg); font: 12px system-ui, sans-serif; } svg .axis { stroke: var(--line); }
svg .bar { fill: var(--bar); } svg .good { fill: var(--good); } svg .bad { fill: var(--bad); }
svg .track { fill: var(--zebra); stroke: var(--line); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; }
.students { max-width: 28rem; overflow-wrap: anywhere; }
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


def column_chart(bars: list[tuple[str, float]], label: str, unit: str = "") -> str:
    """Vertical bars: one per (label, value), labelled under the axis, the value above each bar."""
    width, height, left, bottom, top = 640, 220, 34, 36, 18
    peak = max((value for _, value in bars), default=0) or 1
    step = (width - left - 8) / max(1, len(bars))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{e(label)}" width="{width}" height="{height}">',
             f'<line class="axis" x1="{left}" y1="{height - bottom}" x2="{width - 4}" y2="{height - bottom}"/>']
    every = max(1, math.ceil(len(bars) / 24))  # labels that fit
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


def render(results: ClassResults) -> str:
    """The class report of ``results``, a whole HTML page."""
    s = summarise(results)
    manifest = results.manifest or {}
    total = len(results.verdicts)
    graded = total - s.statuses.get("error", 0)
    title = f"{s.exercise or 'Results'}: class report"
    out = [f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
           f'<meta name="viewport" content="width=device-width, initial-scale=1">'
           f'<meta name="color-scheme" content="light dark"><title>{e(title)}</title>'
           f'<style>{STYLE}</style></head><body>',
           f"<h1>{e(title)}</h1>",
           f'<p><strong>{total}</strong> submissions: <span class="passed">{s.statuses.get("passed", 0)} passed'
           f'</span>, <span class="failed">{s.statuses.get("failed", 0)} failed</span>, <span class="error">'
           f'{s.statuses.get("error", 0)} could not be graded</span>.</p>']
    run = [("Exercise", e(s.exercise)), ("Seed", e(seed_line(s, manifest))),
           ("Grader version", e(", ".join(s.grader_versions) or "not recorded")),
           ("Sandbox", "<br>".join(e(line) for line in s.sandboxes) or "not recorded")]
    if s.shard:
        run.append(("Shard", e(f"{s.shard} of the class (merge every shard for the whole class)")))
    if s.graded_at:
        run.append(("Graded", e(f"{s.graded_at[0]} to {s.graded_at[1]} (UTC)")))
    out.append('<section id="run"><h2>The run</h2><dl>' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in run)
               + "</dl></section>")

    label = "points, rounded down" if s.fractional else "points"
    out.append('<section id="scores"><h2>Score distribution</h2>'
               f'<p class="muted">Every submission, out of {num(s.max_score)} points; one that could not be graded '
               'scores 0.</p><figure>'
               + column_chart([(str(points), count) for points, count in s.distribution], "submissions by score")
               + f"<figcaption>Submissions by score ({e(label)}).</figcaption></figure>"
               + _table("Submissions by score (scores nobody got left out)", [e(label.capitalize()), "Submissions"],
                        [[str(points), str(count)] for points, count in s.distribution if count], {0, 1}, "scores")
               + "</section>")

    out.append(f'<section id="checks"><h2>Checks by topic, worst first</h2><p class="muted">Pass rates over the '
               f"{graded} submissions that could be graded. A check skipped because another failed counts as not "
               "passed here; the mistakes below count only root causes.</p>")
    statuses = ["passed", "failed", "error", "timeout", "skipped"]
    for topic, rate, checks in s.topics:
        out.append(f'<h3 id="topic-{e(topic)}">{e(topic)}: {percent(rate)} passed</h3><figure>'
                   + rate_chart([(c.id, c.rate) for c in checks], f"pass rates of the {topic} checks") + "</figure>"
                   + _table(f"Checks of {e(topic)}", ["Check", "Title"] + [w.capitalize() for w in statuses]
                            + ["Pass rate"],
                            [[f"<code>{e(c.id)}</code>", e(c.title)] + [str(c.counts.get(w, 0)) for w in statuses]
                             + [percent(c.rate)] for c in checks], set(range(2, 8)), "checks"))
    if not s.topics:
        out.append("<p>No submission could be graded, so no check ran.</p>")
    out.append("</section>")

    out.append('<section id="mistakes"><h2>Most common mistakes</h2><p class="muted">Students grouped by the same '
               "set of failed root causes (checks skipped because another failed are left out), most common first."
               "</p>")
    if s.mistakes:
        out.append(_table("Mistakes", ["Students", "Root causes", "First failing check's message", "Who"],
                          [[str(len(m.students)), "<br>".join(f"<code>{e(c)}</code>" for c in m.causes),
                            f'<div class="msg">{e(m.message)}</div>',
                            f'<div class="students">{", ".join(e(i) for i in m.students)}</div>']
                           for m in s.mistakes], {0}, "mistakes"))
    else:
        out.append("<p>No graded submission failed a check.</p>")
    out.append("</section>")

    out.append('<section id="ungradable"><h2>Could not be graded</h2>')
    if s.ungradable:
        out.append(_table(f"{len(s.ungradable)} submissions could not be graded", ["Id", "Student", "Reason"],
                          [[e(i), e(student or ""), f'<div class="msg">{e(reason)}</div>']
                           for i, student, reason in s.ungradable], set(), "ungradable"))
    else:
        out.append("<p>Every submission could be graded.</p>")
    out.append("</section>")

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

    out.append('<section id="submissions"><h2>Every submission</h2>'
               + _table("Submissions", ["Id", "Student", "Status", "Score", "Seconds"],
                        [[e(r["id"]), e(r["student"] or ""), f'<span class="{e(r["status"])}">{e(r["status"])}</span>',
                          f"{num(r['score'])}/{num(r['max_score'])}",
                          "" if r["seconds"] is None else f"{r['seconds']:.1f}"] for r in s.rows], {3, 4},
                        "submissions")
               + "</section>")
    out.append("</body></html>\n")
    return "".join(out)


def write_report(folder, results: ClassResults | None = None) -> str:
    """Write ``report.html`` into a results folder (read from it unless ``results`` are given);
    returns its path."""
    from pathlib import Path

    from .results import read_results

    results = results if results is not None else read_results(Path(folder))
    path = Path(folder) / "report.html"
    temporary = path.with_name(".report.html.tmp")
    temporary.write_text(render(results), encoding="utf-8", errors="backslashreplace")
    temporary.replace(path)
    return str(path)
