"""The Content-Security-Policy in a real Chromium: no page of the site breaks it (no inline script or
style, no eval, the live chat's websocket allowed as 'self'), and the chat still works under it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import ask, last_run

pytestmark = pytest.mark.slow

# Recorded by the page itself, from its first script on: every violation the browser reports.
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__violations.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + e.sourceFile + ":" + e.lineNumber);
});
window.__wsOpened = 0;
document.addEventListener("htmx:wsOpen", function () { window.__wsOpened += 1; });
"""
PAGES = [
    "/",
    "/settings/",
    "/settings/connectors/",
    "/settings/connectors/new",
    "/settings/budgets/",
    "/settings/usage/",
    "/settings/usage/?month=2020-01",
    "/kb/",
    "/kb/factures/",
    "/kb/new",
    "/tasks/",
    "/tasks/new",
    "/c/search?q=invoice",
    "/documents/1/",
    "/v1/docs",
    "/admin/login/",  # the API's OpenAPI pages (Swagger UI as django-ninja ships it, static files)
]


def _watched(page: Page) -> list[str]:
    """Console messages about the policy (Chromium logs each refusal), from now on."""
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
    page.add_init_script(WATCH)
    return console


def _violations(page: Page) -> list[Any]:
    found: list[Any] = page.evaluate("window.__violations")
    return found


def _until(page: Page, expression: str, timeout: float = 10) -> None:
    """Polls ``expression`` through CDP: Playwright's wait_for_function evaluates strings in the page, which
    the policy (no eval) may refuse."""
    for _ in range(int(timeout * 10)):
        if page.evaluate(expression):
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"still false after {timeout} s: {expression}")


def test_no_page_breaks_the_policy_and_the_chat_works_under_it(page: Page) -> None:
    console = _watched(page)
    for path in PAGES:
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("load")
        assert _violations(page) == [], path
    page.goto("/")
    ask(page, "Bimbamjob: invoices, payments and relationship")
    run = last_run(page)
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)  # pushed through the websocket
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(run.locator(".text")).to_contain_text("Here is what the documents say")
    assert _violations(page) == []
    # The conversation's own page connects its websocket ('self' covers ws: of the page's origin).
    page.reload()
    _until(page, "window.__wsOpened > 0")
    expect(page.locator("#connection")).to_be_hidden()
    assert _violations(page) == []
    assert console == []


def test_the_policy_is_enforced_and_a_violation_would_be_seen(page: Page) -> None:
    """The watch above can fail: an inline style or script added to a page is refused and reported."""
    _watched(page)
    page.goto("/settings/")
    page.evaluate(
        """() => {
        const div = document.createElement("div");
        div.innerHTML = '<p style="color: red">x</p>';
        document.body.append(div);
        const script = document.createElement("script");
        script.textContent = "window.__ran = true";
        document.body.append(script);
    }"""
    )
    _until(page, "window.__violations.length >= 2")
    assert page.evaluate("window.__ran === undefined")
    directives = {v.split(" ")[0] for v in _violations(page)}
    assert {"style-src-attr", "script-src-elem"} <= directives, directives


def test_the_sign_in_page_keeps_to_the_policy(browser: Any, server: str) -> None:
    context = browser.new_context(base_url=server)
    page = context.new_page()
    console = _watched(page)
    page.goto("/login/")
    page.wait_for_load_state("load")
    assert _violations(page) == [] and console == []
    context.close()
