"""The Slurm scripts the package ships, run on a real (private, single-node) Slurm.

A class of a dozen submissions (the solution, the stub, catalogued mistakes, a correct variant, a
file that does not parse), in folders whose names hold spaces, quotes and shell syntax, is graded by
``submit-class.sh``: an array job of three shares and the merge after it. One task is requeued
while it grades, as a preemption would: it finishes its share with ``--resume``. The merged results
must equal one ``grade batch`` of the whole class with the same seed. Skipped, saying why, where
Slurm cannot run (``tests/slurm_cluster.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import cli, exercises
from grader.integrations.discovery import class_ids, survey
from grader.integrations.outputs import finished_rows
from grader.integrations.shards import share_of

from .catalog.exercise3 import MISTAKES, VARIANTS
from .conftest import SharedWorkers
from .slurm_cluster import Unavailable, private_slurm
from .test_shards import gradescope_files, summary_rows, timeless_report, verdict_lines
from .text import says

pytestmark = pytest.mark.slow

SLURM = Path(exercises.PROJECT_ROOT) / "grader" / "integrations" / "slurm"
GRADE = Path(sys.executable).parent / "grade"
SEED = 2026
SHARES = 3
MISTAKE = {m.name: m.source for m in MISTAKES}
VARIANT = {v.name: v.source for v in VARIANTS}
# A download of a class, folders named as people name them: spaces, quotes, shell syntax.
CLASS = {
    "Section 1/Ann O'Neil/exercise3.py": exercises.get("exercise3").solution.read_text(encoding="utf-8"),
    'Section 1/Bob "the builder"/exercise3.py': exercises.get("exercise3").stub.read_text(encoding="utf-8"),
    "Section 1/$(touch pwned); echo 'x'/exercise3.py": MISTAKE["shared_norm"],
    "Section 1/uma/exercise3.py": MISTAKE["ignored_mask"],
    "Section 1/dan/exercise3.py": MISTAKE["wrong_mask_axis"],
    "Section 1/eve/exercise3.py": MISTAKE["pre_norm"],
    "Section 2/fay `id`/exercise3.py": MISTAKE["no_relu"],
    "Section 2/wes/exercise3.py": MISTAKE["no_ffn_residual"],
    "Section 2/hal/exercise3.py": MISTAKE["inverted_mask"],
    "Section 2/xia/exercise3.py": MISTAKE["reused_norm"],
    "Section 2/jo & kim/exercise3.py": VARIANT["other_attribute_names"],
    "Section 2/lee/exercise3.py": "class TransformerEncoder(:\n",
}


@pytest.fixture(scope="module")
def slurm():
    try:
        with private_slurm() as cluster:
            yield cluster
    except Unavailable as why:
        pytest.skip(f"no private Slurm here: {why}")


def test_a_class_graded_by_the_slurm_scripts_equals_one_batch_of_the_whole_class(slurm, tmp_path, capsys):
    root = tmp_path / "a class of 2026 (Ms O'Hara's \"section\")"
    for name, source in CLASS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source, encoding="utf-8")
    out = tmp_path / "results 100% 'slurm'"
    submitted = subprocess.run(
        ["bash", str(SLURM / "submit-class.sh"), "--grade", str(GRADE), "--class", str(root), "--exercise",
         "exercise3", "--seed", str(SEED), "--shares", str(SHARES), "--out", str(out), "--parsable", "--",
         "--time=00:40:00", "--cpus-per-task=1", "--mem=3G"],
        env=slurm.env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    array, merge = submitted.stdout.split()
    limit = sum(slurm.time_limit(array) for _ in range(SHARES)) + slurm.time_limit(merge)  # even one after another

    # The largest share's task requeued once it has graded someone, as a preemption would: it starts
    # again and finishes its share.
    ids = class_ids(survey([root], "exercise3"))
    sizes = {k: sum(share_of(i, SHARES) == k for i in ids) for k in range(1, SHARES + 1)}
    assert min(sizes.values()) >= 1  # names chosen so that every task grades someone
    k = max(sizes, key=sizes.get)
    deadline = time.monotonic() + slurm.time_limit(array)
    while not finished_rows(out / f"shard-{k}") and time.monotonic() < deadline:
        slurm.check_daemons()
        time.sleep(0.5)
    slurm.run("scontrol", "requeue", f"{array}_{k}")

    ended = slurm.wait([array, merge], limit)
    logs = "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
                     for path in sorted((out / "logs").glob("*.out")))
    states = {record["JobId"]: (record["JobState"], record["ExitCode"]) for records in ended.values()
              for record in records}
    assert set(states.values()) == {("COMPLETED", "0:0")}, f"{states}\n{logs}"
    assert "Resuming the run" in (out / "logs" / f"grade-{array}_{k}.out").read_text(errors="replace"), logs
    assert not [folder for folder in (out, root, root / "Section 1", tmp_path) if (folder / "pwned").exists()]

    whole = tmp_path / "whole"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("grader.integrations.batch.Workers", SharedWorkers)
        assert cli.main(["batch", str(root), "--exercise", "exercise3", "--seed", str(SEED), "--out", str(whole),
                         "--jobs", "2"]) == 0
    assert says(capsys.readouterr().out, "Batch results")
    merged = out / "class"
    lines = verdict_lines(merged)
    assert len(lines) == len(CLASS) and [line["id"] for line in lines] == sorted(line["id"] for line in lines)
    assert lines == verdict_lines(whole)  # ids, statuses, scores, every check, the submission's path, the seed
    statuses = {line["id"]: line["status"] for line in lines}
    assert statuses["Section_1_Ann_O_Neil_exercise3"] == "passed"
    assert statuses["Section_2_jo_kim_exercise3"] == "passed" and statuses["Section_2_lee_exercise3"] == "error"
    assert sorted(statuses.values()).count("failed") == 9
    assert summary_rows(merged) == summary_rows(whole)
    assert gradescope_files(merged) == gradescope_files(whole)
    assert timeless_report(merged) == timeless_report(whole)
    manifest = json.loads((merged / "run.json").read_text(encoding="utf-8"))
    assert manifest["merged_from"] == [f"{k}/{SHARES}" for k in range(1, SHARES + 1)]
    assert manifest["class"] == json.loads((whole / "run.json").read_text(encoding="utf-8"))["class"]
