"""Classes that outgrow one machine: deterministic shares of a class, the run's manifest, merging.

``grade batch --shard K/N`` grades only the submissions whose id falls in share K of N. An id's
share comes from a SHA-256 of the id (never Python's salted ``hash()``), so every machine, run and
Python cuts the same class the same way. Every results folder gets ``run.json``, the manifest of
its run: the exercise, the shard, the ``--seed`` given (or null: a fresh secret seed per
submission), the grader's version, the settings that change a verdict, the ids of the whole
class the shard was cut from, and the paths found beside the submissions and not graded. ``grade merge`` reads the manifests and refuses shards that cannot
make one run of one class (overlapping or missing shares, mixed seeds, versions, settings or
classes, a shard that did not finish), then writes one results folder equal to grading the class
in one run: the same ``verdicts.jsonl``, ``summary.csv``, Gradescope files and class report.
``resume_differences`` names what keeps a run from finishing another's results (``--resume``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .results import MANIFEST, cell, printable, replace_file

MANIFEST_FORMAT = 1
# What two shards must agree on to be one run: a difference in any of them changes a verdict
# or a results file.
AGREED = ("exercise", "seed", "grader_version", "timeout", "memory_mb", "gradescope_visibility", "backend")


class ShardError(ValueError):
    """Shards that cannot be merged, or a --shard value that means nothing; the message says why."""


@dataclass(frozen=True)
class Shard:
    k: int  # 1 to n
    n: int

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"

    def holds(self, identity: str) -> bool:
        return share_of(identity, self.n) == self.k


WHOLE = Shard(1, 1)


def parse_shard(value: str) -> Shard:
    """``K/N``: share K (1 to N) of N."""
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", value or "")
    if not found:
        raise ShardError(f"--shard takes K/N, share K of N counted from 1 (e.g. 2/3), not {value!r}")
    k, n = int(found.group(1)), int(found.group(2))
    if n < 1:
        raise ShardError(f"--shard {value}: N, the number of shares, must be at least 1")
    if not 1 <= k <= n:
        raise ShardError(f"--shard {value}: K must be between 1 and {n} (shares are counted from 1; "
                         f"with Kubernetes' 0-based JOB_COMPLETION_INDEX give $((JOB_COMPLETION_INDEX + 1))/{n})")
    return Shard(k, n)


def share_of(identity: str, n: int) -> int:
    """The share (1 to n) an id belongs to: the same on every machine and in every run."""
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).digest()  # any str, file names' bytes too
    return int.from_bytes(digest[:8], "big") % n + 1


def manifest(exercise: str, shard: Shard, class_ids, settings, visibility: str | None, sandboxes=(),
             not_graded=()) -> dict:
    """The manifest of a run of ``grade batch`` (``run.json``); ``sandboxes``, the sandbox lines of
    its gradings (the report header's line: what confinement the machine applied); ``not_graded``,
    what the survey of the whole class skipped (``batch.Skipped``: stray files, other assignments)."""
    from .. import __version__
    from .platforms import DEFAULT_VISIBILITY

    return {"format": MANIFEST_FORMAT, "exercise": exercise, "shard": {"k": shard.k, "n": shard.n},
            "seed": settings.seed, "grader_version": __version__, "timeout": settings.timeout,
            "memory_mb": settings.memory_mb, "gradescope_visibility": visibility or DEFAULT_VISIBILITY,
            "backend": getattr(settings, "backend", "tensorflow"),
            "sandbox": sorted({class_line(line) for line in sandboxes if line}), "class": sorted(set(class_ids)),
            "not_graded": [{"path": str(item.path), "why": item.why} for item in not_graded]}


def class_line(sandbox: str) -> str:
    """A grading's sandbox line as it holds for the whole class: each grading runs as a user id of
    its own, which the class's line does not list."""
    return re.sub(r"runs as user \d+,", "runs as a user of its own,", sandbox)


def write_manifest(folder: Path, record: dict) -> None:
    replace_file(Path(folder) / MANIFEST, json.dumps(record, indent=1) + "\n")


# What a resumed run must share with the run it finishes, and how a difference is named.
RESUMED = {"exercise": "the exercise", "shard": "the shard (--shard)", "seed": "the seed (--seed)",
           "grader_version": "the grader's version", "timeout": "--timeout", "memory_mb": "--memory",
           "backend": "the Keras backend (--backend)", "gradescope_visibility": "--gradescope-visibility"}


def resume_differences(earlier: dict, planned: dict) -> list[str]:
    """How the run recorded by ``earlier`` (its manifest) differs from the run ``planned``, each
    difference named; nothing if ``planned`` can finish it."""
    def shown(key, value):
        if key == "shard" and isinstance(value, dict):
            return f"{value.get('k')}/{value.get('n')}"
        if key == "seed" and value is None:
            return "none (a fresh seed per submission)"
        return "missing" if value is _MISSING else repr(value)

    differences = []
    for key, name in RESUMED.items():
        was, now = earlier.get(key, _MISSING), planned.get(key)
        if key == "backend" and was is _MISSING:
            was = "tensorflow"
        if json.dumps(was, default=str) != json.dumps(now, default=str):
            differences.append(f"{name} was {shown(key, was)}, now {shown(key, now)}")
    was = earlier.get("class")
    now = set(planned.get("class") or ())
    if not isinstance(was, list) or set(was) != now:
        was = set(was) if isinstance(was, list) else set()
        changes = [f"{some(sorted(now - was))} {'are' if len(now - was) > 1 else 'is'} new" if now - was else "",
                   f"{some(sorted(was - now))} {'are' if len(was - now) > 1 else 'is'} gone" if was - now else ""]
        differences.append(f"the class differs ({'; '.join(c for c in changes if c)})")
    return differences


_MISSING = object()


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST
    if not Path(folder).is_dir():
        raise ShardError(f"{folder} is not a folder of results")
    if not path.is_file():
        raise ShardError(f"{folder} has no {MANIFEST}: it is not the results of a grade batch run that "
                         "finished (finish it with grade batch --resume, or grade it again with --force)")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        shard = Shard(int(record["shard"]["k"]), int(record["shard"]["n"]))
        if not (isinstance(record["class"], list) and all(isinstance(i, str) for i in record["class"])):
            raise TypeError("class is not a list of ids")
        record.setdefault("backend", "tensorflow")  # a manifest from before the backends were a setting
        missing = [key for key in AGREED if key not in record]
        if missing or record.get("format") != MANIFEST_FORMAT:
            raise KeyError(", ".join(missing) or "format")
    except (ValueError, KeyError, TypeError) as exc:
        raise ShardError(f"{path} is not a manifest this grader can read ({type(exc).__name__}: {exc})") from None
    record["_shard"] = shard
    return record


def _verdict_lines(folder: Path) -> list[tuple[str, str]]:
    path = Path(folder) / "verdicts.jsonl"
    if not path.is_file():
        raise ShardError(f"{folder} has no verdicts.jsonl")
    lines = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                lines.append((json.loads(line)["id"], line))
            except (ValueError, KeyError, TypeError):
                raise ShardError(f"{path}, line {number}, is not a verdict") from None
    return lines


def _summary_rows(folder: Path) -> tuple[list[str], list[list[str]]]:
    path = Path(folder) / "summary.csv"
    if not path.is_file():
        raise ShardError(f"{folder} has no summary.csv")
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], [row for row in rows[1:] if row]


