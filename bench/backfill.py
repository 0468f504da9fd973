"""Measure memory backfill: `python -m bench backfill --out FILE.json`.

Builds a synthetic 10,000-message room, backfills it with the built-in extractive summariser and
then with the fake provider as Utility model, and times summaries, scene indexing and — in the
same run, on the same texts — the raw embedding model: on the scene chunks alone, and on every
text the backfill embedded (summaries, chunks, message passages, facts), whose time over the whole
backfill's is `indexing_vs_raw`. Then the catch-up that follows each reply once the memory is
built (one message more at a time), also split into the replies that complete a block and the
others. Prints a table and writes the JSON.

In the worker: the Procfile's `worker` (niced, one process, as `make run` starts it)
backfills a third room of the same size, queued as an import queues it; its time and the peak
resident memory of the worker's processes (the main process and any pool child it forks, summed,
sampled every 50 ms; and their proportional set size, in which a page a forked child shares with
its parent counts once) are the worker's figures. The benchmark's own process also holds the rooms it builds
and both in-process backfills; its peak is reported beside as `bench_process_rss_mb`.

Cold start: a fresh web process (daphne, as `make run` starts it) beside a worker; from the
moment its /healthz first answers 200 (when `make run` says "ready") to the first token of a
reply in the built room, its recall included, with the fake provider answering at once.
"""

from __future__ import annotations

import asyncio
import json
import random
import resource
import time
import urllib.request

import psutil
from django.conf import settings

from bench import kit
from bench.load import start_worker
from memory import index, selectors, tasks
from memory.models import Fact, RoomMemory, Scene, Summary
from memory.services.catch_up import backfill, catch_up
from memory.services.indexing import scene_text, turn_passages
from orbchat.connections import embedder
from orbchat.connections import services as connections
from orbchat.library import services as library
from rooms import services

NAMES = ["Maren", "Tobin", "Harrow", "Ilse", "Corwin", "Esk", "Wren", "Dunmore"]
PLACES = ["the lighthouse", "Inchfallow", "the customs house", "the seal rocks", "the fog bell", "the ferry"]
THINGS = ["brass key", "tide ledger", "lamp wick", "sea chart", "iron lantern", "salt box", "signal flag"]
VERBS = ["found", "hid", "lost", "mended", "sold", "stole", "buried", "carried"]
CATCH_UPS = 40  # replies timed after the backfill


def sentence(rng: random.Random) -> str:
    when = f"{rng.choice(['storm', 'bells', 'tide', 'ferry'])} {rng.choice(['came', 'turned', 'rang'])}"
    who, did, what, where = rng.choice(NAMES), rng.choice(VERBS), rng.choice(THINGS), rng.choice(PLACES)
    return f"{who} {did} the {what} near {where} before the {when}."


def message_text(rng: random.Random, seq: int) -> str:
    small = ["Hm.", "Thanks.", "*nods*", "Go on."]
    parts = [sentence(rng) for _ in range(rng.randint(2, 5))]
    if rng.random() < 0.3:
        parts.insert(0, rng.choice(small))
    return f"{' '.join(parts)} (#{seq})"


def raw_encoder_s(texts: list[str]) -> float:
    """Seconds the raw embedding model takes for these texts, in the index's batches."""
    clock = time.perf_counter()
    for start in range(0, len(texts), index.BATCH):
        embedder.embed(texts[start : start + index.BATCH])
    return time.perf_counter() - clock


