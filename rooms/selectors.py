"""Reads of rooms."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from orbchat.library.selectors import persona_default
from rooms.models import Invite, Member, Message, Room, Seat, Variant
from rooms.rendering import plain_excerpt
from rooms.timeline import ticks, timeline


def visible_rooms(*, user) -> QuerySet[Room]:
    """Rooms `user` hosts or is an active member of."""
    member_of = Member.objects.filter(user=user, state=Member.State.ACTIVE).values("room_id")
    return Room.objects.filter(Q(host=user) | Q(pk__in=member_of))


def plays_in_others_rooms(*, user) -> bool:
    """Whether `user` is an active member of an open room someone else hosts (where the host's
    Chat model answers, so they can play with no model of their own)."""
    return (
        Member.objects.filter(user=user, state=Member.State.ACTIVE, room__archived_at=None)
        .exclude(room__host=user)
        .exists()
    )


def seat_avatar(room: Room, *, seat_pk: int):
    """The picture of the character in one of `room`'s seats (its card's image), or None."""
    seat = Seat.objects.filter(room=room, pk=seat_pk).select_related("character").first()
    if seat is None or seat.character is None or not seat.character.avatar:
        return None
    return seat.character.avatar


def person_avatar(room: Room, *, user_pk: int):
    """The picture of the persona a person of `room` (its host, or a member now or before)
    writes as there, or None."""
    if user_pk == room.host_id:
        persona = room.persona if room.persona_id is not None else persona_default(user=room.host)
    else:
        member = Member.objects.filter(room=room, user_id=user_pk).select_related("persona", "user").first()
        if member is None:
            return None
        persona = member.persona or persona_default(user=member.user)
    return persona.avatar if persona is not None and persona.avatar else None


def persona_avatar(room: Room, *, persona_pk: int):
    """The picture of a persona a message in `room` was written as, or None (also for a persona
    no message there was written as: a persona is shown only to the rooms it spoke in)."""
    message = (
        Message.objects.filter(room=room, persona_id=persona_pk, kind=Message.Kind.HUMAN)
        .select_related("persona")
        .only("persona__avatar")
        .first()
    )
    if message is None or message.persona is None or not message.persona.avatar:
        return None
    return message.persona.avatar


def hosted_rooms(*, user) -> QuerySet[Room]:
    """The rooms `user` hosts (what their Corpus searches and their memory stats count)."""
    return Room.objects.filter(host=user).order_by("title", "pk")


LAST_LINE_CHARS = 120  # how much of a chat's last message its row in the chat list shows


@dataclass(frozen=True)
class LastLine:
    speaker: str
    text: str  # plain text: macros and markup stripped, at most LAST_LINE_CHARS
    at: datetime


def chat_list(*, user, q: str = "", tag: str = "") -> QuerySet[Room]:
    """The chats `user` may open, each annotated with `last_message_pk`, its newest visible message."""
    last_visible = Message.objects.filter(room=OuterRef("pk"), hidden=False).order_by("-seq").values("pk")[:1]
    rooms = (
        visible_rooms(user=user)
        .select_related("host")
        .prefetch_related("seats")
        .annotate(last_message_pk=Subquery(last_visible))
    )
    if q:
        text_hits = Variant.objects.filter(room__in=visible_rooms(user=user), text__icontains=q).values(
            "room_id"
        )
        rooms = rooms.filter(
            Q(title__icontains=q) | Q(seats__name__icontains=q) | Q(pk__in=text_hits)
        ).distinct()
    if tag:
        ids = [r.pk for r in rooms.only("pk", "tags") if tag.lower() in (t.lower() for t in r.tags)]
        rooms = rooms.filter(pk__in=ids)
    return rooms


def chat_last_lines(rooms) -> dict[int, LastLine]:
    """Map each room of `rooms` (from `chat_list`) to its last visible message line, in one query.

    A room with no visible message is left out.
    """
    ids = [room.last_message_pk for room in rooms if room.last_message_pk is not None]
    variants = (
        Variant.objects.filter(message_id__in=ids, index=F("message__active_index"))
        .select_related("message")
        .only("text", "room_id", "message__speaker_name", "message__created_at")
    )
    return {
        v.room_id: LastLine(
            speaker=v.message.speaker_name,
            text=plain_excerpt(v.text, limit=LAST_LINE_CHARS),
            at=v.message.created_at,
        )
        for v in variants
    }


def solo_chats_latest(*, user, character_ids) -> dict[int, int]:
    """Map each of `character_ids` to the chat `user` hosts with that character as its only seat,
    most recently active first; a character with no such chat is left out.

    Archived chats (nobody may post there) are not offered.
    """
    rows = (
        Room.objects.filter(host=user, archived_at=None)
        .annotate(seat_count=Count("seats"), solo_character=Max("seats__character_id"))
        .filter(seat_count=1, solo_character__in=list(character_ids))
        .order_by("-last_activity", "-pk")
        .values_list("solo_character", "pk")
    )
    latest: dict[int, int] = {}
    for character_id, room_id in rows:
        latest.setdefault(character_id, room_id)
    return latest


def chat_tags(*, user) -> list[str]:
    tags: set[str] = set()
    for row in Room.objects.filter(host=user).values_list("tags", flat=True):
        tags.update(t for t in row if isinstance(t, str) and t)
    return sorted(tags, key=str.lower)


def last_prompt(room: Room) -> dict | None:
    """Return the prompt recorded for the room's most recent AI turn run as its current host."""
    variants = Variant.objects.filter(room=room, prompt__isnull=False)
    if room.host_since is not None:
        variants = variants.filter(created_at__gte=room.host_since)
    variant = variants.order_by("-created_at", "-pk").first()
    return variant.prompt if variant else None


def room_people(room: Room) -> dict:
    """Return the room's seats (with presence) and people, for the People page and the room header."""
    seats = list(Seat.objects.filter(room=room).select_related("character").prefetch_related("presences"))
    seated_ids = {s.pk for s in seats if any(p.left_seq is None for p in s.presences.all())}
    members = list(
        Member.objects.filter(room=room, state=Member.State.ACTIVE).select_related("user", "persona")
    )
    rows = timeline(
        [(s.name, [(p.joined_seq, p.left_seq) for p in s.presences.all()]) for s in seats],
        length=room.next_seq,
    )
    return {
        "seats": [s for s in seats if s.pk in seated_ids],
        "unseated": [s for s in seats if s.pk not in seated_ids],
        "members": members,
        "timeline": rows,
        "ticks": ticks(room.next_seq),
    }


def pending_invitations(*, user):
    """Invitations addressed to `user` that are still open."""
    now = timezone.now()
    return (
        Invite.objects.filter(user=user, revoked_at__isnull=True, room__archived_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .select_related("room", "room__host")
    )
