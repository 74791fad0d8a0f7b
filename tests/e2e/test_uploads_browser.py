"""Uploading in a real headless Chromium: the documents list follows processing without a reload."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "knowledge"))
from knowledge_support import pdf_bomb

pytestmark = pytest.mark.slow
Shot = Callable[[str], None]


def test_an_upload_shows_ready_or_its_failure_without_reloading(page: Page, shot: Shot) -> None:
    page.goto("/kb/factures/")
    page.set_input_files(
        "form.upload input[name=files]",
        [
            {"name": "quokka.txt", "mimeType": "text/plain", "buffer": b"the quokka report"},
            {"name": "bomb.pdf", "mimeType": "application/pdf", "buffer": pdf_bomb()},
        ],
    )
    page.click("form.upload button[type=submit]")
    page.wait_for_url("**/kb/factures/")
    expect(page.locator(".messages")).to_be_visible()
    page.evaluate("window.__same_page = true")  # gone if the page were reloaded
    bomb = page.locator("#documents tr", has_text="bomb.pdf")
    expect(bomb).to_contain_text("Failed: too large when expanded: more than 50 MB of data.", timeout=30_000)
    expect(page.locator("#documents tr", has_text="quokka.txt")).to_contain_text("Ready")
    # Nothing processing any more: the list stops polling; it was updated in place.
    expect(page.locator("#documents[hx-trigger]")).to_have_count(0)
    assert page.evaluate("window.__same_page") is True
    shot("uploads-outcome")
