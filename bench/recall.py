"""Measure recall on LoCoMo: `python -m bench recall --data locomo10.json --out FILE.json`.

Each conversation is ingested into two rooms through the real services (speaker_a is the person,
speaker_b the character), and memory is built by `memory.services.catch_up.catch_up` twice: with the
built-in extractive summariser, and with an *observation* Utility model — a local stand-in that
answers each block with the dataset's own observation facts for the turns in it. Every question is
then asked as the latest user message and the Memory section is scored against the answer and the
evidence turns, beside baselines (BM25, dense turns, dense 8-turn chunks, recency) held to the same
word budget per question. A synthetic 100,000-message room times recall at scale.

With `--while-backfilling`, the last conversation's questions are asked once more of the default
system, embedding as the web process does (`embedder.serve_web`), while a real 10,000-message
backfill runs in a real worker on the same machine (`bench.load`); only the questions asked
while a backfill was running count.

The LoCoMo file is non-commercial (CC BY-NC 4.0): read it from where it lies, never copy it here.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import random
import re
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench import kit, locomo
from bench.backfill import NAMES, PLACES, THINGS, message_text, sentence
from bench.load import Backfilling
from memory import blocks, extractive, index, models
from memory.blocks import block_range
from memory.drafts import MAX_FACTS, MAX_KEYWORDS, Draft, render, shorten, when_label
from memory.models import SHARED, Summary, VectorIndex
from memory.recall import recaller
from memory.selectors import block_tuning, memory_on, tuning_get
from memory.services.catch_up import catch_up
from memory.services.indexing import generations_ensure
from memory.services.summaries import keyword_words
from memory.summarize import MAX_PROMPT_MESSAGE
from orbchat.connections import embedder
from orbchat.connections import services as connections
from orbchat.connections.embedder import DIMENSIONS
from orbchat.library import services as library
from orbchat.prompting.assemble import default_count_tokens
from rooms import services as rooms
from rooms import tokens
from rooms.models import Message, Room, Variant

LIVE = 8  # the live window: the last 8 turns are in the prompt, not in memory
CONTEXT = 8192  # tokens of context the memory budget is a share of
NO_FACTS = {"facts_per_reply": 0}
MEMORY_SYSTEMS = {
    # name: (room, tuning changes). Both rooms hold facts (the memory cycle runs in every
    # catch-up); the summaries-only systems recall none of them.
    "mixC_extractive": ("extractive", NO_FACTS),
    "mixC_observation": ("observation", NO_FACTS),
    "semantic_observation": ("observation", {**NO_FACTS, "mode": "semantic"}),
    "nokeyword_observation": ("observation", {**NO_FACTS, "keyword_match": False}),
    "tier0_observation": ("observation", {**NO_FACTS, "max_tier": 0}),
    "noquotes_observation": ("observation", {**NO_FACTS, "quotes_on": False}),
    "noquotes_extractive": ("extractive", {**NO_FACTS, "quotes_on": False}),
    # Summaries alone given more of the budget (8 summaries recalled, not 3): what the facts'
    # words would buy if they went to summaries instead.
    "wide_observation": ("observation", {**NO_FACTS, "keep": 8}),
    "facts_observation": ("observation", {}),  # summaries + the observation stand-in's facts
    "facts_extractive": ("extractive", {}),  # summaries + the built-in extractor's facts
}
BASELINES = ("bm25_turns", "dense_turns", "dense_chunk8", "recency")
SYSTEMS = (*MEMORY_SYSTEMS, *BASELINES)
BUDGET_SYSTEM = "mixC_observation"  # the system whose words set the baselines' budget
FACTS_SYSTEM = "facts_observation"
FACTS_MARGIN = 0.05  # answer containment (categories 1–4) summaries + facts must gain to be the default


# The observation Utility model -------------------------------------------------------------------

_LINE_RE = re.compile(r"^#(\d+) (.+?): (.*)$")
_NOTE_RE = re.compile(r"(?:^|\n\n)Note \d+:\n")


class ObservationModel:
    """A local OpenAI-compatible server that summarises with LoCoMo's observation facts.

    A block prompt is answered with the facts whose dia ids lie among the block's turns (found by
    their text), headed with the speakers and the session dates; a roll-up prompt with its notes'
    facts, cut to the normal number of facts (at least one from each note first). The memory
    manager (a request with tools) is answered with a create_fact call for each of those facts
    of the block, citing the messages it comes from: what a Utility model would extract, as the
    summaries stand in for its notes.
    """

    def __init__(self) -> None:
        self.conversation: locomo.Conversation | None = None
        self.by_text: dict[str, list[tuple[int, str]]] = {}
        self.seqs: dict[str, int] = {}  # each turn's seq by dia id
        self.requests = 0
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "no route", "type": "not_found"}})
                    return
                messages = body.get("messages") or []
                if body.get("tools"):
                    calls = model.manage(messages)
                    message = {"role": "assistant", "content": None, "tool_calls": calls}
                    finish = "tool_calls" if calls else "stop"
                else:
                    message = {"role": "assistant", "content": model.answer(messages)}
                    finish = "stop"
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{secrets.token_hex(6)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "observation"),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ObservationModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def load(self, conversation: locomo.Conversation, seqs: dict[str, int]) -> None:
        """Answer for this conversation from now on (turn texts as the prompt shows them)."""
        by_text: dict[str, list[tuple[int, str]]] = {}
        for turn in conversation.turns:
            key = shorten(turn.text, MAX_PROMPT_MESSAGE)
            by_text.setdefault(key, []).append((seqs[turn.dia_id], turn.dia_id))
        with self._lock:
            self.conversation, self.by_text, self.seqs = conversation, by_text, dict(seqs)

    def answer(self, messages: list[dict]) -> str:
        with self._lock:
            self.requests += 1
            conversation, by_text = self.conversation, self.by_text
        prompt = str(messages[-1].get("content", "")) if messages else ""
        if conversation is None:
            return json.dumps({"heading": "", "facts": [], "keywords": []})
        if prompt.startswith("Notes, oldest first:"):
            return json.dumps(self._rollup(conversation, prompt))
        return json.dumps(self._block(conversation, by_text, prompt))

    def manage(self, messages: list[dict]) -> list[dict]:
        """The memory manager's tool calls for one block: create each of its observation facts."""
        with self._lock:
            self.requests += 1
            conversation, by_text, seqs = self.conversation, self.by_text, self.seqs
        prompt = str(messages[-1].get("content", "")) if messages else ""
        if conversation is None:
            return []
        _, _, transcript = prompt.partition("Transcript:\n")
        ids = self._ids(by_text, transcript)
        cited: dict[str, list[int]] = {}  # each fact of the block, and the messages it comes from
        for fact, keys in conversation.facts:
            found = [seqs[key] for key in keys if key in ids]
            if found:
                cited.setdefault(fact, []).extend(found)
        speakers = (conversation.speaker_a, conversation.speaker_b)
        calls = []
        for fact, messages in cited.items():
            subjects = [name for name in speakers if name in fact]
            subjects += [name for name in extractive.proper_names(fact) if name not in subjects]
            arguments = {
                "text": fact,
                "category": "event",
                "subjects": subjects[:8],
                "confidence": 0.9,
                "messages": sorted(set(messages)),
            }
            calls.append(
                {
                    "id": f"call_{secrets.token_hex(4)}",
                    "type": "function",
                    "function": {"name": "create_fact", "arguments": json.dumps(arguments)},
                }
            )
        return calls

    def _ids(self, by_text: dict, transcript: str) -> set[str]:
        """The dia ids of the transcript's lines (found by their text)."""
        ids: set[str] = set()
        for line in transcript.splitlines():
            match = _LINE_RE.match(line)
            if not match:
                continue
            found = by_text.get(match[3], [])
            if len(found) > 1:  # the same words said twice: the line's own seq decides
                found = [pair for pair in found if pair[0] == int(match[1])] or found[:1]
            ids.update(dia for _, dia in found)
        return ids

    def _names(self, conversation: locomo.Conversation) -> str:
        return f"{conversation.speaker_a} and {conversation.speaker_b}"

    def _keywords(self, conversation: locomo.Conversation, facts: list[str]) -> list[str]:
        speakers = {conversation.speaker_a.casefold(), conversation.speaker_b.casefold()}
        names = extractive.proper_names(" ".join(facts))
        return [name for name in names if name.casefold() not in speakers][:MAX_KEYWORDS]

    def _block(self, conversation: locomo.Conversation, by_text: dict, prompt: str) -> dict:
        _, _, transcript = prompt.partition("Transcript:\n")
        ids = self._ids(by_text, transcript)
        facts = [fact for fact, keys in conversation.facts if any(key in ids for key in keys)]
        facts = list(dict.fromkeys(facts))
        days = [turn.when for turn in conversation.turns if turn.dia_id in ids]
        heading = f"{self._names(conversation)}, {when_label(days)}".rstrip(", ")
        return {"heading": heading, "facts": facts, "keywords": self._keywords(conversation, facts)}

    def _rollup(self, conversation: locomo.Conversation, prompt: str) -> dict:
        body = prompt.removeprefix("Notes, oldest first:").rsplit("\n\nWrite the JSON object", 1)[0]
        notes = [note.strip() for note in _NOTE_RE.split(body) if note.strip()]
        children: list[list[str]] = []
        days: list[dt.date] = []
        keywords: dict[str, int] = {}
        shown: dict[str, str] = {}
        for note in notes:
            lines = note.splitlines()
            days.extend(extractive.heading_parts(lines[0])[3] if lines else [])
            children.append([line[2:].strip() for line in lines[1:] if line.startswith("- ")])
            for line in lines[1:]:
                if line.startswith("Keywords: "):
                    for word in line.removeprefix("Keywords: ").split(", "):
                        key = word.strip().casefold()
                        if key:
                            keywords[key] = keywords.get(key, 0) + 1
                            shown.setdefault(key, word.strip())
        picked: list[tuple[int, int]] = []
        seen: set[str] = set()
        depth = max((len(facts) for facts in children), default=0)
        for position in range(depth):  # the first fact of each note, then the second, ...
            for child, facts in enumerate(children):
                if len(picked) >= MAX_FACTS:
                    break
                if position < len(facts) and facts[position].casefold() not in seen:
                    seen.add(facts[position].casefold())
                    picked.append((child, position))
        facts = [children[c][p] for c, p in sorted(picked)]
        order = {key: index for index, key in enumerate(shown)}
        merged = sorted(keywords, key=lambda key: (-keywords[key], order[key]))
        heading = f"{self._names(conversation)}, {when_label(days)}".rstrip(", ")
        return {"heading": heading, "facts": facts, "keywords": [shown[k] for k in merged][:MAX_KEYWORDS]}


