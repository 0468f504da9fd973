from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from orbchat.accounts.models import User
from orbchat.connections import services as connection_services
from tests.fakes.llm import Reply
from tests.library.cards import png_card, v2_card

pytestmark = pytest.mark.browser


@pytest.fixture
def chat_page(signed_in_page, fake_llm, tmp_path):
    """The owner, connected to the fake provider, in a new chat with an imported card."""
    page = signed_in_page
    owner = User.objects.get(username="owner")
    connection_services.connection_create(
        owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
    )
    card = tmp_path / "mira.png"
    card.write_bytes(png_card(v2_card()))
    page.get_by_role("link", name="Characters").click()
    page.get_by_label("Files").set_input_files(str(card))
    page.get_by_role("button", name="Import").click()
    page.get_by_role("link", name="Mira").click()
    page.get_by_role("button", name="New chat").click()
    expect(page.locator(".message").first).to_contain_text("Careful—the ink is still wet.")
    expect(page.locator(".room")).to_have_attribute("data-socket", "open")
    return page


def last_message(page):
    return page.locator("#messages > .message").last


def send(page, text):
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_chat_send_stream_swipe_regenerate_continue_edit_fork_delete(chat_page, fake_llm):
    page = chat_page
    fake_llm.script(
        Reply('*Mira looks up.* "You came back." ' + "The tide hums. " * 8, token_delay=0.08),
        Reply("A second take."),
        Reply(" And she smiles."),
    )
    send(page, "Hello, Mira!")
    expect(page.locator(".message.human").last).to_contain_text("Hello, Mira!")
    streaming = page.locator(".message.streaming")
    expect(streaming).to_contain_text("Mira looks up.")  # tokens arrive before the reply is done
    expect(streaming).to_have_count(0, timeout=20000)
    reply = last_message(page)
    expect(reply.locator("em")).to_have_text("Mira looks up.")
    expect(reply.locator(".speech")).to_contain_text("You came back.")

    page.get_by_role("button", name="Regenerate").click()
    expect(last_message(page)).to_contain_text("A second take.")
    expect(last_message(page).locator(".swipe-count")).to_have_text("2/2")
    last_message(page).get_by_role("button", name="Previous swipe").click()
    expect(last_message(page)).to_contain_text("You came back.")
    expect(last_message(page).locator(".swipe-count")).to_have_text("1/2")

    page.get_by_role("button", name="Continue").click()
    expect(last_message(page)).to_contain_text("And she smiles.")
    expect(page.locator(".message.streaming")).to_have_count(0)

    last_message(page).get_by_role("button", name="Edit").click()
    last_message(page).locator("textarea.edit-box").fill("An edited reply.")
    last_message(page).get_by_role("button", name="Save edit").click()
    expect(last_message(page)).to_have_text(re.compile("An edited reply."))
    page.reload()
    expect(last_message(page)).to_contain_text("An edited reply.")

    page.once("dialog", lambda dialog: dialog.accept())
    last_message(page).get_by_role("button", name="More actions").click()
    last_message(page).get_by_role("button", name="Delete", exact=True).click()
    expect(page.locator(".message", has_text="An edited reply.")).to_have_count(0)

    page.locator(".message.human").last.get_by_role("button", name="More actions").click()
    page.locator(".message.human").last.get_by_role("button", name="Fork here").click()
    expect(page.get_by_text("Forked at message #1")).to_be_visible()
    expect(page.get_by_role("link", name="Mira")).to_be_visible()  # "forked from" link to the parent
    expect(last_message(page)).to_contain_text("Hello, Mira!")


def test_reload_mid_reply_then_stop(chat_page, fake_llm):
    page = chat_page
    words = " ".join(f"word{i}" for i in range(30))
    fake_llm.script(
        Reply(words, token_delay=0.15), Reply(" ".join(f"slow{i}" for i in range(200)), token_delay=0.1)
    )
    send(page, "Tell me everything.")
    expect(page.locator(".message.streaming")).to_contain_text("word3")
    page.reload()
    expect(page.locator(".message.streaming")).to_contain_text("word")  # the text so far survived the reload
    expect(page.locator(".message.streaming")).to_have_count(0, timeout=20000)
    expect(last_message(page)).to_contain_text("word29")

    send(page, "And again.")
    expect(page.locator(".message.streaming")).to_contain_text("slow3")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".message.streaming")).to_have_count(0, timeout=10000)
    expect(last_message(page)).to_contain_text("stopped")
    expect(last_message(page)).to_contain_text("slow0")
    expect(last_message(page)).not_to_contain_text("slow199")


def test_a_provider_error_keeps_the_message_and_retry_resends(chat_page, fake_llm):
    page = chat_page
    fake_llm.script(Reply(status=500), Reply("Back again."))
    send(page, "Are you there?")
    notice = page.locator("#notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("The reply failed.")
    expect(page.locator("#site-notices")).to_contain_text(
        "The provider had a problem on its side. Retry in a moment."
    )
    expect(last_message(page)).to_contain_text("Are you there?")
    page.get_by_role("button", name="Retry").click()
    expect(last_message(page)).to_contain_text("Back again.")
    expect(notice).to_be_hidden()
