"""The job files of a class on several machines (docs/scaling.md): the Kubernetes Indexed Job, read
into the Kubernetes API's own V1Job, and the Slurm scripts, run with stand-ins for sbatch and grade
that record the command lines they get, paths with spaces, quotes and shell syntax included. The
scripts on a real Slurm: tests/test_slurm.py (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader import cli, exercises

ROOT = Path(exercises.PROJECT_ROOT)
JOB = ROOT / "container" / "grade-job.yaml"
SLURM = ROOT / "grader" / "integrations" / "slurm"
GUIDE = ROOT / "docs" / "scaling.md"
ODD = "it's a \"class\" $(touch pwned) `id` 100% & more"


def stand_in(folder: Path, name: str, prints: str = "") -> Path:
    """A program ``name`` that appends its arguments (a JSON list) to ``folder/calls.jsonl`` and prints
    ``prints`` followed by its call's number."""
    path = folder / name
    path.write_text(f"""#!{sys.executable}
import json, sys
with open({str(folder / 'calls.jsonl')!r}, "a", encoding="utf-8") as calls:
    calls.write(json.dumps([{name!r}, *sys.argv[1:]]) + "\\n")
with open({str(folder / 'calls.jsonl')!r}, encoding="utf-8") as calls:
    count = len(calls.readlines())
print({prints!r} + str(40 + count))
""", encoding="utf-8")
    path.chmod(0o755)
    return path


