"""Nothing of a reference in any process that runs student code, in any mode.

A submission that is a correct encoder, and also a probe: at import it reads every page of its own
memory that is not a library's file (the heap, the stacks, every anonymous and data mapping:
what the grader, its worker or the job could have put there) and then tries to open, by name,
every file under the folders where a reference could lie (the clone or the package, the folder of
the class or the nbgrader course it was taken from), as the test lists them. It looks in both for phrases of
every solution, of the checks and of the judge's references, and for a control phrase of its own
that it must find, and says what it found in the error its import raises: the verdict's error
carries it in every mode. Files it could open are compared with what the grading is granted
(``grader.exercises.reads.policy``).

The probe never holds a phrase as it is until it scans: each comes XOR-ed, is decoded in place into
a buffer of its own, and a match at that buffer, or inside the buffer the scan reads into, is not
counted.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
import zlib
from pathlib import Path

import pytest

from grader import cli, exercises
from grader.api import Grading, Settings
from grader.exercises.reads import policy
from grader.location import PACKAGE_DIR, PROJECT_ROOT, SOLUTIONS_DIR
from grader.sandbox.landlock import abi_version
from grader.sandbox.process import Child

from .conftest import warm_runner

KEY = 0x5A
CONTROL = "a control phrase of this submission only, 5c1e"
MIN_PHRASE = 30
PER_FILE = 3

needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock: folders are not closed")

ENCODER = '''
import keras
from keras import layers, ops


class TransformerEncoder(keras.layers.Layer):
    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.dense_dim, self.num_heads = embed_dim, dense_dim, num_heads
        self.attn = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.hidden = layers.Dense(dense_dim, activation="relu")
        self.back = layers.Dense(embed_dim)
        self.first_norm = layers.LayerNormalization()
        self.second_norm = layers.LayerNormalization()
        self.supports_masking = True

    def call(self, inputs, mask=None):
        keys = None if mask is None else ops.expand_dims(mask, axis=1)
        seen = self.first_norm(inputs + self.attn(inputs, inputs, attention_mask=keys))
        return self.second_norm(seen + self.back(self.hidden(seen)))

    def get_config(self):
        return {**super().get_config(), "embed_dim": self.embed_dim, "dense_dim": self.dense_dim,
                "num_heads": self.num_heads}
'''

PROBE = r'''
import base64 as _base64, ctypes as _ctypes, json as _json, os as _os, zlib as _zlib

_KEY = __KEY__
_PHRASES = _json.loads(__PHRASES__)
_FILES = _json.loads(_zlib.decompress(_base64.b64decode(__FILES__)))
_GRANTED = set(_json.loads(__GRANTED__))
_CONTROL = "__CONTROL__"


def _decoded(text):
    coded = bytes.fromhex(text)
    needle = bytearray(len(coded))
    for index, byte in enumerate(coded):
        needle[index] = byte ^ _KEY
    return needle


def _address(buffer):
    return _ctypes.addressof((_ctypes.c_char * len(buffer)).from_buffer(buffer))


def _scan():
    needles = {label: _decoded(text) for label, text in _PHRASES.items()}
    own = {_address(needle) for needle in needles.values()}
    buffer = bytearray(1 << 20)
    start = _address(buffer)
    found, scanned = {}, 0
    memory = _os.open("/proc/self/mem", _os.O_RDONLY)
    with open("/proc/self/maps") as maps:
        regions = maps.read().splitlines()
    for line in regions:
        fields = line.split()
        low, high = (int(part, 16) for part in fields[0].split("-"))
        path = fields[5] if len(fields) > 5 else ""
        if "r" not in fields[1] or path in ("[vvar]", "[vvar_vclock]", "[vsyscall]"):
            continue
        if path.startswith("/") and ".so" in path and "w" not in fields[1]:
            continue  # a library's own pages: the file itself, as installed
        place = low
        while place < high:
            try:
                got = _os.preadv(memory, [memoryview(buffer)[:min(len(buffer), high - place)]], place)
            except OSError:
                break
            if got <= 0:
                break
            for label, needle in needles.items():
                at = buffer.find(needle, 0, got)
                while at >= 0:
                    where = place + at
                    if where not in own and not start <= where < start + len(buffer):
                        found.setdefault(label, where)
                    at = buffer.find(needle, at + 1, got)
            scanned += got
            place += got - (max(map(len, needles.values())) - 1) if got == len(buffer) else got
    _os.close(memory)
    memory_found = sorted(found)
    opened, outside, in_files = 0, [], set()
    for path in _FILES:
        try:
            handle = _os.open(path, _os.O_RDONLY | _os.O_NOFOLLOW | _os.O_NONBLOCK)
        except OSError:
            continue
        try:
            data = _os.read(handle, 8 << 20)
        except OSError:
            data = b""
        finally:
            _os.close(handle)
        opened += 1
        if path not in _GRANTED:
            outside.append(path)
        for label, needle in needles.items():
            if label != "control" and needle in data:
                in_files.add(label)
    return {"control": "control" in memory_found, "memory": [l for l in memory_found if l != "control"],
            "files": sorted(in_files), "outside": outside[:3], "outside_count": len(outside),
            "opened": opened, "scanned_mb": scanned >> 20}


raise RuntimeError("SCAN" + _json.dumps(_scan(), separators=(",", ":")) + "SCAN")
'''


# ----------------------------------------------------------------------------- the phrases
def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]


def _solution_lines(path: Path) -> list[str]:
    lines, inside = [], False
    for line in _lines(path):
        if line.startswith("### BEGIN SOLUTION"):
            inside = True
        elif line.startswith("### END SOLUTION"):
            inside = False
        elif inside:
            lines.append(line)
    return lines


@pytest.fixture(scope="module")
def phrases() -> dict[str, str]:
    """{label: phrase}: lines of every solution, of every exercise's checks and of the judge's
    references that nothing a grading may hold contains (the files it is granted, the exercise
    files, Keras's own sources, this probe)."""
    import keras

    allowed = [PROBE, ENCODER]
    judging = (PACKAGE_DIR / "judge", PACKAGE_DIR / "judging")
    for path in map(Path, policy()["grant"]):  # what a grading runs, but never a part of the judge's
        if path.suffix == ".py" and path.name != "checks.py" and not any(f in path.parents for f in judging):
            allowed.append(path.read_text(encoding="utf-8", errors="replace"))
    for stub in (PROJECT_ROOT / "exercises").glob("*.*"):
        allowed.append(stub.read_text(encoding="utf-8", errors="replace"))
    library = Path(keras.__file__).parent
    allowed += [path.read_text(encoding="utf-8", errors="replace") for path in library.rglob("*.py")]
    everything = "\n".join(allowed)

    sources = [(f"solution {path.stem}", _solution_lines(path)) for path in sorted(SOLUTIONS_DIR.glob("*.py"))]
    sources += [(f"checks {path.parent.name}", _lines(path))
                for path in sorted((PACKAGE_DIR / "exercises").glob("*/checks.py"))]
    sources += [(f"judge {path.stem}", _lines(path))
                for path in sorted((PACKAGE_DIR / "judge").rglob("*.py"))]
    chosen = {}
    for label, lines in sources:
        kept = [line for line in dict.fromkeys(lines)
                if len(line) >= MIN_PHRASE and line.isascii() and line not in everything]
        for index, line in enumerate(sorted(kept, key=len, reverse=True)[:PER_FILE]):
            chosen[f"{label} {index}"] = line
    assert sum(label.startswith("solution") for label in chosen) >= 2 * len(list(SOLUTIONS_DIR.glob("*.py")))
    assert any(label.startswith("checks") for label in chosen) and any(label.startswith("judge") for label in chosen)
    return chosen


def probing_source(phrases: dict[str, str], roots: list[Path]) -> str:
    coded = {label: bytes(byte ^ KEY for byte in text.encode()).hex() for label, text in phrases.items()}
    coded["control"] = bytes(byte ^ KEY for byte in CONTROL.encode()).hex()
    granted = [os.path.realpath(path) for path in policy()["grant"]]
    files = sorted({os.path.realpath(path) for root in roots for path in _files_under(root)})
    packed = base64.b64encode(zlib.compress(json.dumps(files).encode(), 9)).decode()
    text = (PROBE.replace("__KEY__", str(KEY)).replace("__PHRASES__", repr(json.dumps(coded)))
            .replace("__FILES__", repr(packed))
            .replace("__GRANTED__", repr(json.dumps(granted))).replace("__CONTROL__", CONTROL))
    return ENCODER + text


def _files_under(root: Path) -> list[str]:
    """Every file under ``root`` (the test lists them: a grading cannot list a folder closed to it,
    and tries each by name), leaving out Python's own environments inside a clone."""
    found = []
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if name not in (".venv", ".venv313", "node_modules")]
        found += [os.path.join(folder, name) for name in files]
    return found


