"""What confined a grading, in words for the report header: the child's own report, validated.

The grading process reports, before any student code runs, which measures the
kernel let it apply (``grader.sandbox.confine``). ``describe`` turns that report
into the header's "Sandbox" line: each measure that applied, and then what did
not, with the kernel's reason. Nothing is claimed that the report does not
say; a report that is missing or malformed claims nothing.
"""

from __future__ import annotations

from .process import CHILD_ENV, PASSED_THROUGH

SCRATCH_VARIABLES = ("TMPDIR", "HOME", "KERAS_HOME", "XDG_CACHE_HOME", "MPLCONFIGDIR")
NAMESPACE_WORDS = {"pid": "PID", "mount": "mount", "network": "network", "ipc": "IPC"}
MEASURE_WORDS = {
    "user": "user namespace", "pid": "PID namespace", "mount": "mount namespace", "network": "network namespace",
    "ipc": "IPC namespace", "mounts": "private mounts", "proc": "own /proc", "tmpfs": "cap on bytes written",
    "exposed": "Python reachable by another user", "capabilities": "dropping capabilities",
    "process_limit": "cap on processes", "landlock": "Landlock", "seccomp": "seccomp",
    "cgroup": "control group",
}


def _mib(value: int) -> str:
    return f"{value / (1024 * 1024):g} MiB"


def valid(report) -> bool:
    """Whether ``report`` has the form the child's confinement report has."""
    if not isinstance(report, dict):
        return False
    checks = [
        isinstance(report.get("landlock"), dict),
        isinstance(report.get("seccomp"), bool),
        isinstance(report.get("namespaces"), dict) and all(isinstance(v, bool) for v in report["namespaces"].values()),
        report.get("reaper") in ("pid-namespace", "subreaper"),
        isinstance(report.get("own_proc"), bool),
        report.get("write_limit") is None or _int(report.get("write_limit")),
        report.get("process_limit") is None or _int(report.get("process_limit")),
        _int(report.get("uid")), isinstance(report.get("from_root"), bool), _int(report.get("capabilities")),
        isinstance(report.get("environment"), list) and all(isinstance(n, str) for n in report["environment"]),
        report.get("cgroup") is None or _group(report["cgroup"]),
        report.get("nice") is None or _int(report.get("nice")),
        isinstance(report.get("refused"), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in report["refused"].items()),
    ]
    return all(checks)


def _group(value) -> bool:
    return isinstance(value, dict) and value.get("version") in (1, 2) and _int(value.get("memory_bytes")) \
        and _int(value.get("processes"))


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def measures(report) -> tuple[list[str], list[str]]:
    """(what applied, what did not and why), in words."""
    if not valid(report):
        return [], ["every measure but the time and memory limits (the grading process sent no valid report)"]
    applied: list[str] = []
    ruleset = report["landlock"]
    if ruleset.get("applied") is True:
        rights = ["writes only in its scratch folder",
                  "reads only system and Python folders, not the solutions or the checks"]
        if ruleset.get("network") is True:
            rights.append("no TCP")
        if ruleset.get("signals") is True:
            rights.append("no signal or abstract socket outside it")
        applied.append(f"Landlock ABI {ruleset.get('abi')}: " + ", ".join(rights))
    if report["seccomp"]:
        applied.append("seccomp: no sockets of any kind, no ptrace, no new namespaces or sessions, no memory "
                       "files")
    group = report.get("cgroup")
    if group is not None:
        applied.append(f"own control group: at most {_mib(group['memory_bytes'])} of memory in all (shared "
                       f"memory and tmpfs included), {group['processes']} processes, one process's share of the CPU")
    if _int(report.get("nice")) and report["nice"] > 0:
        applied.append(f"runs at a lower priority than the grader (nice {report['nice']})")
    spaces = report["namespaces"]
    own = [word for name, word in NAMESPACE_WORDS.items() if spaces.get(name)]
    if own:
        applied.append("own " + ", ".join(own) + " namespace" + ("s" if len(own) > 1 else "")
                       + (" (in a user namespace)" if spaces.get("user") else ""))
    if report["reaper"] == "pid-namespace" and spaces.get("pid"):
        applied.append("every process it starts ends with the grading")
    else:
        applied.append("every process it starts is killed at the end (subreaper)")
    if report["own_proc"]:
        applied.append("/proc shows only its own processes")
    if report["from_root"]:
        applied.append(f"runs as user {report['uid']}, not root")
    if report["capabilities"] == 0:
        applied.append("no capabilities")
    if report["process_limit"] is not None:
        applied.append(f"at most {report['process_limit']} processes and threads")
    if report["write_limit"] is not None:
        applied.append(f"at most {_mib(report['write_limit'])} written in all, removed afterwards")
    if _int(report.get("file_limit")):
        applied.append(f"files of at most {_mib(report['file_limit'])}")
    expected = set(CHILD_ENV) | set(SCRATCH_VARIABLES) | set(PASSED_THROUGH) | {"PATH"}
    if set(report["environment"]) <= expected:
        applied.append("a minimal environment")
    missing = [f"{MEASURE_WORDS.get(name, name)} ({why})" for name, why in sorted(report["refused"].items())]
    return applied, missing


def describe(report) -> str:
    """The header's one line about the sandbox."""
    applied, missing = measures(report)
    text = "; ".join(applied) if applied else "time and memory limits only"
    if missing:
        text += "; not applied: " + "; ".join(missing)
    return text
