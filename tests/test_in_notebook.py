"""The grader where students work: ``check()`` in a notebook, and the course's "Check your work" cell.

A real kernel (nbclient, as Jupyter runs one) executes a self-learner's notebook that calls
``check()``; the report in the cell is ``grade``'s, with the score ``grade --submission --json``
gives the same code. The released course notebook's check cell shows that report where the grader
is installed and, where ``import grader`` fails, runs its plain asserts and says they are a smoke
test. The slow tier runs the course's notebook in a kernel with a wrong and a right answer, and
without the grader.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader import exercises
from grader.verdict import CheckResult, Verdict

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")


def _mistake(exercise_id: str, name: str) -> str:
    from .catalog import catalog

    return next(m.source for m in catalog(exercise_id)[0] if m.name == name)


SHARED_NORM = _mistake("exercise3", "shared_norm")
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")


def run_notebook(notebook, folder: Path, env: dict | None = None, name: str = "notebook.ipynb"):
    """Save ``notebook`` as ``folder/name`` and execute it there in a real kernel, as Jupyter does."""
    import nbclient

    folder.mkdir(parents=True, exist_ok=True)
    notebook.metadata = {"kernelspec": KERNELSPEC}
    nbformat.write(notebook, folder / name)
    nbclient.NotebookClient(notebook, timeout=300, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute(env=env or ENV)
    return notebook


def json_score(exercise_id: str, code: str, folder: Path) -> float:
    """The score ``grade EXERCISE --submission FILE.py --json`` gives ``code``."""
    path = folder / f"{exercise_id}.py"
    path.write_text(code, encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "grader", exercise_id, "--submission", str(path), "--json",
                             "--no-server"], capture_output=True, text=True, env=ENV, timeout=600)
    return json.loads(result.stdout)["score"]


def html_text(html: str) -> str:
    """What a browser shows of the report's HTML: its text, entities read."""
    import html as entities

    return entities.unescape(re.sub(r"<[^>]+>", "", html))


def report_outputs(cell) -> list:
    return [o for o in cell.outputs if o.output_type == "display_data" and "text/html" in o.data]


# --------------------------------------------------------------------------- a self-learner's notebook