def findings(error: str | None) -> dict:
    match = re.search(r"SCAN(\{.*?\})SCAN", error or "", re.S)
    assert match, error
    return json.loads(match.group(1))


def assert_holds_nothing(found: dict) -> None:
    assert found["control"], found  # the scan works: it finds the submission's own phrase
    assert found["scanned_mb"] > 50, found  # the grading process's memory, TensorFlow's heap included
    assert found["memory"] == [] and found["files"] == [], found
    assert found["outside_count"] == 0, found


def roots(*more: Path) -> list[Path]:
    return [PROJECT_ROOT, PACKAGE_DIR, *more]


# ----------------------------------------------------------------------------- the modes
@pytest.fixture(scope="module")
def class_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    return folder


@pytest.fixture(scope="module")
def probing(phrases, class_folder):
    path = class_folder / "student" / "exercise3.py"
    path.parent.mkdir()
    (class_folder / "classmate").mkdir()
    (class_folder / "classmate" / "exercise3.py").write_text(
        exercises.get("exercise3").solution.read_text(encoding="utf-8"), encoding="utf-8")
    path.write_text(probing_source(phrases, roots(class_folder)), encoding="utf-8")
    return path


@needs_landlock
@pytest.mark.parametrize("runner", ["cold", "worker"])
def test_a_grading_holds_and_opens_nothing_of_a_reference(probing, runner):
    """A fresh grading process (``grade``), and a fork of the batch's worker (``grade batch``, the
    grading server): a classmate's correct file lies beside the student's."""
    verdict = Grading("exercise3", probing, Settings(seed=3),
                      runner=Child if runner == "cold" else warm_runner()).finish()
    assert_holds_nothing(findings(verdict.error))


