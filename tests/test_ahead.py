"""What the grader's own process judges and reports with is imported while the grading process starts
(``grader.ahead``): once the first grading process of a run has ended, the grader's process imports
nothing more, whatever the verdicts are and whichever command drew them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest

from grader import ahead, exercises

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
STUB = exercises.get("exercise3").stub.read_text(encoding="utf-8")
# one submission down each way a verdict is drawn: passed, failed (causes and advice in the report),
# a layer of the wrong kind, a grading process that ended early, a file whose import raised
CLASS = {
    "correct.py": SOLUTION,
    "shared_norm.py": SOLUTION.replace("self.layernorm_2 = layers.LayerNormalization()",
                                       "self.layernorm_2 = self.layernorm_1"),
    "stub.py": STUB,
    "not_a_layer.py": "class TransformerEncoder:\n    pass\n",
    "exits.py": "import os\nos._exit(3)\n",
    "raises.py": "raise ValueError('at import')\n",
}

# Runs the grade command in this process and prints, on its last line of stderr, every module imported
# after the first grading process ended: from the moment the grader waits for what ``ahead`` imports.
LATE_IMPORTS = textwrap.dedent("""
    import importlib.abc, json, sys
    from grader import ahead, cli

    late = []

    class Recorder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in sys.modules:
                late.append(name)
            return None

    waited = ahead.wait

    def wait():
        waited()
        if not any(isinstance(finder, Recorder) for finder in sys.meta_path):
            sys.meta_path.insert(0, Recorder())

    ahead.wait = wait
    try:
        code = cli.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    print(json.dumps({"late": late, "code": code}), file=sys.stderr)
""")


def late_imports(tmp_path, *args) -> tuple[list[str], int, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="80")
    result = subprocess.run([sys.executable, "-c", LATE_IMPORTS, *args], cwd=tmp_path, capture_output=True,
                            text=True, env=env, timeout=600)
    told = json.loads(result.stderr.strip().splitlines()[-1])
    return told["late"], told["code"], result.stdout


def test_a_batch_imports_nothing_once_its_first_grading_process_has_ended(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for name, source in CLASS.items():
        (folder / name).write_text(source, encoding="utf-8")
    late, code, _ = late_imports(tmp_path, "batch", str(folder), "--exercise", "exercise3", "--out",
                                 str(tmp_path / "out"), "--jobs", "2")
    rows = [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]
    statuses = {row["id"]: row["status"] for row in rows}
    assert statuses == {"correct": "passed", "shared_norm": "failed", "stub": "failed", "not_a_layer": "error",
                        "exits": "error", "raises": "error"}, statuses
    assert (tmp_path / "out" / "report.html").is_file() and len(list((tmp_path / "out" / "students").iterdir())) == 6
    assert code == 0
    assert late == []


@pytest.mark.parametrize("name, json_out", [("shared_norm.py", False), ("exits.py", False), ("correct.py", True)])
def test_a_cold_grade_imports_nothing_once_its_grading_process_has_ended(tmp_path, name, json_out):
    (tmp_path / name).write_text(CLASS[name], encoding="utf-8")
    late, code, shown = late_imports(tmp_path, "exercise3", "--submission", name, "--no-server",
                                     *(["--json"] if json_out else []))
    assert code == {"shared_norm.py": 1, "exits.py": 2, "correct.py": 0}[name], shown
    if json_out:
        assert json.loads(shown)["status"] == "passed"
    else:  # the report was drawn
        assert ("Score 17/23" in shown) if name == "shared_norm.py" else ("Could not grade this submission" in shown), shown
    assert late == []


def test_what_is_imported_ahead_is_imported_once_by_a_thread_that_then_ends(monkeypatch):
    runs = []
    monkeypatch.setattr(ahead, "_started", set())
    monkeypatch.setattr(ahead, "_threads", [])
    monkeypatch.setattr(ahead, "_import_for", lambda exercise: runs.append((exercise.id, ahead.threading.current_thread())))
    exercise = exercises.get("exercise3")
    ahead.start(exercise)
    ahead.start(exercise)
    ahead.wait()
    ahead.start(exercises.get("exercise1"))
    ahead.wait()
    assert [run[0] for run in runs] == ["exercise3", "exercise1"]
    assert all(thread is not ahead.threading.main_thread() and not thread.is_alive() for _, thread in runs)
    assert ahead._threads == []
    ahead.wait()  # nothing left to wait for


def test_an_import_that_fails_ahead_says_nothing_and_leaves_the_step_that_needs_it_to_fail(monkeypatch, capfd):
    monkeypatch.setattr(ahead, "_started", set())
    monkeypatch.setattr(ahead, "_threads", [])
    missing = types.SimpleNamespace(id="missing", checks_module="grader.exercises.no_such_exercise.checks")
    ahead.start(missing)
    ahead.wait()
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    assert "grader.exercises.no_such_exercise.checks" not in sys.modules
    from grader.judging.declarations import declared_checks

    with pytest.raises(ModuleNotFoundError):
        declared_checks(missing)
