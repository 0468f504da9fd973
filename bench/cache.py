"""Measure how much of each prompt a provider's prompt cache can reuse: `python -m bench cache --out FILE`.

A long chat (`--start` messages, then two a turn: the person's and the reply) is prompted for
`--turns` turns with memory and world info, the way a turn does it (`memory.turn_memory`): the
prompt is fitted, the memory budget reserved, the history window cut beside it, and the Memory
section filled. What recall finds changes every turn (three of the chat's summaries picked by the
newest message); a lore book of eight entries activates on its keys in the last four messages
(the scan depth; about one message in three names one of them), beside two constant entries and
one at depth; the author's note sits at depth 4.

Each prompt's *prefix share* is the share of its text equal to the previous prompt's beginning (the
part a provider's cache would hit), for the cache-friendly layout (`layout: "cache"`, the one a
turn uses) and for the layout before it (`layout: "sliding"`: a window sliding by a message a turn,
memory and activated world info ahead of the history), in the same run.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from dataclasses import replace

from bench import kit
from bench.backfill import NAMES, PLACES, message_text, sentence
from orbchat.library.presets import default_sections
from orbchat.prompting import assemble
from orbchat.prompting.worldinfo import Position

CONTEXT = 8192
MAX_TOKENS = 400
BUDGET_SHARE = 0.25  # Memory tuning's default memory budget
BLOCK = 8  # Memory tuning's default block size
SCAN = 4  # messages world info scans for its keys
KEEP = 3  # summaries recalled per reply
LORE = [
    "Saint Quillon",
    "the drowned bell",
    "Morrow's Reach",
    "the salt court",
    "the grey fleet",
    "Oldwick",
    "the tithe barge",
    "the lantern-wardens",
]
MENTION = 0.3  # share of messages that name a lore key


def _lore() -> list[tuple[str, assemble.WorldInsert]]:
    """(key, entry) pairs: one entry per place and thing, two constant, one at depth."""
    entries = [
        (
            key,
            assemble.WorldInsert(
                content=f"{key.capitalize()}: " + " ".join(sentence(random.Random(key)) for _ in range(3)),
                position=Position.BEFORE_CHAR if n % 2 == 0 else Position.AFTER_CHAR,
                order=100 + n,
            ),
        )
        for n, key in enumerate(LORE)
    ]
    entries.append(
        ("", assemble.WorldInsert(content="The coast of Inchfallow, a fishing town.", constant=True))
    )
    entries.append(
        (
            "",
            assemble.WorldInsert(
                content="Lamps are lit at dusk.", position=Position.AFTER_CHAR, constant=True, order=90
            ),
        )
    )
    entries.append(
        (
            "the drowned bell",
            assemble.WorldInsert(
                content="The fog bell rings twice at low tide.", position=Position.AT_DEPTH, depth=2
            ),
        )
    )
    return entries


def _summaries(rng: random.Random, count: int) -> list[str]:
    return [
        f"{rng.choice(NAMES)} and {rng.choice(NAMES)} at {rng.choice(PLACES)}.\n"
        + "\n".join(f"- {sentence(rng)}" for _ in range(rng.randint(3, 6)))
        for _ in range(count)
    ]


def _prompt(base: assemble.PromptInput, history, memory: str, *, cache: bool) -> list[dict]:
    """The turn's prompt as `memory.turn_memory.with_memory` lays it out."""
    inp = replace(base, history=history, cache_friendly=cache)
    prompt = assemble.assemble(inp)
    if not prompt.history_dropped:
        return prompt.messages
    reserve = int(inp.context_size * BUDGET_SHARE)
    fitted = assemble.assemble(
        replace(inp, max_tokens=inp.max_tokens + reserve, history_align=BLOCK if cache else 0)
    )
    live_start = fitted.history_kept[0] if fitted.history_kept else history[-1].seq + 1
    final = assemble.assemble(
        replace(inp, history=[h for h in history if h.seq >= live_start], memory_text=memory)
    )
    return final.messages


def _flat(messages: list[dict]) -> str:
    return "".join(f"<{m['role']}>{m['content']}\n" for m in messages)


def prefix_share(previous: str, current: str) -> float:
    """The share of `current` equal to the start of `previous`."""
    if not current:
        return 0.0
    same = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        same += 1
    return same / len(current)


class Bench:
    help = "Measure the share of each prompt a provider's prompt cache can reuse (table + JSON)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", required=True)
        parser.add_argument("--turns", type=int, default=300)
        parser.add_argument(
            "--start", type=int, default=1000, help="messages in the chat before the first turn"
        )

    def handle(self, *, out: str, turns: int, start: int) -> None:
        clock = time.perf_counter()
        rng = random.Random(21)
        summaries = _summaries(rng, 64)
        lore = _lore()
        names = ("Wren", "Maren")
        history: list[assemble.HistoryMessage] = []

        def say(seq: int) -> None:
            role = "user" if seq % 2 == 0 else "assistant"
            text = message_text(rng, seq)
            if rng.random() < MENTION:
                text += f" {rng.choice(NAMES)} spoke of {rng.choice(LORE)} again."
            history.append(assemble.HistoryMessage(seq=seq, role=role, name=names[seq % 2], text=text))

        for seq in range(start):
            say(seq)
        base = assemble.PromptInput(
            sections=default_sections(),
            characters=[
                assemble.CardInfo(
                    name="Maren",
                    description="Keeper of the Inchfallow light. "
                    + " ".join(sentence(rng) for _ in range(12)),
                    personality="Dry, patient, watchful.",
                    scenario="A winter on the coast.",
                )
            ],
            speaker="Maren",
            user_name="Wren",
            authors_note="[Keep the tone quiet and wintry.]",
            authors_note_depth=4,
            context_size=CONTEXT,
            max_tokens=MAX_TOKENS,
            macro_context=None,
        )
        shares: dict[str, list[float]] = {"cache": [], "sliding": []}
        previous: dict[str, str] = {}
        for turn in range(turns + 1):
            if turn:
                say(len(history))
            recent = " ".join(h.text for h in history[-SCAN:]).casefold()
            world = [entry for key, entry in lore if not key or key.casefold() in recent]
            picker = random.Random(history[-1].text)
            memory = "\n\n".join(picker.sample(summaries, KEEP))
            for layout, cache in (("cache", True), ("sliding", False)):
                text = _flat(_prompt(replace(base, world_info=world), list(history), memory, cache=cache))
                if layout in previous:
                    shares[layout].append(prefix_share(previous[layout], text))
                previous[layout] = text
            if turn:
                say(len(history))
        results = {
            "prefix_share": _figures(shares["cache"]),
            "turns": len(shares["cache"]),
            "layouts": {layout: {"prefix_share": _figures(values)} for layout, values in shares.items()},
            "messages_at_start": start,
            "context": CONTEXT,
        }
        kit.write_json(out, results)
        for layout, values in results["layouts"].items():
            figures = values["prefix_share"]
            print(f"{layout:8} prefix share median {figures['median']:.1%}  p10 {figures['p10']:.1%}")
        sys.stderr.write(f"[bench cache] {results['turns']} turns in {time.perf_counter() - clock:.1f} s\n")


def _figures(values: list[float]) -> dict[str, float]:
    if not values:
        return {"median": 0.0, "p10": 0.0}
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 4),
        "p10": round(ordered[int(0.1 * (len(ordered) - 1))], 4),
    }
