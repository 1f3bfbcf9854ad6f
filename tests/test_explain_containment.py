"""`grade explain exercise3` keeps references and student code apart, seen from inside its processes.

A student's encoder, each time explain's experiments build it, searches every
readable page of its own process's memory (``/proc/self/maps`` and
``/proc/self/mem``) for phrases that only the references hold — lines of every
solution, of every exercise's checks and of the judge, read here from those
files — and tries to open those files, the exercise files and the file it was
submitted as. It prints what it found on its standard output, which the
parent keeps with the child's run. Controls prove the search sees what is
there: two phrases of its own (one held as a one-byte string, one as a
two-byte string) must be found, and a file every grading process may read
must open.

The search never holds a phrase whole: each travels in two parts (all but its
last character, and that character), and a hit is a place where the first
part lies immediately before the second; a phrase inside another phrase is not
looked for, since the other's first part would hold it. Every 8-byte-aligned
word of memory is looked up in a table of the words of the first parts, so the
search costs one pass over memory (some 1.4 GB, TensorFlow's libraries
included) whatever the number of phrases; each phrase is looked for in one-,
two- and four-byte characters (how Python holds a string by its widest
character).

Two runs: an encoder that passes grading (the experiments run on it: its child
must hold no reference), and an encoder that shares one norm (the experiments
run on the reference encoder: that child must run nothing of the student's, and
the student's encoder runs in a child of its own that must hold no reference).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import secrets
from pathlib import Path

import pytest

from grader import exercises
from grader.api import Settings
from grader.exercises import EXERCISES
from grader.exercises.reads import policy
from grader.explain import run as explain_module
from grader.explain.run import Plan, explain
from grader.location import PACKAGE_DIR, SOLUTIONS_DIR

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

TINY = Plan(seeds=1, steps=3, batch=8, train_count=16, test_count=8)
SETTINGS = Settings(seed=1, timeout=900)
MARK = "EXPLAIN-SCAN"
MIN_PHRASE = 24  # characters: every form of a phrase then holds a whole aligned 8-byte word in its first half
PER_FILE = 8
ENCODINGS = ("latin-1", "utf-16-le", "utf-32-le")
READABLE = str(PACKAGE_DIR / "explain" / "experiments.py")  # granted to every grading process: its opening must be seen


# --------------------------------------------------------------------------- what only the references hold


def reference_files() -> list[Path]:
    """The solutions, every exercise's checks and the judge: what no process running student code may hold."""
    files = sorted({*SOLUTIONS_DIR.glob("*.py"), *SOLUTIONS_DIR.glob("*.md"),
                    *(exercise.solution for exercise in EXERCISES.values())})
    files += sorted(exercise.checks for exercise in EXERCISES.values())
    files += sorted((PACKAGE_DIR / "judge").rglob("*.py"))
    return [path for path in files if path.is_file()]


