"""The brain icon over real sockets: the count for everyone, the detail for the host alone."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.urls import reverse

from memory.models import RecallLog
from memory.services import catch_up as passes
from memory.services import tuning as tuning_services
from orbchat.asgi import application
from orbchat.connections import selectors as connection_selectors
from orbchat.connections import services as connection_services
from rooms import members
from rooms.models import Invite
from tests.factories import make_user
from tests.fakes.llm import Reply
from tests.memory.conftest import rerank_from_nowhere, story_room
from tests.memory.test_recaller import PLANT_AT, PLANTED, varied

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def open_socket(user, path: str) -> WebsocketCommunicator:
    cookie = await sync_to_async(cookie_for)(user)
    socket = WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"origin", b"http://127.0.0.1:8000"),
            (b"host", b"127.0.0.1:8000"),
            (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()),
        ],
    )
    connected, _ = await socket.connect()
    assert connected
    return socket


async def frames_until(socket, predicate, timeout=30) -> list[dict]:
    seen = []
    while True:
        frame = await socket.receive_json_from(timeout=timeout)
        seen.append(frame)
        if predicate(frame):
            return seen


def reply_done(frame) -> bool:
    return (
        frame["type"] == "message"
        and "streaming" not in frame["html"]
        and 'data-kind="character"' in frame["html"]
    )


@sync_to_async
def long_shared_room(room, host, fake_llm):
    connection_services.connection_create(
        owner=host,
        name="Fake",
        provider="local",
        model="fake-model",
        api_base=fake_llm.base_url,
        context_size=4000,
    )
    story_room(room, 450, plant={seq: varied(seq) for seq in range(450)} | {PLANT_AT: PLANTED})
    passes.catch_up(room.pk)
    member = make_user(actor=host, username="member")
    invite, token = members.invite_link_create(room=room, by=host)
    members.invite_accept(invite=Invite.objects.get(token_hash=members.token_hash(token)), user=member)
    return member


async def test_everyone_sees_recalling_then_the_count_and_only_the_host_gets_the_detail(room, host, fake_llm):
    member = await long_shared_room(room, host, fake_llm)
    fake_llm.script(Reply("The chapel, yes. *She lowers her voice.*", token_delay=0.01))
    host_room = await open_socket(host, f"/ws/rooms/{room.pk}/")
    member_room = await open_socket(member, f"/ws/rooms/{room.pk}/")
    host_site = await open_socket(host, "/ws/")
    member_site = await open_socket(member, "/ws/")
    for site in (host_site, member_site):
        assert (await site.receive_json_from())["type"] == "hello"

    await member_room.send_json_to({"type": "send", "text": "Tell me again about Quillon."})
    for tab in (host_room, member_room):
        frames = await frames_until(tab, reply_done)
        kinds = [
            f["state"] if f["type"] == "recall" else f["type"]
            for f in frames
            if f["type"] in ("recall", "token")
        ]
        # Recall first ("recalling", then its count), then the reply's tokens.
        assert kinds[:2] == ["recalling", "done"] and set(kinds[2:]) == {"token"}
        done = next(f for f in frames if f["type"] == "recall" and f["state"] == "done")
        assert set(done) == {"type", "state", "count"} and done["count"] >= 1

    detail = await host_site.receive_json_from(timeout=10)
    assert detail["type"] == "recall_detail" and detail["room"] == room.pk
    assert detail["detail"]["query"].endswith("Tell me again about Quillon.")
    assert detail["detail"]["kept"] and all("score" in k for k in detail["detail"]["kept"])
    assert len(detail["detail"]["kept"]) + len(detail["detail"]["quotes"]) == done["count"]
    await asyncio.sleep(0.5)
    assert await member_site.receive_nothing(timeout=0.5)  # never the detail, not even hidden

    log = await sync_to_async(RecallLog.objects.get)(room=room)
    assert log.count == done["count"] and log.variant_id is not None
    for socket in (host_room, member_room, host_site, member_site):
        await socket.disconnect()


async def test_memory_off_says_off_and_recalls_nothing(room, host, fake_llm):
    await long_shared_room(room, host, fake_llm)
    await sync_to_async(tuning_services.remember_set)(user=host, on=False)
    fake_llm.script(Reply("Hm.", token_delay=0.0))
    tab = await open_socket(host, f"/ws/rooms/{room.pk}/")
    await tab.send_json_to({"type": "send", "text": "Quillon?"})
    frames = await frames_until(tab, reply_done)
    recalls = [f for f in frames if f["type"] == "recall"]
    assert recalls == [{"type": "recall", "state": "off", "count": 0}]
    assert "Past events" not in str(fake_llm.requests[-1].body["messages"])
    await tab.disconnect()


def preview_page(user, room) -> str:
    client = Client()
    client.force_login(user)
    return client.get(reverse("rooms:preview", args=[room.pk])).content.decode()


@sync_to_async
def detail_status(user, room) -> tuple[int, dict | None]:
    client = Client()
    if user is not None:
        client.force_login(user)
    response = client.get(reverse("memory:recall_detail", args=[room.pk]))
    return response.status_code, response.json() if response.status_code == 200 else None


async def test_the_detail_over_http_is_for_the_host_only_and_is_a_fresh_check(room, host, fake_llm):
    member = await long_shared_room(room, host, fake_llm)
    outsider = await sync_to_async(make_user)(actor=host, username="outsider")
    status, body = await detail_status(host, room)
    assert status == 200 and body == {"state": "none", "fresh": False}
    fake_llm.script(Reply("Yes.", token_delay=0.0))
    tab = await open_socket(host, f"/ws/rooms/{room.pk}/")
    await tab.send_json_to({"type": "send", "text": "Tell me again about Quillon."})
    await frames_until(tab, reply_done)
    await tab.disconnect()

    status, body = await detail_status(host, room)
    assert (
        status == 200
        and body["fresh"] is True
        and body["turn_count"] == len(body["kept"]) + len(body["quotes"])
    )
    assert any(k["seq_from"] <= PLANT_AT <= k["seq_to"] for k in body["kept"])
    preview = await sync_to_async(preview_page)(host, room)
    assert "Recalled memories" in preview and "silver astrolabe" in preview  # the texts, for the host
    assert (await detail_status(member, room))[0] == 403
    assert (await detail_status(outsider, room))[0] == 404
    assert (await detail_status(None, room))[0] == 302


@sync_to_async
def embed_with_the_fake(host, fake_llm):
    roles = connection_selectors.model_roles_get(user=host)
    embedding = connection_services.connection_create(
        owner=host, name="Emb", provider="local", model="fake-embed", api_base=fake_llm.base_url
    )
    connection_services.model_roles_update(
        user=host, chat=roles.chat, utility=None, embedding=embedding, rerank_kind="builtin"
    )


@pytest.mark.parametrize("broken", ["reranker", "embedder"])
async def test_a_broken_reranker_or_embedder_tells_the_host_and_the_reply_still_arrives(
    room, host, fake_llm, broken
):
    if broken == "embedder":
        await embed_with_the_fake(host, fake_llm)  # memory is built with it, then it fails
    await long_shared_room(room, host, fake_llm)
    if broken == "reranker":
        await sync_to_async(rerank_from_nowhere)(host)
        expected, count = "The Rerank model failed", 3 + 4  # three summaries by meaning alone, four quotes
    else:
        fake_llm.embeddings_status = 500
        expected, count = "Your library couldn't be searched", 0
    fake_llm.script(Reply("Still here.", token_delay=0.0))
    tab = await open_socket(host, f"/ws/rooms/{room.pk}/")
    site = await open_socket(host, "/ws/")
    assert (await site.receive_json_from())["type"] == "hello"
    await tab.send_json_to({"type": "send", "text": "Where did Maren bury the silver astrolabe?"})
    frames = await frames_until(tab, reply_done)
    assert "Still here." in frames[-1]["html"]
    assert next(f for f in frames if f["type"] == "recall" and f["state"] == "done")["count"] == count
    pushed = [await site.receive_json_from(timeout=10) for _ in range(2)]
    notices = [f["text"] for f in pushed if f["type"] == "notice"]
    assert notices and notices[0].startswith(expected)
    for socket in (tab, site):
        await socket.disconnect()
