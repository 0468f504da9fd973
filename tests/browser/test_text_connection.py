"""Connecting a text-completion server in the browser, choosing its templates, and the error pages."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from orbchat.connections.models import Connection
from tests.browser.test_reading import SIZES, shot
from tests.fakes.llm import Reply


@pytest.mark.parametrize("size", list(SIZES))
def test_a_text_completion_connection_is_made_with_its_templates_and_tested(signed_in_page, fake_llm, size):
    page = signed_in_page
    page.set_viewport_size(SIZES[size])
    page.goto("/settings/models/connect/")
    page.get_by_role("link", name="Text completion (instruct templates)").click()
    expect(page.get_by_label("Kind of API")).to_have_value("text")
    page.get_by_label("Model", exact=True).fill("local-model")
    page.get_by_label("API base URL").fill(fake_llm.base_url)
    page.get_by_label("Text-completion server").select_option(label="llama.cpp server")
    page.get_by_label("Instruct template").select_option(label="Llama 3 Instruct (bundled)")
    page.get_by_label("Context template").select_option(label="Llama 3 Instruct (bundled)")
    page.get_by_role("group", name="Text completion").scroll_into_view_if_needed()
    shot(page, "text-connection-form", size)
    page.get_by_role("button", name="Save").click()
    fake_llm.script(Reply("ready"))
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-result")).to_contain_text("The model answered: ready")
    connection = Connection.objects.get(model="openai/local-model")
    assert (connection.api, connection.text_backend, connection.instruct_template) == (
        "text",
        "llamacpp",
        "bundled:Llama 3 Instruct",
    )
    assert fake_llm.completions()[-1].body["prompt"] == (
        "<|start_header_id|>user<|end_header_id|>\n\nReply with the single word: ready<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


@pytest.mark.parametrize("size", list(SIZES))
def test_a_page_that_is_not_there_keeps_the_sites_navigation(signed_in_page, size):
    page = signed_in_page
    page.set_viewport_size(SIZES[size])
    page.goto("/no-such-page/")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("link", name="Back to your chats")).to_be_visible()
    expect(page.locator("nav.site-nav")).to_have_count(1)
    shot(page, "not-found", size)
