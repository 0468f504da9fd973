"""Bound how many HTTP requests the web process works on at once; the rest wait their turn.

Django runs each request's synchronous code on a thread of the request's own. Two hundred
requests at once are two hundred threads taking turns at one interpreter lock: each advances
a little at a time, all finish near the end, and switching between them costs more than the
pages themselves. Letting a few in at a time and queueing the others in the event loop (which
costs nothing) serves the same requests sooner, first come first served. Websockets are not
counted: they live long and spend their time waiting.
"""

from __future__ import annotations

import asyncio

from orbchat import env

# Requests worked on at once. Some wait on the network (a model's Test connection, a search in
# Chroma), so a few more than the cores keep the others moving meanwhile.
HTTP_CONCURRENCY = env.get_int("HTTP_CONCURRENCY", 8)


class ConcurrencyLimit:
    """ASGI middleware: at most `limit` HTTP requests inside `app` at once (0 for no limit)."""

    def __init__(self, app, limit: int = HTTP_CONCURRENCY) -> None:
        self.app = app
        self.limit = limit
        self._slots: asyncio.Semaphore | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or self.limit <= 0:
            await self.app(scope, receive, send)
            return
        if self._slots is None:  # made on first use, in the server's event loop
            self._slots = asyncio.Semaphore(self.limit)
        async with self._slots:
            await self.app(scope, receive, send)