def check_mergeable(folders: list[Path]) -> list[dict]:
    """The manifests of ``folders``, if together they are every shard of one run; else ShardError."""
    if not folders:
        raise ShardError("give the results folders of the shards to merge")
    resolved = [Path(f).resolve() for f in folders]
    for index, folder in enumerate(resolved):
        if folder in resolved[:index]:
            raise ShardError(f"{folders[index]} is given twice")
    records = [read_manifest(folder) for folder in folders]
    first = records[0]
    for key in AGREED:
        values = {json.dumps(r[key]) for r in records}
        if len(values) > 1:
            shown = ", ".join(f"{f}: {r[key]!r}" for f, r in zip(folders, records))
            what = {"seed": "mixed seeds (--seed, null for a fresh seed per submission)",
                    "grader_version": "mixed grader versions",
                    "backend": "mixed Keras backends (--backend)"}.get(key, f"mixed {key}")
            raise ShardError(f"these shards are not one run: {what}: {shown}. Grade every shard with the same "
                             "grader and options")
    if len({json.dumps(r["class"]) for r in records}) > 1:
        classes = [set(r["class"]) for r in records]
        every = set().union(*classes)
        lacking = [f"{folder} lacks {some(sorted(every - ids))}" for folder, ids in zip(folders, classes)
                   if every - ids]
        raise ShardError(f"these shards were cut from different classes: {'; '.join(lacking)} (their run.json "
                         "lists the class each was cut from). Grade every shard from the same submissions")
    sizes = {r["_shard"].n for r in records}
    if len(sizes) > 1:
        shown = ", ".join(f"{f}: {r['_shard']}" for f, r in zip(folders, records))
        raise ShardError(f"these shards cut the class into different numbers of shares: {shown}")
    n = first["_shard"].n
    by_k: dict[int, Path] = {}
    for folder, record in zip(folders, records):
        k = record["_shard"].k
        if k in by_k:
            raise ShardError(f"overlapping shards: {by_k[k]} and {folder} are both shard {k}/{n}")
        by_k[k] = folder
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in by_k]
    if missing:
        raise ShardError(f"missing shard{'s' if len(missing) > 1 else ''} {', '.join(missing)}: grade "
                         f"{'them' if len(missing) > 1 else 'it'} with --shard, then merge every shard")
    for folder, record in zip(folders, records):
        expected = {i for i in record["class"] if record["_shard"].holds(i)}
        found = [identity for identity, _ in _verdict_lines(folder)]
        strays = sorted(set(found) - expected)
        if strays or len(found) != len(set(found)):
            raise ShardError(f"{folder} holds verdicts that are not its shard's "
                             f"({some(strays) or 'an id twice'})")
        lost = sorted(expected - set(found))
        if lost:
            raise ShardError(f"{folder} lacks {len(lost)} verdict(s) of its shard ({some(lost)}): that run did "
                             "not finish; grade the shard again with --resume")
    return records


