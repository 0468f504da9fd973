"""The sockets' defences: who may open one, what a bad frame gets, who is cut off, who is online.

In-process sockets run the real ASGI application on the real Redis channel layer; the tests
that name a real server talk to daphne over TCP as a browser does.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
import websockets
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from websockets.asyncio.client import connect

from orbchat.accounts import services as account_services
from orbchat.asgi import application
from rooms import members, services, turns
from tests import services as test_services
from tests.factories import join, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

HOST = b"127.0.0.1:8000"
ORIGIN = b"http://127.0.0.1:8000"


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def socket_to(path: str, user=None, *, origin: bytes | None = ORIGIN, host: bytes = HOST):
    headers = [(b"host", host)]
    if origin is not None:
        headers.append((b"origin", origin))
    if user is not None:
        cookie = await sync_to_async(cookie_for)(user)
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def opened(path: str, user, **kwargs) -> WebsocketCommunicator:
    socket = await socket_to(path, user, **kwargs)
    connected, _ = await socket.connect()
    assert connected
    return socket


async def until(socket, predicate, timeout: float = 10) -> dict:
    while True:
        frame = await socket.receive_json_from(timeout=timeout)
        if predicate(frame):
            return frame


async def until_closed(socket, timeout: float = 10) -> tuple[dict, list[dict]]:
    seen = []
    while True:
        output = await socket.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            return output, seen
        seen.append(json.loads(output["text"]))


async def settle() -> None:
    while turns.running:
        await asyncio.sleep(0.05)


@pytest.fixture
def member(host, room):
    person = make_user(actor=host, username="member")
    join(room, person)
    return person


# Origin ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/ws/", "room"])
async def test_only_the_sites_own_origin_may_open_a_socket_not_another_port_or_scheme(room, member, path):
    path = f"/ws/rooms/{room.pk}/" if path == "room" else path
    for origin in (b"http://127.0.0.1:9999", b"https://127.0.0.1:8000", b"http://127.0.0.1", None):
        socket = await socket_to(path, member, origin=origin)
        connected, _ = await socket.connect()
        assert not connected, origin
        await socket.disconnect()
    socket = await opened(path, member)
    await socket.disconnect()


async def test_an_origin_listed_in_csrf_trusted_origins_may_open_a_socket_behind_a_proxy(member, settings):
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com"]
    # TLS ends at the proxy: daphne sees ws:// and the public host name.
    host = b"chat.example.com"
    socket = await opened("/ws/", member, origin=b"https://chat.example.com", host=host)
    assert (await socket.receive_json_from())["type"] == "hello"
    await socket.disconnect()
    refused = await socket_to("/ws/", member, origin=b"https://chat.example.com:8443", host=host)
    connected, _ = await refused.connect()
    assert not connected
    await refused.disconnect()


async def test_a_real_server_refuses_a_page_on_another_port_and_serves_its_own(live_site, host):
    cookie = await sync_to_async(cookie_for)(host)
    uri = live_site.replace("http://", "ws://") + "/ws/"
    headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
    other_port = live_site.rsplit(":", 1)[0] + ":9"
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(uri, origin=other_port, additional_headers=headers)
    assert refused.value.response.status_code == 403
    async with connect(uri, origin=live_site, additional_headers=headers) as socket:
        assert json.loads(await asyncio.wait_for(socket.recv(), 10)) == {"type": "hello", "user": "host"}


# Malformed frames -------------------------------------------------------------------------------

BAD_FRAMES = [
    "this is not JSON",
    "[1, 2, 3]",
    '"send"',
    '{"text": "no type"}',
    '{"type": 5}',
    '{"type": "dance"}',
    '{"type": "send", "text": {"nested": "object"}}',
    '{"type": "speak", "seat": [1]}',
    '{"type": "swipe", "message": null, "direction": "left"}',
    '{"type": "swipe", "message": 1, "direction": "up"}',
    '{"type": "speak_next", "seat": "x"}',
    '{"type": "speak_next", "seat": 1, "on": "no"}',
]


@pytest.mark.parametrize("frame", BAD_FRAMES)
async def test_a_malformed_room_frame_gets_an_error_in_words_and_the_socket_stays_open(host, room, frame):
    before = await sync_to_async(room.messages.count)()
    socket = await opened(f"/ws/rooms/{room.pk}/", host)
    await socket.send_to(text_data=frame)
    error = await until(socket, lambda f: f["type"] in ("error", "notice"))
    assert error["type"] == "error" and error["message"].endswith(".")
    seat = await sync_to_async(room.seats.get)()
    await socket.send_json_to({"type": "speak_next", "seat": seat.pk, "on": True})
    assert (await until(socket, lambda f: f["type"] == "people"))["type"] == "people"
    assert await sync_to_async(room.messages.count)() == before  # nothing was saved from the bad frame
    await settle()
    await socket.disconnect()


async def test_a_malformed_frame_on_the_site_socket_gets_an_error_and_the_socket_stays_open(host):
    socket = await opened("/ws/", host)
    assert (await socket.receive_json_from())["type"] == "hello"
    await socket.send_to(text_data="{not json")
    error = await socket.receive_json_from()
    assert error["type"] == "error" and "not JSON" in error["message"]
    await socket.send_json_to({"type": "ping"})
    assert await socket.receive_json_from() == {"type": "pong"}
    await socket.disconnect()


# Cut off at once --------------------------------------------------------------------------------


async def test_a_deactivated_members_sockets_close_at_once_and_receive_nothing_more(host, room, member):
    room_socket = await opened(f"/ws/rooms/{room.pk}/", member)
    site_socket = await opened("/ws/", member)
    assert (await site_socket.receive_json_from())["type"] == "hello"
    await sync_to_async(account_services.user_set_active)(actor=host, user=member, active=False)

    closed, frames = await until_closed(room_socket)  # the member sent nothing: it is pushed
    assert closed["code"] == 4404
    assert {"type": "notice", "text": "Your account was deactivated."} in frames
    closed, frames = await until_closed(site_socket)
    assert closed["code"] == 4401
    assert frames == [{"type": "notice", "text": "Your account was deactivated."}]

    await sync_to_async(services.message_create)(room=room, author=host, text="Not for the deactivated.")
    assert await room_socket.receive_nothing(timeout=1)
    await room_socket.disconnect()
    await site_socket.disconnect()


async def test_a_deactivated_hosts_socket_to_their_own_room_closes_at_once(host, member):
    character = await sync_to_async(member.characters.first)()
    theirs = await sync_to_async(services.room_create_from_character)(host=member, character=character)
    socket = await opened(f"/ws/rooms/{theirs.pk}/", member)
    await sync_to_async(account_services.user_set_active)(actor=host, user=member, active=False)
    closed, _ = await until_closed(socket)
    assert closed["code"] == 4404
    await socket.disconnect()


async def test_a_kicked_members_socket_receives_nothing_of_the_room_after_it_closes(host, room, member):
    socket = await opened(f"/ws/rooms/{room.pk}/", member)
    await sync_to_async(members.member_kick)(room=room, user_id=member.pk)
    closed, _ = await until_closed(socket)
    assert closed["code"] == 4404
    await sync_to_async(services.message_create)(room=room, author=host, text="After the member left.")
    assert await socket.receive_nothing(timeout=1)
    await socket.disconnect()


async def test_a_real_socket_of_a_deactivated_member_is_closed_before_the_next_message(
    live_site, host, room, member
):
    cookie = await sync_to_async(cookie_for)(member)
    uri = live_site.replace("http://", "ws://") + f"/ws/rooms/{room.pk}/"
    headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
    async with connect(uri, origin=live_site, additional_headers=headers) as socket:
        await asyncio.wait_for(socket.recv(), 10)  # who is online: the socket is in the room
        await sync_to_async(account_services.user_set_active)(actor=host, user=member, active=False)
        frames = []
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                frames.append(json.loads(await asyncio.wait_for(socket.recv(), 10)))
        assert closed.value.rcvd.code == 4404
        assert {"type": "notice", "text": "Your account was deactivated."} in frames
    await sync_to_async(services.message_create)(room=room, author=host, text="Never seen by the member.")
    assert not any(f["type"] == "message" for f in frames)


# Presence ---------------------------------------------------------------------------------------


async def test_someone_whose_server_died_without_closing_their_socket_is_offline_within_the_lifetime(
    host, room, member, child_env, tmp_path, settings
):
    settings.PRESENCE_TTL = 2
    watcher = await opened(f"/ws/rooms/{room.pk}/", host)
    server, url = await sync_to_async(test_services.start_web)(tmp_path, {**child_env, "PRESENCE_TTL": "2"})
    try:
        cookie = await sync_to_async(cookie_for)(member)
        uri = url.replace("http://", "ws://") + f"/ws/rooms/{room.pk}/"
        headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
        vanished = await connect(uri, origin=url, additional_headers=headers, close_timeout=0.1)
        await until(watcher, lambda f: f["type"] == "online" and f["users"] == sorted([host.pk, member.pk]))
        os.killpg(server.popen.pid, signal.SIGKILL)  # no disconnect runs
        died = asyncio.get_running_loop().time()
        await until(watcher, lambda f: f["type"] == "online" and f["users"] == [host.pk], timeout=6)
        # Gone within its lifetime plus one renewal of the watcher (a third of it).
        assert asyncio.get_running_loop().time() - died < 2 + 2 / 3 + 0.5
        await vanished.close()
    finally:
        server.stop()
        await watcher.disconnect()
