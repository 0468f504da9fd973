from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from orbchat.asgi import application
from orbchat.consumers import CLOSE_UNAUTHENTICATED, user_group
from tests.factories import make_owner

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def session_cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def communicator(cookie: str | None = None, origin: bytes = b"http://127.0.0.1:8000"):
    headers = [(b"origin", origin), (b"host", b"127.0.0.1:8000")]
    if cookie:
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, "/ws/", headers=headers)


async def test_anonymous_websocket_is_refused():
    socket = communicator()
    connected, code = await socket.connect()
    assert not connected and code == CLOSE_UNAUTHENTICATED
    await socket.disconnect()


async def test_signed_in_websocket_is_greeted_and_joins_the_user_group():
    owner = await sync_to_async(make_owner)()
    socket = communicator(await sync_to_async(session_cookie_for)(owner))
    connected, _ = await socket.connect()
    assert connected
    assert await socket.receive_json_from() == {"type": "hello", "user": "owner"}
    await get_channel_layer().group_send(user_group(owner.pk), {"type": "user.notice", "text": "Hi"})
    assert await socket.receive_json_from() == {"type": "notice", "text": "Hi"}
    await socket.send_json_to({"type": "ping"})
    assert await socket.receive_json_from() == {"type": "pong"}
    await socket.disconnect()


async def test_foreign_origin_is_refused_even_when_signed_in():
    owner = await sync_to_async(make_owner)()
    socket = communicator(await sync_to_async(session_cookie_for)(owner), origin=b"http://evil.example")
    connected, _ = await socket.connect()
    assert not connected
    await socket.disconnect()
