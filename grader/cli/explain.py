"""``grade explain exercise3``: measure why the encoder needs two LayerNormalization layers."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

from .common import exercise_choice, add_backend_argument, report_console, resolve_settings
from .grading import find_working_copy


def explain_command(argv: list[str]) -> int:
    """`grade explain exercise3`: experiments on the encoder answering why it needs two norms."""
    from ..explain.run import DEFAULT_SEED, EXPLAINABLE, EXPLAIN_TIMEOUT

    parser = argparse.ArgumentParser(
        prog="grade explain",
        description="Measure why the Transformer encoder needs two LayerNormalization layers. Your encoder "
                    "is graded first; if it passes the structure checks (api, weights, gradients, mask, "
                    "forward) the experiments run on it, otherwise on the reference encoder, and the report "
                    "says which. In the same sandbox as grading, a small classifier is trained on the "
                    "synthetic task with two norms and with one shared norm, over three seeds; each claim of "
                    "the chapter's answer gets its numbers and a verdict: supported, not supported or "
                    "inconclusive. It takes about a minute. An explanation is never a score.",
        epilog="exit codes: 0 every experiment reported, 2 the experiments could not run or lost measurements. "
               "The same seed gives the same numbers.",
    )
    parser.add_argument("exercise", help=f"the exercise to explain: {', '.join(EXPLAINABLE)}")
    parser.add_argument("--submission", type=Path, metavar="PATH",
                        help="explain this .py file or .ipynb notebook instead of your working copy")
    parser.add_argument("--json", action="store_true",
                        help='print only {"exercise", "submission", "subject", "claims": [{"id", "claim", '
                             '"measured", "verdict", "summary"}]} on stdout')
    parser.add_argument("--details", action="store_true",
                        help="show the evidence behind each claim: tables, plots, seeds, versions and the sandbox")
    parser.add_argument("--predict", action="store_true",
                        help="first ask what you expect each experiment to show, then compare with the measurements")
    parser.add_argument("--seed", type=int, default=None,
                        help=f"seed of the experiments: seeds N, N+1 and N+2 are trained (default {DEFAULT_SEED})")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help=f"wall-clock limit of the grading and of the experiments, each (default "
                             f"{EXPLAIN_TIMEOUT:g})")
    parser.add_argument("--memory", type=int, default=None, metavar="MB",
                        help="memory limit of the processes running the encoder (default 4096)")
    add_backend_argument(parser)
    args = parser.parse_args(argv)
    exercise = exercise_choice(parser, args.exercise)
    if exercise.id not in EXPLAINABLE:
        parser.error(f"grade explain measures {', '.join(EXPLAINABLE)} only (the chapter's question "
                     f"about its two LayerNormalization layers), not {exercise.id}")
    settings = resolve_settings(args, parser)
    if args.timeout is None and not os.environ.get("GRADE_TIMEOUT"):
        settings = dataclasses.replace(settings, timeout=EXPLAIN_TIMEOUT)  # training takes longer than grading
    submission = (args.submission or find_working_copy(exercise)).resolve()
    if not submission.is_file():
        parser.error(f"{submission} is not a file")

    from ..explain.run import explain

    if args.json and args.predict:
        parser.error("--predict asks questions on the terminal; it cannot be combined with --json")
    if args.json:
        explanation = explain(exercise.id, submission, settings)
        print(json.dumps(explanation.to_json(), indent=2))
        return explanation.exit_code

    from rich.text import Text

    from ..explain.report import read_predictions, render

    console = report_console()
    predictions = None
    if args.predict:
        console.print("Before measuring: what do you expect? Answer y, n, or ? if you are not sure.")

        def ask(question: str):
            try:
                return console.input(Text(f"{question} [y/n/?] "))  # text, not Rich markup
            except EOFError:
                return None

        predictions = read_predictions(ask)
    with console.status("Starting …", spinner="dots") as status:
        explanation = explain(exercise.id, submission, settings, on_progress=status.update)
    console.print(render(explanation, details=args.details, predictions=predictions))
    return explanation.exit_code
