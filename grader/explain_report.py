"""Renders an Explanation (``grade explain``) as Rich renderables. Pure: explanation in, renderable out.

One panel per claim: the claim, its verdict and summary, a small table of the
numbers behind it and a sparkline or bar plot. Reads well at 80 columns.
"""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .explain import Explanation
from .report import printable
from .explain_claims import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, Claim

VERDICT_STYLE = {SUPPORTED: ("✓", "green"), NOT_SUPPORTED: ("✗", "red"), INCONCLUSIVE: ("?", "yellow")}
BLOCKS = "▁▂▃▄▅▆▇█"
PLACES = ("x + attention(x)", "h + ffn(h)")


def render(explanation: Explanation) -> RenderableType:
    parts: list[RenderableType] = [header(explanation)]
    if explanation.shared_norm:
        parts.append(Panel(
            Text("Your encoder applies one LayerNormalization at both places, so it shares one gamma and one "
                 "beta between the attention residual and the feed-forward residual. The experiments below "
                 "compare two norms with exactly that: their “one shared norm” variant is your encoder's "
                 "design."),
            title="Your encoder shares one norm", title_align="left", border_style="yellow"))
    if explanation.error:
        parts.append(Panel(Text(printable(explanation.error), style="bold"), title="The experiments could not run",
                           title_align="left", border_style="magenta"))
    if explanation.problems:
        parts.append(Panel(Text("\n".join(f"• {p}" for p in explanation.problems)),
                           title="Measurements lost", title_align="left", border_style="magenta"))
    for number, claim in enumerate(explanation.claims, start=1):
        parts.append(claim_panel(number, claim))
    parts.append(footer(explanation))
    return Group(*parts)


def header(explanation: Explanation) -> RenderableType:
    ctx = explanation.context
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    title = explanation.context.get("title")
    grid.add_row("Exercise", f"{explanation.exercise} — {title}" if title else explanation.exercise)
    grid.add_row("Submission", Text(printable(explanation.submission)))
    who = "your encoder" if explanation.subject == "student" else "the reference encoder"
    grid.add_row("Subject", Text(who, style="bold"))
    grid.add_row("", Text(explanation.subject_reason, style="dim"))
    plan = ctx.get("plan") or {}
    if plan:
        seeds = ", ".join(str(ctx.get("seed", 0) + i) for i in range(plan.get("seeds", 0)))
        grid.add_row("Experiment",
                     f"seeds {seeds}{' (given)' if ctx.get('seed_given') else ' (default; --seed N to change)'}; "
                     f"a classifier (embed {plan.get('embed_dim')}, dense {plan.get('dense_dim')}, "
                     f"{plan.get('num_heads')} heads) trained {plan.get('steps')} steps of {plan.get('batch')} on "
                     f"the synthetic task ({plan.get('train_count')} train, {plan.get('test_count')} test "
                     "sequences), with two norms and with one shared norm")
    versions = ", ".join(f"{name} {ctx[key]}" for name, key in
                         (("Python", "python"), ("TensorFlow", "tensorflow"), ("Keras", "keras")) if ctx.get(key))
    if versions:
        grid.add_row("Versions", Text(printable(versions)))
    if ctx.get("sandbox"):
        grid.add_row("Sandbox", Text(printable(ctx["sandbox"])))
    if ctx.get("seconds") is not None:
        grid.add_row("Time", f"{ctx['seconds']:.0f} s (grading {ctx.get('grading_seconds', 0):.0f} s, "
                             f"experiments {ctx.get('experiment_seconds', 0):.0f} s)")
    return Panel(grid, title="Why two LayerNormalization layers? — measured", title_align="left",
                 border_style="blue")


def claim_panel(number: int, claim: Claim) -> RenderableType:
    symbol, style = VERDICT_STYLE.get(claim.verdict, ("?", "white"))
    parts: list[RenderableType] = [Text(claim.claim, style="bold")]
    verdict = Text(f"{symbol} {claim.verdict}", style=f"bold {style}")
    verdict.append("  ")
    verdict.append(claim.summary, style="default")
    parts.append(verdict)
    if "missing" not in claim.measured:
        details = DETAILS.get(claim.id)
        if details is not None:
            parts.extend(details(claim.measured))
    return Panel(Group(*parts), title=f"{number} · {claim.id}", title_align="left", border_style=style)


def footer(explanation: Explanation) -> RenderableType:
    counts = {v: sum(c.verdict == v for c in explanation.claims) for v in VERDICT_STYLE}
    line = Text()
    for index, (verdict, count) in enumerate(counts.items()):
        if index:
            line.append("  ·  ")
        line.append(f"{count} {verdict}", style=VERDICT_STYLE[verdict][1])
    note = Text("Small experiments on a tiny classifier and a synthetic task: they show what each mechanism "
                "does, not how much it matters in a large model. The numbers behind every verdict, and the "
                "rule that decided it, are in --json.", style="dim")
    return Panel(Group(line, note), border_style="blue")


# --------------------------------------------------------------------------- plots


def sparkline(values, low: float | None = None, high: float | None = None) -> str:
    """One block character per value, on the scale [low, high] (the values' own range by default)."""
    values = [float(v) for v in values]
    if not values:
        return ""
    low = min(values) if low is None else low
    high = max(values) if high is None else high
    if not high > low:
        return BLOCKS[len(BLOCKS) // 2] * len(values)
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[min(top, max(0, round((v - low) / (high - low) * top)))] for v in values)


def bar(value: float, largest: float, width: int = 16) -> str:
    if largest <= 0 or value <= 0:
        return ""
    return "█" * max(1, round(value / largest * width))


def _shrink(values, points: int) -> list[float]:
    values = [float(v) for v in values]
    if len(values) <= points:
        return values
    size = len(values) / points
    return [sum(chunk) / len(chunk) for chunk in
            (values[int(i * size):max(int((i + 1) * size), int(i * size) + 1)] for i in range(points))]


def _table(*columns: tuple[str, str]) -> Table:
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="dim")
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=True)
    return table


def _g(value, digits: int = 3) -> str:
    return f"{float(value):.{digits}g}"


# --------------------------------------------------------------------------- details of each claim


def _inputs_differ(measured: dict) -> list[RenderableType]:
    profiles = measured.get("first_seed") or {}
    table = _table(("", "left"), ("norm input", "left"), ("per-feature mean", "left"), ("spread", "right"),
                   ("", "left"))
    largest = max((sum(p[k]["std"]) / len(p[k]["std"]) for p in profiles.values() for k in ("first", "second")
                   if p[k]["std"]), default=0.0)
    for stage in ("before", "after"):
        profile = profiles.get(stage)
        if not profile:
            continue
        means = profile["first"]["mean"] + profile["second"]["mean"]
        bound = max(abs(v) for v in means) or 1.0
        for index, key in enumerate(("first", "second")):
            spread = sum(profile[key]["std"]) / len(profile[key]["std"])
            table.add_row(f"{stage} training" if index == 0 else "", PLACES[index],
                          sparkline(profile[key]["mean"], -bound, bound), _g(spread), bar(spread, largest, 12))
    seeds = _table(("seed", "right"), ("mean difference", "right"), ("", "right"), ("spread ratio", "right"),
                   ("", "right"), ("split-half noise", "right"))
    seeds.add_row("", "before", "after", "before", "after", "")
    for row in measured.get("per_seed") or []:
        before, after = row["before"], row["after"]
        noise_d = max(before["noise_mean_difference"], after["noise_mean_difference"])
        noise_r = max(before["noise_spread_ratio"], after["noise_spread_ratio"])
        seeds.add_row(str(row["seed"]), _g(before["mean_difference"], 2), _g(after["mean_difference"], 2),
                      _g(before["spread_ratio"]), _g(after["spread_ratio"]), f"≤ {noise_d:.2g} / {noise_r:.3g}")
    note = Text("above: first seed, over the real positions of the test sequences; spread is the features' "
                "standard deviation. Below: the mean difference is in units of spread; noise is the same "
                "statistic between two halves of one norm's inputs.", style="dim")
    return [table, note, seeds]


