"""A real headless Chromium (the system's, installed by the bootstrap) driven by Playwright.

Started with a fresh profile and without the background traffic a browser makes on its own (the
machines reach no network but the package mirrors), always closed. Playwright never downloads a
browser here: it is given the system's executable.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

REPO = Path(__file__).resolve().parents[2]
#: Where tests keep what a person may want to look at afterwards (screenshots); CI keeps the folder.
ARTIFACTS = Path(os.environ.get("AIRFLOW_COMMIT_TEST_ARTIFACTS", REPO / "test-artifacts"))
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@contextmanager
def chromium_page() -> Iterator[Page]:
    """One page of a headless Chromium with an empty profile, closed afterwards."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        raise RuntimeError(
            "chromium is not installed: run scripts/bootstrap.sh (Debian: apt-get install chromium)"
        )
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS)
        )
        try:
            yield browser.pages[0] if browser.pages else browser.new_page()
        finally:
            browser.close()


def sign_in(page: Page, base_url: str, username: str, password: str) -> None:
    """Sign into Airflow through its own login page, as a person does (the session is a cookie)."""
    page.goto(f"{base_url}/auth/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/auth/login" not in url)


def screenshot(page: Page, name: str) -> Path:
    """Keep a full-page screenshot as a test artifact; its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
