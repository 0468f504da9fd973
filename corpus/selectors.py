"""Reads of the Corpus: the rooms a person hosts, whether they are indexed, transcript windows."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, F, Max, Q

from corpus import ranking
from memory import blocks
from memory.models import Scene, Summary
from memory.selectors import block_tuning, tuning_get
from orbchat.library.models import Character
from rooms import selectors as rooms_selectors
from rooms.models import Message, Room, Seat

WINDOW_AROUND = 3  # messages shown before and after a scene
WINDOW_LIMIT = 60  # messages at most in one window (a deep roll-up covers hundreds)


@dataclass(frozen=True)
class RoomReadiness:
    room: Room
    expected: int  # complete blocks that should have a scene
    indexed: int

    @property
    def state(self) -> str:
        if self.expected == 0:
            return "young"
        if self.indexed == 0:
            return "not indexed"
        if self.indexed < self.expected:
            return "partly indexed"
        return "indexed"


def readiness(user) -> list[RoomReadiness]:
    """Each hosted room's scene index against what its messages call for (gaps and hidden
    messages make the count approximate: a room counts as indexed when nothing is missing)."""
    t = block_tuning(tuning_get())
    rooms = list(
        rooms_selectors.hosted_rooms(user=user).annotate(
            newest=Max("messages__seq"),
        )
    )
    indexed = dict(
        Scene.objects.filter(room__host=user)
        .exclude(indexed_hash="")
        .values_list("room_id")
        .annotate(n=Count("pk"))
        .values_list("room_id", "n")
    )
    found = []
    for room in rooms:
        newest = room.newest if room.newest is not None else -1
        fresh_start = max(0, newest + 1 - t.fresh_window)
        expected = fresh_start // blocks.span(0, t)
        found.append(RoomReadiness(room, expected, min(indexed.get(room.pk, 0), expected)))
    return found


def host_room(user, room_id: int) -> Room | None:
    """The room if `user` hosts it, else None (the Corpus never shows anyone else's room)."""
    return Room.objects.filter(pk=room_id, host=user).first()


def host_summary(user, summary_id: int) -> Summary | None:
    return Summary.objects.filter(pk=summary_id, room__host=user).select_related("room").first()


def scene_range(room: Room, block: int) -> tuple[int, int]:
    """The messages of a scene: as indexed, or (its row gone with a rewind) its block's range."""
    found = Scene.objects.filter(room=room, block=block).values_list("seq_from", "seq_to").first()
    if found:
        return found
    start, end = blocks.block_range(0, block, block_tuning(tuning_get()))
    return start, end - 1


def window(room: Room, seq_from: int, seq_to: int, *, q: str = "", around: int = WINDOW_AROUND) -> dict:
    """The transcript around a stretch: its messages plus `around` before and after, each with
    its number and speaker; `missing` when none of the stretch's own messages exist any more.
    `moment` is the message a link into the chat lands on: the one of the stretch sharing most
    words with the query `q` (the first one when none does)."""
    before = list(
        Message.objects.filter(room=room, seq__lt=seq_from)
        .order_by("-seq")
        .values_list("seq", flat=True)[:around]
    )
    after = list(
        Message.objects.filter(room=room, seq__gt=seq_to)
        .order_by("seq")
        .values_list("seq", flat=True)[:around]
    )
    start = min(before) if before else seq_from
    end = max(after) if after else seq_to
    rows = (
        Message.objects.filter(room=room, seq__gte=start, seq__lte=end, variants__index=F("active_index"))
        .order_by("seq")
        .values_list("seq", "speaker_name", "hidden", "variants__text")[:WINDOW_LIMIT]
    )
    lines = [
        {"seq": seq, "speaker": speaker, "hidden": hidden, "text": text, "inside": seq_from <= seq <= seq_to}
        for seq, speaker, hidden, text in rows
    ]
    inside = [line for line in lines if line["inside"]]
    total_inside = Message.objects.filter(room=room, seq__gte=seq_from, seq__lte=seq_to).count()
    wanted = set(ranking.query_terms(q))
    best = max(inside, key=lambda line: len(wanted & set(ranking.terms(line["text"]))), default=None)
    for line in lines:
        line["moment"] = best is not None and line["seq"] == best["seq"]
    return {
        "lines": lines,
        "missing": not total_inside,
        "moment": best["seq"] if best else None,
        "cut": max(0, total_inside - len(inside)),
    }


def characters_of(rooms_ids: list[int]) -> dict[int, list[str]]:
    """The seated characters' names per room."""
    names: dict[int, list[str]] = {}
    for room_id, name in Seat.objects.filter(room_id__in=rooms_ids).values_list("room_id", "name"):
        names.setdefault(room_id, []).append(name)
    return names


def hosted_characters(user):
    return Character.objects.filter(owner=user).filter(Q(seats__room__host=user)).distinct().order_by("name")
