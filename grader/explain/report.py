"""Renders an Explanation (``grade explain``) as Rich renderables. Pure: explanation in, renderable out.

The report answers first: two or three plain sentences built from this run's
numbers (``plain_answer``), then each claim in a line or two with its verdict.
``details`` adds the full evidence: one panel per claim with the claim, its
verdict and summary, a small table of the numbers behind it and a sparkline or
bar plot. Reads well at 80 columns.
"""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .run import Explanation
from ..report import printable
from .claims import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, Claim

VERDICT_STYLE = {SUPPORTED: ("✓", "green"), NOT_SUPPORTED: ("✗", "red"), INCONCLUSIVE: ("?", "yellow")}
BLOCKS = "▁▂▃▄▅▆▇█"
PLACES = ("x + attention(x)", "h + ffn(h)")


def render(explanation: Explanation, details: bool = False, predictions: dict | None = None) -> RenderableType:
    """``predictions``: the student's answer to each claim's question, asked before the run
    (``QUESTIONS``: "yes", "no" or "?"), told beside what was measured."""
    parts: list[RenderableType] = [header(explanation) if details else short_header(explanation)]
    answer = plain_answer(explanation)
    if answer:
        parts.append(Panel(Text(answer), title="The answer, from this run", title_align="left",
                           border_style="green"))
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
    if details:
        if predictions:
            parts.append(claim_lines(explanation, predictions))
        for number, claim in enumerate(explanation.claims, start=1):
            parts.append(claim_panel(number, claim))
    else:
        parts.append(claim_lines(explanation, predictions))
    parts.append(footer(explanation, details))
    return Group(*parts)


def short_header(explanation: Explanation) -> RenderableType:
    who = "your encoder" if explanation.subject == "student" else "the reference encoder"
    title = Text("Why two LayerNormalization layers? — measured on ", style="bold")
    title.append(who, style="bold cyan")
    seed = explanation.context.get("seed")
    plan = explanation.context.get("plan") or {}
    if isinstance(seed, int) and plan.get("seeds"):
        title.append(f", seeds {seed} to {seed + plan['seeds'] - 1}", style="dim")
    return Group(title, Text(explanation.subject_reason, style="dim"))


# --------------------------------------------------------------------------- the answer


SHORT_CLAIMS = {
    "inputs_differ": "The two norms see differently distributed inputs",
    "parameters_diverge": "Each norm learns its own gamma and beta",
    "shared_couples": "One shared norm is pulled two ways at once",
    "sharing_cost": "The classifier trains worse with one shared norm",
    "parameter_count": "Two norms cost only 2 × embed_dim parameters",
}


def _first_seed(claim: Claim) -> dict:
    rows = claim.measured.get("per_seed") or []
    return rows[0] if rows and isinstance(rows[0], dict) else {}


def _measured(claim: Claim | None) -> bool:
    return claim is not None and "missing" not in claim.measured


def claim_numbers(claim: Claim) -> str:
    """The numbers behind a claim in a few words (its summary's first sentence when not measured)."""
    try:
        m = claim.measured
        if claim.id == "inputs_differ":
            after = _first_seed(claim)["after"]
            return (f"after training, features spread {after['spread_first']:.2g} at x + attention(x) and "
                    f"{after['spread_second']:.2g} at h + ffn(h)")
        if claim.id == "parameters_diverge":
            row = _first_seed(claim)
            return f"their updates differ by {row['update_gap_ratio']:.2g} times their size"
        if claim.id == "shared_couples":
            row = _first_seed(claim)
            return f"its two places' gradients are {row['median_angle']:.0f}° apart (median over steps)"
        if claim.id == "sharing_cost":
            numbers = (f"test loss {m['shared_norm']['test_loss']['mean']:.2g} with one shared norm, "
                       f"{m['two_norms']['test_loss']['mean']:.2g} with two")
            if "test_loss_spread" in m:
                numbers += (f": difference {m['test_loss_difference']['mean']:+.2g}, spread over seeds "
                            f"{m['test_loss_spread']:.2g}")
            return numbers
        if claim.id == "parameter_count":
            return f"{m['difference']} more parameters, {m['fraction_of_classifier']:.1%} of the classifier"
    except (KeyError, IndexError, TypeError, ValueError):
        pass
    return claim.summary.split(". ")[0].rstrip(".")


