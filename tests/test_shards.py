"""`grade batch --shard K/N` and `grade merge`: shares of a class, merged, equal one run of the whole class.

One small class with catalogued mistakes is graded once whole and then in 2 and in 3 shards (one
of the three holds nobody), all with the same --seed; the merged folders must hold what the whole
run holds, up to the times. Bad merges are refused, with a message that says why, on results
folders built without grading.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from grader import cli, exercises
from grader.causes import not_attempted
from grader.integrations.class_report import render, root_causes, verdict_of
from grader.integrations.results import read_results
from grader.integrations.shards import Shard, ShardError, parse_shard, share_of

from .catalog.exercise3 import MISTAKES
from .conftest import SharedWorkers
from .test_class_report import Page

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
STUB = exercises.get("exercise3").stub.read_text(encoding="utf-8")
MISTAKE = {m.name: m.source for m in MISTAKES}
HTML_PRINTER = "print('<script>alert(1)</script>')\nraise ValueError('<b>bold</b><script>alert(2)</script>')\n"
# Names chosen so that, cut in 3, share 3 holds nobody (asserted below: share_of is stable).
CLASS = {
    "dave": SOLUTION,
    "erin": MISTAKE["shared_norm"],
    "<img src=x onerror=alert(1)>": MISTAKE["shared_norm"],
    "ignored_mask": MISTAKE["ignored_mask"],
    "stub": STUB,
    "broken": "class TransformerEncoder(:\n",
    "prints_html": HTML_PRINTER,
}
SEED = 7


def course(root: Path) -> Path:
    for student, source in CLASS.items():
        folder = root / "submitted" / student / "exercise3"
        folder.mkdir(parents=True)
        (folder / "exercise3.py").write_text(source, encoding="utf-8")
    return root


def batch(course_folder: Path, out: Path, *more: str) -> int:
    return cli.main(["batch", str(course_folder), "--exercise", "exercise3", "--out", str(out), "--jobs", "2",
                     "--seed", str(SEED), "--timeout", "120", *more])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded whole and in shares, six runs of ``grade batch`` forking from one worker."""
    root = course(tmp_path_factory.mktemp("course"))
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("grader.integrations.batch.Workers", SharedWorkers)
        assert batch(root, results / "whole") == 0
        shards = {}
        for n in (2, 3):
            shards[n] = []
            for k in range(1, n + 1):
                assert batch(root, results / f"{k}-of-{n}", "--shard", f"{k}/{n}") == 0
                shards[n].append(results / f"{k}-of-{n}")
    return root, results, shards


