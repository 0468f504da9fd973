"""World Info against SillyTavern's own: `python -m bench worldinfo --sillytavern DIR [--out FILE.json]`.

Runs the same scenarios through OrbChat's `worldinfo.activate()` and through SillyTavern's
`checkWorldInfo()` (its real `public/scripts/world-info.js` from the checkout at DIR, loaded by the
Node harness in `bench/sillytavern/` with our stubs for the modules it imports), and compares, turn
by turn, which entries activate and the text each puts before and after the character.

The scenarios are the hand-written ones of `bench/worldinfo_scenarios.json`, one or more per rule
of docs/sillytavern.md, plus `--random` generated ones (seeded by `--seed`). A scenario's books
are SillyTavern World Info files; its chat is a list of `"Name: text"` lines (a `(hidden) ` prefix
makes a message hidden), or `turns`, each adding lines to the chat, for sticky, cooldown and delay.
Both sides count tokens the same way (a quarter of the UTF-16 length), draw the same scripted
random numbers (`rolls`) and expand only `{{char}}` and `{{user}}`.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench import kit
from orbchat.interop.worldbooks import parse_world_info
from orbchat.prompting import macros, worldinfo

HERE = Path(__file__).parent
HARNESS = HERE / "sillytavern"
SCENARIOS = HERE / "worldinfo_scenarios.json"
CHARACTER, USER = "Alice", "Bob"

# SillyTavern's settings under the short names the scenarios use, with the values a scenario gets
# unless it says otherwise.
SETTINGS = {
    "depth": ("world_info_depth", 2),
    "min_activations": ("world_info_min_activations", 0),
    "min_activations_depth_max": ("world_info_min_activations_depth_max", 0),
    "budget": ("world_info_budget", 25),
    "include_names": ("world_info_include_names", True),
    "recursive": ("world_info_recursive", True),
    "case_sensitive": ("world_info_case_sensitive", False),
    "whole_words": ("world_info_match_whole_words", True),
    "strategy": ("world_info_character_strategy", 1),
    "budget_cap": ("world_info_budget_cap", 0),
    "group_scoring": ("world_info_use_group_scoring", False),
    "max_recursion_steps": ("world_info_max_recursion_steps", 0),
}
# A new entry in SillyTavern's editor.
ENTRY_DEFAULTS = {
    "key": [],
    "keysecondary": [],
    "comment": "",
    "content": "",
    "constant": False,
    "vectorized": False,
    "selective": True,
    "selectiveLogic": 0,
    "addMemo": False,
    "order": 100,
    "position": 0,
    "disable": False,
    "excludeRecursion": False,
    "preventRecursion": False,
    "delayUntilRecursion": 0,
    "probability": 100,
    "useProbability": True,
    "depth": 4,
    "group": "",
    "groupOverride": False,
    "groupWeight": 100,
    "scanDepth": None,
    "caseSensitive": None,
    "matchWholeWords": None,
    "useGroupScoring": None,
    "automationId": "",
    "role": 0,
    "sticky": None,
    "cooldown": None,
    "delay": None,
}
KINDS = {
    "global": worldinfo.BookKind.GLOBAL,
    "character": worldinfo.BookKind.CHARACTER,
    "chat": worldinfo.BookKind.CHAT,
}


def message(line: str | dict) -> dict:
    """A chat message from a scenario line: "Name: text", "(hidden) Name: text", or a text (the user's)."""
    if isinstance(line, dict):
        return line
    hidden = line.startswith("(hidden) ")
    line = line.removeprefix("(hidden) ")
    name, sep, text = line.partition(": ")
    if not sep:
        name, text = USER, line
    return {"name": name, "mes": text, "is_user": name == USER, "is_system": hidden}


def expand(scenario: dict) -> dict:
    """The scenario in full: every setting, every entry field, the chat of each turn."""
    settings = {
        long: scenario.get("settings", {}).get(short, default) for short, (long, default) in SETTINGS.items()
    }
    books = scenario.get("books") or [
        {"name": "World", "kind": "global", "entries": scenario.get("entries", [])}
    ]
    character = scenario.get("character", {"name": CHARACTER, "tags": []})
    if character is None:  # no character, no character lore
        books = [book for book in books if book.get("kind") != "character"]
    full_books = []
    for book in books:
        entries = {}
        for uid, entry in enumerate(book["entries"]):
            entry = {**ENTRY_DEFAULTS, "uid": uid, **entry}
            entries[str(entry["uid"])] = entry
        full_books.append({"name": book["name"], "kind": book.get("kind", "global"), "entries": entries})
    if "turns" in scenario:
        chats, chat = [], []
        for added in scenario["turns"]:
            chat = chat + [message(line) for line in added]
            chats.append(chat)
    else:
        chats = [[message(line) for line in scenario.get("chat", [])]]
    return {
        "id": scenario["id"],
        "rule": scenario.get("rule", ""),
        "settings": settings,
        "max_context": scenario.get("max_context", 100_000),
        "user": scenario.get("user", USER),
        "character": character,
        "books": full_books,
        "rolls": scenario.get("rolls", [0.5]),
        "turns": [{"chat": chat} for chat in chats],
    }


def count_tokens(text: str) -> int:
    """The harness's counter: a quarter of the length in UTF-16 code units, at least one for any text."""
    size = len(text.encode("utf-16-le")) // 2
    return max(1, size // 4) if text else 0


class Rolls(random.Random):
    """The scripted random numbers both sides draw, in a cycle."""

    def __init__(self, rolls: list[float]) -> None:
        super().__init__(0)
        self.rolls, self.next = rolls or [0.5], 0

    def random(self) -> float:
        value = self.rolls[self.next % len(self.rolls)]
        self.next += 1
        return value


def _filter(value: Any) -> worldinfo.CharacterFilter | None:
    if not isinstance(value, dict):
        return None
    return worldinfo.CharacterFilter(
        is_exclude=bool(value.get("isExclude")),
        names=tuple(str(n) for n in value.get("names") or ()),
        tags=tuple(str(t) for t in value.get("tags") or ()),
    )


def our_books(full: dict) -> list[worldinfo.Book]:
    """The scenario's books as OrbChat imports them, each with SillyTavern's global scan settings."""
    settings = full["settings"]
    fields = [name for name in worldinfo.Entry.__dataclass_fields__ if name != "character_filter"]
    books = []
    for index, book in enumerate(full["books"], start=1):
        parsed = parse_world_info({"entries": book["entries"]}, name=book["name"])
        entries = tuple(
            worldinfo.Entry(
                **{name: tuple(e[name]) if name.endswith("keys") else e[name] for name in fields},
                character_filter=_filter(e["extra"].get("characterFilter")),
            )
            for e in parsed["entries"]
        )
        books.append(
            worldinfo.Book(
                id=index,
                name=book["name"],
                entries=entries,
                scan_depth=settings["world_info_depth"],
                recursive=settings["world_info_recursive"],
                case_sensitive=settings["world_info_case_sensitive"],
                match_whole_words=settings["world_info_match_whole_words"],
                kind=KINDS[book["kind"]],
            )
        )
    return books


def our_settings(full: dict) -> worldinfo.Settings:
    settings = full["settings"]
    percent = settings["world_info_budget"]
    percent = 25 if percent > 100 else percent  # SillyTavern's migration of old settings
    return worldinfo.Settings(
        include_names=settings["world_info_include_names"],
        min_activations=settings["world_info_min_activations"],
        min_activations_depth_max=settings["world_info_min_activations_depth_max"],
        # SillyTavern's budget is a share of the context, rounded half up, at least 1.
        token_budget=math.floor(percent * full["max_context"] / 100 + 0.5) or 1,
        budget_cap=settings["world_info_budget_cap"],
        insertion_strategy=worldinfo.InsertionStrategy(settings["world_info_character_strategy"]),
        use_group_scoring=settings["world_info_use_group_scoring"],
        max_recursion_steps=settings["world_info_max_recursion_steps"],
    )


def run_ours(full: dict) -> list[dict]:
    """Each turn of the scenario through `activate`, the timed state carried from turn to turn."""
    books = our_books(full)
    names = {book.id: book.name for book in books}
    settings = our_settings(full)
    who = full["character"]
    context = macros.MacroContext(char=who["name"] if who else "", user=full["user"])
    character = worldinfo.Character(name=who["name"], tags=tuple(who.get("tags") or ())) if who else None
    state, turns = None, []
    for turn in full["turns"]:
        visible = [m for m in turn["chat"] if not m.get("is_system")]
        result = worldinfo.activate(
            books,
            [(m["name"], m["mes"]) for m in visible],
            message_count=len(visible),
            state=state,
            rng=Rolls(full["rolls"]),
            count_tokens=count_tokens,
            settings=settings,
            substitute=lambda text: macros.substitute(text, context),
            character=character,
        )
        state = result.state
        texts = {
            position: "\n".join(
                a.entry.content for a in result.activated if a.entry.position == position and a.entry.content
            )
            for position in (worldinfo.Position.BEFORE_CHAR, worldinfo.Position.AFTER_CHAR)
        }
        turns.append(
            {
                "activated": [f"{names[a.book_id]}#{a.entry.uid}" for a in result.activated],
                "before": texts[worldinfo.Position.BEFORE_CHAR],
                "after": texts[worldinfo.Position.AFTER_CHAR],
            }
        )
    return turns


def run_sillytavern(fulls: list[dict], sillytavern: Path) -> dict[str, dict]:
    """Every scenario through SillyTavern's checkWorldInfo(), by the Node harness; results by id."""
    world_info = sillytavern / "public" / "scripts" / "world-info.js"
    if not world_info.is_file():
        raise kit.BenchError(f"{world_info} not found: --sillytavern names a SillyTavern checkout")
    node = shutil.which("node")
    if node is None:
        raise kit.BenchError("node (Node.js 20 or later) is not on the PATH")
    env = {**os.environ, "ST_WORLD_INFO_URL": world_info.resolve().as_uri()}
    done = subprocess.run(
        [node, "--import", "./register.mjs", "harness.mjs"],
        input=json.dumps(fulls),
        capture_output=True,
        text=True,
        cwd=HARNESS,
        env=env,
        timeout=600,
    )
    if done.returncode != 0:
        raise kit.BenchError(f"the SillyTavern harness failed:\n{done.stderr.strip()}")
    results = {result["id"]: result for result in json.loads(done.stdout)}
    failed = [f"{id}: {r['error']}" for id, r in results.items() if "error" in r]
    if failed:
        raise kit.BenchError("the SillyTavern harness could not run:\n" + "\n".join(failed))
    return results


# --- generated scenarios ------------------------------------------------------------------------

WORDS = ["dragon", "castle", "river", "sword", "queen", "forest", "storm", "lantern", "ghost", "harbor"]
NON_ASCII = ["кот", "龙", "café", "Ärger", "дом", "山"]


def _key(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.08:
        word = rng.choice(WORDS)
        return rng.choice(
            [f"/{word}/i", f"/{word[:3]}\\w+/", f"/^\\x01{word}/", f"/{word}$/m", "/[unclosed/"]
        )
    if roll < 0.15:
        return rng.choice(NON_ASCII)
    if roll < 0.2:
        return rng.choice(["{{char}}", "{{user}}", f"{rng.choice(WORDS)} {rng.choice(WORDS)}"])
    if roll < 0.25:
        return rng.choice(WORDS).capitalize()
    if roll < 0.3:
        return rng.choice(["(sword)", "sword!", " storm ", "КОТ", "queen\tstorm", "ghost's", "_river"])
    return rng.choice(WORDS)


def _text(rng: random.Random, words: int) -> str:
    pool = (
        WORDS
        + NON_ASCII
        + ["the", "a", "of", "and", "Alice", "Bob", "dragons", "swordsman", "кот!", "我看到龙了"]
    )
    return " ".join(rng.choice(pool) for _ in range(words))


def _entry(rng: random.Random, uid: int) -> dict:
    entry: dict[str, Any] = {
        "uid": uid,
        "key": [_key(rng) for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))],
        "content": rng.choice(["", "{{char}} ", "", *[""] * 7]) + f"[{uid}] " + _text(rng, rng.randint(1, 6)),
        "order": rng.choice([100, 100, 50, 200, 10, rng.randint(0, 300)]),
        "position": rng.choice([0, 0, 1]),
    }
    if rng.random() < 0.3:
        entry["keysecondary"] = [_key(rng) for _ in range(rng.randint(1, 2))]
        entry["selectiveLogic"] = rng.randint(0, 3)
    if rng.random() < 0.1:
        entry["constant"] = True
    if rng.random() < 0.1:
        entry["disable"] = True
    if rng.random() < 0.25:
        entry["group"] = rng.choice(["g1", "g2", "g1,g2", "g1, g2", "2", "1", "g1,1"])
        entry["groupOverride"] = rng.random() < 0.3
        entry["groupWeight"] = rng.choice([100, 50, 10, 1])
        if rng.random() < 0.3:
            entry["useGroupScoring"] = True
    if rng.random() < 0.15:
        entry["preventRecursion"] = True
    if rng.random() < 0.15:
        entry["excludeRecursion"] = True
    if rng.random() < 0.15:
        entry["delayUntilRecursion"] = rng.choice([True, 1, 2, 3])
    if rng.random() < 0.1:
        entry["probability"] = 0
    elif rng.random() < 0.15:
        entry["probability"] = rng.choice([25, 50, 75])
        entry["useProbability"] = rng.random() < 0.8
    if rng.random() < 0.15:
        entry["scanDepth"] = rng.choice([0, 1, 3, 5, 10])
    if rng.random() < 0.1:
        entry["caseSensitive"] = rng.random() < 0.5
    if rng.random() < 0.1:
        entry["matchWholeWords"] = rng.random() < 0.5
    if rng.random() < 0.08:
        entry["content"] = rng.choice(["@@activate\n", "@@dont_activate\n"]) + entry["content"]
    if rng.random() < 0.08:
        entry["characterFilter"] = {
            "isExclude": rng.random() < 0.5,
            "names": rng.choice([[CHARACTER], ["Carol"], []]),
            "tags": rng.choice([[], ["hero"], ["villain"]]),
        }
    return entry


def generated(count: int, seed: int) -> list[dict]:
    """`count` random scenarios: books of random entries against random chats."""
    rng = random.Random(seed)
    scenarios = []
    for index in range(count):
        timed = rng.random() < 0.2
        kinds = rng.choice([["global"], ["global"], ["global", "character"], ["character", "global", "chat"]])
        books = [
            {
                "name": f"{kind}-book",
                "kind": kind,
                "entries": [_entry(rng, uid) for uid in range(rng.randint(2, 10))],
            }
            for kind in kinds
        ]
        if timed:
            for book in books:
                for entry in book["entries"]:
                    for effect in ("sticky", "cooldown", "delay"):
                        if rng.random() < 0.25:
                            entry[effect] = rng.randint(1, 3)
        settings = {
            "depth": rng.choice([0, 1, 2, 2, 3, 4, 6]),
            "recursive": rng.random() < 0.6,
            "whole_words": rng.random() < 0.7,
            "case_sensitive": rng.random() < 0.15,
            "strategy": rng.choice([0, 1, 2]),
            "group_scoring": rng.random() < 0.2,
            "max_recursion_steps": rng.choice([0, 0, 0, 1, 2, 3]),
            "include_names": rng.random() < 0.8,
        }
        if rng.random() < 0.2:
            settings["min_activations"] = rng.randint(1, 4)
            settings["min_activations_depth_max"] = rng.choice([0, 0, 3, 5])
            if rng.random() < 0.5:
                settings["max_recursion_steps"] = 0
        if rng.random() < 0.1:
            settings["budget_cap"] = rng.choice([5, 10, 20])
        scenario: dict[str, Any] = {
            "id": f"random-{seed}-{index}",
            "rule": "generated",
            "settings": settings,
            "books": books,
            "rolls": [rng.random() for _ in range(7)],
            "character": rng.choice(
                [None, *[{"name": CHARACTER, "tags": t} for t in ([], ["hero"], ["villain", "hero"])] * 6]
            ),
        }
        if rng.random() < 0.2:
            scenario["max_context"] = rng.choice([40, 80, 200])
        speakers = [USER, CHARACTER]
        lines = [f"{speakers[i % 2]}: {_text(rng, rng.randint(2, 8))}" for i in range(rng.randint(1, 8))]
        if rng.random() < 0.1:
            lines.insert(rng.randrange(len(lines)), f"(hidden) {USER}: {_text(rng, 4)}")
        if timed:
            later = [rng.choice([[], [f"{USER}: {_text(rng, 3)}"]]) for _ in range(4)]  # [] is a regenerate
            scenario["turns"] = [[line] for line in lines] + later
        else:
            scenario["chat"] = lines
        scenarios.append(scenario)
    return scenarios


# --- the benchmark ------------------------------------------------------------------------------


def compare(full: dict, ours: list[dict], theirs: list[dict]) -> dict:
    """How one scenario's turns compare: the same entries, and the same text in the same order."""
    same_set = all(
        sorted(o["activated"]) == sorted(t["activated"]) for o, t in zip(ours, theirs, strict=True)
    )
    same_text = all(
        o["before"] == t["before"] and o["after"] == t["after"] for o, t in zip(ours, theirs, strict=True)
    )
    return {
        "id": full["id"],
        "rule": full["rule"],
        "same_entries": same_set,
        "same_text": same_text,
        "ours": ours,
        "sillytavern": theirs,
    }


class Bench:
    help = "Compare World Info activation with SillyTavern's checkWorldInfo() (table + JSON)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--sillytavern", required=True, type=Path, help="a SillyTavern checkout (its public/)"
        )
        parser.add_argument("--out", help="write the results here as JSON")
        parser.add_argument(
            "--random", type=int, default=150, help="generated scenarios besides the written ones"
        )
        parser.add_argument("--seed", type=int, default=4)
        parser.add_argument("--only", help="run only the scenarios whose id contains this")

    def handle(self, *, sillytavern: Path, out: str | None, random: int, seed: int, only: str | None) -> None:
        written = json.loads(SCENARIOS.read_text())
        scenarios = written + generated(random, seed)
        if only:
            scenarios = [s for s in scenarios if only in s["id"]]
        fulls = [expand(s) for s in scenarios]
        theirs = run_sillytavern(fulls, sillytavern)
        rows = [compare(full, run_ours(full), theirs[full["id"]]["turns"]) for full in fulls]
        results = self._summary(rows, len(written) if not only else None)
        self._print(results)
        if out:
            kit.write_json(out, results)
            print(f"wrote {out}")

    def _summary(self, rows: list[dict], written: int | None) -> dict:
        def tally(part: list[dict]) -> dict:
            return {
                "scenarios": len(part),
                "same_entries": sum(r["same_entries"] for r in part),
                "same_entries_and_text": sum(r["same_entries"] and r["same_text"] for r in part),
            }

        hand = [r for r in rows if r["rule"] != "generated"]
        made = [r for r in rows if r["rule"] == "generated"]
        return {
            "written": tally(hand),
            "generated": tally(made),
            "all": tally(rows),
            "scenarios": [{key: r[key] for key in ("id", "rule", "same_entries", "same_text")} for r in rows],
            "disagreements": [r for r in rows if not (r["same_entries"] and r["same_text"])],
        }

    def _print(self, results: dict) -> None:
        print(f"{'scenarios':<10} {'count':>6} {'same entries':>13} {'same entries + text':>20}")
        for name in ("written", "generated", "all"):
            row = results[name]
            same, both = row["same_entries"], row["same_entries_and_text"]
            print(f"{name:<10} {row['scenarios']:>6} {same:>13} {both:>20}")
        for row in results["disagreements"]:
            what = "text/order" if row["same_entries"] else "entries"
            print(f"  differs ({what}): {row['id']} [{row['rule']}]")
            for turn, (ours, theirs) in enumerate(zip(row["ours"], row["sillytavern"], strict=True), start=1):
                if ours != theirs:
                    print(f"    turn {turn}: ours {ours['activated']} / SillyTavern {theirs['activated']}")
