"""JAX's compiled operations kept between gradings (``grader.compiled``): filled once by the grader's
own run of the solution, read by every grading, written by none; a verdict the same with or
without them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest

from grader import backends, compiled, exercises
from grader.api import Settings
from grader.sandbox.landlock import abi_version

from grader.api import Grading
from grader.workers import Workers

needs_jax = pytest.mark.skipif(not backends.installed("jax"), reason="JAX is not installed here (pip install '.[jax]')")
needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock: no folder is kept")
SLOW = 900.0  # a JAX grading's time limit here: only a wrong verdict fails these tests
ENTRY = "jit_transpose-" + "0123456789abcdef" * 4 + "-cache"


@pytest.fixture(scope="module")
def jax_workers():
    """A worker with JAX imported, whose children grade on JAX (as ``grade batch --backend jax`` does)."""
    workers = Workers(backend="jax")
    yield workers
    workers.close()


def on_jax(workers, submission: Path, settings: Settings) -> tuple:
    """(the verdict, the grading's child run) of ``submission`` on JAX."""
    grading = Grading("exercise3", submission, settings, runner=workers)
    return grading.finish(), grading.run


# ----------------------------------------------------------------------------- where, and for what
def test_the_folder_is_the_users_cache_another_named_or_none(tmp_path):
    assert compiled.root({"GRADE_COMPILED": "off"}) is None
    assert compiled.root({"GRADE_COMPILED": str(tmp_path)}) == tmp_path
    assert compiled.root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "transformer-exercises" / "compiled"
    assert compiled.folder("tensorflow", {"GRADE_COMPILED": str(tmp_path)}) is None  # JAX's alone
    assert compiled.folder("jax", {"GRADE_COMPILED": "off"}) is None


@needs_jax
def test_each_version_of_jax_has_its_own_folder(tmp_path):
    import importlib.metadata

    named = compiled.folder("jax", {"GRADE_COMPILED": str(tmp_path)})
    assert named.parent == tmp_path
    assert importlib.metadata.version("jax") in named.name and importlib.metadata.version("jaxlib") in named.name


# ----------------------------------------------------------------------------- what is taken from a run
def test_only_plain_files_named_as_jax_names_them_are_taken_each_written_anew(tmp_path):
    staging, target = tmp_path / "staging", tmp_path / "target"
    staging.mkdir()
    target.mkdir()
    (staging / ENTRY).write_bytes(b"compiled")
    outside = tmp_path / "secret"
    outside.write_bytes(b"not an entry")
    odd = {
        "link": "jit_add-" + "1" * 64 + "-cache",  # a link, to a file outside
        "folder": "jit_mul-" + "2" * 64 + "-cache",  # a folder with an entry's name
        "empty": "jit_neg-" + "3" * 64 + "-cache",  # nothing in it
        "unnamed": "notes.txt",
        "no key": "jit_add-cache",
        "a path's characters": "jit_add-" + "4" * 64 + "-cache.tmp",
        "a dot file": ".jit_add-" + "5" * 64 + "-cache",
    }
    os.symlink(outside, staging / odd["link"])
    (staging / odd["folder"]).mkdir()
    (staging / odd["empty"]).write_bytes(b"")
    for name in ("unnamed", "no key", "a path's characters", "a dot file"):
        (staging / odd[name]).write_bytes(b"x")
    assert compiled.take(staging, target) == 1
    assert sorted(p.name for p in target.iterdir()) == [ENTRY]
    kept = target / ENTRY
    assert kept.read_bytes() == b"compiled" and not kept.is_symlink()
    assert oct(kept.stat().st_mode & 0o777) == oct(0o644)  # readable by a grading, writable by the grader alone
    assert os.stat(kept).st_ino != os.stat(staging / ENTRY).st_ino  # a copy, not the run's own file


def test_an_entry_kept_already_is_never_replaced_and_an_oversized_one_never_taken(tmp_path, monkeypatch):
    staging, target = tmp_path / "staging", tmp_path / "target"
    staging.mkdir()
    target.mkdir()
    (target / ENTRY).write_bytes(b"first")
    (staging / ENTRY).write_bytes(b"second")
    big = "jit_add-" + "6" * 64 + "-cache"
    (staging / big).write_bytes(b"y" * 11)
    monkeypatch.setattr(compiled, "MAX_ENTRY_BYTES", 10)
    assert compiled.take(staging, target) == 0
    assert (target / ENTRY).read_bytes() == b"first" and not (target / big).exists()


# ----------------------------------------------------------------------------- filled once, under a lock
@needs_jax
@needs_landlock
def test_the_solution_fills_the_folder_once_and_a_failed_run_fills_nothing(tmp_path):
    environ = {"GRADE_COMPILED": str(tmp_path)}
    exercise = exercises.get("exercise3")
    runs = []

    def run_solution(entry):
        runs.append(entry)
        assert entry["write"] is True and Path(entry["folder"]).parent == tmp_path  # its own staging folder
        (Path(entry["folder"]) / ENTRY).write_bytes(b"compiled")
        return True

    threads = [threading.Thread(target=compiled.prepare, args=(exercise, "jax", run_solution, environ))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entry = compiled.prepare(exercise, "jax", run_solution, environ)
    assert len(runs) == 1  # four gradings started together, and one more after: one run of the solution
    target = compiled.folder("jax", environ)
    assert entry == {"folder": str(target), "write": False}
    assert (target / ENTRY).read_bytes() == b"compiled"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".filling-")]  # the staging folder is gone
    assert oct(tmp_path.stat().st_mode & 0o777) == oct(0o700)

    other = exercises.get("exercise4")
    failures = []

    def fails(entry):
        failures.append(entry)
        (Path(entry["folder"]) / ("jit_add-" + "7" * 64 + "-cache")).write_bytes(b"from a run that failed")
        raise RuntimeError("the grader's own run failed")

    assert compiled.prepare(other, "jax", fails, environ) == entry  # the grading goes on, reading what is kept
    assert compiled.prepare(other, "jax", fails, environ) == entry
    assert len(failures) == 1  # not tried again for every grading of the class
    assert not (target / ("jit_add-" + "7" * 64 + "-cache")).exists()
    assert not compiled.filled(other, "jax", environ) and compiled.filled(exercise, "jax", environ)


