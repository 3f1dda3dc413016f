"""Security: the web UI's session cookie, caught by another server on the agent's loopback address.

A cookie is scoped to a host, never to a port, and for ``SameSite`` the site of ``http://127.0.0.1:P`` is
``127.0.0.1`` whatever ``P``. So a server that another local user (or a task on the host's network) runs
on another loopback port, once the operator's browser opens any of its pages, can navigate to its own
``/ui/``: a navigation of the same site, which carries the UI's ``SameSite=Strict`` cookie of
``Path=/ui/``. Replayed to the agent, that cookie is a signed-in session (stop, dispatch, the terminal)
for 12 hours, and the token was never needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.support.agent import AgentProcess
from tests.support.fileserver import FileServer, serve
from tests.support.waiting import wait_for
from tests.ui.conftest import chromium, require_selenium

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

TOKEN = "ui-session-port-t0ken"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    require_selenium()
    folder = tmp_path / "browser"
    folder.mkdir()
    with chromium(folder) as driver:
        yield driver


@pytest.fixture
def other_port() -> Iterator[FileServer]:
    """Another user's server on 127.0.0.1: its page sends the browser on to its own ``/ui/``."""
    for server in serve():
        server.files["/"] = b"<!doctype html><script>location.href = '/ui/caught'</script>"
        yield server


@pytest.mark.xfail(strict=True, reason="the session cookie is a bearer credential the browser also sends to "
                                       "every other port of the agent's host; binding the session to the "
                                       "agent's origin needs a credential the browser keeps per origin")
def test_another_loopback_port_cannot_replay_the_ui_session(tmp_path: Path, browser: WebDriver,
                                                            other_port: FileServer) -> None:
    from selenium.webdriver.common.by import By

    agent = AgentProcess(tmp_path, token=TOKEN, raw_exec=False).start()
    try:
        browser.get(f"{agent.url}/ui/login")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "form.login button").click()
        wait_for(lambda: browser.current_url.rstrip("/").endswith("/ui"), what="signed in to the UI")

        browser.get(other_port.url("/"))
        caught = wait_for(lambda: next((headers.get("Cookie") for path, headers in other_port.requests
                                        if path == "/ui/caught"), None),
                          what="the other server's /ui/ requested by the browser, with its cookies")
        replayed = httpx.get(f"{agent.url}/ui/", headers={"Cookie": caught}, follow_redirects=False)
        assert replayed.status_code != 200, "the cookie caught on another port signs in to the agent's UI"
    finally:
        agent.shutdown()
