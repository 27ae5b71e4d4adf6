"""The search page in a real browser: headless Chromium (the system's, /usr/bin/chromium) driven by
Playwright against the loopback server. ``FASTREID_UPDATE_SCREENSHOTS=1`` saves the page with
its results to docs/images/serve_search.png."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest
from serve_testing import MAX_BYTES, REPO, skip_without_serve_extra

skip_without_serve_extra()

CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = REPO / "docs" / "images" / "serve_search.png"

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="needs Playwright for Python: pip install playwright",
    ),
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM), reason=f"needs Chromium at {CHROMIUM} (apt-get install chromium)"
    ),
]


def wait_until(page, expression: str, timeout: float = 20.0) -> None:
    """Poll ``expression`` in the page until it is true. (Playwright's wait_for_function evaluates
    its predicate with eval, which the page's Content-Security-Policy rightly forbids.)"""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {timeout} s: {expression}"
        time.sleep(0.05)


def test_the_page_searches_and_shows_errors(live_server, gallery_dir, tmp_path):
    from playwright.sync_api import sync_playwright

    query = sorted(gallery_dir.iterdir())[3]
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not an image")
    too_large = tmp_path / "large.jpg"
    too_large.write_bytes(b"\xff\xd8" + b"\0" * MAX_BYTES)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(live_server + "/", timeout=20_000)
            assert page.inner_text("#size") == str(len(list(gallery_dir.iterdir())))

            page.set_input_files("#image", str(query))
            page.click("#submit")
            page.wait_for_selector(".hit", timeout=20_000)
            first = page.locator(".hit").first.inner_text()
            assert first == f"#1 {query.name}", first
            assert page.locator(".hit").count() == 10
            assert page.locator(".distance").first.inner_text().startswith("0.000")
            wait_until(
                page,
                "Array.from(document.querySelectorAll('#results img, #query img'))"
                ".every(i => i.complete && i.naturalWidth > 0)",
            )
            if os.environ.get("FASTREID_UPDATE_SCREENSHOTS") == "1":
                page.screenshot(path=str(SCREENSHOT), full_page=True)
            assert errors == [], errors

            page.set_input_files("#image", str(text_file))
            page.click("#submit")
            page.wait_for_selector("#error:not(:empty)", timeout=20_000)
            assert "Not a readable image" in page.inner_text("#error")
            assert page.locator(".hit").count() == 0

            page.set_input_files("#image", str(too_large))
            page.click("#submit")
            page.wait_for_function(
                "document.getElementById('error').textContent.includes('limit')", timeout=20_000
            )
            assert page.locator(".hit").count() == 0
            # the 415 of the text file is the only console error (Chromium logs failed fetches)
            assert all("415" in e for e in errors), errors
        finally:
            browser.close()
