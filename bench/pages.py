"""Measure how fast the room page is served; print a table and write JSON.

Each build under test is a real daphne serving OrbChat, started as `make run` starts the web
process (the Procfile's `web` command), over the same database: the code of this checkout and,
with `--baseline REF`, the code of that git commit, unpacked into a temporary folder, so both
are measured in one run on one machine under the same load.

- Single user: a room of 10,000 messages (the page shows the newest 200), one request at a time;
  the time from sending the request to having the whole page, on loopback.
- Concurrent: a room of 2,000 messages, `--rounds` bursts of 200 GETs sent at once (by one
  signed-in user, as 200 tabs); requests per second over the bursts, p95 of the requests' times,
  and how many failed (an error status, a broken connection or no answer within 300 s).
- Older page: the 50 messages before a point deep in the 10,000-message room, as the page loads
  them while you scroll up (`rooms:messages?before=N`), one request at a time.
- First token on screen: in Chromium, on the page of a room whose memory is on and built, from
  pressing Send to the reply's first token in the page, with the fake provider answering at once
  (the reply's recall included).

Each server first serves a few warm-up requests, as a page someone already opened has been;
the first view of each room after start (nothing cached) is reported apart. The benchmark makes
its own user, rooms and messages and deletes them afterwards.
"""

from __future__ import annotations

import asyncio
import io
import random
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.urls import reverse

from bench import kit
from memory.services.catch_up import catch_up
from orbchat.connections import services as connections
from orbchat.library import services as library
from rooms import services

SINGLE_ROOM = 10_000
CONCURRENT_ROOM = 2_000
CONCURRENCY = 200
MEMORY_ROOM = 600  # messages in the room whose replies are timed on screen (memory built)
TURNS_ON_SCREEN = 30
WARMUP = 5
SETTLE = 30  # seconds for freshly started web processes to finish warming up
TIMEOUT = 300  # seconds a request may take before it counts as failed
TEXT = (
    '*She sets the lamp down.* "The fog is **thick** tonight," she says, and points at the '
    "[harbour map](https://example.com/map).\n\n- three ships due\n- one overdue\n\n"
    "The keeper counted ships and wrote their names in the ledger, one by one, until the lamp "
    "burned low and the tide turned."
)


# Press Send and resolve with the milliseconds until a new character message shows text.
ON_SCREEN = """
(text) => new Promise((resolve, reject) => {
  const list = document.getElementById("messages");
  const last = () => [...list.querySelectorAll('[data-kind="character"]')].pop();
  const before = last() ? last().id : null;
  const observer = new MutationObserver(() => {
    const item = last();
    if (item && item.id !== before && item.textContent.includes("Fog")) {
      observer.disconnect();
      clearTimeout(timer);
      resolve(performance.now() - start);
    }
  });
  const timer = setTimeout(() => { observer.disconnect(); reject(new Error("no reply in 60 s")); }, 60000);
  observer.observe(list, { childList: true, subtree: true, characterData: true });
  document.getElementById("composer-text").value = text;
  const start = performance.now();
  document.getElementById("send").click();
})
"""


