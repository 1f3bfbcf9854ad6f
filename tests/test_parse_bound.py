"""The grader's own processes read a submission only within a bound: a submission is parsed and
compiled in the grader's process (the syntax check, a notebook's cells) only up to
``MAX_SOURCE_BYTES`` of code, and a notebook decoded only up to ``MAX_NOTEBOOK_VALUES``; beyond,
it is refused at once, saying which limit, before anything is parsed. Parsing costs up to about
350 bytes of memory per byte of code: a 20 MB file parsed would cost the grader gigabytes.

Each process that reads submissions — a cold ``grade``, ``grade batch`` and the warm grading
server — is given a correct encoder with a pasted table of 2 MB and of 20 MB (as a file and as a
notebook) and must refuse each at once, its peak memory no more than a small file's grading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import exercises
from grader.api import Grading, Settings
from grader.submission import (MAX_BYTES, MAX_NOTEBOOK_VALUES, MAX_SOURCE_BYTES, SubmissionError,
                               read_submission)

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
ROOT = Path(__file__).resolve().parents[1]
SIZES = {"2MB": 2_000_000, "20MB": 20_000_000}
# A grading's parent holds a few tens of MB beyond its imports; a parse of 2 MB costs about 700 MB
HEADROOM_MB = 64


def with_table(size: int) -> str:
    """A correct encoder, then a pasted table of numbers up to ``size`` bytes in all: the costliest
    Python to parse of its size (a node for each number)."""
    row = ", ".join(f"{i % 97}" for i in range(40)) + ",\n"
    rows = (size - len(SOLUTION)) // len(row) + 1
    return SOLUTION + "\nTABLE = [\n" + row * rows + "]\n"


def notebook(code: str, outputs: str = "") -> str:
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": code,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": outputs}] if outputs else []}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name / ("exercise3" + (".ipynb" if name.endswith("notebook") else ".py"))
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


def refused(error: str) -> bool:
    """Whether ``error`` refuses a submission by one of the bounds, naming it."""
    return (f"at most {MAX_SOURCE_BYTES // 1024} KiB" in error and " MiB of " in error
            or f"larger than {MAX_BYTES // (1024 * 1024)} MiB" in error)


# ----------------------------------------------------------------------------- the bound itself
def test_code_at_the_bound_is_read_and_a_byte_over_is_refused_naming_the_bound(tmp_path):
    exact = SOLUTION + "#" * (MAX_SOURCE_BYTES - len(SOLUTION.encode()) - 1) + "\n"
    assert len(exact.encode()) == MAX_SOURCE_BYTES
    for name, text in (("exact", exact), ("exact_notebook", notebook(exact))):
        assert "TransformerEncoder" in read_submission(write(tmp_path, name, text)).text
    over = exact + "\n"
    for name, text in (("over", over), ("over_notebook", notebook(over))):
        with pytest.raises(SubmissionError) as refused:
            read_submission(write(tmp_path, name, text))
        assert f"at most {MAX_SOURCE_BYTES // 1024} KiB" in str(refused.value), str(refused.value)


def test_a_notebooks_outputs_do_not_count_as_its_code(tmp_path):
    """A notebook may carry large outputs (a training log, a plot): only its code is bounded."""
    path = write(tmp_path, "notebook", notebook(SOLUTION, outputs="epoch 1/1 loss 0.5\n" * 200_000))
    assert path.stat().st_size > 10 * MAX_SOURCE_BYTES
    assert "TransformerEncoder" in read_submission(path).text


def test_a_notebook_of_too_many_values_is_refused_before_it_is_decoded(tmp_path):
    values = "[" + "0," * MAX_NOTEBOOK_VALUES + "0]"
    path = write(tmp_path, "notebook", notebook(SOLUTION)[:-1] + ', "pasted": ' + values + "}")
    with pytest.raises(SubmissionError) as refused:
        read_submission(path)
    assert f"more than {MAX_NOTEBOOK_VALUES:,} JSON values" in str(refused.value)


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("form", ["file", "notebook"])
def test_a_grading_of_a_large_submission_is_an_error_at_once_naming_the_bound(tmp_path, size, form):
    text = with_table(SIZES[size])
    path = write(tmp_path, "big" if form == "file" else "big_notebook", text if form == "file" else notebook(text))
    grading = Grading("exercise3", path, Settings(seed=1))
    assert grading.child is None  # refused before any grading process started
    verdict = grading.finish()
    assert verdict.status == "error" and verdict.exit_code == 2
    assert refused(verdict.error), verdict.error


# ----------------------------------------------------------------------------- each process
PEAK = """
import resource, sys
from grader import cli
code = cli.main(sys.argv[1:])
print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "EXIT", code, file=sys.stderr)
"""


def peak_of(argv: list[str], environ: dict | None = None) -> tuple[int, int, str]:
    """(the exit code, the peak resident memory in MB of the grader's own process, its stdout) of
    ``grade argv`` (its children, a grading process or a worker, are not counted)."""
    done = subprocess.run([sys.executable, "-c", PEAK, *argv], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(environ or {})}, timeout=900)
    line = [line for line in done.stderr.splitlines() if line.startswith("PEAK ")]
    assert line, done.stderr[-2000:]
    fields = line[-1].split()
    return int(fields[3]), int(fields[1]), done.stdout


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    folder = tmp_path_factory.mktemp("large")
    paths = {"small": write(folder, "small", SOLUTION.replace("class TransformerEncoder(", "class TransformerEncoder((", 1))}
    for size, count in SIZES.items():
        paths[size] = write(folder, size, with_table(count))
        paths[f"{size}_notebook"] = write(folder, f"{size}_notebook", notebook(with_table(count)))
    return paths


def test_a_cold_grade_refuses_large_submissions_with_no_more_memory_than_a_small_ones(submissions):
    code, small, _ = peak_of(["exercise3", "--submission", str(submissions["small"]), "--json", "--no-server"])
    assert code == 2  # a syntax error, found by the grader's own compile
    for name in ("2MB", "20MB", "20MB_notebook"):
        code, peak, out = peak_of(["exercise3", "--submission", str(submissions[name]), "--json", "--no-server"])
        assert code == 2 and refused(json.loads(out)["error"])
        assert peak <= small + HEADROOM_MB, (name, peak, small)


def test_a_batch_refuses_large_submissions_with_no_more_memory_than_a_small_ones(submissions, tmp_path):
    def batch(names: list[str], out: Path) -> tuple[int, int]:
        folder = tmp_path / f"{out.name}-in"
        folder.mkdir()
        for name in names:
            (folder / f"{name}{submissions[name].suffix}").write_bytes(submissions[name].read_bytes())
        code, peak, _ = peak_of(["batch", str(folder), "--exercise", "exercise3", "--out", str(out), "--jobs", "1"])
        return code, peak

    _, small = batch(["small"], tmp_path / "small-out")
    _, peak = batch(["small", "2MB", "20MB", "20MB_notebook"], tmp_path / "large-out")
    assert peak <= small + HEADROOM_MB, (peak, small)
    rows = {row["id"]: row for row in _results(tmp_path / "large-out")}
    for name in ("2MB", "20MB", "20MB_notebook"):
        assert rows[name]["status"] == "error" and refused(rows[name]["error"])


def _results(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.slow
def test_the_grading_server_refuses_large_submissions_with_no_more_memory_than_a_small_ones(submissions,
                                                                                          monkeypatch, capsys):
    from grader import cli

    from .test_server import Runtime

    runtime = Runtime()
    try:
        runtime.use(monkeypatch)
        assert cli.main(["exercise3", "--submission", str(submissions["small"]), "--json"]) == 2
        capsys.readouterr()
        server = runtime.status()["pid"]
        before = _high_water_mb(server)
        for name in ("2MB", "20MB", "20MB_notebook"):
            assert cli.main(["exercise3", "--submission", str(submissions[name]), "--json"]) == 2
            assert refused(json.loads(capsys.readouterr().out)["error"])
        assert _high_water_mb(server) <= before + HEADROOM_MB
    finally:
        runtime.close()


def _high_water_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmHWM:"))
