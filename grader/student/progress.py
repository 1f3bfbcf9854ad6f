"""Remembers, per student machine, the last verdict of each file and the hints shown.

Stored as JSON in ``$GRADE_STATE_DIR`` (default: ``$XDG_CACHE_HOME/transformer-exercises``
or ``~/.cache/transformer-exercises``). A verdict counts only for the exact file
contents it was computed on (SHA-256), so an edited file shows as not graded.
Losing this file loses nothing but the memory of past runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path


def state_path() -> Path:
    base = os.environ.get("GRADE_STATE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "transformer-exercises"
    )
    return Path(base) / "progress.json"


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def load() -> dict:
    try:
        data = json.loads(state_path().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save(data: dict) -> None:
    """Write atomically, so an interrupted run never leaves a broken file."""
    path = state_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
        os.replace(handle.name, path)
    except OSError:
        pass  # progress is a convenience; grading never fails because of it


def record_verdict(verdict) -> None:
    digest = file_digest(Path(verdict.submission))
    if digest is None:
        return
    from ..causes import root_causes

    data = load()
    causes = root_causes(verdict.checks)
    first = causes[0].root if causes else None
    data.setdefault("verdicts", {})[verdict.submission] = {
        "exercise": verdict.exercise,
        "sha256": digest,
        "status": verdict.status,
        "score": verdict.score,
        "max_score": verdict.max_score,
        "next": (f"{first.id}: {first.title}" if first else
                 "fix the error the report shows" if verdict.status == "error" else "done"),
        # each cause of failure: its checks, the one that tells it first (for `grade hint`)
        "causes": [[c.id for c in cause.checks] for cause in causes],
        "error": (verdict.error or "").splitlines()[0] if verdict.error else None,
        "graded_at": time.time(),  # which exercise `grade hint` alone means: the one graded last
    }
    save(data)


def last_verdict(path: Path) -> dict | None:
    """The remembered verdict of ``path``, if it was computed on its current contents."""
    entry = load().get("verdicts", {}).get(str(Path(path).resolve()))
    if entry and entry.get("sha256") == file_digest(path):
        return entry
    return None


def last_graded_exercise(exercises_folder: Path, known) -> str | None:
    """The exercise whose file in ``exercises_folder`` (a workspace's ``exercises/``) was graded last,
    of those in ``known``; None when none of its files was ever graded here."""
    folder = str(Path(exercises_folder).resolve())
    entries = [(entry.get("graded_at") or 0, place, entry.get("exercise"))
               for place, (path, entry) in enumerate(load().get("verdicts", {}).items())
               if isinstance(entry, dict) and os.path.dirname(path) == folder and entry.get("exercise") in known]
    return max(entries)[2] if entries else None


def next_hint(exercise_id: str, count: int) -> int:
    """Advance and return the index of the next hint to show (the last one repeats)."""
    data = load()
    shown = data.setdefault("hints", {}).get(exercise_id, 0)
    index = min(shown, count - 1)
    data["hints"][exercise_id] = index + 1
    save(data)
    return index


def reset_hints(exercise_id: str) -> None:
    data = load()
    data.setdefault("hints", {}).pop(exercise_id, None)
    data.setdefault("cause_hints", {}).pop(exercise_id, None)
    save(data)


def next_cause_hint(exercise_id: str, cause: str) -> int:
    """How many hints were shown for ``cause`` (a check id) before, counting this one."""
    data = load()
    shown = data.setdefault("cause_hints", {}).setdefault(exercise_id, {}).get(cause, 0)
    data["cause_hints"][exercise_id][cause] = shown + 1
    save(data)
    return shown
