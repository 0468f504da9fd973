"""Measure Corpus search: `python -m bench corpus --data locomo10.json --out FILE.json`.

Part 1, quality: the LoCoMo conversations become rooms of one host (turns as messages), their
scenes are built by the real `memory.services.indexing.index_scenes` (tier-0 blocks of 8 messages, every
block including the last, unfinished one), and every question is asked through
`corpus.search.search(target="scenes", limit=10)`; a question is a hit when a returned scene's seq
range holds one of its evidence turns. The fused ranking is compared with meaning alone and words
alone, asked in the question's own room (as the BM25 reference is) and across all the host's rooms.
The closeness threshold is calibrated from the best cosine of answered questions against
off-topic and gibberish queries. With `--memories`, the rooms also get their (extractive) memory,
and the Memories target is measured and calibrated the same way.

Part 2, speed: one host with 50 rooms × 2,000 messages (12,500 scenes). Messages and Scene rows
are bulk-created and the scenes written with the real `memory.index.upsert_scenes`; their texts
and vectors are Part 1's LoCoMo scenes reused (embedding 12,500 chunks again would dominate the
run), so the search path — the vector query, the word index, fusion — is the real one.
About 200 questions are then timed.

The LoCoMo file is non-commercial (CC BY-NC 4.0): read it from where it lies, never copy it here.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import time
from pathlib import Path

from bench import kit, locomo, recall
from corpus import ranking, search
from memory import index
from memory.drafts import Line
from memory.models import Scene
from memory.selectors import block_tuning, reading_generation, tuning_get
from memory.services.catch_up import catch_up
from memory.services.indexing import generations_ensure, index_scenes, scene_text
from orbchat.connections import embedder
from orbchat.library import services as library
from rooms import services as rooms
from rooms.models import Room

# (fusion, asked in the question's own room?)
VARIANTS: dict[str, tuple[ranking.Fusion, bool]] = {
    "fused": (ranking.Fusion(), True),
    "fused_rrf60_even": (ranking.Fusion(k=60, lexical_weight=1.0), True),
    "dense": (ranking.Fusion(method=ranking.DENSE), True),
    "lexical": (ranking.Fusion(method=ranking.LEXICAL), True),
    "fused_all_rooms": (ranking.Fusion(), False),
    "dense_all_rooms": (ranking.Fusion(method=ranking.DENSE), False),
    "lexical_all_rooms": (ranking.Fusion(method=ranking.LEXICAL), False),
}
PRIMARY = "fused"
K = 10
# Queries nothing in a chat between friends is really close to (the closeness calibration's negatives).
OFF_TOPIC = [
    "quantum chromodynamics lattice gauge theory",
    "kubernetes pod eviction policy",
    "how to configure a BGP route reflector",
    "the melting point of tungsten carbide",
    "eigenvalues of a hermitian matrix",
    "compile the linux kernel with clang",
    "interest rate swap valuation",
    "mitochondrial DNA haplogroup migration",
    "postgres vacuum freeze wraparound",
    "torque specification for cylinder head bolts",
    "the Treaty of Westphalia 1648",
    "photosynthesis light-independent reactions",
    "assembly language interrupt vector table",
    "tax depreciation schedule for commercial property",
    "superconducting qubit decoherence time",
    "soil nitrogen fixation by legumes",
    "the byzantine generals problem",
    "carburetor float needle adjustment",
    "tensile strength of structural steel",
    "the diffraction limit of a telescope",
    "medieval canon law on tithes",
    "sql index fragmentation rebuild",
    "volcanic pyroclastic flow velocity",
    "insulin receptor tyrosine kinase",
    "HTTP/2 header compression",
    "the hydraulic press brake tonnage",
    "ancient sumerian cuneiform tablets",
    "orbital mechanics hohmann transfer",
    "pharmacokinetics of warfarin",
    "zoning variance application process",
]
GIBBERISH = 30  # random letter strings


class Bench(recall.Bench):
    help = "Benchmark Corpus search on LoCoMo (hit@10 per category) and at scale (latency); table + JSON."
    label = "bench corpus"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--data", required=True, help="locomo10.json (or a file shaped like it)")
        parser.add_argument("--out", required=True)
        parser.add_argument("--conversations", type=int, default=0, help="only the first N (0: all)")
        parser.add_argument("--questions", type=int, default=0, help="at most N per conversation (0: all)")
        parser.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
        parser.add_argument("--memories", action="store_true", help="also build and measure Memories")
        parser.add_argument("--dump", default="", help="write every question's top-100 rankings here (JSON)")
        parser.add_argument("--scale-rooms", type=int, default=50, help="0 skips the scale run")
        parser.add_argument("--scale-messages", type=int, default=2000)
        parser.add_argument("--scale-queries", type=int, default=200)

    def handle(self, *, data: str, out: str, **options) -> None:
        started = time.perf_counter()
        self.data = Path(data)
        conversations = locomo.load_locomo(data)[: options["conversations"] or None]
        names = [n for n in options["variants"].split(",") if n] or list(VARIANTS)
        unknown = set(names) - set(VARIANTS)
        if unknown:
            raise kit.BenchError(f"unknown variants: {', '.join(sorted(unknown))}")
        with self._services("orbchat-bench-corpus-"):
            results = self._quality(
                conversations, options["questions"], names, options["memories"], options["dump"]
            )
            if options["scale_rooms"]:
                results["scale"] = self._scale(
                    conversations, options["scale_rooms"], options["scale_messages"], options["scale_queries"]
                )
                results["search_ms"] = results["scale"]["search_ms"]
        results["wall_s"] = round(time.perf_counter() - started, 1)
        kit.write_json(out, results)
        print(format_table(results["variants"]))
        print(f"questions with evidence: {results['n_questions']}")
        for target, chosen in results["closeness"].items():
            print(
                f"closeness ({target}): best cosine >= {chosen['threshold']} "
                f"(answered judged close {chosen['answered_close']:.3f}, "
                f"off-topic judged close {chosen['off_topic_close']:.3f})"
            )
        scale = results.get("scale")
        if scale:
            ms = scale["search_ms"]
            print(
                f"scale: {scale['rooms']} rooms x {scale['messages_per_room']:,} messages, "
                f"{scale['scenes']:,} scenes: search p50 {ms['p50']} ms, p95 {ms['p95']} ms "
                f"(target p95 <= 150 ms); first search {scale['first_ms']} ms, "
                f"after a new scene {scale['after_new_scene_ms']} ms"
            )
        print(f"wrote {out} in {results['wall_s']:.0f} s")

    # Part 1: quality --------------------------------------------------------------------------------

    def _build(self, user, conversation: locomo.Conversation, memories: bool):
        """A room holding the conversation, with its scenes (and memory) built by the real services."""
        room, seqs = self._room(user, conversation, [0] * len(conversation.turns))
        t = block_tuning(tuning_get())
        if memories:
            catch_up(room.pk)
        # Every block, the last unfinished one too: a question may be about the latest turns.
        index_scenes(
            room, fresh_start=room.next_seq + t.block_size - 1, t=t, generations=generations_ensure(user)
        )
        return room, seqs

    def _quality(
        self, conversations, per_conversation: int, names: list[str], memories: bool, dump: str = ""
    ) -> dict:
        user = self._user("locomo")
        embedder.embed(["warm up"])
        records: dict[str, list[dict]] = {name: [] for name in names}
        memory_records: list[dict] = []
        dumped: list[dict] = []
        for number, conversation in enumerate(conversations, 1):
            clock = time.perf_counter()
            room, seqs = self._build(user, conversation, memories)
            self.progress(
                f"{conversation.sample_id} ({number}/{len(conversations)}): {len(conversation.turns)} turns "
                f"built in {time.perf_counter() - clock:.1f} s"
            )
            clock = time.perf_counter()
            questions = [qa for qa in conversation.questions if qa.evidence][: per_conversation or None]
            for qa in questions:
                evidence = [seqs[key] for key in qa.evidence]
                for name in names:
                    fusion, own_room = VARIANTS[name]
                    found = search.search(
                        user,
                        target="scenes",
                        q=qa.question,
                        room_ids=[room.pk] if own_room else None,
                        limit=K,
                        fusion=fusion,
                    )
                    if found.notice:
                        self.progress(f"{name}: {found.notice}")
                    records[name].append(_record(qa.category, found, evidence))
                if memories:
                    found = search.search(user, target="memories", q=qa.question, room_ids=[room.pk], limit=K)
                    memory_records.append(_record(qa.category, found, evidence))
                if dump:
                    dumped.append(_rankings(user, room.pk, qa, evidence))
            self.progress(
                f"{conversation.sample_id}: {len(questions)} questions x {len(names)} variants "
                f"in {time.perf_counter() - clock:.1f} s"
            )
        if dump:
            generation = reading_generation(user)
            ids, texts, metas = index.index_documents(generation, "scenes", where={"host": user.pk})
            Path(dump).write_text(json.dumps({"questions": dumped, "scenes": [ids, texts, metas]}))
        variants = {name: _summary(rows) for name, rows in records.items()}
        negatives = _negatives(OFF_TOPIC, GIBBERISH)
        closeness = {"scenes": self._calibrate(user, "scenes", records.get(PRIMARY) or [], negatives)}
        if memories:
            variants["memories_fused"] = _summary(memory_records)
            closeness["memories"] = self._calibrate(user, "memories", memory_records, negatives)
        primary = variants.get(PRIMARY) or next(iter(variants.values()))
        return {
            "scenes_hit_at_10": primary["hit_at_10"],
            "variants": variants,
            "closeness": closeness,
            "n_questions": len(next(iter(records.values()))),
            "reference_bm25_chunk8_hit_at_10": _reference(self.data),
        }

    def _calibrate(self, user, target: str, answered: list[dict], negatives: list[str]) -> dict:
        """Pick the cosine that best separates answered questions from off-topic queries."""
        positives = [r["best_cosine"] for r in answered if r["hit"] and r["best_cosine"] is not None]
        off: list[float] = []
        judged_close = 0
        for query in negatives:
            found = search.search(user, target=target, q=query, limit=K)
            off.append(found.best_cosine if found.best_cosine is not None else 0.0)
            judged_close += found.close
        chosen = calibrate(positives, off)
        chosen["current"] = ranking.CLOSE_COSINE[target]
        chosen["current_answered_close"] = _share(positives, ranking.CLOSE_COSINE[target])
        chosen["current_off_topic_close"] = _share(off, ranking.CLOSE_COSINE[target])
        # What the list says now (cosine or every query word in the best hit).
        chosen["flag_answered_close"] = round(
            sum(r["close"] for r in answered if r["hit"]) / max(1, len(positives)), 4
        )
        chosen["flag_off_topic_close"] = round(judged_close / len(negatives), 4)
        return chosen

    # Part 2: speed ------------------------------------------------------------------------------------

    def _scale(self, conversations, rooms_n: int, per_room: int, queries_n: int) -> dict:
        import numpy as np

        t = block_tuning(tuning_get())
        source_user = self.users[0]
        source = reading_generation(source_user)
        ids, texts, metas = index.index_documents(source, "scenes", where={"host": source_user.pk})
        vectors = index.index_vectors(source, "scenes", ids)
        pool = [
            (text, np.asarray(vectors[id_], dtype=np.float32)) for id_, text in zip(ids, texts, strict=True)
        ]
        if not pool:
            raise kit.BenchError("part 1 built no scenes to reuse")
        rng = random.Random(rooms_n * per_room)
        noise = np.random.default_rng(rooms_n)
        user = self._user("scale")
        generation = generations_ensure(user)[0]
        start = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
        clock = time.perf_counter()
        total_scenes = 0
        for number in range(rooms_n):
            card = {"name": f"Keeper {number}", "description": "A friend.", "first_mes": ""}
            character = library.character_create(owner=user, card=card)
            room = rooms.room_create_from_character(host=user, character=character)
            blocks = -(-per_room // t.block_size)
            picks = [rng.randrange(len(pool)) for _ in range(blocks)]
            lines: list[tuple[int, str, str]] = []  # (seq, speaker, text)
            for block, pick in enumerate(picks):
                for offset, line in enumerate(_lines_of(pool[pick][0])[: t.block_size]):
                    lines.append((block * t.block_size + offset, *line))
            lines = [line for line in lines if line[0] < per_room]
            when = start + dt.timedelta(days=number * 7)
            text_of = {seq: text for seq, _, text in lines}
            speaker_of = {seq: speaker for seq, speaker, _ in lines}
            kit.bulk_history(
                room,
                list(text_of),
                text_for=text_of.get,
                tokens=30,
                speaker_for=speaker_of.get,
                person_odd=False,
                next_seq=per_room,
                batch=1000,
            )
            by_block: dict[int, list[tuple[int, str, str]]] = {}
            for line in lines:
                by_block.setdefault(line[0] // t.block_size, []).append(line)
            scenes, chunk_texts, speakers, chunk_vectors = [], [], [], []
            for block, block_lines in sorted(by_block.items()):
                text = scene_text([Line(seq=s, speaker=p, text=x) for s, p, x in block_lines])
                scenes.append(
                    Scene(
                        room=room,
                        block=block,
                        seq_from=block_lines[0][0],
                        seq_to=block_lines[-1][0],
                        text_hash=index.text_hash(text),
                        indexed_hash=index.text_hash(text),
                        first_at=when + dt.timedelta(minutes=block_lines[0][0]),
                    )
                )
                chunk_texts.append(text)
                speakers.append(", ".join(dict.fromkeys(p for _, p, _ in block_lines)))
                vector = pool[picks[block]][1] + noise.normal(0, 0.02, pool[picks[block]][1].shape).astype(
                    np.float32
                )
                chunk_vectors.append((vector / np.linalg.norm(vector)).tolist())
            Scene.objects.bulk_create(scenes, batch_size=1000)
            for first in range(0, len(scenes), 1000):
                index.upsert_scenes(
                    generation,
                    scenes[first : first + 1000],
                    chunk_texts[first : first + 1000],
                    speakers[first : first + 1000],
                    chunk_vectors[first : first + 1000],
                )
            total_scenes += len(scenes)
            if (number + 1) % 10 == 0:
                self.progress(
                    f"scale: {number + 1}/{rooms_n} rooms, {total_scenes:,} scenes, "
                    f"{time.perf_counter() - clock:.0f} s"
                )
        kit.settle()
        built_s = time.perf_counter() - clock

        questions = [qa.question for c in conversations for qa in c.questions]
        rng.shuffle(questions)
        # Distinct questions for each timed run (a query asked again skips embedding: cached).
        pool_n = queries_n + 150
        asked = (questions * (1 + pool_n // max(1, len(questions))))[:pool_n]
        queries, filtered_queries, host_queries = asked[:queries_n], asked[-150:-100], asked[-100:]
        search.forget_word_indexes()
        first = search.search(user, target="scenes", q="warm up the word index", limit=K)
        stage_names = ("scope", "word_index", "words", "embed", "vectors", "wait", "hits")
        latencies: list[float] = []
        stages: dict[str, list[float]] = {name: [] for name in stage_names}
        for query in queries:
            found = search.search(user, target="scenes", q=query, limit=K)
            if found.notice:
                self.progress(f"scale: {found.notice}")
            latencies.append(found.ms)
            for name in stage_names:
                stages[name].append(found.timings.get(name, 0.0))
        filtered = []
        room_ids = list(Room.objects.filter(host=user).values_list("pk", flat=True))
        for query in filtered_queries:
            found = search.search(
                user,
                target="scenes",
                q=query,
                room_ids=rng.sample(room_ids, min(5, len(room_ids))),
                date_from=dt.date(2023, 3, 1),
                limit=K,
            )
            filtered.append(found.ms)
        # The same questions with a separate {"host": ...} clause in the vector query's filter.
        with_host = []
        plain_filter = search.vector_filter

        def host_filter(rooms, at_from, at_to):
            where = plain_filter(rooms, at_from, at_to)
            return {"$and": [{"host": user.pk}, *where.get("$and", [where])]}

        search.vector_filter = host_filter
        try:
            for query in host_queries:
                with_host.append(search.search(user, target="scenes", q=query, limit=K).ms)
        finally:
            search.vector_filter = plain_filter
        # One scene more (as a chat's next block ages out): the next search fetches only that text.
        extra = scenes[-1]
        extra.pk, extra.block = None, extra.block + 1
        extra.seq_from, extra.seq_to = extra.seq_from + t.block_size, extra.seq_to + t.block_size
        Scene.objects.bulk_create([extra])
        index.upsert_scenes(generation, [extra], [chunk_texts[-1]], [speakers[-1]], [chunk_vectors[-1]])
        after_change = search.search(user, target="scenes", q="after a new scene", limit=K)
        result = {
            "rooms": rooms_n,
            "messages_per_room": per_room,
            "scenes": total_scenes,
            "built_s": round(built_s, 1),
            "queries": len(latencies),
            "first_ms": round(first.ms, 1),
            "after_new_scene_ms": round(after_change.ms, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()],  # the machine is shared
            "search_ms": kit.summary(latencies),
            "filtered_search_ms": kit.summary(filtered),
            "with_host_clause_search_ms": kit.summary(with_host),
            "stage_ms_p50": {name: round(locomo.percentile(v, 50), 1) for name, v in stages.items()},
            "stage_ms_p95": {name: round(locomo.percentile(v, 95), 1) for name, v in stages.items()},
        }
        self.progress(f"scale: {json.dumps(result)}")
        return result


_LINE_RE = re.compile(r"^#\d+ (.+?): (.*)$")


def _lines_of(text: str) -> list[tuple[str, str]]:
    """(speaker, text) of a scene's lines."""
    found = []
    for line in text.splitlines():
        match = _LINE_RE.match(line)
        if match:
            found.append((match[1], match[2]))
        elif found:
            found[-1] = (found[-1][0], f"{found[-1][1]}\n{line}")
    return found


