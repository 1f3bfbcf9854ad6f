"""The ids of ``grade batch``, over many generated classes: own names keep their ids, every id is
unique, and the ids are a function of the whole class, the same for every order of the paths given,
every listing, every machine, every shard and after ``grade merge``.

Each class mixes names that are ids as they are (``s1234567``, ``A.b-c``, ones of exactly MAX_ID
characters, ``v-2`` beside ``v``) with names made to become those ids or each other's: a trailing or
leading space, a tab, another case, letters outside ASCII, a zero-width space, dots and underscores
at the ends, a folder for an underscore, runs of removed characters of other lengths, names past
MAX_ID (two of them differing only in removed characters, and a valid name that is exactly another's
cut id), and nbgrader students with the same names, each in folders of one course or of two. A
submission may be a symbolic link (a refused row, which has its id as any row does). The generator
is seeded: the same classes every run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import re
import string
from pathlib import Path

from grader.api import Settings
from grader.integrations import class_run, discovery
from grader.integrations.discovery import MAX_ID, class_ids, cut, survey
from grader.integrations.outputs import Outputs, Result, write_result
from grader.integrations.shards import Shard, manifest, merge, write_manifest
from grader.verdict import error_verdict

CASES = 300
ID_ALPHABET = string.ascii_letters + string.digits + "._-"
OWN = re.compile(r"[A-Za-z0-9._-]+")


def valid_id(rng: random.Random) -> str:
    length = rng.choice([1, 2, 3, 5, 8, 12, 12, MAX_ID])
    while True:
        name = "".join(rng.choice(ID_ALPHABET) for _ in range(length))
        if name[0] not in "._" and name[-1] not in "._":
            return name


def is_own(stem: str) -> bool:
    """A name that is an id as it is (the rule docs/batch.md states, written again here)."""
    return bool(OWN.fullmatch(stem)) and stem[0] not in "._" and stem[-1] not in "._" and len(stem) <= MAX_ID


def onto(rng: random.Random, name: str) -> str:
    """A name that becomes ``name``'s id, or one close to it, once made an id."""
    ways = [lambda v: v + " ", lambda v: " " + v, lambda v: v + "\t", lambda v: v + "é", lambda v: "é" + v,
            lambda v: v + "\u200b", lambda v: v + ".", lambda v: v + "_", lambda v: v + "..", lambda v: "_" + v,
            lambda v: v.upper(), lambda v: v.swapcase(), lambda v: v + "  ", lambda v: v + " \x1b[31m",
            lambda v: v + "-2", lambda v: v + "-3", lambda v: v + "_2", lambda v: v + " 2",
            lambda v: v.replace("_", " "), lambda v: v.replace("_", "  "), lambda v: v.replace("_", "é"),
            lambda v: v.replace("_", "/", 1), lambda v: v + "/x", lambda v: v + " " + "y" * 150,
            lambda v: v + "  " + "y" * 150, lambda v: "y" * 150 + " " + v]
    made = rng.choice(ways)(name)
    parts = made.split("/")
    if any(not p or p.startswith(".") or len(p.encode()) > 200 for p in parts):
        return name + " "
    return made


def cut_id(relative: str) -> str:
    """The id of a name past MAX_ID (the rule docs/batch.md states: its first characters, and a
    digest of its path below the folder given)."""
    stem = relative.rsplit(".", 1)[0]
    plain = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._")
    return f"{plain[:MAX_ID - 11]}-{hashlib.sha256(relative.encode()).hexdigest()[:10]}"


