"""A test that needs a system package CI installs while the suite starts waits for the installs to end."""

from __future__ import annotations

import threading

from .system_packages import installed


def test_the_packages_are_looked_for_once_the_installs_have_ended(tmp_path, monkeypatch):
    ready = tmp_path / "packages-ready"
    monkeypatch.setenv("GRADE_TEST_PACKAGES_READY", str(ready))
    seen = []
    timer = threading.Timer(1.0, lambda: (seen.append("installs ended"), ready.touch()))
    timer.start()
    try:
        found = installed("sh", "no-such-command-here")
        seen.append("looked")
    finally:
        timer.cancel()
    assert seen == ["installs ended", "looked"]
    assert found["sh"] and found["no-such-command-here"] is None


def test_installs_that_never_end_are_waited_for_only_so_long(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADE_TEST_PACKAGES_READY", str(tmp_path / "never"))
    assert installed("sh", wait=0.0)["sh"]  # then looked for anyway: a missing package skips its tests