def _rankings(user, room_id: int, qa: locomo.Question, evidence: list[int]) -> dict:
    """A question's top-100 by meaning and by words, in its room and across all rooms."""
    ranked = {}
    for method in (ranking.DENSE, ranking.LEXICAL):
        for scope, room_ids in (("room", [room_id]), ("all", None)):
            found = search.search(
                user,
                target="scenes",
                q=qa.question,
                room_ids=room_ids,
                limit=100,
                fusion=ranking.Fusion(method=method, candidates=100),
            )
            ranked[f"{method}_{scope}"] = [
                (h.key, h.seq_from, h.seq_to, round(h.score, 4)) for h in found.hits
            ]
    return {
        "q": qa.question,
        "category": qa.category,
        "room": room_id,
        "evidence": evidence,
        "ranked": ranked,
    }


def _record(category: str, found, evidence: list[int]) -> dict:
    ranges = [(h.seq_from, h.seq_to) for h in found.hits if h.seq_from is not None and h.seq_to is not None]
    return {
        "category": category,
        "hit": any(lo <= seq <= hi for seq in evidence for lo, hi in ranges),
        "best_cosine": found.best_cosine,
        "close": found.close,
        "ms": found.ms,
    }


def _summary(rows: list[dict]) -> dict:
    return {
        "hit_at_10": locomo.by_category((r["category"], 1.0 if r["hit"] else 0.0) for r in rows),
        "close": locomo.by_category((r["category"], 1.0 if r["close"] else 0.0) for r in rows),
        "ms": kit.summary([r["ms"] for r in rows]),
        "n": len(rows),
    }


