"""Finding a class's submissions: ``survey`` walks the paths given (an nbgrader course, its
``submitted/`` folder, a student's folder, or any folder of files) and gives each submission an id,
the folders no grading of the class may read, and what it skipped or refused, and why.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..submission import closed_around


SUFFIXES = (".py", ".ipynb")
SKIPPED_FOLDERS = {".ipynb_checkpoints", "__pycache__", ".git", ".venv", "node_modules"}
# Besides a submitted/ folder, the signs that a folder is an nbgrader course.
COURSE_MARKERS = ("nbgrader_config.py", "gradebook.db")
NBGRADER_TIMESTAMP = "timestamp.txt"  # nbgrader collect's own file in every submission folder: not stray


@dataclass(frozen=True)
class Submission:
    id: str
    path: Path
    student: str | None = None  # nbgrader's student, for a file in submitted/<student>/<exercise>/
    refused: str | None = None  # why the file is not read: its row is an error


@dataclass(frozen=True)
class Skipped:
    path: Path
    why: str


@dataclass
class Discovery:
    """What ``survey`` found under the paths given."""

    submissions: list[Submission] = field(default_factory=list)  # to grade
    refused: list[Submission] = field(default_factory=list)  # error rows, never read
    skipped: list[Skipped] = field(default_factory=list)  # not a submission of this exercise
    searched: list[tuple[Path, Path]] = field(default_factory=list)  # (course given, its submitted/ folder)
    given: list[Path] = field(default_factory=list)  # the folders given (a file: its folder), resolved
    # the rows found outside nbgrader's layout whose id is their name below the folder given, as it is
    named: set[Submission] = field(default_factory=set, repr=False)

    def private(self) -> list[str]:
        """The folders no grading of this class may read: those given, whole (a classmate's other
        files, folders nothing was graded from, an nbgrader course's source and gradebook), and
        the folders the refused links point into."""
        folders = [str(folder) for folder in self.given]
        folders += [os.path.dirname(os.path.realpath(s.path)) for s in self.refused]
        return list(dict.fromkeys(folders))


class LayoutError(ValueError):
    """A path given cannot be searched for submissions; the message says what to give instead."""


def survey(paths: list[Path], exercise_id: str) -> Discovery:
    """Find the submissions of ``exercise_id`` under ``paths``.

    In nbgrader's layout (an nbgrader course folder, its ``submitted/``, a student's folder in it
    or a student's assignment folder) only ``submitted/<student>/<exercise>/`` is graded, one file
    per student, the student being its id: ``<exercise>.ipynb``, else ``<exercise>.py``, else the
    only notebook or ``.py`` file there. Other assignments and stray files are skipped and listed.
    Elsewhere every ``.py`` or ``.ipynb`` file is graded, its id being its path below the folder
    given. A symbolic link where a submission would be, or a file that resolves outside the path
    given, is refused: an error row, never read. Ids are unique and depend on the whole class found,
    never on the order of the paths given or of a listing (``_unique``).
    """
    found = Discovery()
    for given in paths:
        given = Path(given)
        if not given.exists():
            raise FileNotFoundError(f"{given} does not exist")
        root = given.resolve()
        found.given.append(root.parent if root.is_file() else root)
        if root.is_file():
            _add_file(found, given.absolute(), root.parent, exercise_id)
        elif _is_course(root):
            submitted = root / "submitted"
            if not submitted.is_dir() or submitted.is_symlink():
                raise LayoutError(f"{given} is an nbgrader course folder without a submitted/ folder: collect "
                                  "the submissions first (nbgrader collect or zip_collect), or give the folder "
                                  "that holds them")
            found.searched.append((root, submitted))
            _students(found, submitted, exercise_id)
        elif root.name == "submitted":
            _students(found, root, exercise_id)
        elif root.parent.name == "submitted":
            _student(found, root, root.name, exercise_id)
        elif root.parent.parent.name == "submitted":
            if root.name == exercise_id:
                _assignment(found, root, root.parent.name, exercise_id)
            else:
                found.skipped.append(Skipped(root, f"another assignment ({root.name}), not {exercise_id}"))
        else:
            _loose(found, root)
    found.submissions, found.refused = _unique(found.submissions, found.refused, found.named)
    return found


def _is_course(folder: Path) -> bool:
    return (folder / "submitted").is_dir() or any((folder / marker).exists() for marker in COURSE_MARKERS)


def _hidden(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_FOLDERS


def _entries(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as scan:
        return sorted((e for e in scan if not _hidden(e.name)), key=lambda e: e.name)


def _students(found: Discovery, submitted: Path, exercise_id: str) -> None:
    for entry in _entries(submitted):
        path = Path(entry.path)
        if entry.is_symlink():
            if path.suffix in SUFFIXES or entry.is_dir():
                found.refused.append(Submission(entry.name, path, entry.name, "is a symbolic link"))
            else:
                found.skipped.append(Skipped(path, "not a student's folder"))
        elif entry.is_dir(follow_symlinks=False):
            _student(found, path, entry.name, exercise_id)
        else:
            found.skipped.append(Skipped(path, "not in a student's folder"))


def _student(found: Discovery, folder: Path, student: str, exercise_id: str) -> None:
    handed_in = []
    for entry in _entries(folder):
        path = Path(entry.path)
        if entry.name == exercise_id and entry.is_symlink():
            found.refused.append(Submission(student, path, student, "is a symbolic link"))
            handed_in.append(entry.name)
        elif entry.name == exercise_id and entry.is_dir(follow_symlinks=False):
            _assignment(found, path, student, exercise_id)
            handed_in.append(entry.name)
        elif entry.is_dir(follow_symlinks=False):
            found.skipped.append(Skipped(path, f"another assignment ({entry.name}), not {exercise_id}"))
        else:
            found.skipped.append(Skipped(path, f"not in an assignment folder of {student}"))
    if not handed_in:
        found.skipped.append(Skipped(folder, f"{student} has no {exercise_id} folder"))


def _assignment(found: Discovery, folder: Path, student: str, exercise_id: str) -> None:
    """One student's submission of the exercise: the file graded, the others listed."""
    candidates = _files(folder)
    by_name = {p.relative_to(folder).as_posix(): p for p in candidates}
    top = [p for p in candidates if p.parent == folder]
    chosen = by_name.get(f"{exercise_id}.ipynb") or by_name.get(f"{exercise_id}.py") or (
        top[0] if len(top) == 1 else None)
    if chosen is None:
        if candidates:
            names = ", ".join(p.relative_to(folder).as_posix() for p in candidates)
            why = (f"holds several files that could be the answer ({names}) and none is named "
                   f"{exercise_id}.ipynb")
        else:
            why = "holds no .ipynb or .py file"
        found.refused.append(Submission(student, folder, student, why))
        return
    for other in candidates:
        if other != chosen:
            found.skipped.append(Skipped(other, f"not the file graded for {student} ({chosen.name})"))
    for other in _files(folder, every=True):
        if other.suffix not in SUFFIXES and other != folder / NBGRADER_TIMESTAMP:
            found.skipped.append(Skipped(other, f"not a .py or .ipynb file, not graded for {student}"))
    _add(found, Submission(student, chosen, student), folder)


def _files(folder: Path, every: bool = False) -> list[Path]:
    """The .py and .ipynb files under ``folder`` (``every``: all files), symbolic links included,
    without following any; hidden ones (.ipynb_checkpoints, dotfiles) left out."""
    files = []
    for current, folders, names in os.walk(folder):
        folders[:] = sorted(f for f in folders if not _hidden(f))
        files += [Path(current) / n for n in sorted(names)
                  if not _hidden(n) and (every or Path(n).suffix in SUFFIXES)]
    return files


def _loose(found: Discovery, root: Path) -> None:
    for current, folders, names in os.walk(root):
        for name in sorted(folders):
            if not _hidden(name) and (Path(current) / name).is_symlink():
                found.skipped.append(Skipped(Path(current) / name, "a symbolic link to a folder, not followed"))
        folders[:] = sorted(f for f in folders if not _hidden(f))
        for name in sorted(names):
            path = Path(current) / name
            if _hidden(name):
                continue
            if path.suffix in SUFFIXES:
                _add_file(found, path, root, None)
            else:
                found.skipped.append(Skipped(path, "not a .py or .ipynb file"))


def _add_file(found: Discovery, path: Path, base: Path, exercise_id: str | None) -> None:
    """A file found outside nbgrader's layout, or given by name."""
    if path.suffix not in SUFFIXES:
        found.skipped.append(Skipped(path, "not a .py or .ipynb file"))
        return
    student = _layout_student(path, exercise_id) if exercise_id else None
    identity, named = (student, False) if student else _identify(path, base)
    _add(found, Submission(identity, path, student), base, named=named)


def _layout_student(path: Path, exercise_id: str) -> str | None:
    """The student of a file given by name at ``submitted/<student>/<exercise>/<file>``."""
    parts = path.absolute().parts
    if len(parts) >= 4 and parts[-4] == "submitted" and parts[-2] == exercise_id:
        return parts[-3]
    return None


def _add(found: Discovery, submission: Submission, inside: Path, named: bool = False) -> None:
    path = submission.path
    if path.is_symlink():
        row = replace(submission, refused="is a symbolic link")
        found.refused.append(row)
    elif not path.resolve().is_relative_to(inside.resolve()):
        row = replace(submission, refused=f"resolves outside {inside}")
        found.refused.append(row)
    else:
        row = replace(submission, path=path.resolve())
        found.submissions.append(row)
    if named:
        found.named.add(row)


MAX_ID = 100
ID_CHARACTERS = re.compile(r"[^A-Za-z0-9._-]+")  # any other run of characters becomes _ in an id


def _identify(path: Path, base: Path) -> tuple[str, bool]:
    """A file's id outside nbgrader's layout, and whether that id is its name as it is: its path below
    the folder given, without suffix, any run of characters other than letters, digits, ``.``, ``_``
    and ``-`` made ``_`` and ``.`` and ``_`` taken off its ends. It depends on nothing above that
    folder, so the same class copied anywhere, on any machine, gets the same ids (and so the same
    shares)."""
    path, base = path.absolute(), base.absolute()
    relative = path.relative_to(base) if path.is_relative_to(base) else Path(path.name)
    name = relative.with_suffix("").as_posix()
    identity = ID_CHARACTERS.sub("_", name).strip("._") or "submission"
    if len(identity) > MAX_ID:  # an id names a folder of the results: keep it well inside a file name's limit
        digest = hashlib.sha256(os.fsencode(relative.as_posix())).hexdigest()[:10]
        identity = f"{identity[:MAX_ID - 11]}-{digest}"
    return identity, identity == name


def _order(row: Submission) -> tuple:
    """Where a row stands when two want one id: a student first, then by the id it wants and the
    name of its file, then by its path (which two rows below one folder given order alike anywhere)."""
    return row.student is None, row.id, row.path.name, row.path.as_posix()


def _numbered(base: str, count: int) -> str:
    suffix = f"-{count}"
    return base[:max(1, MAX_ID - len(suffix))] + suffix if len(base) + len(suffix) > MAX_ID else base + suffix


def _unique(submissions: list[Submission], refused: list[Submission], named: set[Submission] = frozenset()):
    """One row per file, and one id per row, a function of the whole class found, never of the order
    of the paths given or of any listing, so that every machine and every shard gives each file the
    same id:
    - the same file found twice is one row (a student's row, else the one wanting the first id);
    - an own name keeps its id: a student's name, or a file's name below the folder given that is an
      id as it is (``alice.py``, not ``alice .py``); of two rows with one own name, the first by
      ``_order`` keeps it (a student before a file, ``alice.ipynb`` before ``alice.py``);
    - every other row (a name that had to be made an id, or an own name another row keeps) gets, by
      ``_order``, the first of ``<id>``, ``<id>-2``, ``<id>-3``, ... that is no row's own name, nor
      another row's id, nor either of them but for letter case (file systems that ignore it would
      give both one results folder); past ``<id>`` also none any row wants."""
    graded = _one_row_per_file(submissions, lambda s: s.path)
    rows = graded + _one_row_per_file(refused, lambda s: s.path)
    own = [s.student is not None or s in named for s in rows]
    ordered = sorted(range(len(rows)), key=lambda i: _order(rows[i]))
    ids: dict[int, str] = {}
    taken: set[str] = set()
    for index in ordered:  # own names first
        if own[index] and rows[index].id not in taken:
            ids[index] = rows[index].id
            taken.add(rows[index].id)
    folded = {identity.casefold() for identity in taken}
    wanted = {row.id.casefold() for row in rows}
    for index in ordered:  # then every other row
        if index in ids:
            continue
        base, count = rows[index].id, 1
        identity = base
        while identity.casefold() in folded or (count > 1 and identity.casefold() in wanted):
            count += 1
            identity = _numbered(base, count)
        ids[index] = identity
        folded.add(identity.casefold())
    named_rows = [replace(row, id=ids[index]) for index, row in enumerate(rows)]
    return named_rows[:len(graded)], named_rows[len(graded):]


def _one_row_per_file(rows: list[Submission], key) -> list[Submission]:
    """``rows`` less the rows of a file found again, the row kept being the first by ``_order``, in
    the order found."""
    first: dict = {}
    for row in rows:
        kept = first.get(key(row))
        if kept is None or _order(row) < _order(kept):
            first[key(row)] = row
    return [row for row in rows if first[key(row)] is row]


def private_folders(submissions) -> list[str]:
    """The folders of a class no grading may read: each submission's own folder and, in nbgrader's
    layout, the whole course (its source notebooks, gradebook and autograded copies)."""
    return list(dict.fromkeys(folder for submission in submissions for folder in closed_around(submission.path)))


def cut(found: Discovery, shard) -> Discovery:
    """The share ``shard`` (``grader.integrations.shards.Shard``) of what ``survey`` found, by id: every machine
    that surveys the same class cuts it the same way."""
    return replace(found, submissions=[s for s in found.submissions if shard.holds(s.id)],
                   refused=[s for s in found.refused if shard.holds(s.id)])


def class_ids(found: Discovery) -> list[str]:
    """The ids of the whole class, every row ``survey`` gives (graded or refused)."""
    return sorted(s.id for s in found.submissions + found.refused)
