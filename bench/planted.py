"""Measure what the built-in memory finds again: `python -m bench planted --out FILE.json`.

A generated 1,100-message chat (two speakers, everyday filler with the chat's own refrains) holds
ten facts planted at spread-out messages, all long scrolled out of the prompt. Its memory is built
with the built-in summariser alone (no Utility model), then recall runs once per question, as the
reply to a message from the person would: once with a question naming the fact's thing ("Where is
the silver astrolabe?"), once with a paraphrase that names none of its words ("Where did she put
that old star instrument?"). A question counts as found when every answer word is in the Memory
section recall sent. Prints a table, misses included, and writes the JSON.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench import kit
from memory.services.catch_up import backfill
from memory.turn_memory import recall_dry_run
from orbchat.connections import embedder
from orbchat.library import services as library
from rooms import services

SIZE = 1_100


@dataclass(frozen=True)
class Planted:
    seq: int
    text: str  # what the speaker says, inside an ordinary message
    named: str  # a question naming it
    paraphrase: str  # a question that names none of its distinctive words
    answer: tuple[str, ...]  # the words the recalled memory must hold


PLANTED = (
    Planted(
        40,
        "I hid the silver astrolabe in the crypt under the chapel of Saint Quillon.",
        "Where is the silver astrolabe now?",
        "Where did you put that old instrument for reading the stars?",
        ("crypt",),
    ),
    Planted(
        130,
        "My brother Anselm drowned off Gull Reef the winter I turned twelve.",
        "What happened to your brother Anselm?",
        "How did you lose your sibling when you were a child?",
        ("drowned",),
    ),
    Planted(
        220,
        "The password at the harbour gate is 'cormorant', say it twice.",
        "What is the password for the harbour gate?",
        "What do I have to say to the guards to get into the port?",
        ("cormorant",),
    ),
    Planted(
        310,
        "Tobin owes the widow Varga forty silver marks and cannot pay.",
        "How much does Tobin owe the widow Varga?",
        "Who is in debt to that old woman, and for how much money?",
        ("forty",),
    ),
    Planted(
        400,
        "The smugglers keep their rum in the old icehouse behind the mill.",
        "Where do the smugglers keep their rum?",
        "Where do the men who bring in goods without paying duty store their liquor?",
        ("icehouse",),
    ),
    Planted(
        490,
        "I promised Ilse I would take her to the lantern festival in Corrow on midsummer night.",
        "What did you promise Ilse about the lantern festival?",
        "What did you swear you would do for her at the summer celebration?",
        ("corrow",),
    ),
    Planted(
        580,
        "Doctor Fenn says the fever came from the well on Tanner Street.",
        "What did Doctor Fenn say about the fever?",
        "Where did the physician think the sickness came from?",
        ("tanner",),
    ),
    Planted(
        670,
        "The lighthouse keeper's logbook is locked in the blue sea chest in the attic.",
        "Where is the lighthouse keeper's logbook?",
        "Where are the old records of the tower's watchman kept?",
        ("chest",),
    ),
    Planted(
        760,
        "I am allergic to honey; it closes my throat.",
        "Are you allergic to honey?",
        "Is there any food that makes you ill?",
        ("honey",),
    ),
    Planted(
        850,
        "Captain Orsolya sails the Grey Heron to Valmere at the next new moon.",
        "When does Captain Orsolya sail the Grey Heron to Valmere?",
        "When does the ship leave for the southern port, and who commands it?",
        ("moon",),
    ),
)

FILLER = (
    "*She pulls her shawl tighter as the wind comes off the water.*",
    "The kettle is singing again; do you want another cup?",
    "I keep thinking the roads will be better once the rain stops.",
    "*He laughs and shakes his head.* You always say that.",
    "We should sleep soon, there is work at first light.",
    "The market was loud today, fish and rope and shouting.",
    "That is a sharp thing to say, even for you.",
    "*The lamp gutters as a draught slips under the door.*",
    "Tell me again how the nets are mended, I never remember.",
    "It is quiet tonight. Too quiet, my mother would have said.",
    "*She counts the coins twice and sighs.*",
    "The gulls were at the bins again this morning.",
    "I saw the baker's boy running down to the quay at noon.",
    "Do you hear the bells? Someone is marrying, I think.",
)


def chat_text(seq: int, rng: random.Random, planted: dict[int, str]) -> str:
    parts = rng.sample(FILLER, rng.randint(2, 4))
    if seq in planted:
        parts.insert(rng.randint(0, len(parts)), planted[seq])
    return " ".join(parts)


class Bench:
    help = (
        "Benchmark planted facts found again by the built-in memory in a 1,100-message chat (table + JSON)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", required=True)
        parser.add_argument("--seed", type=int, default=11)

    def handle(self, *, out: str, seed: int) -> None:
        with kit.Children() as children:
            children.ensure_chroma()
            results = self._run(seed)
        kit.write_json(out, results)
        self._print(results)
        print(f"wrote {out}")

    def _run(self, seed: int) -> dict:
        user = kit.bench_user("planted")
        try:
            card = {
                "name": "Maren",
                "description": "A fisherman's widow in a harbour town.",
                "first_mes": "Come in.",
            }
            character = library.character_create(owner=user, card=card)
            embedder.embed(["warm up"])
            room = services.room_create_from_character(host=user, character=character)
            rng = random.Random(seed)
            planted = {p.seq: p.text for p in PLANTED}
            kit.bulk_history(
                room, range(1, SIZE + 1), text_for=lambda seq: chat_text(seq, rng, planted), tokens=30
            )
            kit.settle()
            backfill(room.pk)
            seat = room.seats.get()
            rows = []
            for fact in PLANTED:
                row = {"seq": fact.seq, "fact": fact.text}
                for kind in ("named", "paraphrase"):
                    question = getattr(fact, kind)
                    outcome = recall_dry_run(room=room, seat=seat, text=question)
                    memory = outcome.text.casefold()
                    row[kind] = {
                        "question": question,
                        "found": all(word in memory for word in fact.answer),
                        "recalled": outcome.count,
                    }
                rows.append(row)
        finally:
            user.delete()
        return {
            "messages": SIZE,
            "named": {"found": sum(r["named"]["found"] for r in rows), "of": len(rows)},
            "paraphrase": {"found": sum(r["paraphrase"]["found"] for r in rows), "of": len(rows)},
            "facts": rows,
        }

    def _print(self, r: dict) -> None:
        print(f"planted facts in a {r['messages']:,}-message chat, built-in summariser, no Utility model")
        print(f"found by a question naming them (goal 9/10): {r['named']['found']}/{r['named']['of']}")
        print(
            f"found by a paraphrase (goal 7/10):           {r['paraphrase']['found']}/{r['paraphrase']['of']}"
        )
        for row in r["facts"]:
            marks = " ".join(
                f"{kind} {'found' if row[kind]['found'] else 'MISSED'}" for kind in ("named", "paraphrase")
            )
            print(f"  #{row['seq']:>4}  {marks}  {row['fact'][:60]}")
