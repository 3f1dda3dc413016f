"""A real browser for the web UI's tests: headless Chromium from the distribution, driven by Selenium.

Without Chromium, its driver or Selenium the tests are skipped, or fail when ``HERDER_REQUIRE`` names
``chromium``. Chromium and chromedriver are started with paths under the test's ``tmp_path`` (profile,
log), so the suite's check that no process outlives its test covers them too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.require import ENV, require, required

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
OUTPUT = Path(__file__).resolve().parent / "output"
"""Where the tests save their screenshots, one folder per test (not committed)."""


def require_selenium() -> None:
    """For a test module, before it imports Selenium: skip the module without it (fail it under
    ``HERDER_REQUIRE`` naming chromium)."""
    if importlib.util.find_spec("selenium") is None:
        reason = "no selenium package (pip install selenium)"
        if "chromium" in required():
            pytest.fail(f"chromium is required ({ENV}) but {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


@contextlib.contextmanager
def chromium(folder: Path, *arguments: str) -> Iterator[WebDriver]:
    """Headless Chromium with its profile and its driver's log under ``folder``, and ``arguments`` besides."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if shutil.which(path) is None]
    require("chromium", not missing, f"no {' nor '.join(missing)} (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox",  # as root, Chromium runs only without its sandbox
                     "--disable-dev-shm-usage", "--window-size=1280,1000", "--no-first-run",
                     f"--user-data-dir={folder / 'chromium'}", *arguments):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for CSP violations
    service = Service(CHROMEDRIVER, service_args=[f"--log-path={folder / 'chromedriver.log'}"])
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    with chromium(tmp_path) as driver:
        yield driver


@pytest.fixture
def screenshots(request: pytest.FixtureRequest) -> Path:
    """The test's folder of screenshots under :data:`OUTPUT`, emptied first."""
    folder = OUTPUT / request.node.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder
