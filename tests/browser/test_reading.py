"""Reading a chat: it opens at the latest message, follows a reply at the bottom, stays put when
scrolled up (with a pill back down), never hides a line behind the composer, and loads earlier
messages as the reader scrolls up, keeping the view still. At desktop and phone width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bench import kit
from orbchat.accounts.models import User
from orbchat.connections import services as connection_services
from rooms import services
from tests.browser.looks import SCREENSHOTS, SIZES
from tests.fakes.llm import Reply

pytestmark = pytest.mark.browser

STREAM_TIMEOUT = 30000
LONG_REPLY = "\n\n".join(
    f"Paragraph {i}: the tide hums against the rocks below the light." for i in range(14)
)


def open_room(page, fake_llm, size: str, *, history: int):
    """The owner's chat with Maren, `history` messages long, open at `size`."""
    owner = User.objects.get(username="owner")
    connection_services.connection_create(
        owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
    )
    room = services.room_create_from_character(host=owner, character=owner.characters.get())
    kit.bulk_history(room, range(1, history + 1), text_for=lambda seq: f"Line {seq}: the fog.", tokens=5)
    page.set_viewport_size(SIZES[size])
    page.goto(f"/chats/{room.pk}/")
    expect(page.locator(".room")).to_have_attribute("data-socket", "open")
    return room


