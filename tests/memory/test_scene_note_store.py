"""The room's scene note: automatic updates, the host's edit, and what the prompt gets."""

from __future__ import annotations

import pytest

from memory import facts, selectors
from memory.services import scene
from memory.services.person import MemoryRefused
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db

HARBOUR = facts.SceneNote(
    where="the harbour", who=("Maren", "Ilya"), when="dusk", open_threads=("Who lit the lamp?",)
)


def test_a_room_has_no_note_until_one_is_written(room):
    assert selectors.scene_note_get(room) is None
    assert selectors.scene_note_text(room) == ""


def test_an_update_keeps_what_it_could_not_read_and_reads_forward_only(room):
    room = story_room(room, 6)
    assert scene.scene_note_update(room=room, note=HARBOUR, source=scene.READER, upto_seq=3)
    later = facts.SceneNote(who=("Maren",), when="night")
    assert scene.scene_note_update(room=room, note=later, source=scene.READER, upto_seq=5)
    note, source = selectors.scene_note_get(room)
    assert (note.where, note.who, note.when) == ("the harbour", ("Maren",), "night")
    assert source == scene.READER
    # The same messages read again write nothing.
    assert not scene.scene_note_update(room=room, note=HARBOUR, source=scene.MODEL, upto_seq=5)
    assert "the harbour" in selectors.scene_note_text(room)


def test_the_hosts_edit_stands_until_a_later_message(room):
    room = story_room(room, 6)
    scene.scene_note_update(room=room, note=HARBOUR, source=scene.READER, upto_seq=3)
    mine = scene.clean_note(where="the lighthouse", who="Maren, Ilya", when="midnight", open_threads="")
    scene.scene_note_edit(room=room, note=mine)
    assert not scene.scene_note_update(
        room=room, note=HARBOUR, source=scene.MODEL, upto_seq=room.next_seq - 1
    )
    note, source = selectors.scene_note_get(room)
    assert (note.where, source) == ("the lighthouse", scene.PERSON)
    assert scene.scene_note_update(
        room=room, note=facts.SceneNote(when="dawn"), source=scene.MODEL, upto_seq=room.next_seq
    )
    note, _ = selectors.scene_note_get(room)
    assert (note.where, note.when) == ("the lighthouse", "dawn")


def test_an_over_long_field_is_refused_by_name():
    with pytest.raises(MemoryRefused) as refused:
        scene.clean_note(where="x" * 81, who="", when="", open_threads="")
    assert refused.value.field == "where"
    with pytest.raises(MemoryRefused) as refused:
        scene.clean_note(where="", who=",".join(f"P{i}" for i in range(9)), when="", open_threads="")
    assert refused.value.field == "who"