def test_check_in_a_real_kernel_shows_grades_report_and_score_and_nothing_on_stderr(tmp_path):
    """A notebook with the shared-norm encoder, then `from grader import check; v = check()`: the cell
    holds one report, as HTML and as text, with grade's score, the cause and the call that checks
    again; the verdict is returned; a second call with hint=True adds the hint for that cause; nothing
    reaches stderr."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(SHARED_NORM),
        nbformat.v4.new_code_cell("from grader import check\nv = check()\nprint(v.score, type(v).__mro__[1].__name__)"),
        nbformat.v4.new_code_cell('check("exercise3", hint=True)'),
    ])
    run_notebook(notebook, tmp_path / "work", name="my-encoder.ipynb")
    expected = json_score("exercise3", SHARED_NORM, tmp_path)
    assert expected == 17
    first, again = notebook.cells[1], notebook.cells[2]
    for cell in (first, again):
        assert [o.get("name") for o in cell.outputs if o.output_type == "stream"] in ([], ["stdout"])
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    [shown] = report_outputs(first)
    text, page = shown.data["text/plain"], html_text(shown.data["text/html"])
    for report in (text, page):
        assert f"Score {expected:g}/23" in report
        assert "Two distinct LayerNormalization layers are applied" in report and "weights.two_norms" in report
        assert "one instance is called 2 times" in " ".join(report.split())
        assert 'check("exercise3")' in report and "grade hint" not in report
        assert "my-encoder.ipynb" in report  # the saved notebook was graded
    assert shown.data["text/html"].startswith("<pre") and "color" in shown.data["text/html"]
    assert [o.text for o in first.outputs if o.output_type == "stream"] == [f"{float(expected)} Verdict\n"]
    [hinted] = report_outputs(again)  # shown once, though the call is the cell's last expression
    assert "hint" in hinted.data["text/plain"] and "for weights.two_norms" in hinted.data["text/plain"]


def test_the_grader_s_calls_in_a_notebook_are_never_graded(tmp_path):
    """`grade --submission` of a notebook that calls the grader grades the answer without them, as
    check() does: the calls, and what uses what they return, are commented out where they stand."""
    from grader.submission import read_submission

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("from grader import check"),
        nbformat.v4.new_code_cell("import numpy as np\n\nx = np.zeros(3)"),
        nbformat.v4.new_code_cell("v = check(); print(v.score)\ny = x + 1"),
    ])
    path = tmp_path / "mine.ipynb"
    nbformat.write(notebook, path)
    source = read_submission(path)
    assert source.text.splitlines() == ["# from grader import check", "", "import numpy as np", "",
                                        "x = np.zeros(3)", "", "# v = check(); print(v.score)", "y = x + 1"]
    assert source.where(8) == "code cell 3, line 2"


def _verdict(status_of_two_norms: str = "failed") -> Verdict:
    checks = [CheckResult("api.output_shape", "Output shape", "api", "passed", 2.0, 2.0, ""),
              CheckResult("weights.two_norms", "Two distinct LayerNormalization layers are applied", "weights",
                          status_of_two_norms, 0.0 if status_of_two_norms == "failed" else 2.0, 2.0,
                          "Observed: one instance is called 2 times.\nExpected: 2 separate instances.\n"
                          "Why it matters: each norm learns its own gamma and beta.")]
    score = sum(c.points for c in checks)
    return Verdict("exercise3", "the cells this kernel ran", "failed" if score < 4 else "passed", score, 4.0,
                   None, checks, {"title": "The Transformer encoder"})


def test_the_drawn_report_is_the_terminal_s_with_the_notebook_s_call():
    """The cell's report is grader.report's: the same header, cause and score as text and as HTML;
    the advice names check() where the terminal's names `grade hint`; a note goes above it."""
    from rich.console import Console

    from grader.in_notebook import WIDTH, drawn
    from grader.report import render

    text, page = drawn(_verdict(), 'check("exercise3")', note="A note above the report.")
    console = Console(record=True, width=WIDTH, file=open(os.devnull, "w"))
    console.print(render(_verdict()))
    terminal = console.export_text()
    assert text.startswith("A note above the report.")
    for line in ("✗ Weights 0/2  which variables exist", "Observed: one instance is called 2 times.",
                 "Score 2/4  ·  1 passed  ·  1 failed  ·  1 cause"):
        assert line in terminal and line in text and line in html_text(page)
    assert "grade hint exercise3" in terminal and "grade hint" not in text
    assert 'check("exercise3", hint=True)' in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert "<script" not in page and "<html" not in page  # a fragment for a cell, drawing nothing else


def test_the_exercise_is_the_one_whose_class_the_notebook_defines(tmp_path):
    """In an IPython shell: the class's name picks the exercise; the two editions' classes of one name are
    told apart by the constructor's parameters; none, several, or an unknown name is a message that lists
    the choices."""
    from IPython.core.interactiveshell import InteractiveShell

    from grader.in_notebook import CheckError, choose_exercise

    shell = InteractiveShell.instance()
    try:
        with pytest.raises(CheckError, match=r"defines none of the exercises' classes.*exercise3 \(TransformerEncoder\)"):
            choose_exercise(None, None)
        shell.run_cell("class TransformerEncoder:\n    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):\n"
                       "        pass\n", store_history=True)
        assert choose_exercise(None, None).id == "exercise3"
        shell.run_cell("class TransformerEncoder:\n    def __init__(self, hidden_dim, intermediate_dim, num_heads):\n"
                       "        pass\n", store_history=True)
        assert choose_exercise(None, None).id == "ch15_encoder"
        assert choose_exercise(3, None).id == "exercise3" and choose_exercise("exercise3", None).id == "exercise3"
        shell.run_cell("class PositionalEmbedding:\n    pass\n", store_history=True)
        with pytest.raises(CheckError, match=r"several exercises: exercise1 \(PositionalEmbedding\), "
                                             r"exercise3 .*ch15_embedding .*ch15_encoder .*Name the one"):
            choose_exercise(None, None)
        shell.run_cell("def build_classifier(vocab_size):\n    pass\n", store_history=True)
        assert choose_exercise(None, None).id == "exercise5"  # its answer carries the layers of 1 and 3
        with pytest.raises(CheckError, match=r"no exercise 'exercise9'.*exercise5 \(build_classifier\)"):
            choose_exercise("exercise9", None)
    finally:
        InteractiveShell.clear_instance()