# The benchmark -------------------------------------------------------------------------------------------


class Bench:
    help = "Benchmark recall on LoCoMo against baselines at the same word budget (table + JSON)."
    label = "bench recall"  # progress lines start with it

    def add_arguments(self, parser) -> None:
        parser.add_argument("--data", required=True, help="locomo10.json (or a file shaped like it)")
        parser.add_argument("--out", required=True)
        parser.add_argument("--conversations", type=int, default=0, help="only the first N (0: all)")
        parser.add_argument("--questions", type=int, default=0, help="at most N per conversation (0: all)")
        parser.add_argument("--scale-messages", type=int, default=100_000, help="0 skips the scale run")
        parser.add_argument("--scale-turns", type=int, default=100)
        parser.add_argument(
            "--while-backfilling",
            action="store_true",
            help="Also time the default system's recall while a 10,000-message backfill runs.",
        )

    def handle(self, *, data: str, out: str, **options) -> None:
        started = time.perf_counter()
        conversations = locomo.load_locomo(data)[: options["conversations"] or None]
        with self._services("orbchat-bench-recall-"):
            results = self._run(conversations, options["questions"])
            if options["scale_messages"]:
                results["scale_100k"] = self._scale(options["scale_messages"], options["scale_turns"])
            if options["while_backfilling"]:
                results["while_backfilling"] = self._while_backfilling()
        kit.write_json(out, results)
        print(locomo.format_table(results["systems"]))
        print(f"questions: {results['n_questions']}; default: {results['default']}")
        print("facts written: " + ", ".join(f"{k} {v:,}" for k, v in results["facts_written"].items()))
        scale = results.get("scale_100k")
        if scale:
            lat = scale["latency_ms"]
            print(
                f"scale: {scale['messages']:,} messages, pool {scale['pool']}, "
                f"recall p50 {lat['p50']} ms, p95 {lat['p95']} ms (target p95 <= 120 ms)"
            )
        loaded = results.get("while_backfilling")
        if loaded:
            lat = loaded["latency_ms"]
            print(
                f"while backfilling: recall p50 {lat['p50']} ms, p95 {lat['p95']} ms over {loaded['n']} "
                f"questions (target p95 <= 80 ms)"
            )
        print(f"wrote {out} in {time.perf_counter() - started:.0f} s")

    def progress(self, text: str) -> None:
        sys.stderr.write(f"[{self.label}] {text}\n")
        sys.stderr.flush()

    # Services and users --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _services(self, prefix: str):
        """Chroma for the run (a private one when none answers); the users made meanwhile go after it."""
        self.users: list = []
        with kit.Children(prefix) as children:
            self.children = children
            try:
                children.ensure_chroma()
                children.ensure_redis()  # the broker of --while-backfilling's worker
                yield
            finally:
                self._clean_up()

    def _user(self, label: str):
        user = kit.bench_user(f"bench-recall-{label}")
        self.users.append(user)
        return user

    def _clean_up(self) -> None:
        for user in self.users:
            try:
                for room in list(user.hosted_rooms.all()):
                    rooms.room_delete(room=room)
                for generation in VectorIndex.objects.filter(user=user):
                    index.drop_generation(generation)
                user.delete()
            except Exception as exc:  # noqa: BLE001 - clean what can be cleaned, say what could not
                self.progress(f"could not clean up {user.username}: {exc}")

    # Ingest ---------------------------------------------------------------------------------------

    def _room(self, user, conversation: locomo.Conversation, counts: list[int]):
        """A room holding the conversation: speaker_a as the person, speaker_b as the character.

        Returns the room and each turn's seq by dia id.
        """
        card = {"name": conversation.speaker_b, "description": "A friend.", "first_mes": ""}
        character = library.character_create(owner=user, card=card)
        room = rooms.room_create_from_character(host=user, character=character)
        room.refresh_from_db()
        seat = room.seats.get()
        first = room.next_seq
        human = {conversation.speaker_a}
        made = Message.objects.bulk_create(
            [
                Message(
                    room=room,
                    seq=first + index,
                    kind=Message.Kind.HUMAN if turn.speaker in human else Message.Kind.CHARACTER,
                    author=user if turn.speaker in human else None,
                    seat=None if turn.speaker in human else seat,
                    speaker_name=turn.speaker,
                )
                for index, turn in enumerate(conversation.turns)
            ]
        )
        if not made or made[0].pk is None:
            made = list(Message.objects.filter(room=room, seq__gte=first).order_by("seq"))
        for message, turn in zip(made, conversation.turns, strict=True):
            message.created_at = turn.when
        Message.objects.bulk_update(made, ["created_at"], batch_size=500)
        Variant.objects.bulk_create(
            [
                Variant(message=m, room=room, index=0, text=turn.text, tokens=count)
                for m, turn, count in zip(made, conversation.turns, counts, strict=True)
            ]
        )
        Room.objects.filter(pk=room.pk).update(next_seq=first + len(made))
        room.refresh_from_db()
        kit.settle()
        return room, {turn.dia_id: first + index for index, turn in enumerate(conversation.turns)}

    # The benchmark --------------------------------------------------------------------------------

    def _run(self, conversations: list[locomo.Conversation], per_conversation: int) -> dict:
        tuning = tuning_get()
        budget = int(CONTEXT * tuning.budget_share)
        variants = {name: _variant(tuning, **changes) for name, (_, changes) in MEMORY_SYSTEMS.items()}
        records: dict[str, list[dict]] = {name: [] for name in SYSTEMS}
        facts_written = {"extractive": 0, "observation": 0}
        extractive_host = self._user("extractive")
        observation_host = self._user("observation")
        model = ObservationModel().start()
        try:
            utility = connections.connection_create(
                owner=observation_host,
                name="Observation stand-in",
                provider="local",
                model="observation",
                api_base=model.base_url,
            )
            connections.model_roles_update(
                user=observation_host, chat=None, utility=utility, embedding=None, rerank_kind="builtin"
            )
            embedder.embed(["warm up"])
            for number, conversation in enumerate(conversations, 1):
                clock = time.perf_counter()
                counts = [tokens.count(turn.text) for turn in conversation.turns]
                rooms = {}
                room, seqs = self._room(extractive_host, conversation, counts)
                report = catch_up(room.pk)
                rooms["extractive"] = room
                built_extractive = time.perf_counter() - clock
                clock = time.perf_counter()
                room, seqs = self._room(observation_host, conversation, counts)
                model.load(conversation, seqs)
                report_obs = catch_up(room.pk)
                rooms["observation"] = room
                built_observation = time.perf_counter() - clock
                for name, room in rooms.items():
                    facts_written[name] += models.Fact.objects.filter(room=room).count()
                    if not memory_on(room, tuning):
                        raise kit.BenchError(f"memory is off for the {name} room: check the tuning and host")
                self.progress(
                    f"{conversation.sample_id} ({number}/{len(conversations)}): "
                    f"{len(conversation.turns)} turns; "
                    f"extractive {report.written} summaries in {built_extractive:.1f} s, "
                    f"observation {report_obs.written} in {built_observation:.1f} s"
                    + (f" ({'; '.join(report_obs.problems)[:200]})" if report_obs.problems else "")
                )
                questions = conversation.questions[: per_conversation or None]
                default = _default(records)
                self.last = (
                    conversation,
                    questions,
                    seqs,
                    rooms[MEMORY_SYSTEMS[default][0]],
                    variants[default],
                )
                clock = time.perf_counter()
                self._ask(conversation, questions, seqs, rooms, variants, budget, records)
                self.progress(
                    f"{conversation.sample_id}: {len(questions)} questions "
                    f"in {time.perf_counter() - clock:.1f} s"
                )
        finally:
            model.stop()
        return {
            "systems": {name: _summary(records[name]) for name in SYSTEMS},
            "n_questions": len(records[BUDGET_SYSTEM]),
            "default": _default(records),
            "facts_written": facts_written,
        }

    def _ask(self, conversation, questions, seqs, rooms, variants, budget, records) -> None:
        import numpy as np

        turns = conversation.turns
        ordered = sorted(seqs.values())
        live_start = ordered[-LIVE] if len(ordered) >= LIVE else ordered[0]
        last_text = turns[-1].text
        # What the baselines see: the turns before the live window.
        before = [(seqs[t.dia_id], locomo.turn_line(t)) for t in turns if seqs[t.dia_id] < live_start]
        line_of = dict(before)
        turn_seqs = [seq for seq, _ in before]
        bm25 = locomo.BM25([text for _, text in before])
        chunks = locomo.aligned_chunks(turn_seqs, LIVE)
        chunk_texts = ["\n".join(line_of[seq] for seq in chunk) for chunk in chunks]
        turn_matrix = _matrix(embedder.embed([text for _, text in before]))
        chunk_matrix = _matrix(embedder.embed(chunk_texts))
        recent = [[(seq, line_of[seq])] for seq in locomo.recency_order(turn_seqs)]

        for number, qa in enumerate(questions, 1):
            evidence = [seqs[key] for key in qa.evidence]
            words = 0
            for name, (room_key, _) in MEMORY_SYSTEMS.items():
                clock = time.perf_counter()
                outcome = recaller.recall_for(
                    room=rooms[room_key],
                    seat=None,
                    query_texts=[last_text, qa.question],
                    live_start=live_start,
                    budget=budget,
                    count=default_count_tokens,
                    tuning=variants[name],
                )
                ms = (time.perf_counter() - clock) * 1000
                if outcome.notices:
                    self.progress(f"{name}: {'; '.join(outcome.notices)}")
                count = locomo.word_count(outcome.text)
                if name == BUDGET_SYSTEM:
                    words = count
                ranges = [(s.item.seq_from, s.item.seq_to) for s in outcome.kept]
                ranges += [
                    (p.fact.first_seq, p.fact.last_seq) for p in outcome.facts if p.fact.first_seq is not None
                ]
                ranges += [(q.turn.seq, q.turn.seq) for q in getattr(outcome, "quotes", ())]
                records[name].append(
                    _record(qa, outcome.text, locomo.evidence_coverage(evidence, ranges), count, ms)
                )

            def fill(name, ranked, ms_before, started, qa=qa, evidence=evidence, words=words) -> None:
                text, returned, used = locomo.fill_budget(ranked, words)
                ms = ms_before + (time.perf_counter() - started) * 1000
                records[name].append(_record(qa, text, locomo.set_coverage(evidence, returned), used, ms))

            clock = time.perf_counter()
            fill("bm25_turns", ([before[i]] for i in bm25.rank(qa.question)), 0.0, clock)
            clock = time.perf_counter()
            query = np.asarray(embedder.embed([qa.question])[0], dtype=np.float32)
            embed_ms = (time.perf_counter() - clock) * 1000
            clock = time.perf_counter()
            order = locomo.rank_by((turn_matrix @ query).tolist()) if before else []
            fill("dense_turns", ([before[i]] for i in order), embed_ms, clock)
            clock = time.perf_counter()
            order = locomo.rank_by((chunk_matrix @ query).tolist()) if chunks else []
            fill("dense_chunk8", ([(seq, line_of[seq]) for seq in chunks[i]] for i in order), embed_ms, clock)
            clock = time.perf_counter()
            fill("recency", recent, 0.0, clock)
            if number % 50 == 0:
                self.progress(f"{conversation.sample_id}: {number}/{len(questions)} questions")

    def _while_backfilling(self) -> dict:
        conversation, questions, seqs, room, tuning = self.last
        budget = int(CONTEXT * tuning_get().budget_share)
        ordered = sorted(seqs.values())
        live_start = ordered[-LIVE] if len(ordered) >= LIVE else ordered[0]
        user = self._user("backfilling")
        card = {"name": "Maren", "description": "Keeper of the light.", "first_mes": "Welcome."}
        character = library.character_create(owner=user, card=card)
        embedder.serve_web()
        latencies = []
        with Backfilling(self.children, user, character) as load:
            for qa in questions:
                if not load.running():
                    continue
                clock = time.perf_counter()
                recaller.recall_for(
                    room=room,
                    seat=None,
                    query_texts=[conversation.turns[-1].text, qa.question],
                    live_start=live_start,
                    budget=budget,
                    count=default_count_tokens,
                    tuning=tuning,
                )
                ms = (time.perf_counter() - clock) * 1000
                if load.running():
                    latencies.append(ms)
            backfills = load.backfills
        self.progress(f"while backfilling: {len(latencies)} questions, {backfills} backfills started")
        return {"latency_ms": kit.summary(latencies), "n": len(latencies), "backfills": backfills}

    # The 100,000-message room ---------------------------------------------------------------------------

    def _scale(self, size: int, turns: int) -> dict:
        import numpy as np

        rng = random.Random(size)
        vectors_rng = np.random.default_rng(size)
        tuning = tuning_get()
        t = block_tuning(tuning)
        budget = int(CONTEXT * tuning.budget_share)
        user = self._user("scale")
        card = {"name": "Maren", "description": "Keeper of the light.", "first_mes": ""}
        character = library.character_create(owner=user, card=card)
        room = rooms.room_create_from_character(host=user, character=character)
        room.refresh_from_db()
        generation = generations_ensure(user)[0]
        start_time = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        texts: dict[int, str] = {}

        def text_for(seq: int) -> str:
            texts[seq] = message_text(rng, seq)
            return texts[seq]

        clock = time.perf_counter()
        kit.bulk_history(room, range(size), text_for=text_for, tokens=40)
        self.progress(f"scale: {size:,} messages in {time.perf_counter() - clock:.1f} s")

        written = [0] * (t.max_tier + 1)  # blocks written per tier (they are written in order)

        def complete(next_seq: int) -> int:
            """Write every summary due once the fresh window starts at `next_seq - fresh_window`."""
            fresh_start = max(0, next_seq - t.fresh_window)
            made = []
            for tier in range(t.max_tier + 1):
                due = fresh_start // blocks.span(tier, t)
                for block in range(written[tier], due):
                    made.append(_synthetic_summary(room, tier, block, t, rng, start_time))
                written[tier] = max(written[tier], due)
            return _store_summaries(made, generation, vectors_rng)

        clock = time.perf_counter()
        total = complete(size)
        took = time.perf_counter() - clock
        self.progress(f"scale: {total:,} summaries stored with vectors in {took:.1f} s")
        kit.settle()

        embedder.embed(["warm up"])
        latencies: list[float] = []
        pools: list[int] = []
        next_seq = size
        for turn in range(1, turns + 1):
            kit.bulk_history(room, range(next_seq, next_seq + 2), text_for=text_for, tokens=40)
            next_seq += 2
            if turn % 4 == 0:
                complete(next_seq)
            live_start = next_seq - LIVE
            clock = time.perf_counter()
            outcome = recaller.recall_for(
                room=room,
                seat=None,
                query_texts=[texts[next_seq - 2], texts[next_seq - 1]],
                live_start=live_start,
                budget=budget,
                count=default_count_tokens,
                tuning=tuning,
            )
            latencies.append((time.perf_counter() - clock) * 1000)
            pools.append(outcome.pool)
            if outcome.notices:
                self.progress(f"scale: {'; '.join(outcome.notices)}")
        result = {
            "messages": size,
            "pool": int(round(locomo.mean(pools))),
            "latency_ms": kit.summary(latencies),
        }
        self.progress(
            f"scale: {turns} turns, pool {result['pool']}, p50 {result['latency_ms']['p50']} ms, "
            f"p95 {result['latency_ms']['p95']} ms, first {latencies[0]:.0f} ms, max {max(latencies):.0f} ms"
        )
        return result


