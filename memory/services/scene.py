"""Writes of a room's scene note: where the scene is, who is there, when, and what is left open.

One current note per room. The memory cycle (the Utility model, or the built-in reader of the
latest messages) updates it after each reply; the host may edit it. An automatic update keeps
any field it left empty from the note before (a scene does not move because the latest lines
do not name the place), and never overwrites the host's note with what it read of the same
messages: only a later message starts a new update.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from memory import facts
from memory.models import RoomMemory
from memory.services.person import MemoryRefused
from rooms.models import Room

READER = "reader"  # the built-in reader of the latest messages
MODEL = "model"  # the Utility model
PERSON = "person"  # the host's own edit
SOURCES = (READER, MODEL, PERSON)


def note_json(note: facts.SceneNote) -> dict:
    return {
        "where": note.where,
        "who": list(note.who),
        "when": note.when,
        "open_threads": list(note.open_threads),
    }


def _merged(new: facts.SceneNote, old: dict) -> facts.SceneNote:
    return facts.SceneNote(
        where=new.where or old.get("where", ""),
        who=new.who or tuple(old.get("who", ())),
        when=new.when or old.get("when", ""),
        open_threads=new.open_threads or tuple(old.get("open_threads", ())),
    )


@transaction.atomic
def scene_note_update(*, room: Room, note: facts.SceneNote, source: str, upto_seq: int) -> bool:
    """Save the memory cycle's note, read up to message `upto_seq`; return whether it changed.

    Nothing is saved when the note already read that far (a re-run, or the host's edit of the
    same moment)."""
    if source not in (READER, MODEL):
        raise ValueError(f"not an automatic source: {source!r}")
    state, _ = RoomMemory.objects.select_for_update().get_or_create(room=room)
    if upto_seq <= state.scene_note_seq:
        return False
    merged = note_json(_merged(note, state.scene_note or {}))
    changed = merged != state.scene_note
    state.scene_note = merged
    state.scene_note_source = source
    state.scene_note_seq = upto_seq
    state.scene_note_at = timezone.now()
    state.save(
        update_fields=["scene_note", "scene_note_source", "scene_note_seq", "scene_note_at", "updated_at"]
    )
    return changed


def _field(value: object, name: str, limit: int) -> str:
    text = " ".join(str(value or "").split())
    if len(text) > limit:
        raise MemoryRefused(
            f"The scene note's {name} is {len(text)} characters; at most {limit}.", field=name
        )
    return text


def clean_note(*, where: object, who: object, when: object, open_threads: object) -> facts.SceneNote:
    """Return a person's note, or refuse a field that is too long (or too many of them)."""
    names = [name for name in (_field(n, "who", facts.MAX_NOTE_FIELD) for n in _lines(who, ",")) if name]
    if len(names) > facts.MAX_WHO:
        raise MemoryRefused(
            f"The scene note names {len(names)} people; at most {facts.MAX_WHO}.", field="who"
        )
    threads = [
        t for t in (_field(t, "open_threads", facts.MAX_THREAD) for t in _lines(open_threads, "\n")) if t
    ]
    if len(threads) > facts.MAX_THREADS:
        raise MemoryRefused(
            f"The scene note has {len(threads)} open threads; at most {facts.MAX_THREADS}.",
            field="open_threads",
        )
    return facts.SceneNote(
        where=_field(where, "where", facts.MAX_NOTE_FIELD),
        who=tuple(names),
        when=_field(when, "when", facts.MAX_NOTE_FIELD),
        open_threads=tuple(threads),
    )


def _lines(value: object, separator: str) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    return str(value or "").split(separator)


@transaction.atomic
def scene_note_edit(*, room: Room, note: facts.SceneNote) -> None:
    """Save the host's note; it stands until a later message starts the next automatic update."""
    state, _ = RoomMemory.objects.select_for_update().get_or_create(room=room)
    state.scene_note = note_json(note)
    state.scene_note_source = PERSON
    state.scene_note_seq = max(state.scene_note_seq, room.next_seq - 1)
    state.scene_note_at = timezone.now()
    state.save(
        update_fields=["scene_note", "scene_note_source", "scene_note_seq", "scene_note_at", "updated_at"]
    )
