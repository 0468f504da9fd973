"""A new owner's first long chat: connect a model, import a long SillyTavern chat, and memory works.

The owner sets OrbChat up with no model, connects one through "Connect a model" (the first model
is the Chat model and, as the form offers, the Utility model that writes memory summaries),
imports a 300-message SillyTavern chat with "Build memory" ticked, and the real Celery worker
builds its memory with that model. The Memory panel shows the model's summaries, and the next
reply recalls some of them.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.looks import SIZES
from tests.browser.test_reading import shot
from tests.fakes.llm import Reply

pytestmark = pytest.mark.browser

PASSWORD = "a long test passphrase"
MESSAGES = 300
SUMMARY = {
    "heading": "Alex and Maren at the lighthouse, the week of the autumn storms",
    "facts": [
        "Maren hid the brass key under the third step of the lighthouse stair.",
        "Alex promised to row the lamp oil across before the storm.",
    ],
    "keywords": ["brass key", "lighthouse stair", "lamp oil"],
}
MEMORY_PROMPT = "You keep the memory of a long roleplay chat"
BUILD_TIMEOUT = 40  # seconds for the worker to summarise and index the whole chat
WARMING = "warming up the memory model…"
WARM_TIMEOUT = 240000  # a first start exports the built-in memory model (tens of seconds)

WHO = ["Tobin", "Ilse", "Corwin", "the harbourmaster", "the ferryman", "Old Harrow"]
DID = ["mended", "sold", "lost", "counted", "painted", "carried", "weighed"]
WHAT = ["a net", "the gull feathers", "a lantern", "three crates of tea", "the tide table", "a rope"]


def long_chat(count: int) -> bytes:
    """A SillyTavern chat file (.jsonl): a header line, then `count` messages between Alex and Maren."""
    start_ms = 1_717_000_000_000
    lines = [
        {
            "user_name": "Alex",
            "character_name": "Maren Tallis",
            "create_date": "2024-5-29 @16h 26m 40s 0ms",
            "chat_metadata": {},
        }
    ]
    for seq in range(count):
        is_user = seq % 2 == 1
        text = (
            f"Day {seq // 20 + 1}: {WHO[seq % len(WHO)]} {DID[seq % len(DID)]} {WHAT[seq % len(WHAT)]}"
            f" by the harbour wall (note {seq})."
        )
        lines.append(
            {
                "name": "Alex" if is_user else "Maren Tallis",
                "is_user": is_user,
                "is_system": False,
                "send_date": start_ms + seq * 60_000,
                "mes": text,
                "extra": {},
            }
        )
    return "\n".join(json.dumps(line) for line in lines).encode()


def memory_prompts(fake_llm) -> list:
    """The summariser requests the fake provider received (block notes and broader roll-ups)."""
    prompts = []
    for received in list(fake_llm.requests):
        messages = received.body.get("messages") or []
        if messages and MEMORY_PROMPT in str(messages[0].get("content", "")):
            prompts.append(received)
    return prompts


def set_up_owner(page) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/setup/$"))
    page.get_by_label("Username").fill("owner")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create the owner account").click()
    expect(page.get_by_role("heading", name="Chats", exact=True)).to_be_visible()


def connect_first_model(page, fake_llm) -> None:
    """Connect the fake provider as a local OpenAI-compatible server, from the Chats page's notice."""
    notice = page.get_by_role("status").filter(has_text="No Chat model is connected yet")
    notice.get_by_role("link", name="Connect a model").click()
    expect(page.get_by_role("heading", name="Connect a model")).to_be_visible()
    page.get_by_role("link", name="KoboldCpp / llama.cpp server").click()
    page.get_by_label("Model", exact=True).fill("fake-model")
    page.get_by_label("API base URL").fill(fake_llm.base_url)
    # A local server's own context size: the 300 messages do not all fit, so memory is needed.
    page.get_by_label("Context size").fill("4096")
    expect(page.get_by_label("Also write memory summaries with it")).to_be_checked()
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Connection fake-model saved.")).to_be_visible()


def import_chat(page, path) -> None:
    page.goto("/")
    expect(page.get_by_text("No Chat model is connected yet")).to_have_count(0)
    page.get_by_label("SillyTavern chat (.jsonl)").set_input_files(str(path))
    page.get_by_label("Character").select_option(label="Maren Tallis")
    expect(page.get_by_label("Build memory for this chat")).to_be_checked()
    page.get_by_role("button", name="Import chat").click()
    expect(page.get_by_text("long-chat.jsonl: imported.")).to_be_visible()
    expect(page.locator(".room")).to_have_attribute("data-socket", "open")