def put(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x = 1\n", encoding="utf-8")
    return path


def make_class(rng: random.Random, root: Path) -> dict:
    """A class in ``root``: a loose folder of files and, often, an nbgrader course or two; returns what
    was made: the paths given and, for each file, the own name it claims (or None) and whether it is
    a student's."""
    loose = root / "loose"
    loose.mkdir(parents=True)
    pool = [valid_id(rng) for _ in range(rng.randint(1, 5))]
    pool += [f"{rng.choice(pool)}-{rng.choice([2, 3])}" for _ in range(rng.randint(0, 2))]
    claims: dict[Path, tuple[str | None, bool]] = {}
    stems = set()
    for _ in range(rng.randint(1, 12)):
        base = rng.choice(pool)
        stem = base if rng.random() < 0.4 else onto(rng, base)
        for suffix in rng.sample([".py", ".ipynb"], rng.choice([1, 1, 1, 2])):
            if (stem, suffix) in stems:
                continue
            stems.add((stem, suffix))
            path = loose / f"{stem}{suffix}"
            if path.exists() or any(p.is_file() for p in path.parents if p != loose and loose in p.parents):
                continue
            if rng.random() < 0.08 and claims:  # a link: an error row, never read
                path.parent.mkdir(parents=True, exist_ok=True)
                path.symlink_to(rng.choice(list(claims)))
            else:
                if path.is_dir():
                    continue
                put(path)
            claims[path] = (stem if "/" not in stem and is_own(stem) else None, False)
    long_ones = [p for p in claims if len(p.name) > MAX_ID and "/" not in str(p.relative_to(loose))
                 and not p.is_symlink()]
    if long_ones and rng.random() < 0.7:  # a valid name that is exactly a long name's cut id
        taken = cut_id(long_ones[0].relative_to(loose).as_posix())
        claims[put(loose / f"{taken}.py")] = (taken, False)
    given = [loose]
    for course_name in rng.sample(["course", "other"], rng.choice([0, 1, 1, 2])):
        course = root / course_name
        put(course / "nbgrader_config.py")
        (course / "submitted").mkdir()
        for _ in range(rng.randint(1, 4)):
            student = rng.choice(pool) if rng.random() < 0.5 else onto(rng, rng.choice(pool))
            if "/" in student or student in (".", "..") or student.startswith("."):
                continue
            path = course / "submitted" / student / "exercise3" / "exercise3.ipynb"
            if not path.exists():
                claims[put(path)] = (student, True)
        given.append(course)
    return {"given": given, "claims": claims, "root": root}


def ids_by_path(found, root: Path) -> dict[str, str]:
    rows = found.submissions + found.refused
    mapping = {os.path.relpath(s.path, root): s.id for s in rows}
    assert len(mapping) == len(rows), "a file has two rows"
    return mapping


def check_the_rule(made: dict, found) -> None:
    root = made["root"].resolve()
    ids = ids_by_path(found, root)
    every = list(ids.values())
    # (b) unique, and unique but for letter case except between two own names
    assert len(set(every)) == len(every), every
    own_of = {os.path.relpath(path.parent.resolve() / path.name, root): claim
              for path, claim in made["claims"].items()}
    assert set(own_of) == set(ids), (sorted(own_of), sorted(ids))
    derived = [relative for relative, identity in ids.items() if own_of[relative][0] != identity]
    folded = {}
    for relative, identity in ids.items():
        folded.setdefault(identity.casefold(), []).append(relative)
    for relative in derived:
        assert len(folded[ids[relative].casefold()]) == 1, (ids[relative], folded[ids[relative].casefold()])
        assert len(ids[relative]) <= MAX_ID
    # (a) an own name is kept by exactly one of the files that claim it, a student's if any is
    claimants: dict[str, list[str]] = {}
    for relative, (name, _) in own_of.items():
        if name is not None:
            claimants.setdefault(name, []).append(relative)
    for name, paths in claimants.items():
        keepers = [p for p in paths if ids[p] == name]
        assert len(keepers) == 1, (name, paths, [ids[p] for p in paths])
        if any(own_of[p][1] for p in paths):
            assert own_of[keepers[0]][1], (name, keepers)
        if len(paths) == 1:
            assert ids[paths[0]] == name


def test_a_name_made_an_id_never_takes_a_classmate_s_own_name(tmp_path):
    """``s1234567 .py`` (a trailing space) becomes the id s1234567 only where no file's name is that
    id: here ``s1234567.py`` keeps it, whichever is listed or given first."""
    folder = tmp_path / "class"
    for name in ("s1234567 .py", "s1234567.py", "s1234567-2.py", "S1234567 .ipynb"):
        put(folder / name)
    expected = {"s1234567.py": "s1234567", "s1234567-2.py": "s1234567-2", "S1234567 .ipynb": "S1234567-3",
                "s1234567 .py": "s1234567-4"}
    for given in ([folder], sorted(folder.iterdir()), sorted(folder.iterdir(), reverse=True)):
        assert {s.path.name: s.id for s in survey(given, "exercise3").submissions} == expected


def surveyed(given: list[Path], monkeypatch) -> tuple:
    """``survey(given)``, and the rows it found as it found them, before their ids were made unique."""
    seen, real = [], discovery._unique

    def recording(submissions, refused, named=frozenset()):
        seen.append((list(submissions), list(refused), set(named)))
        return real(submissions, refused, named)

    with monkeypatch.context() as patch:
        patch.setattr("grader.integrations.discovery._unique", recording)
        found = survey(given, "exercise3")
    return found, seen[0]


def test_ids_follow_the_rule_and_are_a_function_of_the_whole_class(tmp_path, monkeypatch):
    rng = random.Random(20240531)
    for case in range(CASES):
        made = make_class(rng, tmp_path / f"class{case}")
        root = made["root"].resolve()
        whole, (rows, refused, named) = surveyed(made["given"], monkeypatch)
        check_the_rule(made, whole)
        expected = ids_by_path(whole, root)
        # (c) every order of the paths given, with files of the loose folder given again by name
        top = [p for p in sorted(made["claims"]) if p.parent == made["given"][0] and not p.is_symlink()]
        paths = made["given"] + rng.sample(top, min(len(top), rng.randint(0, 2)))
        orders = list(itertools.permutations(paths))
        for order in rng.sample(orders, min(len(orders), 6)):
            assert ids_by_path(survey(list(order), "exercise3"), root) == expected, order
        # ... and every order in which a listing gives the rows
        for _ in range(4):
            graded, errors = discovery._unique(rng.sample(rows, len(rows)), rng.sample(refused, len(refused)), named)
            assert {os.path.relpath(s.path, root): s.id for s in graded + errors} == expected
        # (c) each shard's share holds the ids of the whole run, and the shares together are the class
        for n in (2, 3):
            held = {}
            for k in range(1, n + 1):
                share = ids_by_path(cut(whole, Shard(k, n)), root)
                assert not set(share) & set(held)
                held.update(share)
            assert held == expected


def test_a_class_planned_in_shards_on_two_machines_merges_into_the_ids_of_one_run(tmp_path):
    """``grade batch --shard K/N`` plans its share from the whole class wherever the class lies, and
    ``grade merge`` of the shares holds every id once, each the verdict of the file that has it in
    the whole run (results written without grading: an error verdict naming the file)."""
    rng = random.Random(7)
    for case in range(12):
        made = make_class(rng, tmp_path / "here" / f"class{case}")
        here = made["root"].resolve()
        there = tmp_path / "elsewhere" / "mounted" / f"copy{case}"
        there.parent.mkdir(parents=True, exist_ok=True)
        os.rename(here, there)  # the same class, listed and resolved in another place
        moved = [there / p.relative_to(made["root"]) for p in made["given"]]
        whole = class_run.plan("exercise3", moved, tmp_path / f"whole{case}", Settings(seed=1))
        expected = ids_by_path(whole.whole, there)
        os.rename(there, here)
        n = 3
        folders = []
        for k in range(1, n + 1):
            given = [made["root"] / p.relative_to(there) for p in moved]
            run = class_run.plan("exercise3", rng.sample(given, len(given)), tmp_path / f"shard{case}-{k}",
                                 Settings(seed=1), Shard(k, n))
            assert ids_by_path(run.whole, here) == expected
            share = ids_by_path(run.found, here)
            assert share == {p: i for p, i in expected.items() if Shard(k, n).holds(i)}
            with Outputs(run.out) as outputs:
                for submission in run.found.submissions + run.found.refused:
                    relative = os.path.relpath(submission.path, here)
                    verdict = error_verdict("exercise3", relative, "not graded here", 1.0, {"seed": 1})
                    write_result(outputs, Result(submission, verdict, 0.0))
            write_manifest(run.out, manifest("exercise3", run.shard, class_ids(run.whole), run.settings, None))
            folders.append(run.out)
        merge(folders, tmp_path / f"merged{case}")
        lines = [json.loads(line) for line in
                 (tmp_path / f"merged{case}" / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
        assert {line["submission"]: line["id"] for line in lines} == expected
        assert len(lines) == len(expected)