def calls(folder: Path) -> list[list[str]]:
    return [json.loads(line) for line in (folder / "calls.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def tools(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    stand_in(folder, "sbatch")
    grade = stand_in(folder, "grade")
    env = dict(os.environ, PATH=f"{folder}:{os.environ.get('PATH', '')}")
    env.pop("GRADE", None)
    return folder, grade, env


# --------------------------------------------------------------------------- the guide points to the files


def test_the_scaling_guide_links_the_job_files_and_copies_none():
    text = GUIDE.read_text(encoding="utf-8")
    for path in (JOB, SLURM / "submit-class.sh", SLURM / "grade-array.sbatch", SLURM / "merge.sbatch"):
        assert f"]({os.path.relpath(path, GUIDE.parent)})" in text, path.name
    assert "#SBATCH" not in text and "kind: Job" not in text and "completionMode" not in text


# --------------------------------------------------------------------------- Kubernetes


def read_job():
    """The manifest as the Kubernetes client reads an API server's answer: into its V1Job model."""
    import inspect
    from types import SimpleNamespace

    from kubernetes.client import ApiClient

    data = yaml.safe_load(JOB.read_text(encoding="utf-8"))
    client = ApiClient()
    text = json.dumps(data)
    if "response_text" in inspect.signature(client.deserialize).parameters:  # the client's newer generator
        job = client.deserialize(text, "V1Job", "application/json")
    else:
        job = client.deserialize(SimpleNamespace(data=text), "V1Job")
    return data, job, client


def test_the_indexed_job_is_a_v1_job_the_kubernetes_model_reads_whole():
    data, job, client = read_job()
    # serialised again, nothing is lost: no field the API does not know (a misspelt one is dropped)
    assert client.sanitize_for_serialization(job) == data
    assert (job.api_version, job.kind) == ("batch/v1", "Job")
    spec = job.spec
    assert spec.completion_mode == "Indexed" and spec.parallelism == spec.completions == 8
    pod = spec.template.spec
    assert pod.restart_policy == "Never"
    (container,) = pod.containers
    assert container.image == "YOUR-REGISTRY/transformer-exercises-grader"
    assert container.command == ["sh", "-c"] and len(container.args) == 1
    mounts = {m.name: m for m in container.volume_mounts}
    assert mounts["class"].mount_path == "/class" and mounts["class"].read_only
    assert {v.name: v.persistent_volume_claim.claim_name for v in pod.volumes} == {
        "class": "exercise3-submissions", "results": "exercise3-results"}
    assert container.resources.limits["memory"] == container.resources.requests["memory"]


def test_each_pod_of_the_indexed_job_grades_its_own_share(tools):
    folder, _, env = tools
    _, job, _ = read_job()
    (container,) = job.spec.template.spec.containers
    n = job.spec.completions
    for index in range(n):
        ran = subprocess.run([*container.command, *container.args], env=dict(env, JOB_COMPLETION_INDEX=str(index)),
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
    shards = []
    for call in calls(folder):
        assert call[:3] == ["grade", "batch", "/class/submitted"] and "--resume" in call
        assert call[call.index("--seed") + 1] == "2026" and call[call.index("--jobs") + 1] == "4"
        shards.append((call[call.index("--shard") + 1], call[call.index("--out") + 1]))
    assert shards == [(f"{k}/{n}", f"/results/shard-{k}") for k in range(1, n + 1)]


# --------------------------------------------------------------------------- Slurm


def submit(env, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SLURM / "submit-class.sh"), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_submit_class_submits_the_array_then_the_merge_after_it(tools, tmp_path):
    folder, grade, env = tools
    course = tmp_path / ODD / "submitted"
    course.mkdir(parents=True)
    out = tmp_path / f"results {ODD}"
    done = submit(env, "--grade", str(grade), "--class", str(course), "--exercise", "exercise3", "--seed", "7",
                  "--shares", "3", f"--out={out}", "--parsable", "--", "--partition=short", "--time=02:00:00")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["41", "42"]
    (array, merge) = calls(folder)
    assert array[:7] == ["sbatch", "--parsable", "--array=1-3", "--job-name=grade-exercise3", f"--chdir={out}",
                         "--output=logs/grade-%A_%a.out", "--partition=short"]
    assert array[7:] == ["--time=02:00:00", str(SLURM / "grade-array.sbatch"), str(grade), str(course), "exercise3",
                         "7", "3", str(out)]
    assert merge == ["sbatch", "--parsable", "--dependency=afterok:41", "--kill-on-invalid-dep=yes",
                     "--job-name=merge-exercise3", f"--chdir={out}", "--output=logs/merge-%j.out",
                     "--partition=short", "--time=02:00:00", str(SLURM / "merge.sbatch"), str(grade), str(out), "3"]
    assert (out / "logs").is_dir() and not list(tmp_path.rglob("pwned"))


def test_submit_class_makes_every_path_absolute_and_finds_grade_from_the_environment(tools, tmp_path):
    folder, grade, env = tools
    (tmp_path / "class").mkdir()
    done = submit(dict(env, GRADE=str(grade)), "--class", "class", "--exercise", "exercise3", "--seed", "1",
                  "--shares", "2", "--out", "res", "--jobs", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Submitted array job 41: 2 task(s)" in done.stdout and "Submitted job 42" in done.stdout
    array = calls(folder)[0]
    assert array[-7:] == [str(grade), str(tmp_path / "class"), "exercise3", "1", "2", str(tmp_path / "res"), "3"]


@pytest.mark.parametrize("args, said", [
    (["--exercise", "exercise3", "--seed", "1", "--shares", "2", "--out", "o"], "give the class"),
    (["--class", "CLASS", "--exercise", "exercise3", "--shares", "2", "--out", "o"], "give the seed"),
    (["--class", "CLASS", "--exercise", "exercise3", "--seed", "x", "--shares", "2", "--out", "o"],
     "--seed takes a whole number, not 'x'"),
    (["--class", "CLASS", "--exercise", "exercise3", "--seed", "1", "--shares", "0", "--out", "o"],
     "--shares takes a whole number of at least 1"),
    (["--class", "CLASS", "--exercise", "ex 3;", "--seed", "1", "--shares", "2", "--out", "o"],
     "--exercise takes an exercise's id"),
    (["--class", "nowhere", "--exercise", "exercise3", "--seed", "1", "--shares", "2", "--out", "o"],
     "the class 'nowhere' does not exist"),
    (["--class", "CLASS", "--exercise", "exercise3", "--seed", "1", "--shares", "2", "--out", "o", "--grade",
      "/nonexistent/grade"], "--grade must be the grade command"),
    (["--class", "CLASS", "--colour", "red"], "unknown option --colour"),
    (["--class"], "--class needs a value"),
])
def test_submit_class_refuses_bad_arguments_before_submitting(tools, tmp_path, args, said):
    folder, grade, env = tools
    (tmp_path / "CLASS").mkdir()
    done = submit(dict(env, GRADE=str(grade)), *args, cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr
    assert not (folder / "calls.jsonl").exists()


def test_an_array_task_grades_its_share_with_resume(tools, tmp_path):
    folder, grade, env = tools
    task = dict(env, SLURM_ARRAY_TASK_ID="2", SLURM_CPUS_PER_TASK="3")
    course, out = str(tmp_path / ODD), str(tmp_path / f"out {ODD}")
    ran = subprocess.run(["bash", str(SLURM / "grade-array.sbatch"), str(grade), course, "exercise3", "7", "3", out],
                         env=task, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert calls(folder) == [["grade", "batch", "--exercise", "exercise3", "--seed", "7", "--shard", "2/3", "--jobs",
                              "6", "--out", f"{out}/shard-2", "--resume", "--", course]]
    ran = subprocess.run(["bash", str(SLURM / "grade-array.sbatch"), str(grade), course, "exercise3", "7", "3", out],
                         env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "one share per task of an array job" in ran.stderr
    ran = subprocess.run(["bash", str(SLURM / "grade-array.sbatch"), "grade", course, "exercise3", "7", "3", out],
                         env=task, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "GRADE must be the grade command" in ran.stderr
    assert len(calls(folder)) == 1


def test_the_merge_job_joins_every_share(tools, tmp_path):
    folder, grade, env = tools
    out = str(tmp_path / f"out {ODD}")
    ran = subprocess.run(["bash", str(SLURM / "merge.sbatch"), str(grade), out, "3"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert calls(folder) == [["grade", "merge", "--out", f"{out}/class", "--force", "--",
                              *(f"{out}/shard-{k}" for k in (1, 2, 3))]]


def test_grade_reads_the_command_lines_the_scripts_give(tmp_path, capsys):
    """What the scripts pass after ``--`` is the paths, whatever they look like, for both commands."""
    odd = tmp_path / "-not an option"
    odd.mkdir()
    assert cli.main(["batch", "--exercise", "exercise3", "--out", str(tmp_path / "o"), "--resume", "--",
                     str(odd)]) == 2
    assert "No exercise3 submission found" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        cli.main(["merge", "--out", str(tmp_path / "m"), "--force", "--", str(odd)])
    assert refused.value.code == 2 and "has no run.json" in capsys.readouterr().err