def _negatives(off_topic: list[str], gibberish: int) -> list[str]:
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    noise = [
        " ".join(
            "".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(rng.randint(2, 5))
        )
        for _ in range(gibberish)
    ]
    return off_topic + noise


def _share(values: list[float], threshold: float) -> float:
    return round(sum(v >= threshold for v in values) / len(values), 4) if values else 0.0


def calibrate(positives: list[float], negatives: list[float]) -> dict:
    """The threshold (in steps of 0.01) with the best answered-close minus off-topic-close share."""
    best = {"threshold": 0.0, "answered_close": 0.0, "off_topic_close": 0.0, "j": -1.0}
    for step in range(0, 101):
        threshold = step / 100
        tpr, fpr = _share(positives, threshold), _share(negatives, threshold)
        if tpr - fpr > best["j"]:
            best = {
                "threshold": threshold,
                "answered_close": tpr,
                "off_topic_close": fpr,
                "j": round(tpr - fpr, 4),
            }
    best["answered"] = len(positives)
    best["off_topic"] = len(negatives)
    best["answered_p10"] = round(locomo.percentile(positives, 10), 3)
    best["off_topic_p90"] = round(locomo.percentile(negatives, 90), 3)
    return best


def _reference(data: Path) -> float | None:
    """The plain-BM25 8-turn-chunk hit@10 (categories 1–4) from the reference beside the data, if any."""
    path = data.parent / "locomo10_bm25_reference.csv"
    try:
        for line in path.read_text().splitlines():
            cells = line.split(",")
            if cells[:2] == ["chunk8", "hit_any@10"]:
                return float(cells[7]) / 100
    except OSError:
        return None
    return None


def format_table(variants: dict[str, dict]) -> str:
    """Variants × hit@10 per category and latency, as aligned plain text."""
    header = [
        "variant",
        "hit@10 1-4",
        *(f"c{k} {locomo.CATEGORY_NAMES[k][:6]}" for k in locomo.CATEGORIES),
        "ms p50",
        "ms p95",
    ]
    rows = [header]
    for name, v in variants.items():
        hit = v["hit_at_10"]
        rows.append(
            [
                name,
                *("-" if hit.get(key) is None else f"{hit[key]:.3f}" for key in locomo.KEYS),
                f"{v['ms']['p50']:.1f}",
                f"{v['ms']['p95']:.1f}",
            ]
        )
    return locomo.aligned(rows)