def test_no_folder_for_other_backends_or_when_turned_off(tmp_path):
    ran = []
    exercise = exercises.get("exercise3")
    assert compiled.prepare(exercise, "tensorflow", ran.append, {"GRADE_COMPILED": str(tmp_path)}) is None
    assert compiled.prepare(exercise, "jax", ran.append, {"GRADE_COMPILED": "off"}) is None
    assert ran == [] and list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- real gradings on JAX
PROBING = '''
import os
import jax
import keras


class TransformerEncoder(keras.layers.Layer):
    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        folder = jax.config.jax_compilation_cache_dir
        seen = [f"folder {folder}"]
        try:
            seen.append(f"listed {len(os.listdir(folder))}")
        except OSError:
            seen.append("no listing")
        for name in ("planted-0123456789abcdef0123-cache", "filled"):
            try:
                with open(os.path.join(folder, name), "wb") as planted:
                    planted.write(b"an executable of its own")
                seen.append("wrote " + name)
            except OSError:
                seen.append("no writing")
        try:
            with open(os.path.join(folder, "NAME"), "rb") as entry:
                seen.append("read " + entry.read().decode())
        except OSError:
            seen.append("no reading")
        try:
            os.mkdir(os.path.join(folder, "made"))
            seen.append("made a folder")
        except OSError:
            seen.append("no folder made")
        raise RuntimeError("; ".join(seen))
'''


@needs_jax
@needs_landlock
def test_a_grading_opens_the_folders_entries_but_cannot_list_or_write_it(tmp_path, monkeypatch, jax_workers):
    monkeypatch.setenv("GRADE_COMPILED", str(tmp_path))
    exercise = exercises.get("exercise3")

    def run_solution(entry):
        (Path(entry["folder"]) / ENTRY).write_bytes(b"compiled")
        return True

    compiled.prepare(exercise, "jax", run_solution)  # filled as the solution's run would, without its time
    target = compiled.folder("jax")
    kept = sorted(p.name for p in target.iterdir())
    probing = tmp_path / "probing" / "exercise3.py"
    probing.parent.mkdir()
    probing.write_text(PROBING.replace("NAME", ENTRY), encoding="utf-8")
    verdict, _ = on_jax(jax_workers, probing, Settings(backend="jax", timeout=SLOW))
    told = " ".join(c.message for c in verdict.checks)
    assert f"folder {target}" in told  # the grading was given the folder ...
    assert "read compiled" in told  # ... opens its entries by name ...
    assert "no listing" in told and "wrote" not in told and "made a folder" not in told  # ... and does nothing else
    assert sorted(p.name for p in target.iterdir()) == kept and (target / ENTRY).read_bytes() == b"compiled"


