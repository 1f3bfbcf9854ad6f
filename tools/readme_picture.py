"""Draws the report the README shows: a real grading of a real mistake, rendered by Rich to SVG.

    python tools/readme_picture.py           # rewrite docs/report.svg
    python tools/readme_picture.py --check   # exit 1 if docs/report.svg is not what it draws now

The submission is exercise 3's solution with the chapter's own question answered wrong: one
LayerNormalization shared by both places. It is graded as `grade exercise3 --seed 1` grades it;
the picture leaves out what differs between machines (the header's versions and sandbox, the
path of the scratch copy) and is drawn 80 columns wide, so the same sources give the same bytes.
tests/test_readme.py fails when the committed picture is out of date.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "report.svg"
SEED = 1
WIDTH = 80
TITLE = "grade exercise3"
SHARED_NORM = ("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")
# Header fields that change from one machine to another.
MACHINE_CONTEXT = ("python", "tensorflow", "keras", "sandbox", "confinement", "seconds")


def mistaken_encoder() -> str:
    from grader import exercises

    solution = exercises.get("exercise3").solution.read_text(encoding="utf-8")
    old, new = SHARED_NORM
    if solution.count(old) != 1:
        raise RuntimeError(f"exercise 3's solution no longer holds {old!r} once: update SHARED_NORM")
    return solution.replace(old, new)


def draw() -> str:
    """The SVG of the report of the mistaken encoder."""
    from rich.console import Console

    from grader.api import Settings, grade
    from grader.report import render

    with tempfile.TemporaryDirectory() as scratch:
        submission = Path(scratch) / "exercises" / "exercise3.py"
        submission.parent.mkdir()
        submission.write_text(mistaken_encoder(), encoding="utf-8")
        verdict = grade("exercise3", submission, Settings(seed=SEED))
    if verdict.status != "failed":
        raise RuntimeError(f"the shared norm should fail some checks, got {verdict.status}: {verdict.error}")
    context = {key: value for key, value in verdict.context.items() if key not in MACHINE_CONTEXT}
    verdict = dataclasses.replace(verdict, submission="exercises/exercise3.py", context=context)
    console = Console(record=True, width=WIDTH, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      legacy_windows=False)
    console.print(render(verdict))
    return console.export_svg(title=TITLE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/readme_picture.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help=f"compare with {PICTURE.relative_to(ROOT)} instead")
    args = parser.parse_args(argv)
    svg = draw()
    if args.check:
        current = PICTURE.read_text(encoding="utf-8") if PICTURE.exists() else None
        if current != svg:
            print(f"{PICTURE} is out of date: run python tools/readme_picture.py", file=sys.stderr)
            return 1
        return 0
    PICTURE.parent.mkdir(exist_ok=True)
    PICTURE.write_text(svg, encoding="utf-8")
    print(f"wrote {PICTURE}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