def verdict_lines(folder: Path) -> list[dict]:
    lines = [json.loads(line) for line in (folder / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    for line in lines:
        line.pop("graded_at")
    return lines


def summary_rows(folder: Path) -> list[dict]:
    rows = list(csv.DictReader((folder / "summary.csv").open(encoding="utf-8", newline="")))
    for row in rows:
        row.pop("seconds")
    return rows


def gradescope_files(folder: Path) -> dict[str, dict]:
    found = {}
    for path in sorted((folder / "gradescope").glob("*/results.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        record.pop("execution_time", None)
        found[path.parent.name] = record
    return found


def timeless_report(folder: Path) -> str:
    results = read_results(folder)
    results.seconds = {}
    for verdict in results.verdicts:
        verdict.pop("graded_at", None)
    return render(results)


def student_pages(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((folder / "students").iterdir())}


def test_the_class_is_cut_so_that_one_share_of_three_holds_nobody():
    assert sorted({share_of(name, 3) for name in CLASS}) == [1, 2]
    assert len({share_of(name, 2) for name in CLASS}) == 2


@pytest.mark.parametrize("n", [1, 2, 3])
def test_merged_shards_equal_one_run_of_the_whole_class(graded, n, tmp_path):
    _, results, shards = graded
    whole = results / "whole"
    folders = [whole] if n == 1 else shards[n]
    assert cli.main(["merge", *map(str, folders), "--out", str(tmp_path / "merged")]) == 0
    merged = tmp_path / "merged"
    assert verdict_lines(merged) == verdict_lines(whole)
    assert summary_rows(merged) == summary_rows(whole)
    assert gradescope_files(merged) == gradescope_files(whole)
    assert sorted(p.name for p in (merged / "gradescope").iterdir()) == sorted(CLASS)
    assert timeless_report(merged) == timeless_report(whole)
    assert (merged / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert student_pages(merged) == student_pages(whole) and len(student_pages(whole)) == len(CLASS)
    manifest = json.loads((merged / "run.json").read_text(encoding="utf-8"))
    assert manifest["shard"] == {"k": 1, "n": 1} and manifest["seed"] == SEED
    assert manifest["class"] == sorted(CLASS)


def test_each_shard_holds_its_share_and_names_the_whole_class(graded):
    _, _, shards = graded
    for n, folders in shards.items():
        seen = []
        for k, folder in enumerate(folders, 1):
            ids = [line["id"] for line in verdict_lines(folder)]
            assert all(share_of(i, n) == k for i in ids)
            seen += ids
            manifest = json.loads((folder / "run.json").read_text(encoding="utf-8"))
            assert manifest["shard"] == {"k": k, "n": n} and manifest["class"] == sorted(CLASS)
            assert (folder / "report.html").is_file()
        assert sorted(seen) == sorted(CLASS)
    assert verdict_lines(shards[3][2]) == []  # the share that holds nobody is a complete, empty run


def test_the_whole_run_reports_what_its_verdicts_say(graded):
    _, results, _ = graded
    lines = verdict_lines(results / "whole")
    statuses = {line["id"]: line["status"] for line in lines}
    assert statuses["dave"] == "passed"
    assert statuses["broken"] == statuses["prints_html"] == "error"
    assert statuses["erin"] == statuses["<img src=x onerror=alert(1)>"] == "failed"
    page = (results / "whole" / "report.html").read_text(encoding="utf-8")
    tables = Page(page).tables
    graded = [line for line in lines if line["status"] != "error"]
    for row in tables["checks"]:
        statuses = [c["status"] for line in graded for c in line["checks"] if c["id"] == row[0]]
        assert row[2:7] == [str(statuses.count(s)) for s in ("passed", "failed", "error", "timeout", "skipped")]
    assert len(tables["checks"]) == len({c["id"] for line in graded for c in line["checks"]})
    groups = {}
    for line in graded:  # the untouched stub is not attempted, no mistake
        if root_causes(line) and not not_attempted(verdict_of(line).checks):
            groups.setdefault(root_causes(line), []).append(line["id"])
    assert sorted((int(row[0]), row[3]) for row in tables["mistakes"]) == sorted(
        (len(ids), ", ".join(ids)) for ids in groups.values())
    assert [int(row[0]) for row in tables["mistakes"]] == sorted(map(len, groups.values()), reverse=True)
    assert groups[next(c for c in groups if "weights.two_norms" in c)] == ["<img src=x onerror=alert(1)>", "erin"]
    assert [row[0] for row in tables["ungradable"]] == ["broken", "prints_html"]
    assert "<img src=x" not in page and "<script>" not in page and "<b>bold" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in page
    rows = {row[0]: row for row in tables["submissions"]}
    assert rows["stub"][2] == "not attempted" and "stub" not in " ".join(row[3] for row in tables["mistakes"])
    assert rows["broken"][5].startswith("Your file exercise3.py has a SyntaxError at line 1")
    assert rows["prints_html"][5] == "ValueError: <b>bold</b><script>alert(2)</script> at line 2"
    pages = student_pages(results / "whole")
    assert all("<script>" not in text and "<img src=x" not in text for text in pages.values())


def test_merging_refuses_missing_overlapping_and_mixed_shards(graded, tmp_path, capsys):
    _, results, shards = graded
    one, two = shards[2]

    def refused(*folders, out="merged") -> str:
        with pytest.raises(SystemExit) as exited:
            cli.main(["merge", *map(str, folders), "--out", str(tmp_path / out)])
        assert exited.value.code == 2
        assert not (tmp_path / out).exists() or not any((tmp_path / out).iterdir())
        return capsys.readouterr().err

    assert "missing shard 2/2" in refused(one)
    assert "missing shards 1/3, 3/3" in refused(shards[3][1])
    twin = tmp_path / "twin"
    shutil.copytree(one, twin)
    assert "overlapping shards" in refused(one, twin, two)
    assert "different numbers of shares" in refused(one, shards[3][0])
    assert "given twice" in refused(one, one, two)

    def altered(name: str, **changes) -> Path:
        copy = tmp_path / name
        shutil.copytree(two, copy)
        manifest = json.loads((copy / "run.json").read_text(encoding="utf-8"))
        manifest.update(changes)
        (copy / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
        return copy

    assert "mixed seeds" in refused(one, altered("reseeded", seed=8))
    assert "mixed seeds" in refused(one, altered("fresh", seed=None))
    assert "mixed grader versions" in refused(one, altered("newer", grader_version="9.9"))
    assert "mixed Keras backends (--backend)" in refused(one, altered("on_jax", backend="jax"))
    other = refused(one, altered("other", **{"class": sorted(CLASS) + ["zoe"]}))
    assert "different classes" in other and f"{one} lacks zoe" in other
    unfinished = tmp_path / "unfinished"
    shutil.copytree(two, unfinished)
    (unfinished / "run.json").unlink()
    assert "has no run.json" in refused(one, unfinished)
    short = altered("short")
    lines = (short / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()
    (short / "verdicts.jsonl").write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    assert "did not finish" in refused(one, short)
    assert "not a folder of results" in refused(one, tmp_path / "nowhere")
    garbled = altered("garbled")
    (garbled / "run.json").write_text("{\"format\": 1, \"shard\": {}}", encoding="utf-8")
    assert "is not a manifest this grader can read" in refused(one, garbled)
    before = verdict_lines(one)
    with pytest.raises(SystemExit):
        cli.main(["merge", str(one), str(two), "--out", str(one), "--force"])
    assert "is one of the shards" in capsys.readouterr().err
    assert verdict_lines(one) == before


@pytest.mark.parametrize("value, said", [
    ("3", "takes K/N"), ("0/3", "between 1 and 3"), ("4/3", "between 1 and 3"), ("1/0", "at least 1"),
    ("a/b", "takes K/N"), ("-1/2", "takes K/N"),
])
def test_a_bad_shard_is_refused_before_anything_is_graded(value, said, tmp_path, capsys):
    with pytest.raises(ShardError, match=said):
        parse_shard(value)
    root = course(tmp_path / "course")
    with pytest.raises(SystemExit) as exited:
        cli.main(["batch", str(root), "--exercise", "exercise3", "--out", str(tmp_path / "out"), f"--shard={value}"])
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_shares_are_stable_and_cover_every_id():
    assert parse_shard(" 2/3 ") == Shard(2, 3)
    # SHA-256 of the id, not Python's salted hash(): these never change between runs or machines
    assert [share_of(name, 3) for name in ("alice", "bob", "dave", "erin")] == [3, 3, 2, 1]
    ids = [f"student{i}" for i in range(300)]
    for n in (1, 2, 5):
        assert sorted(i for k in range(1, n + 1) for i in ids if Shard(k, n).holds(i)) == sorted(ids)


def test_force_replaces_an_earlier_run_s_manifest_and_report_and_keeps_other_files(tmp_path):
    from grader.integrations.outputs import prepare_results_folder

    for name in ("run.json", "report.html", "verdicts.jsonl", "notes.txt"):
        (tmp_path / name).write_text("earlier", encoding="utf-8")
    with pytest.raises(Exception, match="not empty"):
        prepare_results_folder(tmp_path)
    prepare_results_folder(tmp_path, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# A download from a learning platform: a folder per section, a long folder per student, a file name
# the student chose. Its id is longer than an id may be, so it ends in a hash.
LONG_STUDENT = ("Section 02 (Tuesday)/Doe, Jane Alexandra (jdoe@students.example.edu) - 1234567 - "
                "late submission attempt 2 of 3/exercise3 final version (1).py")


def lms_class(root: Path) -> Path:
    for name, source in ((LONG_STUDENT, STUB), ("Section 01/ann.py", SOLUTION), ("Section 01/bob.py", STUB),
                         ("Section 02 (Tuesday)/cy.py", "class TransformerEncoder(:\n")):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source, encoding="utf-8")
    return root


def test_a_class_copied_to_two_machines_gets_the_same_ids_and_shares(tmp_path):
    """The ids, a long one's hash included, come from the paths below the folder given, never from
    where that folder is: two machines that copied the class to different places cut it alike."""
    from grader.integrations.discovery import MAX_ID, class_ids, cut, survey

    here = lms_class(tmp_path / "here" / "class")
    there = tmp_path / "elsewhere" / "mounted" / "copy"
    shutil.copytree(here, there)
    ids = class_ids(survey([here], "exercise3"))
    assert ids == class_ids(survey([there], "exercise3"))
    (long_id,) = [i for i in ids if i.startswith("Section_02_Tuesday_Doe")]
    assert len(long_id) == MAX_ID and len(LONG_STUDENT) > MAX_ID
    for n in (2, 3):
        for k in range(1, n + 1):
            shard = Shard(k, n)
            assert class_ids(cut(survey([here], "exercise3"), shard)) == \
                class_ids(cut(survey([there], "exercise3"), shard))


@pytest.mark.slow
def test_shards_cut_in_two_folders_grade_a_long_named_student_once_and_merge(tmp_path):
    here = lms_class(tmp_path / "machine-1" / "class")
    there = tmp_path / "machine-2" / "home" / "grader" / "class"
    shutil.copytree(here, there)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("grader.integrations.batch.Workers", SharedWorkers)
        assert batch(here, tmp_path / "res-1", "--shard", "1/2") == 0
        assert batch(there, tmp_path / "res-2", "--shard", "2/2") == 0
    assert cli.main(["merge", str(tmp_path / "res-1"), str(tmp_path / "res-2"), "--out", str(tmp_path / "merged")]) == 0
    graded = [line["id"] for k in (1, 2) for line in verdict_lines(tmp_path / f"res-{k}")]
    long_ids = [i for i in graded if i.startswith("Section_02_Tuesday_Doe")]
    assert len(long_ids) == 1 and len(graded) == len(set(graded)) == 4
    merged = {line["id"]: line for line in verdict_lines(tmp_path / "merged")}
    assert sorted(merged) == sorted(graded)
    assert merged[long_ids[0]]["status"] == "failed" and merged[long_ids[0]]["submission"].endswith("(1).py")
    assert merged["Section_01_ann"]["status"] == "passed"