@pytest.mark.slow
@needs_jax
@needs_landlock
def test_the_solutions_run_fills_the_folder_gradings_read_it_and_verdicts_do_not_change(tmp_path, monkeypatch,
                                                                                        jax_workers):
    solution = exercises.get("exercise3").solution
    settings = Settings(seed=7, backend="jax", timeout=SLOW)
    monkeypatch.setenv("GRADE_COMPILED", "off")
    without, _ = on_jax(jax_workers, solution, settings)

    monkeypatch.setenv("GRADE_COMPILED", str(tmp_path))
    target = compiled.folder("jax")
    with_folder, _ = on_jax(jax_workers, solution, settings)  # fills the folder first, then grades
    kept = sorted(p.name for p in target.iterdir() if p.name != compiled.FILLED)
    assert len(kept) > 20 and compiled.filled(exercises.get("exercise3"), "jax")
    # nothing of where the solution's operations came from: no file, no function of its, no line
    told = located(target, [solution.name, solution.stem, "TransformerEncoder", "submission"])
    assert not told, told
    assert (with_folder.status, with_folder.score, [(c.id, c.status, c.message) for c in with_folder.checks]) == \
        (without.status, without.score, [(c.id, c.status, c.message) for c in without.checks])

    # what it reads, it reads: entries spoilt on disk are told apart and compiled again, the verdict unchanged
    for name in kept:
        (target / name).write_bytes(b"not an executable")
    spoilt, run = on_jax(jax_workers, solution, settings)
    assert "persistent compilation cache" in run.stderr
    assert (spoilt.status, spoilt.score) == (without.status, without.score)


# ----------------------------------------------------------------------------- nothing of its source
def located(folder: Path, names: list[str]) -> dict:
    """What the entries of ``folder`` say of where their operations were written: any Python file's
    name, and any of ``names``, with the entries saying it."""
    pattern = re.compile(rb"[\w./-]+\.py\b|" + b"|".join(re.escape(n.encode()) for n in names))
    found: dict = {}
    for entry in folder.iterdir():
        if not compiled.ENTRY.fullmatch(entry.name):
            continue
        for match in pattern.findall(zlib.decompress(entry.read_bytes())):
            found.setdefault(match.decode(errors="replace"), []).append(entry.name)
    return found


COMPILING = """
import sys
import jax, jax.numpy as jnp
from grader.probe import runtime

runtime.use_compiled(jax, {"folder": sys.argv[1], "write": sys.argv[2] == "write"})

class Kept:
    def a_helper_named_in_no_library(self, x):
        return jnp.sum(jnp.tanh(x) * 3.0) + jnp.max(x)


def entry_point(x):
    return Kept().a_helper_named_in_no_library(x) * 2.0


print(float(jax.jit(entry_point)(jnp.ones((4, 5)))))
"""


@needs_jax
def test_a_compiled_operation_keeps_no_file_function_or_line_of_what_it_was_compiled_from(tmp_path):
    """The folder is filled by a solution and read by students: an entry written the way a grading
    writes one holds no location of the code it came from (no file, no function it called, no
    line), and a run reading the folder as a grading does, from another file at other lines, finds
    it: the same settings make the same keys."""
    folder, first, second = tmp_path / "compiled", tmp_path / "a_file_named_in_no_library.py", tmp_path / "b.py"
    folder.mkdir()
    first.write_text(COMPILING, encoding="utf-8")
    second.write_text("\n" * 17 + COMPILING, encoding="utf-8")
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}
    for script, mode in ((first, "write"), (second, "read")):
        subprocess.run([sys.executable, str(script), str(folder), mode], check=True, capture_output=True,
                       env=environment, cwd=Path(__file__).resolve().parents[1])
        if mode == "write":
            written = {entry.name: entry.stat().st_mtime_ns for entry in folder.iterdir()}
    assert any("entry_point" in name for name in written)  # the function compiled names the entry, as JAX names it
    assert {entry.name: entry.stat().st_mtime_ns for entry in folder.iterdir()} == written  # read, not compiled anew
    told = located(folder, ["a_helper_named_in_no_library", "a_file_named_in_no_library", "Kept"])
    assert not told, told