class Bench:
    help = "Benchmark the room page, single user and 200 concurrent GETs."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", help="Where to write the JSON results.")
        parser.add_argument(
            "--baseline", metavar="REF", help="Also measure the code of this git commit, as the baseline."
        )
        parser.add_argument("--requests", type=int, default=50, help="Single-user requests per build.")
        parser.add_argument("--rounds", type=int, default=3, help="Bursts of 200 concurrent GETs per build.")
        parser.add_argument(
            "--baseline-rounds", type=int, default=1, help="Bursts for the baseline (each can take minutes)."
        )

    def handle(
        self, *, out: str | None, baseline: str | None, requests: int, rounds: int, baseline_rounds: int
    ) -> None:
        self.children = kit.Children(prefix="orbchat-bench-pages-")
        with self.children:
            self.children.ensure_redis()  # the web process's channel layer needs one
            self.children.ensure_chroma()  # memory's index, for the room whose replies are timed
            # This checkout first: a baseline's server may still be busy with requests its
            # clients gave up on, and would slow whatever came after it.
            builds = {"new": Path(settings.BASE_DIR)}
            if baseline:
                builds["baseline"] = self._unpack(baseline)
            user = kit.bench_user("bench-pages")
            try:
                single, concurrent = self._rooms(user)
                memory = self._memory_room(user, single)
                cookie = kit.session_cookie(user)
                servers = {
                    name: self.children.start_web(f"web-{name}", ["--proxy-headers"], cwd=folder)
                    for name, folder in builds.items()
                }
                time.sleep(SETTLE)  # each web process imports litellm on a thread as it starts
                results = {name: {"cold": {}} for name in builds}
                for name, url in servers.items():  # warm up every server before measuring any
                    for room in (single, concurrent):
                        page = url + reverse("rooms:room", args=[room.pk])
                        results[name]["cold"][str(room.pk)] = round(self._get(page, cookie), 1)
                        for _ in range(WARMUP):
                            self._get(page, cookie)
                for name, url in servers.items():
                    page = url + reverse("rooms:room", args=[single.pk])
                    times = [self._get(page, cookie) for _ in range(requests)]
                    results[name]["room_page_ms"] = {str(SINGLE_ROOM): kit.summary(times)}
                    print(f"{name}: single user {results[name]['room_page_ms']}", file=sys.stderr)
                for name, url in servers.items():
                    older = url + reverse("rooms:messages", args=[single.pk])
                    rng = random.Random(1)
                    times = [
                        self._get(f"{older}?before={rng.randrange(100, SINGLE_ROOM - 300)}", cookie)
                        for _ in range(requests)
                    ]
                    results[name]["older_page_ms"] = kit.summary(times)
                    print(f"{name}: older page {results[name]['older_page_ms']}", file=sys.stderr)
                results["new"]["first_token_on_screen_ms"] = self._on_screen(servers["new"], cookie, memory)
                print(
                    f"new: first token on screen {results['new']['first_token_on_screen_ms']}",
                    file=sys.stderr,
                )
                for name, url in servers.items():
                    page = url + reverse("rooms:room", args=[concurrent.pk])
                    bursts = baseline_rounds if name == "baseline" else rounds
                    results[name]["concurrent_200"] = asyncio.run(self._bursts(page, cookie, bursts))
                    print(f"{name}: concurrent {results[name]['concurrent_200']}", file=sys.stderr)
                for name in builds:
                    cold = results[name].pop("cold")
                    results[name]["first_view_ms"] = {
                        str(SINGLE_ROOM): cold[str(single.pk)],
                        str(CONCURRENT_ROOM): cold[str(concurrent.pk)],
                    }
                    results[name].setdefault("first_token_on_screen_ms", None)  # this checkout only
            finally:
                user.delete()
        report = {**results["new"], "baseline": results.get("baseline"), "baseline_ref": baseline}
        self._print(results)
        if out:
            kit.write_json(out, report)
            print(f"wrote {out}")

    # Builds and processes -------------------------------------------------------------------

    def _unpack(self, ref: str) -> Path:
        """The files of commit `ref` in a folder of their own (no git state is changed)."""
        folder = self.children.folder / "baseline"
        try:
            archive = subprocess.run(
                ["git", "archive", "--format=tar", ref],
                cwd=settings.BASE_DIR,
                capture_output=True,
                check=True,
            ).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise kit.BenchError(f"Cannot read commit {ref!r} from the git checkout: {exc}") from exc
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        return folder

    # Data -----------------------------------------------------------------------------------

    def _rooms(self, user):
        card = {"name": "Keeper", "description": "Keeps the harbour ledger.", "first_mes": "Welcome."}
        character = library.character_create(owner=user, card=card)
        rooms = []
        for size in (SINGLE_ROOM, CONCURRENT_ROOM):
            room = services.room_create_from_character(host=user, character=character)
            kit.bulk_history(room, range(1, size), text_for=lambda seq: f"{seq}. {TEXT}", tokens=60)
            rooms.append(room)
        kit.settle()
        return rooms

    def _memory_room(self, user, like):
        """A room of MEMORY_ROOM messages whose memory is built, with the fake provider as chat model."""
        from tests.fakes.llm import FakeLLM, Reply

        self.provider = FakeLLM(default=Reply("Fog over the harbour tonight."))
        self.provider.__enter__()
        connections.connection_create(
            owner=user, name="fake", provider="local", model="fake", api_base=self.provider.base_url
        )
        room = services.room_create_from_character(host=user, character=like.seats.get().character)
        kit.bulk_history(room, range(1, MEMORY_ROOM), text_for=lambda seq: f"{seq}. {TEXT}", tokens=60)
        kit.settle()
        catch_up(room.pk)
        return room

    def _on_screen(self, url: str, cookie: str, room) -> dict:
        """Milliseconds from pressing Send to the reply's first token in the page, in Chromium."""
        import os

        from playwright.sync_api import sync_playwright

        chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        times = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=["--headless", "--no-sandbox"]
            )
            try:
                context = browser.new_context(viewport={"width": 1366, "height": 900})
                context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": url}])
                page = context.new_page()
                page.goto(url + reverse("rooms:room", args=[room.pk]))
                page.wait_for_selector('.room[data-socket="open"]')
                for turn in range(TURNS_ON_SCREEN + WARMUP):
                    ms = page.evaluate(ON_SCREEN, f"Turn {turn}: where is the ledger?")
                    if turn >= WARMUP:
                        times.append(ms)
            finally:
                browser.close()
        self.provider.__exit__(None, None, None)
        return kit.summary(times)

    # Measurements ---------------------------------------------------------------------------

    def _get(self, url: str, cookie: str) -> float:
        """Milliseconds from sending a GET to having read the whole page."""
        request = urllib.request.Request(url, headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"})
        start = time.perf_counter()
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            response.read()
            if response.status != 200:
                raise kit.BenchError(f"{url} answered {response.status}")
        return (time.perf_counter() - start) * 1000

    async def _bursts(self, url: str, cookie: str, rounds: int) -> dict:
        import aiohttp

        times: list[float] = []
        errors = 0
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=TIMEOUT)
        headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as session:

            async def one() -> None:
                nonlocal errors
                start = time.perf_counter()
                try:
                    async with session.get(url) as response:
                        await response.read()
                        if response.status != 200:
                            errors += 1
                            return
                except (aiohttp.ClientError, TimeoutError):
                    errors += 1
                    return
                times.append((time.perf_counter() - start) * 1000)

            began = time.perf_counter()
            for _ in range(rounds):
                await asyncio.gather(*(one() for _ in range(CONCURRENCY)))
            elapsed = time.perf_counter() - began
        p95 = kit.summary(times)["p95"] if times else None
        return {
            "req_per_s": round(len(times) / elapsed, 1),
            "p95_ms": p95,
            "errors": errors,
            "requests": CONCURRENCY * rounds,
        }

    def _print(self, results: dict) -> None:
        names = sorted(results, key=lambda name: name != "baseline")  # the baseline first
        print(f"room page (ms unless said), {', '.join(names)}")
        print(f"{'measure':<44}" + "".join(f"{n:>14}" for n in names))

        def row(label: str, pick) -> None:
            print(f"{label:<44}" + "".join(f"{str(pick(results[n])):>14}" for n in names))

        row(
            f"{SINGLE_ROOM:,} messages, single user, p50",
            lambda r: r["room_page_ms"][str(SINGLE_ROOM)]["p50"],
        )
        row(
            f"{SINGLE_ROOM:,} messages, single user, p95",
            lambda r: r["room_page_ms"][str(SINGLE_ROOM)]["p95"],
        )
        row(f"{SINGLE_ROOM:,} messages, first view", lambda r: r["first_view_ms"][str(SINGLE_ROOM)])
        row(f"{CONCURRENT_ROOM:,} messages, first view", lambda r: r["first_view_ms"][str(CONCURRENT_ROOM)])
        row("older page of 50 messages, p95", lambda r: (r["older_page_ms"] or {}).get("p95"))
        row("send -> first token on screen, p95", lambda r: (r["first_token_on_screen_ms"] or {}).get("p95"))
        row(f"{CONCURRENCY} concurrent GETs, req/s", lambda r: r["concurrent_200"]["req_per_s"])
        row(f"{CONCURRENCY} concurrent GETs, p95", lambda r: r["concurrent_200"]["p95_ms"])
        row(f"{CONCURRENCY} concurrent GETs, errors", lambda r: r["concurrent_200"]["errors"])