def solution_lines(path: Path) -> list[str]:
    """A solution's own lines (between its solution markers); every line of another reference file."""
    text = path.read_text(encoding="utf-8")
    if path.parent == SOLUTIONS_DIR and path.suffix == ".py":
        text = "\n".join(re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", text, flags=re.S))
    return [line.strip() for line in text.splitlines()]


@functools.lru_cache(maxsize=1)
def shared_text() -> str:
    """Text a process may hold without holding a reference: every file of the grader it may read, and
    the libraries it imports (their docstrings stay in memory)."""
    parts = [Path(path).read_text(encoding="utf-8") for path in policy()["grant"] if path.endswith(".py")]
    for package in ("keras", "tensorflow", "numpy"):
        for path in Path(importlib.util.find_spec(package).origin).parent.rglob("*.py"):
            try:
                parts.append(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                pass
    return "\n".join(parts)


@functools.lru_cache(maxsize=1)
def reference_lines() -> dict[str, tuple[str, ...]]:
    """{file: its distinctive lines, longest first}: ASCII, long, free of quotes, in nothing a process
    may hold, at most PER_FILE of each file."""
    common = shared_text()
    found = {}
    for path in reference_files():
        lines = sorted({line for line in solution_lines(path)
                        if len(line) >= MIN_PHRASE and line.isascii() and not re.search(r"[\"'\\]", line)},
                       key=lambda line: (-len(line), line))
        kept = []
        for line in lines:
            if line not in common:
                kept.append(line)
                if len(kept) == PER_FILE:
                    break
        found[str(path)] = tuple(kept)
    return found


def reference_phrases(student_source: str) -> dict[str, list[str]]:
    """{file: the phrases to look for}: its distinctive lines that the student's own file does not hold,
    and that no other phrase holds (the search holds every other phrase's first part, which a phrase
    inside it would be found in)."""
    every = {line for lines in reference_lines().values() for line in lines}
    return {file: [line for line in lines
                   if line not in student_source and not any(line in other for other in every if other != line)]
            for file, lines in reference_lines().items()}


def halves(phrase: str) -> list[str]:
    """[all but its last character, its last character], in hex: the phrase is never whole in the
    student's file or memory (the student's search makes the two- and four-byte forms of each half)."""
    return [phrase[:-1].encode("latin-1").hex(), phrase[-1:].encode("latin-1").hex()]


# --------------------------------------------------------------------------- the student's search

SCAN = r'''
import json as _json
import sys as _sys

import numpy as _np

_SCAN = _json.loads(SCAN_JOB)
_CONTROL = "CONTROL_ASCII"
_WIDE_CONTROL = "\u2014CONTROL_WIDE"  # one character beyond Latin-1: Python holds the string two bytes wide


def _readable_regions():
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            low, high = (int(value, 16) for value in fields[0].split("-"))
            if fields[1].startswith("r"):
                yield low, high, fields[5] if len(fields) > 5 else ""


def _search_memory(needles):
    """{key: (first part, rest)} -> (keys found whole, bytes read, regions that could not be read)."""
    multiplier, bits = _np.uint64(0x9E3779B97F4A7C15), 22
    table = _np.zeros(1 << bits, dtype=bool)
    words = {}
    for key, (first, rest) in needles.items():
        for shift in range(8):
            words.setdefault(int.from_bytes(first[shift:shift + 8], "little"), []).append((key, shift))
    table[(_np.array(sorted(words), dtype=_np.uint64) * multiplier) >> _np.uint64(64 - bits)] = True
    longest = max(len(first) + len(rest) for first, rest in needles.values())
    found, read, unreadable, chunk = set(), 0, [], 8 << 20
    with open("/proc/self/mem", "rb", buffering=0) as memory:
        for low, high, name in list(_readable_regions()):
            position = low
            while position < high:
                size = min(chunk, high - position)
                try:
                    memory.seek(position)
                    data = memory.read(min(size + longest, high - position))
                except OSError:
                    unreadable.append(name or hex(position))
                    position += size
                    continue
                read += len(data)
                values = _np.frombuffer(data, dtype=_np.uint64, count=min(size, len(data)) // 8)
                for index in _np.flatnonzero(table[(values * multiplier) >> _np.uint64(64 - bits)]).tolist():
                    for key, shift in words.get(int(values[index]), ()):
                        first, rest = needles[key]
                        start = index * 8 - shift
                        end = start + len(first)
                        if start >= 0 and data[start:end] == first and data[end:end + len(rest)] == rest:
                            found.add(key)
                position += size
    return found, read, unreadable


def _scan(where):
    needles = {(number, encoding): tuple(bytes.fromhex(part).decode("latin-1").encode(encoding) for part in parts)
               for number, parts in _SCAN["phrases"].items() for encoding in _SCAN["encodings"]}
    found, read, unreadable = _search_memory(needles)
    opened = []
    for path in _SCAN["files"]:
        try:
            with open(path, "rb") as handle:
                handle.read(1)
            opened.append(path)
        except OSError:
            pass
    print(_SCAN["mark"], _json.dumps({"where": where, "found": sorted(found), "read": read,
                                       "unreadable": unreadable[:20], "opened": opened}), flush=True)


def _scan_here(where):
    if "grader.explain.phases" in _sys.modules:  # in explain's experiments, not in the grading before them
        _scan(where)
'''

PASSING = '''
import keras


class TransformerEncoder(keras.layers.Layer):
    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        _scan_here("constructed")
        self.sizes = (embed_dim, dense_dim, num_heads)
        self.heads = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.widen = keras.layers.Dense(dense_dim, activation="relu")
        self.narrow = keras.layers.Dense(embed_dim)
        self.after_heads = keras.layers.LayerNormalization()
        self.after_widening = NORM_AFTER_WIDENING
        self.supports_masking = True

    def call(self, inputs, mask=None):
        keys = None if mask is None else keras.ops.expand_dims(mask, 1)
        middle = self.after_heads(inputs + self.heads(inputs, inputs, attention_mask=keys))
        return self.after_widening(middle + self.narrow(self.widen(middle)))

    def get_config(self):
        embed_dim, dense_dim, num_heads = self.sizes
        return {**super().get_config(), "embed_dim": embed_dim, "dense_dim": dense_dim, "num_heads": num_heads}
'''


def student(tmp_path: Path, shares_norm: bool) -> tuple[Path, dict]:
    """A student's file that searches its process and the phrases' numbering, {number: (file, phrase)}."""
    encoder = PASSING.replace("NORM_AFTER_WIDENING",
                              "self.after_heads" if shares_norm else "keras.layers.LayerNormalization()")
    control = f"explain-control-{secrets.token_hex(12)}"
    wide = f"explain-wide-control-{secrets.token_hex(12)}"
    scan = SCAN.replace("CONTROL_ASCII", control).replace("CONTROL_WIDE", wide)
    phrases = {"control": (None, control), "wide_control": (None, wide)}
    for file, lines in reference_phrases(scan + encoder).items():
        for line in lines:
            phrases[str(len(phrases))] = (file, line)
    folder = tmp_path / "submitted"
    folder.mkdir()
    path = folder / "exercise3.py"
    job = {"mark": MARK, "encodings": ENCODINGS,
           "phrases": {number: halves(phrase) for number, (_, phrase) in phrases.items()},
           "files": [READABLE, *map(str, reference_files()), *(str(exercise.stub) for exercise in EXERCISES.values()),
                     str(path)]}
    path.write_text(f"SCAN_JOB = {json.dumps(json.dumps(job))}\n" + scan + encoder, encoding="utf-8")
    return path, phrases


class Recorded(explain_module.Child):
    """A child of explain that keeps its job, the code it ran and what it sent."""

    started: list = []

    def __init__(self, job, source, *args, **kwargs):
        self.record = {"job": job, "source": source}
        Recorded.started.append(self.record)
        super().__init__(job, source, *args, **kwargs)

    def wait(self):
        self.record["run"] = super().wait()
        return self.record["run"]


@pytest.fixture
def recorded(monkeypatch):
    Recorded.started = []
    monkeypatch.setattr(explain_module, "Child", Recorded)
    return Recorded.started


def scans(run) -> list[dict]:
    return [json.loads(line.split(" ", 1)[1]) for line in run.stdout.splitlines() if line.startswith(MARK + " ")]


def assert_holds_no_reference(record: dict, phrases: dict, path: Path):
    """The child's job and code carry no phrase; its own search found both controls and no phrase, and
    opened the granted file and nothing else: no reference, no exercise file, not the submitted file."""
    sent = json.dumps(record["job"]) + record["source"]
    assert [phrase for file, phrase in phrases.values() if file and phrase in sent] == []
    found = scans(record["run"])
    assert found, f"the student's search did not report: {record['run'].stdout[-2000:]} {record['run'].stderr[-2000:]}"
    for report in found:
        numbers = {number for number, _ in report["found"]}
        assert {("control", "latin-1"), ("wide_control", "utf-16-le")} <= {tuple(key) for key in report["found"]}
        assert report["read"] > 100 * 2 ** 20  # the whole process, libraries included, not a corner of it
        leaked = sorted({phrases[n] for n in numbers - {"control", "wide_control"}})
        assert leaked == [], f"reference phrases in the memory of a process running student code: {leaked}"
        assert report["opened"] == [READABLE], f"readable from a process running student code: {report['opened']}"
    assert os.path.realpath(path.parent) in map(os.path.realpath, record["job"]["private"])


def test_every_reference_file_has_phrases_to_look_for(tmp_path):
    path, phrases = student(tmp_path, shares_norm=False)
    files = {file for file, _ in phrases.values() if file}
    assert files == {str(p) for p in reference_files()}, "a reference file with nothing distinctive to look for"
    assert any(file.endswith("exercise1.py") for file in files) and any(file.endswith("exercise3.py") for file in files)


def test_the_experiments_on_a_students_encoder_hold_no_reference(tmp_path, recorded):
    path, phrases = student(tmp_path, shares_norm=False)
    explanation = explain("exercise3", path, SETTINGS, TINY)
    assert explanation.subject == "student", explanation.subject_reason
    assert explanation.error is None and explanation.problems == []
    (record,) = recorded  # one child: the student's encoder, inside the grader's own classifier
    assert record["job"]["mode"] == "experiments" and record["source"] == path.read_text(encoding="utf-8")
    assert_holds_no_reference(record, phrases, path)
    assert len(scans(record["run"])) == 3  # the structure's model and both variants of the one seed


def test_beside_the_reference_encoder_the_students_code_runs_apart(tmp_path, recorded):
    path, phrases = student(tmp_path, shares_norm=True)
    source = path.read_text(encoding="utf-8")
    explanation = explain("exercise3", path, SETTINGS, TINY)
    assert explanation.subject == "reference" and explanation.shared_norm is True, explanation.subject_reason
    assert explanation.error is None and explanation.problems == []
    by_mode = {record["job"]["mode"]: record for record in recorded}
    assert sorted(by_mode) == ["experiments", "norms"] and len(recorded) == 2
    reference = by_mode["experiments"]
    assert reference["source"] == exercises.get("exercise3").solution.read_text(encoding="utf-8")
    controls = [phrase for file, phrase in phrases.values() if file is None]
    assert not any(control in json.dumps(reference["job"]) for control in controls)  # nothing of the student's
    assert scans(reference["run"]) == [] and MARK not in reference["run"].stdout + reference["run"].stderr
    assert reference["run"].phases["load"]["ok"]
    assert os.path.realpath(path.parent) in map(os.path.realpath, reference["job"]["private"])
    norms = by_mode["norms"]
    assert norms["source"] == source
    assert_holds_no_reference(norms, phrases, path)
    assert norms["run"].phases["submission_structure"]["data"] == {"norm_calls": 2, "distinct_norms": 1}
