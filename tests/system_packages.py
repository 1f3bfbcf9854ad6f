"""The system's packages some tests use (Debian's Chromium, Slurm), which CI installs while the suite
starts: such a test waits for them before it looks, so it neither skips nor fails for being early.

``GRADE_TEST_PACKAGES_READY`` names a file that exists once the installs have ended, installed or
not (``.ci/run``); without it there is nothing being installed, and nothing to wait for.
"""

from __future__ import annotations

import os
import shutil
import time

WAIT_SECONDS = 1200.0  # a slow mirror's installs; past it a test looks anyway, and skips if they are missing


def installed(*commands: str, wait: float = WAIT_SECONDS) -> dict[str, str | None]:
    """{command: its path, or None}, once the installs under way (if any) have ended."""
    ready = os.environ.get("GRADE_TEST_PACKAGES_READY", "").strip()
    if ready:
        deadline = time.monotonic() + wait
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(1.0)
    return {command: shutil.which(command) for command in commands}
