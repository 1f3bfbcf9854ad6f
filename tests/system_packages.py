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


def headless_chromium(window: str, why: str):
    """A Selenium driver of headless Chromium with a window of ``window`` ("1100,1400"), started with
    the flags a closed network needs; the test skips, saying ``why`` it wanted one, where Selenium,
    Chromium or ChromeDriver is missing."""
    import pytest

    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("Selenium is not installed: pip install -e '.[test]'")
    found = installed("chromium", "chromium-browser", "chromedriver")
    chromium, chromedriver = found["chromium"] or found["chromium-browser"], found["chromedriver"]
    if not chromium or not chromedriver:
        pytest.skip(f"no Chromium here: apt-get install chromium chromium-driver (Debian) to {why}")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={window}", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
