"""Runs a check module under pytest and turns each outcome into a CheckResult."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ..verdict import CheckResult
from .framework import CheckFailed, Unavailable

INI = Path(__file__).with_name("pytest.ini")


class CheckCollector:
    """A pytest plugin: provides the ``evidence`` fixture and records results."""

    def __init__(self, evidence):
        self._evidence = evidence
        self.results: list[CheckResult] = []
        self.collection_errors: list[str] = []

    @pytest.fixture(name="evidence")
    def evidence_fixture(self):
        return self._evidence

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when == "call" or (call.when == "setup" and report.outcome != "passed"):
            marker = item.get_closest_marker("check")
            if marker is None:
                return
            status, message = classify(call.excinfo)
            meta = marker.kwargs
            points = float(meta["points"])
            self.results.append(
                CheckResult(
                    id=meta["id"],
                    title=meta["title"],
                    topic=meta["topic"],
                    status=status,
                    points=points if status == "passed" else 0.0,
                    max_points=points,
                    message=message,
                    cause=cause_of(status, message, meta["id"]),
                )
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        marker = item.get_closest_marker("check")
        self._evidence.current_check = marker.kwargs["id"] if marker else ""

    def pytest_itemcollected(self, item):
        # The verdict keeps the check's own message; pytest's traceback, which re-reads and parses
        # the source of every frame, would never be shown and costs more than the check.
        item.repr_failure = lambda excinfo, style=None: classify(excinfo)[1]

    def pytest_collectreport(self, report):
        if report.failed:
            self.collection_errors.append(str(report.longrepr))


def cause_of(status: str, message: str, check_id: str) -> str | None:
    """The check a skipped one points to ("... (see check api.output_shape)."), if any."""
    import re

    if status != "skipped":
        return None
    found = re.search(r"\(see (?:check )?([a-z]+\.[a-z_]+)\)\.?\s*$", message)
    return found.group(1) if found and found.group(1) != check_id else None


def classify(excinfo) -> tuple[str, str]:
    if excinfo is None:
        return "passed", ""
    error = excinfo.value
    if isinstance(error, pytest.skip.Exception):
        return "skipped", str(getattr(error, "msg", error))
    if isinstance(error, Unavailable):
        return error.status, error.message
    if isinstance(error, CheckFailed):
        return "failed", str(error)
    if isinstance(error, AssertionError):
        return "failed", str(error).split("\nassert ")[0]
    return "error", f"The grader could not finish this check ({type(error).__name__}: {error})."


def run_checks(module: Path, evidence) -> list[CheckResult]:
    """Run every ``@check`` in ``module`` against ``evidence``, in file order."""
    collector = CheckCollector(evidence)
    args = [
        str(module),
        "-c", str(INI),
        "--rootdir", str(module.parent),
        "--noconftest",
        "-p", "no:cacheprovider",
        "-p", "no:unraisableexception",  # a full garbage collection per session, for nothing the checks need
        "-p", "no:threadexception",
        "-q",
    ]
    # Only the grader's own plugin: whatever else is installed does not take part in grading.
    saved = {k: os.environ.pop(k) for k in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
             if k in os.environ}
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sink = io.StringIO()
    try:
        with redirect_stdout(sink), redirect_stderr(sink):
            pytest.main(args, plugins=[collector])
    finally:
        os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        os.environ.update(saved)
    if collector.collection_errors or not collector.results:
        raise RuntimeError(
            f"the checks in {module.name} could not be collected:\n" + "\n".join(collector.collection_errors)
            + sink.getvalue()[-2000:]
        )
    return collector.results
