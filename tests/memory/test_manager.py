"""The memory manager's prompts and the scene note's reader of answers (pure)."""

from __future__ import annotations

import datetime as dt

from memory import facts, manager
from memory.drafts import Line

LINES = [
    Line(seq=8, speaker="Maren", text="The ferry is late again."),
    Line(seq=9, speaker="Traveller", text="Then Harrow lied to us."),
]


def known(pk: int, text: str, subjects=(), **kwargs) -> manager.Known:
    return manager.Known(id=pk, text=text, category="event", subjects=tuple(subjects), **kwargs)


def test_pick_facts_prefers_what_the_block_names_then_the_newest():
    facts_ = [
        known(1, "Harrow keeps the ferry.", ["Harrow"]),
        known(2, "Odo sells oil.", ["Odo"]),
        known(3, "Ines has a boat.", ["Ines"]),
        known(4, "Maren guards the light.", ["Maren"]),
    ]
    assert [f.id for f in manager.pick_facts(facts_, LINES, limit=3)] == [1, 3, 4]
    assert manager.pick_facts(facts_, LINES, limit=0) == []


def test_manager_messages_fill_the_template_and_list_the_facts_and_the_transcript():
    messages = manager.manager_messages(
        LINES, [known(7, "Harrow keeps the ferry.", ["Harrow"], yours=True)], pov="Maren"
    )
    system, user = messages[0]["content"], messages[1]["content"]
    assert "{{" not in system and "promise, relationship" in system
    assert "Maren's own memory" in system and facts.FALLBACK_FORMAT in system
    assert "#7 [event, yours] Harrow keeps the ferry. (about: Harrow)" in user
    assert "#9 Traveller: Then Harrow lied to us." in user
    assert "own memory" not in manager.manager_messages(LINES, [])[0]["content"]
    assert "(none yet)" in manager.manager_messages(LINES, [])[1]["content"]


def test_the_manager_is_told_the_days_so_a_fact_can_say_when():
    days = [
        Line(seq=8, speaker="Maren", text="The ferry is late again.", when=dt.datetime(2023, 5, 7, 20)),
        Line(seq=9, speaker="Maren", text="It came at dawn.", when=dt.datetime(2023, 5, 8, 6)),
    ]
    user = manager.manager_messages(days, [])[1]["content"]
    assert "Dates: 7–8 May 2023" in user
    assert (
        "[7 May 2023]\n#8 Maren: The ferry is late again.\n[8 May 2023]\n#9 Maren: It came at dawn." in user
    )
    assert "Dates:" not in manager.manager_messages(LINES, [])[1]["content"]  # undated lines


def test_a_custom_template_is_used_as_given():
    messages = manager.manager_messages(LINES, [], template="Keep facts of kinds {{categories}}.")
    assert messages[0]["content"] == "Keep facts of kinds " + ", ".join(facts.CATEGORIES) + "."


def test_parse_scene_reads_json_tolerantly_and_refuses_what_says_nothing():
    note = manager.parse_scene(
        'Sure!\n```json\n{"Where": "the quay", "who": "Maren, Harrow", "when": "dusk", '
        '"open threads": ["Is the ferry coming?"],}\n```'
    )
    assert note == facts.SceneNote(
        where="the quay", who=("Maren", "Harrow"), when="dusk", open_threads=("Is the ferry coming?",)
    )
    assert manager.parse_scene('{"where": "", "who": []}') is None
    assert manager.parse_scene("The scene is at the quay.") is None
    long = manager.parse_scene('{"where": "' + "x" * 500 + '", "open_threads": ["a", "b", "c", "d", "e"]}')
    assert len(long.where) <= facts.MAX_NOTE_FIELD and len(long.open_threads) == facts.MAX_THREADS


def test_scene_messages_show_the_note_so_far_and_the_latest_lines():
    previous = facts.SceneNote(where="the quay", who=("Maren",))
    user = manager.scene_messages(LINES, previous=previous)[1]["content"]
    assert "Where: the quay" in user and "#8 Maren: The ferry is late again." in user


def test_the_scene_note_prompt_is_the_built_in_one_until_the_host_writes_their_own():
    built_in = manager.scene_messages(LINES)
    assert built_in[0]["role"] == "system" and built_in[0]["content"].startswith("You keep the scene note")
    assert f"at most {facts.MAX_THREADS} open threads" in built_in[0]["content"]
    assert "{{" not in built_in[0]["content"] + built_in[1]["content"]
    own = "Note the scene in Spanish; at most {{threads}} threads.\n\n{{material}}"
    messages = manager.scene_messages(LINES, template=own)
    assert messages[0] == {
        "role": "system",
        "content": f"Note the scene in Spanish; at most {facts.MAX_THREADS} threads.",
    }
    assert (
        messages[1]["content"].startswith("Latest messages:\n")
        and "#8 Maren: The ferry is late again." in messages[1]["content"]
    )