def wait_for_memory(page, room_url: str) -> None:
    """Watch the chat's Settings page until the memory build reads as done."""
    page.goto(f"{room_url}settings/")
    status = page.locator(".backfill-label")
    expect(status).to_have_text("Backfill done.", timeout=BUILD_TIMEOUT * 1000)


@pytest.mark.parametrize("size", list(SIZES))
def test_a_connected_model_builds_the_memory_of_a_long_imported_chat(
    page, fake_llm, celery_worker, tmp_path, size
):
    page.set_viewport_size(SIZES[size])
    fake_llm.default = Reply(json.dumps(SUMMARY))
    chat_file = tmp_path / "long-chat.jsonl"
    chat_file.write_bytes(long_chat(MESSAGES))

    set_up_owner(page)
    connect_first_model(page, fake_llm)
    page.goto("/settings/models/")
    for role in ("Chat", "Utility"):
        expect(page.get_by_label(role, exact=True).locator("option:checked")).to_have_text("fake-model")

    import_chat(page, chat_file)
    room_url = re.sub(r"^.*?(/chats/\d+/).*$", r"\1", page.url)
    wait_for_memory(page, room_url)
    page.goto(f"{room_url}memory/")
    # Every block but the newest, still open to the messages to come, has its memory.
    expect(page.locator(".memory-gaps")).to_contain_text("12 messages have no memory yet, from #288.")

    # The worker asked the connected model for every note: block notes and broader roll-ups.
    prompts = memory_prompts(fake_llm)
    assert len(prompts) >= MESSAGES // 8
    assert all(p.body.get("model") == "fake-model" for p in prompts)
    assert any("Transcript:" in p.body["messages"][1]["content"] for p in prompts)
    assert any("Notes, oldest first" in p.body["messages"][1]["content"] for p in prompts)

    # The panel shows the model's summaries, not the built-in summariser's.
    expect(page.locator(".memory-summariser")).to_have_count(0)
    cards = page.locator("article.memory-card")
    expect(cards.first).to_be_visible()
    expect(cards.first.locator(".memory-text")).to_contain_text(SUMMARY["heading"])
    expect(cards.first.locator(".memory-text")).to_contain_text(SUMMARY["facts"][0])
    expect(cards.first.locator(".tags")).to_contain_text("Utility model · openai/fake-model")
    expect(page.get_by_text("Built-in extractive")).to_have_count(0)
    cards.first.scroll_into_view_if_needed()
    shot(page, "memory-journey-panel", size)
    assert page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]

    # The next reply recalls what the model wrote.
    # From now on every call gets the reply: a memory cycle still queued from the build may ask the
    # same fake model (it is the Utility model too) for the scene note first, and an answer it cannot
    # read leaves the note to the built-in reader.
    fake_llm.default = Reply("*Maren glances at the stair.* Where it always is.", token_delay=0.01)
    page.goto(room_url)
    expect(page.locator(".room")).to_have_attribute("data-socket", "open")
    # On a first start the built-in memory model is still being prepared (tests/browser/test_warming.py):
    # the chat says so, and a reply meanwhile goes out without memory. Wait for it, as a person would.
    expect(page.get_by_text(WARMING)).to_have_count(0, timeout=WARM_TIMEOUT)
    page.get_by_label("Your message").fill("Where did Maren hide the brass key?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#messages > .message").last).to_contain_text("Where it always is.", timeout=20000)
    expect(page.locator("#memory-icon")).to_have_attribute("data-state", "done", timeout=20000)
    page.locator("#memory-icon").click()
    popover = page.get_by_role("dialog", name="Memory")
    expect(popover).not_to_contain_text("Nothing recalled")
    assert int(page.locator("#memory-count").inner_text()) >= 1
    expect(popover).to_contain_text(re.compile(r"\d+ memor(y|ies) recalled for the last reply"))
    expect(popover.locator(".memory-kept li").first).to_contain_text(re.compile(r"Tier \d · block \d+"))
    shot(page, "memory-journey-recalled", size)
    reply_request = [
        r.body for r in fake_llm.requests if r.body.get("stream") and "Transcript" not in str(r.body)
    ][-1]
    assert any("brass key under the third step" in str(m.get("content")) for m in reply_request["messages"])
