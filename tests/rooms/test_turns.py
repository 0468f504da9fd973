"""A turn end to end: a real socket, the real channel layer on Redis, the fake provider."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from orbchat.asgi import application
from rooms import turns
from rooms.models import Message, Variant
from rooms.turns import stream
from tests.factories import join, make_user
from tests.fakes.llm import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def open_socket(user, room_id):
    cookie = await sync_to_async(cookie_for)(user)
    socket = WebsocketCommunicator(
        application,
        f"/ws/rooms/{room_id}/" if room_id else "/ws/",
        headers=[
            (b"origin", b"http://127.0.0.1:8000"),
            (b"host", b"127.0.0.1:8000"),
            (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()),
        ],
    )
    connected, _ = await socket.connect()
    assert connected
    return socket


async def until(socket, predicate, timeout=10):
    """Receive frames until one matches; return it and the frames seen before it."""
    seen = []
    while True:
        frame = await socket.receive_json_from(timeout=timeout)
        if predicate(frame):
            return frame, seen
        seen.append(frame)


def done_message(frame):
    return (
        frame["type"] == "message"
        and "streaming" not in frame["html"]
        and 'data-kind="character"' in frame["html"]
    )


async def settle():
    while turns.running:
        await asyncio.sleep(0.05)


@sync_to_async
def variants_of_last(room):
    message = Message.objects.filter(room=room).order_by("-seq").first()
    return message, list(message.variants.order_by("index"))


async def test_send_streams_the_reply_to_every_tab_and_saves_it(room, host, connected, fake_llm):
    fake_llm.script(Reply('*She smiles.* "Welcome, traveller."', token_delay=0.01))
    first, second = await open_socket(host, room.pk), await open_socket(host, room.pk)
    await first.send_json_to({"type": "send", "text": "Hello there!"})
    for tab in (first, second):
        frame, seen = await until(tab, done_message)
        assert any(f["type"] == "message" and "Hello there!" in f["html"] for f in seen)
        tokens = "".join(f["delta"] for f in seen if f["type"] == "token")
        assert tokens == '*She smiles.* "Welcome, traveller."'
        assert "<em>She smiles.</em>" in frame["html"] and 'class="speech"' in frame["html"]
    await settle()
    message, variants = await variants_of_last(room)
    assert variants[0].state == "done" and variants[0].text.startswith("*She smiles.*")
    sent = fake_llm.requests[-1].body["messages"]
    assert sent[-1]["content"].endswith("Hello there!") or any("Hello there!" in m["content"] for m in sent)
    for tab in (first, second):
        await tab.disconnect()


async def test_closing_the_tab_mid_reply_loses_nothing(room, host, connected, fake_llm):
    fake_llm.script(Reply("one two three four five six seven eight", token_delay=0.1))
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "Tell me a story"})
    await until(socket, lambda f: f["type"] == "token")
    await socket.disconnect()
    await settle()
    _, variants = await variants_of_last(room)
    assert variants[0].text == "one two three four five six seven eight" and variants[0].state == "done"


async def test_stop_keeps_what_was_written(room, host, connected, fake_llm):
    fake_llm.script(Reply(" ".join(f"w{i}" for i in range(60)), token_delay=0.05))
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "Go on"})
    await until(socket, lambda f: f["type"] == "token")
    await socket.send_json_to({"type": "stop"})
    await until(socket, done_message)
    await settle()
    _, variants = await variants_of_last(room)
    assert variants[0].state == "stopped"
    assert variants[0].text.startswith("w0") and len(variants[0].text.split()) < 60
    await socket.disconnect()


async def test_a_second_request_is_refused_while_a_reply_is_written(room, host, connected, fake_llm):
    fake_llm.script(Reply("slow " * 30, token_delay=0.05))
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "First"})
    await until(socket, lambda f: f["type"] == "token")
    await socket.send_json_to({"type": "regenerate"})
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert "already being written" in notice["text"]
    await socket.send_json_to({"type": "stop"})
    await settle()
    await socket.disconnect()


@pytest.mark.parametrize(
    ("fault", "words", "retry"),
    [
        (Reply(status=401), "The provider refused the API key. Check the key in Settings → Models.", False),
        (Reply(status=404), "The provider does not know this model. Check the model name", False),
        (Reply(status=429), "The provider is limiting how often it can be called. Wait a moment", True),
        (Reply(status=500), "The provider had a problem on its side. Retry in a moment.", True),
        (Reply(status=503), "The provider had a problem on its side. Retry in a moment.", True),
    ],
)
async def test_provider_errors_keep_the_message_say_what_to_do_and_offer_retry_when_it_helps(
    room, host, connected, fake_llm, fault, words, retry
):
    fake_llm.script(fault, Reply("Recovered."))
    socket = await open_socket(host, room.pk)
    site = await open_socket(host, None)
    await socket.send_json_to({"type": "send", "text": "Are you there?"})
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert notice["text"] == "The reply failed." and notice["retry"] is retry
    reason, _ = await until(site, lambda f: f["type"] == "notice")
    assert words in reason["text"]
    assert "Error" not in reason["text"] and "litellm" not in reason["text"] and "(" not in reason["text"]
    await settle()
    last, variants = await variants_of_last(room)
    assert last.kind == "human" and variants[0].text == "Are you there?"
    await socket.send_json_to({"type": "reply"})
    await until(socket, lambda f: done_message(f) and "Recovered." in f["html"])
    await settle()
    last, variants = await variants_of_last(room)
    assert last.kind == "character" and variants[0].text == "Recovered."
    for tab in (socket, site):
        await tab.disconnect()


async def test_a_member_hears_that_a_reply_failed_but_not_the_providers_reason(
    room, host, connected, fake_llm
):
    member = await sync_to_async(make_user)(actor=host, username="member")
    await sync_to_async(join)(room, member)
    fake_llm.script(Reply(status=401, error_message="Incorrect API key provided: sk-proj-abcdef123456."))
    tab, site = await open_socket(member, room.pk), await open_socket(member, None)
    assert (await site.receive_json_from())["type"] == "hello"
    await tab.send_json_to({"type": "send", "text": "Hello?"})
    notice, seen = await until(tab, lambda f: f["type"] == "notice")
    assert notice["text"] == "The reply failed."
    await settle()
    assert await site.receive_nothing(timeout=0.5)
    assert not any("sk-proj" in str(frame) or "401" in str(frame) for frame in seen)
    for socket in (tab, site):
        await socket.disconnect()


async def test_a_cut_stream_keeps_the_partial_reply_and_says_so(room, host, connected, fake_llm):
    fake_llm.script(Reply("alpha beta gamma delta epsilon", cut_after=2))
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "Speak"})
    notice, seen = await until(socket, lambda f: f["type"] == "notice")
    assert notice["text"].startswith("The provider's stream was cut off before the reply finished")
    assert notice["retry"] and "500" not in str(seen + [notice])
    await settle()
    last, variants = await variants_of_last(room)
    assert last.kind == "character" and variants[0].text == "alpha beta"
    await socket.disconnect()


async def test_a_timeout_is_reported_in_plain_words(room, host, connected, fake_llm, monkeypatch):
    monkeypatch.setattr(stream, "PROVIDER_TIMEOUT", 0.5)
    fake_llm.script(Reply("late", first_token_delay=2))
    socket, site = await open_socket(host, room.pk), await open_socket(host, None)
    await socket.send_json_to({"type": "send", "text": "Hurry"})
    notice, _ = await until(site, lambda f: f["type"] == "notice")
    assert "did not answer in time" in notice["text"] or "Could not reach" in notice["text"]
    await settle()
    for tab in (socket, site):
        await tab.disconnect()


async def test_regenerate_swipe_and_continue(room, host, connected, fake_llm):
    fake_llm.script(Reply("First take."), Reply("Second take."), Reply(" And more."))
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "Hi"})
    await until(socket, done_message)
    await settle()
    await socket.send_json_to({"type": "regenerate"})
    await until(socket, lambda f: done_message(f) and "Second take." in f["html"])
    await settle()
    message, variants = await variants_of_last(room)
    assert [v.text for v in variants] == ["First take.", "Second take."] and message.active_index == 1
    await socket.send_json_to({"type": "swipe", "message": message.pk, "direction": "left"})
    frame, _ = await until(socket, lambda f: f["type"] == "message" and "First take." in f["html"])
    await socket.send_json_to({"type": "continue"})
    await until(socket, lambda f: done_message(f) and "And more." in f["html"])
    await settle()
    message, variants = await variants_of_last(room)
    assert variants[0].text == "First take. And more."
    assert "Continue your last message" in fake_llm.requests[-1].body["messages"][-1]["content"]
    await socket.disconnect()


async def test_impersonate_drafts_without_saving(room, host, connected, fake_llm):
    fake_llm.script(Reply("I step into the light."))
    socket = await open_socket(host, room.pk)
    before = await sync_to_async(Message.objects.filter(room=room).count)()
    await socket.send_json_to({"type": "impersonate"})
    draft, _ = await until(socket, lambda f: f["type"] == "draft")
    assert draft["text"] == "I step into the light."
    assert await sync_to_async(Message.objects.filter(room=room).count)() == before
    await socket.disconnect()


async def test_without_a_chat_model_the_room_says_how_to_connect_one(room, host):
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "Hello?"})
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert "No Chat model is connected" in notice["text"]
    assert await sync_to_async(Message.objects.filter(room=room, kind="human").count)() == 1
    await socket.disconnect()


async def test_other_users_and_anonymous_cannot_open_the_room_socket(room, host):
    from tests.factories import make_user

    stranger = await sync_to_async(make_user)(actor=host, username="stranger")
    cookie = await sync_to_async(cookie_for)(stranger)
    for headers in ([], [(b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode())]):
        socket = WebsocketCommunicator(
            application,
            f"/ws/rooms/{room.pk}/",
            headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000"), *headers],
        )
        connected, code = await socket.connect()
        assert not connected and code == 4404
        await socket.disconnect()
    assert await sync_to_async(Variant.objects.filter(room=room, state="streaming").count)() == 0


async def test_a_member_whose_draft_fails_hears_only_that_it_failed(room, host, connected, fake_llm):
    member = await sync_to_async(make_user)(actor=host, username="drafter")
    await sync_to_async(join)(room, member)
    fake_llm.script(Reply(status=401, error_message="Incorrect API key provided: sk-proj-abcdef123456."))
    tab = await open_socket(member, room.pk)
    await tab.send_json_to({"type": "impersonate"})
    notice, _ = await until(tab, lambda f: f["type"] == "notice")
    assert notice["text"] == "The draft failed."
    fake_llm.script(Reply(status=401))
    host_tab = await open_socket(host, room.pk)
    await host_tab.send_json_to({"type": "impersonate"})
    notice, _ = await until(host_tab, lambda f: f["type"] == "notice")
    assert "The provider refused the API key. Check the key in Settings → Models." in notice["text"]
    for socket in (tab, host_tab):
        await socket.disconnect()
