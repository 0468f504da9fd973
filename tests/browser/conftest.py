from __future__ import annotations

import os

import pytest

from tests.browser.looks import SIZES

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# Playwright's sync API keeps an event loop running in the test thread; the ORM calls made by
# test setup and teardown are ordinary blocking calls and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


# Every page reports what the Content-Security-Policy refused (Chromium also logs each refusal).
REPORT_CSP_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.violatedDirective} blocked ${event.blockedURI || "inline"}`
    + ` at ${event.sourceFile}:${event.lineNumber}`);
});
"""


def is_csp_violation(text: str) -> bool:
    return text.startswith("CSP violation:") or "Content Security Policy" in text


# Package scope: Playwright's event loop must be gone before the asyncio tests run.
@pytest.fixture(scope="package")
def browser(csp_violations_seen):
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(
            f"Chromium is missing at {CHROMIUM}: run `make test`, which installs it, or set CHROMIUM."
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        new_context = browser.new_context

        def watched_context(**kwargs):
            """A context whose every page records Content-Security-Policy violations."""
            context = new_context(**kwargs)
            context.add_init_script(REPORT_CSP_VIOLATIONS)

            def record(message) -> None:
                if is_csp_violation(message.text):
                    where = message.page.url if message.page else "a page"
                    csp_violations_seen.append(f"{where}: {message.text}")

            context.on("console", record)
            return context

        browser.new_context = watched_context
        yield browser
        browser.close()


@pytest.fixture(scope="package")
def csp_violations_seen() -> list[str]:
    return []


@pytest.fixture(autouse=True)
def csp_violations(csp_violations_seen):
    """Fail a browser test during which a page broke the Content-Security-Policy."""
    csp_violations_seen.clear()
    yield csp_violations_seen
    assert csp_violations_seen == [], "the Content-Security-Policy refused something on a page"


@pytest.fixture(params=list(SIZES))
def size(request) -> str:
    """The width a test looks at a page with: each such test runs at both."""
    return request.param


@pytest.fixture
def page(browser, live_site, transactional_db):
    context = browser.new_context(base_url=live_site)
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


@pytest.fixture
def signed_in_page(page):
    """A browser tab signed in as the owner (with the starter pack)."""
    from playwright.sync_api import expect

    from tests.factories import PASSWORD, make_owner

    make_owner(username="owner")
    page.goto("/login/")
    page.get_by_label("Username").fill("owner")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Chats", exact=True)).to_be_visible()
    return page
