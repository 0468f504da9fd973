"""Measure a turn's overhead and the added streaming latency; print a table and write JSON.

Everything runs as it does in use, one process each: a real daphne serving OrbChat, the fake
zero-latency OpenAI-compatible provider (`python -m tests.fakes.llm`), and the "browsers" —
websocket clients in this process. The three share one clock (time.perf_counter_ns is the
machine's monotonic clock).

Overhead: from the moment a client sends its message on the room socket to the moment the
provider has the request, at 100, 1,000, 10,000 and 100,000 messages of history.
Token latency: from the provider writing a token to a room socket receiving it, with 1 and 20
sockets open on the room.

With `--while-backfilling`, the overhead at 10,000 messages and the token latency with 20 tabs
are measured once more while a real 10,000-message backfill runs in a real worker on the same
machine (`bench.load`); only the samples taken while a backfill was running count.

The benchmark makes its own user, rooms and messages and deletes them afterwards.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.request

from django.conf import settings

from bench import kit
from bench.load import Backfilling
from orbchat.connections import services as connections
from orbchat.library import services as library
from rooms import services, tokens

SIZES = (100, 1_000, 10_000, 100_000)
TABS = (1, 20)
WARMUP = 3
FILLER = (
    "The fog rolled over the harbour while the keeper counted ships and wrote their names. " * 3
).strip()


def summary(values: list[float]) -> dict:
    return {**kit.summary(values, 2, nearest=True), "n": len(values)}


class Bench:
    help = "Benchmark turn overhead and streaming latency."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", required=True, help="Where to write the JSON results.")
        parser.add_argument("--turns", type=int, default=100, help="Measured turns per history size.")
        parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
        parser.add_argument(
            "--while-backfilling",
            action="store_true",
            help="Also measure at 10,000 messages and 20 tabs while a 10,000-message backfill runs.",
        )

    def handle(self, *, out: str, turns: int, sizes: str, while_backfilling: bool) -> None:
        self.children = kit.Children()
        with self.children:
            self.children.ensure_redis()  # the channel layer needs one (no `make run` up)
            self.children.ensure_chroma()  # memory's index, for the turns' recall and the worker
            self.provider = self._start_provider()
            user, character = self._setup()
            try:
                self.web = self.children.start_web("web")
                results = asyncio.run(self._run(user, character, [int(s) for s in sizes.split(",")], turns))
                if while_backfilling:
                    results["while_backfilling"] = self._while_backfilling(user, character, turns)
            finally:
                user.delete()
        kit.write_json(out, results)
        self._print(results)
        print(f"wrote {out}")

    # Processes ------------------------------------------------------------------------------

    def _start_provider(self) -> str:
        port = kit.free_port()
        args = [
            sys.executable,
            "-m",
            "tests.fakes.llm",
            "--port",
            str(port),
            "--reply",
            "OK.",
            "--token-delay",
            "0",
        ]
        child = self.children.spawn("provider", args)
        url = f"http://127.0.0.1:{port}"
        kit.wait_until(lambda: kit.answers(f"{url}/_requests"), "the fake provider", child, 60)
        return url

    def _provider_requests(self) -> list[dict]:
        with urllib.request.urlopen(f"{self.provider}/_requests", timeout=10) as response:
            return json.loads(response.read())["requests"]

    def _script(self, replies: list[dict]) -> None:
        request = urllib.request.Request(
            f"{self.provider}/_script",
            data=json.dumps({"replies": replies}).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).close()

    # Data -----------------------------------------------------------------------------------

    def _setup(self):
        user = kit.bench_user("bench")
        connections.connection_create(
            owner=user, name="fake", provider="local", model="fake", api_base=f"{self.provider}/v1"
        )
        card = {"name": "Bench", "description": "A keeper of ships' names.", "first_mes": "Welcome."}
        return user, library.character_create(owner=user, card=card)

    def _room(self, user, character, size: int):
        """A room whose history already holds `size` messages (bulk-inserted, counted once)."""
        room = services.room_create_from_character(host=user, character=character)
        count = tokens.count(FILLER)
        kit.bulk_history(room, range(1, size), text_for=lambda seq: f"{seq}: {FILLER}", tokens=count)
        kit.settle()
        return room

    # Measurements ---------------------------------------------------------------------------

    async def _socket(self, cookie: str, room_id: int):
        from websockets.asyncio.client import connect

        uri = self.web.replace("http://", "ws://") + f"/ws/rooms/{room_id}/"
        return await connect(
            uri,
            origin=self.web,
            additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"},
            max_size=None,
        )

    async def _until_done(self, socket, on_frame=None, timeout: float = 60) -> None:
        """Receive until this turn's reply is done.

        The reply is the character message created during the turn; events render the message
        as it is when they are sent, so a fast reply's creation may already show it done.
        """
        slot = None
        while True:
            frame = json.loads(await asyncio.wait_for(socket.recv(), timeout))
            if on_frame is not None:
                on_frame(frame)
            if frame["type"] == "notice":
                raise kit.BenchError(f"turn failed: {frame['text']}")
            if frame["type"] != "message":
                continue
            if frame.get("created") and 'data-kind="character"' in frame["html"]:
                slot = frame["id"]
            if frame["id"] == slot and "streaming" not in frame["html"]:
                return

    async def _run(self, user, character, sizes: list[int], turns: int) -> dict:
        from asgiref.sync import sync_to_async

        cookie = await sync_to_async(kit.session_cookie)(user)
        overhead = {}
        for size in sizes:
            room = await sync_to_async(self._room)(user, character, size)
            overhead[str(size)] = summary(await self._overhead(cookie, room.pk, turns))
            print(f"overhead at {size} messages: {overhead[str(size)]}", file=sys.stderr)
        latency = {}
        room = await sync_to_async(self._room)(user, character, 100)
        for tabs in TABS:
            latency[str(tabs)] = summary(await self._latency(cookie, room.pk, tabs))
            print(f"token latency with {tabs} tabs: {latency[str(tabs)]}", file=sys.stderr)
        return {"overhead_ms": overhead, "token_latency_ms": latency}

    def _while_backfilling(self, user, character, turns: int) -> dict:
        from asgiref.sync import sync_to_async

        async def measure(load: Backfilling) -> dict:
            cookie = await sync_to_async(kit.session_cookie)(user)
            room = await sync_to_async(self._room)(user, character, 10_000)
            overhead = summary(await self._overhead(cookie, room.pk, turns, keep=load.running))
            print(f"overhead at 10000 messages while backfilling: {overhead}", file=sys.stderr)
            room = await sync_to_async(self._room)(user, character, 100)
            latency = summary(await self._latency(cookie, room.pk, 20, keep=load.running))
            print(f"token latency with 20 tabs while backfilling: {latency}", file=sys.stderr)
            return {"overhead_ms": {"10000": overhead}, "token_latency_ms": {"20": latency}}

        with Backfilling(self.children, user, character) as load:
            results = asyncio.run(measure(load))
            results["backfills"] = load.backfills
        return results

    async def _overhead(self, cookie: str, room_id: int, turns: int, keep=lambda: True) -> list[float]:
        socket = await self._socket(cookie, room_id)
        samples = []
        try:
            for i in range(turns + WARMUP):  # the first turns warm caches and are not counted
                before = len(await asyncio.to_thread(self._provider_requests))
                start = time.perf_counter_ns()
                await socket.send(json.dumps({"type": "send", "text": f"Message {i} for the bench."}))
                await self._until_done(socket)
                arrived = (await asyncio.to_thread(self._provider_requests))[before]["at_ns"]
                if i >= WARMUP and keep():
                    samples.append((arrived - start) / 1e6)
        finally:
            await socket.close()
        return samples

    async def _latency(self, cookie: str, room_id: int, tabs: int, keep=lambda: True) -> list[float]:
        sockets = [await self._socket(cookie, room_id) for _ in range(tabs)]
        samples: list[float] = []

        async def collect(socket, counted: bool) -> None:
            def take(frame: dict) -> None:
                received = time.perf_counter_ns()
                if frame["type"] == "token" and counted and keep():
                    samples.extend((received - int(stamp)) / 1e6 for stamp in frame["delta"].split())

            await self._until_done(socket, on_frame=take)

        try:
            # The first long stream warms the server's streaming path; it is not counted.
            for counted in (False, True):
                reply = {"text": "x " * 200, "stamp_tokens": True, "token_delay": 0.005}
                await asyncio.to_thread(self._script, [reply])
                await sockets[0].send(json.dumps({"type": "send", "text": "Stream, please."}))
                await asyncio.gather(*(collect(s, counted) for s in sockets))
        finally:
            for socket in sockets:
                await socket.close()
        return samples

    def _print(self, results: dict) -> None:
        print("turn overhead (message sent -> request at the provider), ms")
        print(f"{'history':>10} {'p50':>8} {'p95':>8} {'n':>5}")
        for size, row in results["overhead_ms"].items():
            print(f"{int(size):>10,} {row['p50']:>8} {row['p95']:>8} {row['n']:>5}")
        print("added token latency (provider writes -> room socket receives), ms")
        print(f"{'tabs':>10} {'p50':>8} {'p95':>8} {'n':>5}")
        for tabs, row in results["token_latency_ms"].items():
            print(f"{tabs:>10} {row['p50']:>8} {row['p95']:>8} {row['n']:>5}")
        loaded = results.get("while_backfilling")
        if loaded:
            print(f"while a 10,000-message backfill runs in the worker ({loaded['backfills']} started), ms")
            row = loaded["overhead_ms"]["10000"]
            print(f"{'overhead at 10,000':>20} {row['p50']:>8} {row['p95']:>8} {row['n']:>5}")
            row = loaded["token_latency_ms"]["20"]
            print(f"{'token latency, 20 tabs':>20} {row['p50']:>8} {row['p95']:>8} {row['n']:>5}")
