"""The web UI's terminal in a real browser: a shell in a running raw_exec task, typed into xterm.js, over
the UI's WebSocket (the session cookie, no token in the page)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.ui.conftest import require_selenium
from tests.ui.test_browser import click, text_of, until

require_selenium()
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402

TOKEN = "terminal-t0ken-9c2d"

JOB = """
job "shell" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      kill_timeout = "5s"
    }
  }
}
"""


def typed(browser: WebDriver, text: str) -> None:
    """Keystrokes into the terminal (xterm.js reads them from its hidden textarea)."""
    browser.find_element(By.CSS_SELECTOR, "#terminal .xterm-helper-textarea").send_keys(text)


def screen(browser: WebDriver) -> str:
    return text_of(browser, "#terminal .xterm-rows")


@pytest.mark.slow
def test_a_shell_in_a_running_task(tmp_path: Path, browser: WebDriver, screenshots: Path) -> None:
    agent = AgentProcess(tmp_path, token=TOKEN).start()
    try:
        alloc = agent.submit(JOB)["allocations"][0]["id"]
        agent.wait_task(alloc, "t")
        browser.get(f"{agent.url}/ui/allocations/{alloc}")
        until(browser, expected_conditions.presence_of_element_located((By.ID, "token")), "the sign-in form")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        click(browser, By.CSS_SELECTOR, "form.login button")

        # The running task links to its terminal, which starts /bin/sh in it with a terminal of its own.
        click(browser, By.CSS_SELECTOR, "#task-t a.exec")
        until(browser, lambda b: text_of(b, "#exec-state") == "running", "the shell started")
        assert browser.find_element(By.NAME, "command").get_attribute("value") == "/bin/sh"
        typed(browser, "tty" + Keys.ENTER)
        until(browser, lambda b: "/dev/pts/" in screen(b), "the shell's terminal named")
        typed(browser, "echo $((6*7))" + Keys.ENTER)
        until(browser, lambda b: "42" in screen(b), "the shell's answer")
        # The terminal has the size the page fitted to its element (tty_size frames), not 0 by 0.
        typed(browser, "stty size" + Keys.ENTER)
        until(browser, lambda b: re.search(r"^[1-9][0-9]* [1-9][0-9]*$", screen(b), re.MULTILINE), "its size")
        browser.save_screenshot(str(screenshots / "1-terminal.png"))

        # Its exit ends the session, with its code shown.
        typed(browser, "exit 3" + Keys.ENTER)
        until(browser, lambda b: text_of(b, "#exec-state") == "exited with code 3", "the exit code shown")
        browser.save_screenshot(str(screenshots / "2-exited.png"))
        assert TOKEN not in browser.page_source
        # No script was refused by the page's Content-Security-Policy (xterm.js's own <style> elements are,
        # by design: static/terminal.css stands in for them).
        console = [entry["message"] for entry in browser.get_log("browser")]
        assert not [m for m in console if "Content Security Policy" in m and "style" not in m], console
        with agent.http() as http:
            assert http.get(f"/v1/allocations/{alloc}").json()["tasks"]["t"]["state"] == "running"
    finally:
        agent.shutdown()