def plain_answer(explanation: Explanation) -> str:
    """Two or three sentences answering the chapter's question with this run's numbers; only what
    the verdicts support is said as fact."""
    claims = {claim.id: claim for claim in explanation.claims}
    whose = "Your two norms" if explanation.subject == "student" else "The reference encoder's two norms"
    sentences = []
    inputs, learned = claims.get("inputs_differ"), claims.get("parameters_diverge")
    if _measured(inputs) and inputs.verdict == SUPPORTED:
        try:
            after = _first_seed(inputs)["after"]
            ratio = max(after["spread_ratio"], 1 / after["spread_ratio"]) if after["spread_ratio"] else 0
            first = f"{whose} see inputs whose spread differs {ratio:.3g}-fold"
        except (KeyError, TypeError, ZeroDivisionError):
            first = f"{whose} see differently distributed inputs"
        if _measured(learned) and learned.verdict == SUPPORTED:
            first += ", and they learned different gamma and beta"
        sentences.append(first + ".")
    elif _measured(inputs):
        sentences.append(f"{whose}' inputs did not differ measurably in this run.")
    coupled, cost = claims.get("shared_couples"), claims.get("sharing_cost")
    if _measured(coupled) and coupled.verdict == SUPPORTED:
        try:
            angle = f" {_first_seed(coupled)['median_angle']:.0f}° apart"
        except (KeyError, TypeError, ValueError):
            angle = " that point different ways"
        second = f"One shared norm would have to serve both: its gamma follows the sum of two gradients{angle}"
        if _measured(cost):
            loss = claim_numbers(cost)
            second += {SUPPORTED: f", and the classifier trained with it did worse ({loss}).",
                       NOT_SUPPORTED: f", though here the classifier trained no worse with it ({loss}).",
                       INCONCLUSIVE: f"; this run does not show the classifier training worse with it ({loss})."
                       }.get(cost.verdict, ".")
        else:
            second += "."
        sentences.append(second)
    count = claims.get("parameter_count")
    if _measured(count) and count.verdict == SUPPORTED:
        fraction = count.measured.get("fraction_of_classifier")
        cheap = isinstance(fraction, (int, float)) and fraction < 0.05
        sentences.append(f"The second norm costs {'almost nothing' if cheap else 'little'}: {claim_numbers(count)}.")
    return " ".join(sentences)


# --------------------------------------------------------------------------- predictions (--predict)


# Asked before the experiments run; "yes" is what a supported claim measures.
QUESTIONS = {
    "inputs_differ": "Will the two norms see inputs with different statistics?",
    "parameters_diverge": "Will the two norms learn different gamma and beta?",
    "shared_couples": "Will one shared norm's gamma be pulled by two gradients pointing different ways?",
    "sharing_cost": "Will the classifier train worse with one shared norm than with two?",
    "parameter_count": "Will the second norm cost only its own gamma and beta (2 × embed_dim parameters)?",
}
ANSWERS = {"y": "yes", "yes": "yes", "n": "no", "no": "no"}


def read_predictions(ask) -> dict[str, str]:
    """Each question's answer: ``ask(question)`` returns what the student typed (None at the end of
    the input); anything but yes or no is "?"."""
    return {claim_id: ANSWERS.get((ask(question) or "").strip().lower(), "?")
            for claim_id, question in QUESTIONS.items()}


def prediction_note(claim: Claim, predictions: dict) -> tuple[Text, bool | None]:
    """What the student expected of ``claim`` against what was measured: (the words, whether the
    prediction was right — None when there is nothing to compare)."""
    expected = predictions.get(claim.id, "?")
    measured = {SUPPORTED: "yes", NOT_SUPPORTED: "no"}.get(claim.verdict)
    if expected == "?":
        return Text(" You were not sure.", style="dim"), None
    if measured is None:
        return Text(f" You said {expected}; this run could not tell.", style="dim"), None
    right = expected == measured
    return Text(f" You said {expected}: " + ("as you expected." if right else "not what you expected."),
                style="green" if right else "bold red"), right


def prediction_tally(explanation: Explanation, predictions: dict) -> Text:
    judged = [r for r in (prediction_note(c, predictions)[1] for c in explanation.claims) if r is not None]
    return Text(f"Your predictions: {sum(judged)} of {len(judged)} as measured.", style="bold cyan")


def claim_lines(explanation: Explanation, predictions: dict | None = None) -> RenderableType:
    """Each claim in a line or two: its verdict, in short, and its numbers (after --predict, and
    what the student expected)."""
    lines = [prediction_tally(explanation, predictions)] if predictions else []
    for claim in explanation.claims:
        symbol, style = VERDICT_STYLE.get(claim.verdict, ("?", "white"))
        line = Text()
        line.append(f"{symbol} ", style=f"bold {style}")
        line.append(SHORT_CLAIMS.get(claim.id, claim.claim), style="bold")
        line.append(f" ({claim.verdict}): ", style=style)
        line.append(claim_numbers(claim) + ".")
        if predictions:
            line.append_text(prediction_note(claim, predictions)[0])
        lines.append(line)
    return Group(*lines)


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
                         (("Python", "python"), ("TensorFlow", "tensorflow"), ("JAX", "jax"),
                          ("PyTorch", "torch"), ("Keras", "keras")) if ctx.get(key))
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


def footer(explanation: Explanation, details: bool = True) -> RenderableType:
    counts = {v: sum(c.verdict == v for c in explanation.claims) for v in VERDICT_STYLE}
    line = Text()
    for index, (verdict, count) in enumerate(counts.items()):
        if index:
            line.append("  ·  ")
        line.append(f"{count} {verdict}", style=VERDICT_STYLE[verdict][1])
    note = Text("Small experiments on a tiny classifier and a synthetic task: they show what each mechanism "
                "does, not how much it matters in a large model. "
                + ("The numbers behind every verdict, and the rule that decided it, are in --json." if details else
                   "--details shows the evidence behind each claim; --json every number and rule."), style="dim")
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
    if "test_loss_spread" in measured:
        beyond = "larger" if measured.get("difference_beyond_spread") else "no larger"
        note.append(f" The difference, {difference.get('mean', 0):+.2g}, is {beyond} than the test loss's spread "
                    f"over seeds, {measured['test_loss_spread']:.2g} (the larger sd): a claim is supported only "
                    "when it is larger.")
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
