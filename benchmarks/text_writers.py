"""How long each writer of a verdict takes on adversarial text at the size bound, against half of it.

A check's message may quote a submission's text up to ``grader.protocol.limits.MAX_MESSAGE``
characters. Every writer downstream must be linear in it: this times Gradescope's Markdown,
PrairieLearn's JSON, the terminal report (Rich, 80 columns), the class page's escaping, CSV and
JSON, each on the adversarial texts of tests/test_text_bounds.py grown to the bound and to half of
it, side by side in one run, and prints the ratio (linear: about 2; the Markdown writer's old
code-span regex took about 4, and 56 s for one verdict at the bound).

    python benchmarks/text_writers.py
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from grader.integrations import platforms  # noqa: E402
from grader.integrations.class_report import e  # noqa: E402
from grader.protocol import limits  # noqa: E402
from grader.report import render  # noqa: E402
from grader.verdict import CheckResult, summarise  # noqa: E402

PATTERNS = {"backticks": "`", "backtick_runs": "``x`x```x", "brackets": "[[]", "rich_markup": "[bold red]",
            "html": "<script>a</script>", "control": "\x1b[31m\x07\r"}


def verdict_of(message: str):
    checks = [CheckResult("api.constructor", "The constructor", "api", "failed", 0.0, 1.0, message)]
    return summarise("exercise3", "/class/x.py", checks, {"title": "t", "seed": 1, "timeout": 120.0,
                                                          "memory_mb": 4096})


def writers(verdict):
    message = verdict.checks[0].message

    def rich():
        console = Console(file=io.StringIO(), width=80, color_system=None)
        console.print(render(verdict))

    def comma_separated():
        csv.writer(io.StringIO()).writerow([message])

    return {"gradescope markdown": lambda: platforms.gradescope_results(verdict, "visible"),
            "prairielearn json": lambda: json.dumps(platforms.prairielearn_results(verdict)),
            "terminal report": rich, "class page html": lambda: e(message), "csv": comma_separated,
            "json": lambda: json.dumps(verdict.to_json())}


def seconds(function, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    print(f"message bound: {limits.MAX_MESSAGE:,} characters")
    worst = 0.0
    for name, pattern in PATTERNS.items():
        full = (pattern * (limits.MAX_MESSAGE // len(pattern) + 1))[:limits.MAX_MESSAGE]
        half = full[:limits.MAX_MESSAGE // 2]
        at_full, at_half = writers(verdict_of(full)), writers(verdict_of(half))
        for writer in at_full:
            big, small = seconds(at_full[writer]), seconds(at_half[writer])
            ratio = big / small if small > 0 else float("nan")
            worst = max(worst, ratio)
            print(f"{name:14} {writer:20} {big * 1000:9.2f} ms at the bound, {small * 1000:9.2f} ms at half: "
                  f"x{ratio:.2f}")
    print(f"worst ratio: x{worst:.2f} (linear: about 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
