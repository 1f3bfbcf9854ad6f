"""Writes a student's workspace (``grade init DIR``) from the installed package.

A workspace is a folder holding ``exercises/``: for every exercise of one track (an edition of the
book, ``grader.exercises.tracks``; the second edition unless told) the stub to edit
(``exercise1.py``), its instructions (``exercise1.md``) and its hints
(``hints/exercise1.md``) — the same files as in a clone of the repository.
``grade EXERCISE`` and ``grade list`` look for ``exercises/`` in the current folder
and the folders above it, so they work anywhere inside the workspace.

The exercise files are the stubs generated from the solutions: a package built from a clone in
which someone had solved exercises (or an old wheel that packed them) would otherwise hand out
answers. Such files are not copied; ``Written.not_stubs`` names them, for ``grade init`` to warn.

Nothing a student wrote is lost: a file that exists and differs from what would be
written stops the whole run before anything is written, unless ``force`` is given,
and even then the old file is first kept beside it as ``<name>.bak`` (or ``.bak2``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import exercises
from ..exercises import tracks


@dataclass
class Written:
    """What ``init_workspace`` did, each path absolute."""

    folder: Path
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    backups: dict[Path, Path] = field(default_factory=dict)  # overwritten file -> its copy
    # exercise files of the package that differ from their stubs (the workspace got the stubs)
    not_stubs: list[Path] = field(default_factory=list)


class WorkspaceConflict(Exception):
    """Files exist in the workspace and differ from what ``grade init`` would write."""

    def __init__(self, paths: list[Path]):
        self.paths = paths
        super().__init__("these files exist and differ from what would be written (your work?): "
                         + ", ".join(str(p) for p in paths))


def workspace_files(edition: str = tracks.DEFAULT) -> dict[Path, bytes]:
    """Relative path -> content of every file of a fresh workspace of the track ``edition``."""
    from ..exercises.stubs import fresh_stub

    files: dict[Path, bytes] = {}
    for exercise in map(exercises.get, tracks.get(edition).exercises):
        files[Path("exercises") / f"{exercise.id}.py"] = fresh_stub(exercise).encode()
        files[Path("exercises") / f"{exercise.id}.md"] = exercise.instructions.read_bytes()
        files[Path("exercises") / "hints" / f"{exercise.id}.md"] = exercise.hints.read_bytes()
    return files


def init_workspace(folder: Path, force: bool = False, edition: str = tracks.DEFAULT) -> Written:
    """Write a workspace of the track ``edition`` into ``folder`` (created if missing). Files already as they would be
    written are left alone; files that differ raise WorkspaceConflict, unless ``force``, which
    keeps a copy of each before replacing it."""
    folder = Path(folder).resolve()
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} exists and is not a folder")
    files = workspace_files(edition)
    conflicts = [folder / relative for relative, data in files.items()
                 if (folder / relative).exists() and _read(folder / relative) != data]
    if conflicts and not force:
        raise WorkspaceConflict(conflicts)
    from ..exercises.stubs import edited_stubs

    ids = set(tracks.get(edition).exercises)
    result = Written(folder, not_stubs=[exercise.stub for exercise in edited_stubs() if exercise.id in ids])
    for relative, data in files.items():
        target = folder / relative
        if target.exists() and _read(target) == data:
            result.unchanged.append(target)
            continue
        if target.exists():
            backup = _free_backup_name(target)
            target.replace(backup)
            result.backups[target] = backup
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        result.written.append(target)
    return result


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (IsADirectoryError, PermissionError):
        return None


def _free_backup_name(path: Path) -> Path:
    candidate = path.with_name(path.name + ".bak")
    number = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak{number}")
        number += 1
    return candidate
