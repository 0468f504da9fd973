"""The web process works on a bounded number of HTTP requests at once; websockets are not held back."""

from __future__ import annotations

import asyncio

import pytest

from orbchat.httplimit import ConcurrencyLimit

pytestmark = pytest.mark.asyncio


async def test_at_most_the_limit_of_http_requests_are_worked_on_at_once_and_all_are_served():
    inside, peak, served = 0, 0, 0

    async def app(scope, receive, send):
        nonlocal inside, peak, served
        inside += 1
        peak = max(peak, inside)
        await asyncio.sleep(0.005)
        inside -= 1
        served += 1

    limited = ConcurrencyLimit(app, limit=3)
    await asyncio.gather(*(limited({"type": "http"}, None, None) for _ in range(40)))
    assert (peak, served) == (3, 40)


async def test_open_websockets_do_not_take_the_places_of_http_requests():
    release = asyncio.Event()
    served = []

    async def app(scope, receive, send):
        if scope["type"] == "websocket":
            await release.wait()
        else:
            served.append(scope["path"])

    limited = ConcurrencyLimit(app, limit=1)
    sockets = [asyncio.create_task(limited({"type": "websocket"}, None, None)) for _ in range(3)]
    await asyncio.wait_for(limited({"type": "http", "path": "/"}, None, None), timeout=2)
    release.set()
    await asyncio.gather(*sockets)
    assert served == ["/"]