def some(ids: list[str], shown: int = 5) -> str:
    """The first ids of a list, as text (a file name's bytes that are not UTF-8 escaped), and how many more."""
    more = len(ids) - shown
    return ", ".join(printable(i) for i in ids[:shown]) + (f" and {more} more" if more > 0 else "")


def merge(folders: list[Path], out: Path) -> dict:
    """Write into ``out`` (already prepared: new, empty or cleared) the results of every shard as
    one run of the whole class; returns the merged manifest."""

    records = check_mergeable(folders)
    lines = sorted((pair for folder in folders for pair in _verdict_lines(folder)), key=lambda pair: pair[0])
    header, rows = None, []
    for folder in folders:
        header, more = _summary_rows(folder)
        rows += more
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdicts.jsonl").write_text("".join(line + "\n" for _, line in lines), encoding="utf-8")
    order = {cell(printable(identity)): index for index, (identity, _) in enumerate(lines)}
    with open(out / "summary.csv", "w", encoding="utf-8", newline="", errors="backslashreplace") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(sorted(rows, key=lambda row: (order.get(row[0], len(order)), row[0])))
    for folder in folders:
        gradescope = Path(folder) / "gradescope"
        if gradescope.is_dir():
            shutil.copytree(gradescope, out / "gradescope", dirs_exist_ok=True, symlinks=True)
    merged = {key: value for key, value in records[0].items() if key != "_shard"}
    merged["shard"] = {"k": 1, "n": 1}
    merged["merged_from"] = [str(r["_shard"]) for r in records]
    merged["sandbox"] = sorted({line for r in records for line in r.get("sandbox") or []})
    write_manifest(out, merged)
    return merged