def _matrix(vectors: list[list[float]]):
    import numpy as np

    return np.asarray(vectors, dtype=np.float32).reshape(len(vectors), DIMENSIONS)


def _default(records: dict[str, list[dict]]) -> str:
    """The default system: summaries + facts once they beat summaries alone by FACTS_MARGIN of
    answer containment on categories 1–4, else summaries alone."""
    facts = _summary(records[FACTS_SYSTEM])["answer_containment"].get(locomo.POOLED)
    alone = _summary(records[BUDGET_SYSTEM])["answer_containment"].get(locomo.POOLED)
    if facts is not None and alone is not None and facts >= alone + FACTS_MARGIN:
        return FACTS_SYSTEM
    return BUDGET_SYSTEM


def _variant(tuning, **changes):
    """A copy of the tuning with some fields changed, never saved."""
    changed = copy.copy(tuning)
    for name, value in changes.items():
        setattr(changed, name, value)
    return changed


def _record(qa: locomo.Question, text: str, coverage: float | None, words: int, ms: float) -> dict:
    return {
        "category": qa.category,
        "containment": locomo.containment(qa.answer, text),
        "coverage": coverage,
        "words": words,
        "ms": ms,
    }


def _summary(records: list[dict]) -> dict:
    words = [r["words"] for r in records]
    ms = [r["ms"] for r in records]
    return {
        "answer_containment": locomo.by_category((r["category"], r["containment"]) for r in records),
        "evidence_coverage": locomo.by_category((r["category"], r["coverage"]) for r in records),
        "words_mean": round(locomo.mean(words), 1),
        "words_p95": round(locomo.percentile(words, 95), 1),
        "latency_ms": kit.summary(ms),
    }


