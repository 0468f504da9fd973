from __future__ import annotations

import os

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# Playwright's sync API keeps an event loop running in the test thread; the ORM calls made by
# test setup and teardown are ordinary blocking calls and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


# Package scope: Playwright's event loop must be gone before the asyncio tests run.
@pytest.fixture(scope="package")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(
            f"Chromium is missing at {CHROMIUM}: run `make test`, which installs it, or set CHROMIUM."
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


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
