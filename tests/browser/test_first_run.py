from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PASSWORD = "a long test passphrase"


def test_first_run_setup_then_sign_in_shows_the_live_socket(page):
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/setup/$"))
    page.get_by_label("Username").fill("owner")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create the owner account").click()
    expect(page.get_by_text("You are the owner of this OrbChat")).to_be_visible()

    page.get_by_role("button", name="Sign out owner").click()
    expect(page).to_have_url(re.compile(r"/login/"))
    page.goto("/setup/")  # setup cannot run twice: it leads to sign-in
    expect(page).to_have_url(re.compile(r"/login/"))

    page.get_by_label("Username").fill("owner")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Chats", exact=True)).to_be_visible()
    state = page.locator("#socket-state")
    expect(state).to_have_attribute("data-state", "connected")
    expect(state).to_have_text("Live")


def test_phone_width_keeps_the_navigation_reachable(page, browser):
    page.set_viewport_size({"width": 375, "height": 740})
    page.goto("/setup/")
    page.get_by_label("Username").fill("owner")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create the owner account").click()
    corpus = page.get_by_role("link", name="Corpus")
    expect(corpus).to_be_hidden()
    page.locator("label[for=nav-toggle]").click()
    corpus.click()
    expect(page.get_by_role("heading", name="Corpus")).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375