def shot(page, name: str, size: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{size}.png"))


def bottom_gap(page) -> float:
    """The composer's top minus the last message's bottom: negative when the message is hidden."""
    return page.evaluate(
        """() => {
        const last = document.querySelector("#messages > .message:last-child");
        return document.getElementById("composer").getBoundingClientRect().top
            - last.getBoundingClientRect().bottom;
    }"""
    )


def scroll_top(page) -> float:
    return page.evaluate("() => document.getElementById('scroller').scrollTop")


def settled_scroll_top(page) -> float:
    """The scroller's position once a wheel scroll has come to rest (it eases over several frames)."""
    last = scroll_top(page)
    for _ in range(40):
        page.wait_for_timeout(150)
        now = scroll_top(page)
        if now == last:
            return now
        last = now
    return last


def send(page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_a_chat_opens_at_its_latest_message(signed_in_page, fake_llm, size):
    page = signed_in_page
    open_room(page, fake_llm, size, history=300)
    last = page.locator("#messages > .message").last
    expect(last).to_contain_text("Line 300")
    assert 0 <= bottom_gap(page) < 40
    expect(last).to_be_in_viewport()
    shot(page, "opens-at-latest", size)


def test_a_streamed_reply_is_followed_and_its_last_line_is_never_behind_the_composer(
    signed_in_page, fake_llm, size
):
    page = signed_in_page
    open_room(page, fake_llm, size, history=40)
    fake_llm.script(Reply(LONG_REPLY, token_delay=0.03))
    send(page, "Tell me about the tide.")
    streaming = page.locator(".message.streaming")
    expect(streaming).to_contain_text("Paragraph 3")
    assert bottom_gap(page) >= 0  # the typing cursor is in sight while the reply streams
    expect(streaming).to_have_count(0, timeout=STREAM_TIMEOUT)
    expect(page.locator("#messages > .message").last).to_contain_text("Paragraph 13")
    assert bottom_gap(page) >= 0, "the reply's last line is behind the composer"
    assert bottom_gap(page) < 40, "the view did not follow the reply to its end"
    expect(page.locator("#new-messages")).to_be_hidden()
    shot(page, "reply-followed", size)


def test_scrolled_up_a_streaming_reply_leaves_the_view_still_and_offers_the_pill(
    signed_in_page, fake_llm, size
):
    page = signed_in_page
    open_room(page, fake_llm, size, history=40)
    fake_llm.script(Reply(LONG_REPLY, token_delay=0.12))
    send(page, "Tell me slowly.")
    streaming = page.locator(".message.streaming")
    expect(streaming).to_contain_text("Paragraph 0")
    page.locator("#scroller").hover()
    page.mouse.wheel(0, -700)
    still = settled_scroll_top(page)
    reading = page.locator('#messages > .message[data-seq="30"]')
    where = reading.bounding_box()["y"]
    expect(page.locator("#new-messages")).to_be_visible()
    expect(streaming).to_contain_text("Paragraph 4", timeout=STREAM_TIMEOUT)  # more has arrived since
    assert scroll_top(page) == still
    assert abs(reading.bounding_box()["y"] - where) <= 1
    shot(page, "scrolled-up-pill", size)

    page.get_by_role("link", name="↓ new messages").click()
    expect(page.locator("#new-messages")).to_be_hidden()
    assert 0 <= bottom_gap(page) < 40
    expect(streaming).to_have_count(0, timeout=STREAM_TIMEOUT)
    expect(page.locator("#messages > .message").last).to_contain_text("Paragraph 13")
    assert 0 <= bottom_gap(page) < 40, "after the pill, the view follows the reply again"


def test_scrolling_up_loads_a_long_chat_back_to_message_zero_keeping_the_view_still(
    signed_in_page, fake_llm, size
):
    page = signed_in_page
    open_room(page, fake_llm, size, history=1_999)
    items = page.locator("#messages > .message")
    expect(items).to_have_count(200)
    expect(items.last).to_contain_text("Line 1999")

    # One page, looked at closely: the message being read does not move when earlier ones arrive.
    page.evaluate("() => { document.getElementById('scroller').scrollTop = 1200; }")
    page.wait_for_timeout(100)
    reading = page.locator('#messages > .message[data-seq="1810"]')
    where = reading.bounding_box()["y"]
    page.evaluate("() => { document.getElementById('scroller').scrollTop -= 600; }")
    expect(items).to_have_count(250)
    page.wait_for_timeout(100)
    assert abs(reading.bounding_box()["y"] - (where + 600)) <= 1
    expect(page.get_by_text("earlier messages not shown")).to_have_count(0)

    for _ in range(60):
        if page.locator('#messages > .message[data-seq="0"]').count():
            break
        count = items.count()
        page.evaluate("() => { document.getElementById('scroller').scrollTop = 0; }")
        expect(items).not_to_have_count(count)
    expect(items).to_have_count(2_000)
    seqs = page.evaluate(
        "() => [...document.querySelectorAll('#messages > .message')].map(m => +m.dataset.seq)"
    )
    assert seqs == list(range(2_000))
    expect(page.locator("#earlier")).to_be_hidden()
    page.evaluate("() => { document.getElementById('scroller').scrollTop = 0; }")
    expect(items.first).to_be_in_viewport()
    shot(page, "back-to-message-zero", size)


def test_jump_to_a_message_lands_on_it_in_the_same_scroller_and_later_ones_load_below(
    signed_in_page, fake_llm, size
):
    page = signed_in_page
    open_room(page, fake_llm, size, history=1_000)
    jump = page.get_by_label("Jump to message #")
    jump.fill("950")  # on the page already: only the view moves
    page.get_by_role("button", name="Go").click()
    moment = page.locator('#messages > .message[data-seq="950"]')
    expect(moment).to_have_class(re.compile(r"\bat-moment\b"))
    expect(moment).to_be_in_viewport()
    assert "?at=" not in page.url

    jump.fill("12")  # not loaded: the chat opens at it (?at=12)
    page.get_by_role("button", name="Go").click()
    expect(page).to_have_url(re.compile(r"\?at=12$"))
    moment = page.locator('#messages > .message[data-seq="12"]')
    expect(moment).to_have_class(re.compile(r"\bat-moment\b"))
    expect(moment).to_be_in_viewport()
    assert page.evaluate("() => document.documentElement.scrollTop") == 0  # the scroller moved, not the page
    shot(page, "jump-to-message", size)
    items = page.locator("#messages > .message")
    page.evaluate("() => { document.getElementById('scroller').scrollTop = 0; }")
    expect(items.first).to_have_attribute("data-seq", "0")  # earlier ones load above it
    count = items.count()
    page.evaluate("() => { const s = document.getElementById('scroller'); s.scrollTop = s.scrollHeight; }")
    expect(items).not_to_have_count(count)  # later messages load below