def _parameters_diverge(measured: dict) -> list[RenderableType]:
    after = measured.get("first_seed_after") or {}
    rows = measured.get("per_seed") or []
    table = _table(("after training", "left"), ("values per feature", "left"), ("from initial", "right"))
    first = rows[0] if rows else {}
    for name in ("gamma", "beta"):
        vectors = after.get(name) or []
        everything = [v for vector in vectors for v in vector]
        if not everything:
            continue
        low, high = min(everything), max(everything)
        for index, vector in enumerate(vectors):
            moved = first.get(f"{name}_from_initial", [None, None])[index]
            table.add_row(f"{name}, norm {index + 1}", sparkline(vector, low, high),
                          "" if moved is None else _g(moved))
    line = Text("first seed. Distance between the norms (gamma / beta) and gap between their updates, per seed: "
                + "; ".join(f"seed {r['seed']}: {r['gamma_between']:.2g} / {r['beta_between']:.2g}, "
                            f"gap {r['update_gap_ratio']:.2g}" for r in rows), style="dim")
    return [table, line]


def _shared_couples(measured: dict) -> list[RenderableType]:
    table = _table(("seed", "right"), ("|grad| attention place", "right"), ("|grad| ffn place", "right"),
                   ("angle", "right"), ("opposed steps", "right"))
    for row in measured.get("per_seed") or []:
        table.add_row(str(row["seed"]), _g(row["median_gamma_first"]), _g(row["median_gamma_second"]),
                      f"{row['median_angle']:.0f}°", f"{row['steps_opposed']}/{row['steps']}")
    angles = _shrink(measured.get("first_seed_angles") or [], 48)
    plot = Text("angle per step, first seed (0° to 180°): ", style="dim")
    plot.append(sparkline(angles, 0.0, 180.0), style="cyan")
    equivalence = measured.get("equivalence") or {}
    note = Text("medians over the training steps, for the shared gamma's gradient; the tied model reproduces a "
                f"genuinely shared norm to {equivalence.get('relative_gradient_mismatch', float('nan')):.1g} "
                "(relative gradient mismatch).", style="dim")
    return [table, plot, note]


def _sharing_cost(measured: dict) -> list[RenderableType]:
    table = _table(("variant", "left"), ("test loss", "right"), ("accuracy", "right"),
                   ("training loss, log", "left"))
    curves = [measured[k]["loss_curve"] for k in ("two_norms", "shared_norm") if measured.get(k)]
    logs = [math.log10(max(v, 1e-12)) for curve in curves for v in curve]
    low, high = (min(logs), max(logs)) if logs else (0.0, 1.0)
    for key, name in (("two_norms", "two norms"), ("shared_norm", "one shared norm")):
        variant = measured.get(key)
        if not variant:
            continue
        table.add_row(name, f"{variant['test_loss']['mean']:.3g} ± {variant['test_loss']['sd']:.2g}",
                      f"{variant['test_accuracy']['mean']:.1%} ± {variant['test_accuracy']['sd']:.1%}",
                      sparkline([math.log10(max(v, 1e-12)) for v in _shrink(variant["loss_curve"], 20)], low, high))
    difference = measured.get("test_loss_difference") or {}
    if difference:
        table.add_row(Text("shared − two", style="bold"), f"{difference['mean']:+.2g}", "", "")
    note = Text(f"mean ± sd over seeds {', '.join(str(s) for s in measured.get('seeds', []))}; each seed trains "
                "both variants from the same weights on the same data.", style="dim")
    if difference:
        note.append(f" Test loss difference (shared − two), 95% interval: {difference['low']:+.2g} to "
                    f"{difference['high']:+.2g}.")
    return [table, note]


def _parameter_count(measured: dict) -> list[RenderableType]:
    table = _table(("", "left"), ("trainable parameters", "right"))
    table.add_row("two norms", str(measured["two_norms"]))
    table.add_row("one shared norm", str(measured["shared_norm"]))
    table.add_row(Text("difference", style="bold"),
                  f"{measured['difference']} ({measured['fraction_of_classifier']:.1%})")
    return [table]


DETAILS = {
    "inputs_differ": _inputs_differ,
    "parameters_diverge": _parameters_diverge,
    "shared_couples": _shared_couples,
    "sharing_cost": _sharing_cost,
    "parameter_count": _parameter_count,
}