def _synthetic_summary(room, tier: int, block: int, t, rng: random.Random, start: dt.datetime):
    first, end = block_range(tier, block, t)
    first_at = start + dt.timedelta(minutes=first)
    last_at = start + dt.timedelta(minutes=end - 1)
    who = rng.sample(NAMES, 2)
    draft = Draft(
        heading=f"{who[0]} and {who[1]} at {rng.choice(PLACES)}, {when_label([first_at, last_at])}",
        facts=[sentence(rng) for _ in range(rng.randint(2, 5))],
        keywords=[*who, rng.choice(PLACES), rng.choice(THINGS)],
    )
    text = render(draft)
    return Summary(
        room=room,
        scope=SHARED,
        tier=tier,
        block=block,
        seq_from=first,
        seq_to=end - 1,
        heading=draft.heading,
        facts=draft.facts,
        keywords=draft.keywords,
        text=text,
        source=Summary.Source.EXTRACTIVE,
        indexed_hash=index.text_hash(text),
        first_at=first_at,
        last_at=last_at,
    )


def _store_summaries(summaries: list, generation, rng) -> int:
    """Save summaries and put random unit vectors for them into the generation's `memories`."""
    import numpy as np

    for start in range(0, len(summaries), 1_000):
        batch = summaries[start : start + 1_000]
        Summary.objects.bulk_create(batch)
        _keyword_rows(batch)
        vectors = rng.standard_normal((len(batch), DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index.upsert_memories(generation, batch, vectors.tolist())
    return len(summaries)


def _keyword_rows(summaries: list) -> None:
    """Fill the keyword lookup for bulk-created summaries, as memory's summaries service does."""
    if not hasattr(models, "SummaryKeyword"):
        return  # a version of memory without the lookup table
    if summaries and summaries[0].pk is None:
        tiers, numbers = {s.tier for s in summaries}, {s.block for s in summaries}
        found = models.Summary.objects.filter(room_id=summaries[0].room_id, tier__in=tiers, block__in=numbers)
        by_key = {(s.tier, s.block): s for s in found}
        summaries = [by_key[(s.tier, s.block)] for s in summaries]
    models.SummaryKeyword.objects.bulk_create(
        [
            models.SummaryKeyword(summary=s, room_id=s.room_id, word=word, keyword=keyword)
            for s in summaries
            for word, keyword in keyword_words(list(s.keywords or ()))
        ]
    )