def _notebook(source: str, solution_cell: bool) -> dict:
    metadata = {"nbgrader": {"solution": True, "grade": False, "locked": False, "grade_id": "answer",
                             "schema_version": 3}} if solution_cell else {}
    return {"cells": [{"cell_type": "code", "execution_count": None, "metadata": metadata, "outputs": [],
                       "source": source}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def system_folder():
    """A folder under /opt, where a course an instructor keeps is readable to every process unless
    the grading closes it (a folder under /tmp or a home is closed to gradings anyway)."""
    try:
        folder = Path(tempfile.mkdtemp(prefix="grade-course-", dir="/opt"))
    except OSError as exc:
        pytest.skip(f"/opt cannot be written here ({exc.strerror})")
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@needs_landlock
def test_a_notebook_alone_and_in_its_nbgrader_course_hides_the_course(phrases, system_folder):
    """A notebook graded by itself (``grade --submission``) where it lies in an nbgrader course
    under a system folder: the course's source notebooks (which hold the solutions), its gradebook
    and every other student's copies stay closed, as they are to a batch of the course."""
    from grader.integrations.course import write_course

    course = system_folder / "course"
    write_course(course, ["exercise3"])
    (course / "gradebook.db").write_bytes(b"SQLite format 3\0")
    other = course / "submitted" / "classmate" / "exercise3" / "exercise3.ipynb"
    other.parent.mkdir(parents=True)
    shutil.copy(course / "source" / "exercise3" / "exercise3.ipynb", other)
    mine = course / "submitted" / "student" / "exercise3" / "exercise3.ipynb"
    mine.parent.mkdir(parents=True)
    mine.write_text(json.dumps(_notebook(probing_source(phrases, roots(course)), solution_cell=True)),
                    encoding="utf-8")
    alone = system_folder / "alone" / "exercise3.ipynb"
    alone.parent.mkdir()
    alone.write_text(json.dumps(_notebook(probing_source(phrases, roots(alone.parent)), solution_cell=False)),
                     encoding="utf-8")
    for path in (mine, alone):
        verdict = Grading("exercise3", path, Settings(seed=3), runner=warm_runner()).finish()
        found = findings(verdict.error)
        assert_holds_nothing(found)


@needs_landlock
@pytest.mark.slow
def test_the_command_and_its_server_hold_nothing_of_a_reference(probing, monkeypatch, capsys):
    """``grade --submission`` cold and through the warm grading server."""
    from .test_server import Runtime

    code, verdict, _ = _graded(["exercise3", "--submission", str(probing), "--json", "--no-server"], capsys)
    assert code == 2
    assert_holds_nothing(findings(verdict["error"]))
    runtime = Runtime()
    try:
        runtime.use(monkeypatch)
        code, verdict, _ = _graded(["exercise3", "--submission", str(probing), "--json"], capsys)
        assert runtime.status() is not None  # graded by the server
        assert code == 2
        assert_holds_nothing(findings(verdict["error"]))
    finally:
        runtime.close()


def _graded(argv: list[str], capsys) -> tuple[int, dict, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def _unescaped(markdown: str) -> str:
    """Markdown's backslash escapes taken back out of a platform's text."""
    return re.sub(r"\\(.)", r"\1", markdown)


@needs_landlock
@pytest.mark.slow
def test_the_batch_command_and_the_platforms_entry_points_hold_nothing_of_a_reference(phrases, tmp_path):
    """``grade batch`` over a class folder, Gradescope's run_autograder (the zip unpacked as
    Gradescope unpacks it, the wheel with the solutions beside the submission) and PrairieLearn's
    entry point."""
    from .test_platforms import ENV, SYSTEM_PATH, VENV_BIN, grade, lay_out, prairielearn, run_autograder

    school = tmp_path / "class"
    for name in ("student", "classmate"):
        (school / name).mkdir(parents=True)
    (school / "classmate" / "exercise3.py").write_text(exercises.get("exercise3").solution.read_text(encoding="utf-8"),
                                                        encoding="utf-8")
    (school / "student" / "exercise3.py").write_text(probing_source(phrases, roots(school)), encoding="utf-8")
    done = grade("batch", str(school), "--exercise", "exercise3", "--out", str(tmp_path / "out"), "--jobs", "1")
    assert done.returncode in (0, 1), done.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines() if line]
    (row,) = [row for row in rows if row["id"].startswith("student")]
    assert_holds_nothing(findings(row["error"]))

    out = tmp_path / "autograder.zip"
    built = grade("gradescope-autograder", "exercise3", "--out", str(out))
    assert built.returncode == 0, built.stderr
    import zipfile

    with zipfile.ZipFile(out) as archive:
        entries = {info.filename: (archive.read(info), info.external_attr >> 16) for info in archive.infolist()}
    root = tmp_path / "autograder"
    source = probing_source(phrases, roots(root / "source"))
    lay_out((out, entries), root, {"exercise3.py": source})
    result, results = run_autograder(root, [VENV_BIN, *SYSTEM_PATH])
    assert result.returncode == 0, result.stderr
    assert_holds_nothing(findings(_unescaped(results["tests"][0]["output"])))

    place = tmp_path / "grade"
    (place / "student").mkdir(parents=True)
    (place / "student" / "exercise3.py").write_text(probing_source(phrases, roots(place)), encoding="utf-8")
    result = prairielearn("exercise3", root=place, env=ENV)
    assert result.returncode == 0, result.stderr
    results = json.loads((place / "results" / "results.json").read_text())
    assert_holds_nothing(findings(results["format_errors"][0]))
