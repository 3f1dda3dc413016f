"""The web UI in a real browser, against a real agent with a token: sign in, see the running job, open
its allocation, watch it change and a log line arrive live, stop the job with its button."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.waiting import SH_WAIT_FOR, TIMEOUT, wait_for
from tests.ui.conftest import require_selenium

require_selenium()
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

TOKEN = "browser-t0ken-5e1f"

JOB = """
job "web" {{
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", <<-EOS
          echo "task started"
          {wait} {go}
          echo "printed after the page opened"
          exec sleep 3600
        EOS
        ]
      }}
      resources {{
        network {{
          port "http" {{}}
        }}
      }}
      kill_timeout = "5s"
    }}
  }}
}}
"""


def until(browser: WebDriver, condition: Callable[[WebDriver], object], what: str) -> None:
    WebDriverWait(browser, TIMEOUT, ignored_exceptions=[StaleElementReferenceException]).until(condition, what)


def click(browser: WebDriver, by: str, value: str) -> None:
    """Click the element, found again if the page replaced it meanwhile (its live parts are fetched again)."""
    def clicked(b: WebDriver) -> bool:
        b.find_element(by, value).click()
        return True

    until(browser, clicked, f"{value} clicked")


def text_of(browser: WebDriver, selector: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, selector).text)


@pytest.mark.slow
def test_sign_in_watch_a_job_live_and_stop_it(tmp_path: Path, browser: WebDriver, screenshots: Path) -> None:
    go = tmp_path / "go"
    agent = AgentProcess(tmp_path, token=TOKEN).start()
    try:
        alloc = agent.submit(JOB.format(wait=SH_WAIT_FOR, go=go))["allocations"][0]["id"]
        agent.wait_task(alloc, "t")

        # The UI asks for the token once.
        browser.get(f"{agent.url}/ui/")
        until(browser, expected_conditions.presence_of_element_located((By.ID, "token")), "the sign-in form")
        browser.save_screenshot(str(screenshots / "1-login.png"))
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        click(browser, By.CSS_SELECTOR, "form.login button")

        # The jobs, the running job among them.
        until(browser, lambda b: "running" in text_of(b, "#jobs"), "the running job listed")
        assert TOKEN not in browser.current_url and TOKEN not in browser.page_source
        browser.save_screenshot(str(screenshots / "2-jobs.png"))
        click(browser, By.LINK_TEXT, "web")
        until(browser, expected_conditions.presence_of_element_located((By.ID, "allocations")), "the job's page")
        browser.save_screenshot(str(screenshots / "3-job.png"))

        # Its allocation, which follows the event stream: a restart shows without a reload.
        click(browser, By.LINK_TEXT, alloc[:8])
        until(browser, lambda b: "running" in text_of(b, "#task-t h2"), "the allocation's running task")
        heading = browser.find_element(By.TAG_NAME, "h1")
        with agent.http() as http:
            restarted = http.post(f"/v1/allocations/{alloc}/restart", json={"task": "t", "reason": "asked by the test"})
            assert restarted.status_code == 200
        until(browser, lambda b: "asked by the test" in text_of(b, "#task-t .events"), "the restart's event shown")
        until(browser, lambda b: "restarts 1" in text_of(b, "#task-t .links")
              and "running" in text_of(b, "#task-t h2"), "the task running again")
        assert heading.is_displayed()  # the same page: it was not reloaded (a stale element would raise)
        until(browser, lambda b: "-" not in text_of(b, "#stats tbody td:nth-child(3)"), "the task's memory shown")
        browser.save_screenshot(str(screenshots / "4-allocation.png"))

        # Its log, followed: the line the task prints once the page is open appears in it.
        click(browser, By.CSS_SELECTOR, "#task-t a.stdout")
        until(browser, lambda b: text_of(b, "#follow-state") == "(following)", "the log followed")
        assert "task started" in text_of(browser, "#log")
        assert "printed after the page opened" not in text_of(browser, "#log")
        go.write_text("go\n")
        until(browser, lambda b: "printed after the page opened" in text_of(b, "#log"), "the new log line")
        browser.save_screenshot(str(screenshots / "5-logs.png"))

        # The job's page, its stop button (confirmed), and the job stopped as the API tells.
        click(browser, By.LINK_TEXT, "web.g[0]")
        until(browser, expected_conditions.presence_of_element_located((By.ID, "job-link")), "the allocation")
        click(browser, By.ID, "job-link")
        until(browser, expected_conditions.presence_of_element_located((By.ID, "stop-job")), "the job's page")
        click(browser, By.ID, "stop-job")
        until(browser, expected_conditions.alert_is_present(), "the confirmation")
        browser.switch_to.alert.accept()
        until(browser, lambda b: "job web stopping" in b.page_source, "the stop acknowledged")
        with agent.http() as http:
            wait_for(lambda: http.get("/v1/jobs/web").json()["status"] == "stopped", what="the job stopped")
        until(browser, lambda b: text_of(b, "#job-status") == "stopped", "the page showing it stopped")
        browser.save_screenshot(str(screenshots / "6-stopped.png"))
        # Nothing the pages do was refused by their own Content-Security-Policy.
        console = [entry["message"] for entry in browser.get_log("browser")]
        assert not [m for m in console if "Content Security Policy" in m], console
    finally:
        agent.shutdown()