# --------------------------------------------------------------------------- the course's check cell


def released(exercise_id: str, answer: str):
    """The course's notebook as nbgrader releases it (no hidden tests), the answer cell filled in."""
    from grader.integrations.course import build_notebook

    notebook = build_notebook(exercises.get(exercise_id))
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            cell.source = answer
        cell.source = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S)
    return notebook


def check_cell(notebook):
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("-check"))


def test_without_the_grader_the_check_cell_runs_its_asserts_and_says_they_are_a_smoke_test(tmp_path):
    """The released cell's other branch, in a Python where `import grader` fails: it says the asserts are
    a smoke test and the hidden tests run at grading time, runs them on the answer, and writes nothing
    to stderr."""
    cell = exercises.get("exercise3").notebook.check_cell("exercise3")
    script = tmp_path / "cell.py"
    # the answer imports TensorFlow, which logs on stderr before its settings apply: the cell starts after it
    script.write_text(SOLUTION + "\n\nimport os\nos.write(2, b'-- the check cell --\\n')\n" + cell + "\n",
                      encoding="utf-8")
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "grader.py").write_text('raise ImportError("no grader in this environment")\n', encoding="utf-8")
    env = dict(ENV, PYTHONPATH=str(shadow))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "The grader is not installed here, so these plain asserts are a smoke test only: the hidden tests "
        "check everything when your notebook is graded.", "The smoke test passed."]
    assert result.stderr.endswith("-- the check cell --\n")


@pytest.mark.slow
@pytest.mark.parametrize("answer, right", [(SHARED_NORM, False), (SOLUTION, True)])
def test_the_released_check_cell_shows_the_full_report_where_the_grader_is_installed(tmp_path, answer, right):
    """The released exercise3 notebook in a real kernel: its check cell says the report is feedback,
    not a grade, and shows grade's report with the score `grade --json` gives the answer; no stderr."""
    notebook = run_notebook(released("exercise3", answer), tmp_path / "release", name="exercise3.ipynb")
    cell = check_cell(notebook)
    assert [o.output_type for o in cell.outputs] == ["stream", "display_data"], cell.outputs
    assert cell.outputs[0].name == "stdout" and "feedback, not a grade" in cell.outputs[0].text
    expected = json_score("exercise3", answer, tmp_path)
    assert expected == (23 if right else 17)
    report = cell.outputs[1].data
    for shown in (report["text/plain"], html_text(report["text/html"])):
        assert f"Score {expected:g}/23" in shown
        assert ("Every check passed" in shown) == right
        assert ("weights.two_norms" in shown) == (not right)


@pytest.mark.slow
def test_the_released_check_cell_without_the_grader_in_a_real_kernel(tmp_path):
    """The kernel's Python cannot import the grader: the cell runs its asserts and says what they are."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "grader.py").write_text('raise ImportError("no grader in this environment")\n', encoding="utf-8")
    notebook = run_notebook(released("exercise3", SOLUTION), tmp_path / "release",
                            env=dict(ENV, PYTHONPATH=str(shadow)), name="exercise3.ipynb")
    cell = check_cell(notebook)
    text = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
    assert "smoke test only" in text and "The smoke test passed." in text
    assert not [o for o in cell.outputs if o.output_type in ("error", "display_data") or o.get("name") == "stderr"]


# --------------------------------------------------------------------------- in a browser


def test_a_browser_draws_the_cell_s_report(tmp_path):
    """The report's HTML, as a notebook shows it, in headless Chromium: its text is the report's."""
    from grader.in_notebook import drawn

    from .system_packages import headless_chromium

    driver = headless_chromium("1000,800", "draw the report")

    text, page = drawn(_verdict(), 'check("exercise3")')
    path = tmp_path / "cell.html"
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{page}</body></html>",
                    encoding="utf-8")
    try:
        driver.get(path.as_uri())
        shown = driver.execute_script("return document.body.innerText")
        assert "Score 2/4" in shown and "Observed: one instance is called 2 times." in shown
        shots = Path(os.environ.get("GRADE_REPORT_SCREENSHOTS", tmp_path))
        assert driver.save_screenshot(str(shots / "notebook-report.png"))
    finally:
        driver.quit()