class Bench:
    help = "Benchmark memory backfill on a synthetic 10,000-message room (table + JSON)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", required=True)
        parser.add_argument("--messages", type=int, default=10_000)

    def handle(self, *, out: str, messages: int) -> None:
        with kit.Children() as children:
            children.ensure_chroma()
            children.ensure_redis()  # the cold start's web process and worker need one
            self.children = children
            results = self._run(messages)
        kit.write_json(out, results)
        self._print(results)
        print(f"wrote {out}")

    def _room(self, user, character, size: int):
        rng = random.Random(size)
        room = services.room_create_from_character(host=user, character=character)
        kit.bulk_history(room, range(1, size), text_for=lambda seq: message_text(rng, seq), tokens=40)
        kit.settle()
        return room

    def _run(self, size: int) -> dict:
        from tests.fakes.llm import FakeLLM, Reply

        user = kit.bench_user("bench")
        try:
            card = {"name": "Maren", "description": "Keeper of the light.", "first_mes": "Welcome."}
            character = library.character_create(owner=user, card=card)
            embedder.embed(["warm up"])  # load the model before the clock starts

            room = self._room(user, character, size)
            started = time.perf_counter()
            extractive = backfill(room.pk)
            extractive_s = time.perf_counter() - started

            # The raw encoder on the very texts the backfill embedded: the scene chunks alone (as
            # before), then every text it embedded (summaries, chunks, message passages, facts).
            chunks, groups = [], []
            for scene in Scene.objects.filter(room=room).select_related("room").order_by("block"):
                lines = selectors.message_lines(scene.room, scene.seq_from, scene.seq_to + 1)
                chunks.append(scene_text(lines))
                groups.append((scene.room_id, scene.block, lines))
            raw_per_s = len(chunks) / raw_encoder_s(chunks)
            everything = [
                *Summary.objects.filter(room=room).values_list("text", flat=True),
                *chunks,
                *turn_passages(groups)[1],
                *Fact.objects.filter(room=room).values_list("text", flat=True),
            ]
            raw_all_s = raw_encoder_s(everything)

            after_reply = self._catch_ups(room, size, random.Random(1))
            worker = start_worker(self.children)
            in_worker = self._in_worker(worker, user, character, size)
            to_ready_s, cold_s = self._cold_first_token(user, room)

            reply = Reply(
                json.dumps(
                    {
                        "heading": "Maren and the Traveller at the lighthouse",
                        "facts": [
                            "The brass key was hidden near the fog bell.",
                            "Harrow sold the tide ledger.",
                        ],
                        "keywords": ["brass key", "fog bell", "tide ledger"],
                    }
                )
            )
            with FakeLLM(default=reply) as llm:
                utility = connections.connection_create(
                    owner=user, name="fake", provider="local", model="fake-utility", api_base=llm.base_url
                )
                connections.model_roles_update(
                    user=user, chat=None, utility=utility, embedding=None, rerank_kind="builtin"
                )
                second = self._room(user, character, size)
                clock = time.perf_counter()
                with_llm = backfill(second.pk)
                llm_s = time.perf_counter() - clock
        finally:
            user.delete()
        chunks_per_s = (
            extractive.scenes_indexed / extractive.index_scenes_s if extractive.index_scenes_s else 0.0
        )
        return {
            "messages": size,
            "summaries": extractive.written,
            "scenes": extractive.scenes_indexed,
            "summaries_per_s": {
                "extractive": round(extractive.written / extractive.summarise_s, 1),
                "fake_llm": round(with_llm.written / with_llm.summarise_s, 1),
            },
            "chunks_per_s": round(chunks_per_s, 1),
            "raw_encoder_per_s": round(raw_per_s, 1),
            "indexing_vs_raw": round(raw_all_s / extractive_s, 3),
            "raw_encoder_all": {"texts": len(everything), "seconds": round(raw_all_s, 1)},
            "backfill_10k_s": round(extractive_s, 1),
            "backfill_10k_fake_llm_s": round(llm_s, 1),
            "catch_up_after_reply": after_reply,
            "cold_first_token_s": round(cold_s, 2),
            "cold_start_to_ready_s": round(to_ready_s, 2),
            "backfill_10k_worker_s": in_worker["seconds"],
            "worker_rss_mb": in_worker["total_mb"],
            "worker_rss_parts_mb": {"main": in_worker["main_mb"], "pool": in_worker["pool_mb"]},
            "worker_pss_mb": in_worker["pss_mb"],
            "bench_process_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }

    def _in_worker(self, worker, user, character, size: int) -> dict:
        """Backfill a fresh room in the real worker; its time and the worker's peak memory."""
        room = self._room(user, character, size)
        main = psutil.Process(worker.pid)
        peaks = {"main": 0, "pool": 0, "total": 0, "pss": 0}
        tasks.backfill_start(room.pk)
        clock = time.perf_counter()
        while True:
            try:
                pool = main.children(recursive=True)
                main_rss = main.memory_info().rss
                pool_rss = sum(p.memory_info().rss for p in pool)
                # Proportional set size: a page the pool child shares with the main process
                # (forked, copy-on-write) counts once between them, not once in each.
                pss = sum(p.memory_full_info().pss for p in [main, *pool])
            except psutil.NoSuchProcess as exc:
                raise kit.BenchError("the worker stopped during the backfill") from exc
            for key, value in (
                ("main", main_rss),
                ("pool", pool_rss),
                ("total", main_rss + pool_rss),
                ("pss", pss),
            ):
                peaks[key] = max(peaks[key], value)
            phase = selectors.backfill_progress(room.pk)["phase"]
            if phase == RoomMemory.Backfill.DONE:
                break
            if phase not in (
                RoomMemory.Backfill.RUNNING,
                RoomMemory.Backfill.QUEUED,
                RoomMemory.Backfill.IDLE,
            ):
                raise kit.BenchError(f"the worker's backfill ended as {phase}")
            if time.perf_counter() - clock > 3600:
                raise kit.BenchError("the worker's backfill took over an hour")
            time.sleep(0.05)
        return {
            "seconds": round(time.perf_counter() - clock, 1),
            **{f"{key}_mb": round(value / 2**20, 1) for key, value in peaks.items()},
        }

    def _catch_ups(self, room, size: int, rng: random.Random) -> dict:
        """Time the catch-up that follows each reply once the room's memory is built: one message
        more, then `catch_up`, CATCH_UPS times (every 8th completes a block, which is written)."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        times, queries, completing, other = [], [], [], []
        for seq in range(size, size + CATCH_UPS):
            kit.bulk_history(room, [seq], text_for=lambda seq: message_text(rng, seq), tokens=40)
            before = Summary.objects.filter(room=room).count()
            with CaptureQueriesContext(connection) as captured:
                clock = time.perf_counter()
                catch_up(room.pk)
                times.append((time.perf_counter() - clock) * 1000)
            queries.append(len(captured.captured_queries))
            wrote = Summary.objects.filter(room=room).count() > before
            (completing if wrote else other).append(times[-1])
        return {
            **kit.summary(times),
            "max_queries": max(queries),
            "n": len(times),
            # The reply that completes a block writes its summary, chunk, passages and facts.
            "completing_a_block": {**kit.summary(completing), "n": len(completing)},
            "other": {**kit.summary(other), "n": len(other)},
        }

    def _cold_first_token(self, user, room) -> tuple[float, float]:
        """Start a fresh web process: (seconds from its start to /healthz's first 200, seconds from
        then to the first token of a reply)."""
        from tests.fakes.llm import FakeLLM, Reply

        with FakeLLM(default=Reply("The fog lifts at dawn.")) as llm:
            connections.connection_create(
                owner=user, name="fake chat", provider="local", model="fake-chat", api_base=llm.base_url
            )
            started = time.perf_counter()
            web = self.children.start_web("web")
            while True:
                try:
                    with urllib.request.urlopen(f"{web}/healthz", timeout=10) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                time.sleep(0.05)
            ready = time.perf_counter()
            cookie = kit.session_cookie(user)
            asyncio.run(self._first_token(web, cookie, room.pk))
            return ready - started, time.perf_counter() - ready

    async def _first_token(self, web: str, cookie: str, room_id: int) -> None:
        from websockets.asyncio.client import connect

        uri = web.replace("http://", "ws://") + f"/ws/rooms/{room_id}/"
        headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
        async with connect(uri, origin=web, additional_headers=headers, max_size=None) as socket:
            await socket.send(json.dumps({"type": "send", "text": "Where did Maren hide the brass key?"}))
            while True:
                frame = json.loads(await asyncio.wait_for(socket.recv(), 120))
                if frame["type"] == "notice" and "memory" not in frame.get("text", "").lower():
                    raise kit.BenchError(f"the first reply failed: {frame['text']}")
                if frame["type"] == "token":
                    return

    def _print(self, r: dict) -> None:
        after = r["catch_up_after_reply"]
        rows = [
            ("summaries written", f"{r['summaries']}"),
            ("summaries/s, extractive", f"{r['summaries_per_s']['extractive']}"),
            ("summaries/s, fake Utility model", f"{r['summaries_per_s']['fake_llm']}"),
            ("scene chunks embedded/s (indexing)", f"{r['chunks_per_s']}"),
            ("raw encoder, same texts/s", f"{r['raw_encoder_per_s']}"),
            (
                f"raw encoder on all {r['raw_encoder_all']['texts']:,} texts embedded",
                f"{r['raw_encoder_all']['seconds']} s",
            ),
            ("raw encoder / whole backfill, same texts (target >= 0.9)", f"{r['indexing_vs_raw']}"),
            (
                f"backfill of {r['messages']:,} messages, extractive (target <= 40 s)",
                f"{r['backfill_10k_s']} s",
            ),
            (
                f"backfill of {r['messages']:,} messages, fake Utility model",
                f"{r['backfill_10k_fake_llm_s']} s",
            ),
            (
                f"catch-up after each reply at {r['messages']:,} messages, p50 / p95",
                f"{after['p50']} / {after['p95']} ms, at most {after['max_queries']} queries",
            ),
            (
                "  of those completing a block / the others, p95",
                f"{after['completing_a_block']['p95']} ms ({after['completing_a_block']['n']}) / "
                f"{after['other']['p95']} ms ({after['other']['n']})",
            ),
            (
                f"backfill of {r['messages']:,} messages in the worker, extractive",
                f"{r['backfill_10k_worker_s']} s",
            ),
            (
                "worker resident memory, peak (target <= 700 MB)",
                f"{r['worker_rss_mb']} MB (main {r['worker_rss_parts_mb']['main']}, "
                f"pool {r['worker_rss_parts_mb']['pool']})",
            ),
            ("worker memory without shared pages counted twice (PSS), peak", f"{r['worker_pss_mb']} MB"),
            ("this benchmark's process, peak", f"{r['bench_process_rss_mb']} MB"),
            ("cold start: web process start -> ready", f"{r['cold_start_to_ready_s']} s"),
            ("cold start: ready -> first token (target <= 2 s)", f"{r['cold_first_token_s']} s"),
        ]
        width = max(len(name) for name, _ in rows)
        for name, value in rows:
            print(f"{name.ljust(width)}  {value}")
