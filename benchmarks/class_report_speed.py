"""The class report's size and drawing time, and its hand-made SVG against matplotlib's.

    python benchmarks/class_report_speed.py [--students N] [--repeat R]

Builds a synthetic class of N verdicts (exercise 3's checks, a mix of mistakes, some submissions
that could not be graded), then measures ``grader.integrations.class_report.render``: the page's
size and the time to draw it (best of R); and ``render_student`` for every student: the size of the
students' pages in all and the time to draw them (once: Rich lays out each student's report). If
matplotlib is importable it draws the same charts (the score histogram, one pass-rate chart per
topic, the time histogram) as SVG with text kept as text (``svg.fonttype = none``, its smallest),
and reports their size, the time to draw them and the time to import matplotlib in a fresh
interpreter. matplotlib is not a dependency of the project: install it beside this run only to
compare (``pip install --target /tmp/mpl matplotlib`` and ``PYTHONPATH=/tmp/mpl``).
Nothing is written but the class page, to a temporary folder.
"""

from __future__ import annotations

import argparse
import io
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.integrations.class_report import render, render_student, summarise  # noqa: E402
from grader.integrations.results import ClassResults  # noqa: E402

CHECKS = {
    "api": ["api.builds", "api.output_shape", "api.call_signature"],
    "weights": ["weights.two_norms", "weights.norm_parameters", "weights.count"],
    "gradients": ["gradients.every_variable", "gradients.norms_differ", "gradients.norms_diverge"],
    "config": ["config.round_trip", "config.keys"],
    "mask": ["mask.shape", "mask.padding_keys", "mask.broadcast"],
    "forward": ["forward.post_norm", "forward.residuals"],
}
MISTAKES = [(), ("weights.two_norms",), ("mask.padding_keys",), ("forward.post_norm",), ("config.round_trip",),
            ("weights.two_norms", "mask.shape")]


def synthetic_class(students: int, seed: int = 0) -> ClassResults:
    rng = random.Random(seed)
    verdicts, seconds = [], {}
    for index in range(students):
        identity = f"student{index:05d}"
        if rng.random() < 0.05:
            verdicts.append({"id": identity, "student": identity, "status": "error", "score": 0, "max_score": 16,
                             "error": "SyntaxError: invalid syntax (exercise3.py, line 12)", "checks": [],
                             "seed": None, "grader_version": "0.1.0", "graded_at": "2026-12-01T10:00:00+00:00"})
            seconds[identity] = rng.uniform(0.5, 2)
            continue
        wrong = set(rng.choice(MISTAKES))
        checks = []
        for topic, ids in CHECKS.items():
            for check_id in ids:
                status = "failed" if check_id in wrong else "passed"
                if topic == "gradients" and "weights.two_norms" in wrong and check_id != "gradients.every_variable":
                    status = "skipped"
                message = ("Not checked (see check weights.two_norms)." if status == "skipped"
                           else f"{check_id}: expected something else" if status == "failed" else "")
                checks.append({"id": check_id, "title": check_id, "topic": topic, "status": status,
                               "points": 1.0 if status == "passed" else 0.0, "max_points": 1.0, "message": message})
        verdicts.append({"id": identity, "student": identity, "status": "failed" if wrong else "passed",
                         "score": sum(c["points"] for c in checks), "max_score": 16, "error": None, "checks": checks,
                         "seed": None, "grader_version": "0.1.0", "graded_at": "2026-12-01T10:00:00+00:00"})
        seconds[identity] = rng.uniform(3, 25)
    manifest = {"format": 1, "exercise": "exercise3", "shard": {"k": 1, "n": 1}, "seed": None,
                "grader_version": "0.1.0", "sandbox": ["Landlock ABI 7: ..."], "class": sorted(seconds)}
    return ClassResults("synthetic", verdicts, seconds, manifest)


def best_of(repeat: int, work) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = work()
        best = min(best, time.perf_counter() - started)
    return best, value


def matplotlib_charts(results: ClassResults) -> list[str]:
    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    from matplotlib import pyplot

    summary = summarise(results)
    charts = []

    def svg(figure) -> str:
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg")
        pyplot.close(figure)
        return buffer.getvalue()

    figure, axes = pyplot.subplots(figsize=(6.4, 2.2))
    axes.bar([str(p) for p, _ in summary.distribution], [c for _, c in summary.distribution])
    charts.append(svg(figure))
    for _, _, checks in summary.topics:
        figure, axes = pyplot.subplots(figsize=(6.4, 0.3 * len(checks) + 0.3))
        axes.barh([c.id for c in checks], [c.rate for c in checks])
        axes.set_xlim(0, 1)
        charts.append(svg(figure))
    figure, axes = pyplot.subplots(figsize=(6.4, 2.2))
    axes.hist(list(summary.seconds.values()), bins=10)
    charts.append(svg(figure))
    return charts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[30, 300, 3000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    try:
        import matplotlib  # noqa: F401

        have_matplotlib = True
    except ImportError:
        have_matplotlib = False
    render(synthetic_class(3))  # the first page imports what a page needs once
    for students in args.students:
        results = synthetic_class(students)
        seconds, page = best_of(args.repeat, lambda: render(results))
        svg = sum(len(part.split("</svg>")[0]) for part in page.split("<svg")[1:])
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "report.html").write_text(page, encoding="utf-8")
            size = (Path(folder) / "report.html").stat().st_size
        print(f"{students:5d} students: page {size / 1024:7.1f} KiB (its charts {svg / 1024:5.1f} KiB), "
              f"drawn in {seconds * 1000:6.1f} ms")
        started = time.perf_counter()
        pages = [render_student(record, "exercise3") for record in results.verdicts]
        drawn = time.perf_counter() - started
        print(f"{'':5s}   the students' pages: {sum(len(p.encode('utf-8')) for p in pages) / 1024:7.1f} KiB in all, "
              f"drawn in {drawn * 1000:6.0f} ms ({drawn * 1000 / max(1, len(pages)):.1f} ms a page)")
        if have_matplotlib:
            mpl_seconds, charts = best_of(args.repeat, lambda: matplotlib_charts(results))
            mpl_size = sum(len(c.encode("utf-8")) for c in charts)
            print(f"{'':5s}   matplotlib, the same {len(charts)} charts: {mpl_size / 1024:5.1f} KiB, drawn in "
                  f"{mpl_seconds * 1000:6.1f} ms")
    if have_matplotlib:
        code = "import time; t = time.perf_counter(); import matplotlib.pyplot; print(time.perf_counter() - t)"
        imports = min(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                           check=True).stdout) for _ in range(3))
        print(f"importing matplotlib.pyplot in a fresh interpreter: {imports * 1000:.0f} ms")
    else:
        print("matplotlib is not importable here: no comparison (see this script's docstring)")


if __name__ == "__main__":
    main()
