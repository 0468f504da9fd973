"""Reads of rooms."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from rooms.models import Room, Variant


def chat_list(*, user, q: str = "", tag: str = "") -> QuerySet[Room]:
    rooms = Room.objects.filter(host=user).prefetch_related("seats")
    if q:
        text_hits = Variant.objects.filter(room__host=user, text__icontains=q).values("room_id")
        rooms = rooms.filter(
            Q(title__icontains=q) | Q(seats__name__icontains=q) | Q(pk__in=text_hits)
        ).distinct()
    if tag:
        ids = [r.pk for r in rooms.only("pk", "tags") if tag.lower() in (t.lower() for t in r.tags)]
        rooms = rooms.filter(pk__in=ids)
    return rooms


def chat_tags(*, user) -> list[str]:
    tags: set[str] = set()
    for row in Room.objects.filter(host=user).values_list("tags", flat=True):
        tags.update(t for t in row if isinstance(t, str) and t)
    return sorted(tags, key=str.lower)


def last_prompt(room: Room) -> dict | None:
    """Return the prompt recorded for the room's most recent AI turn."""
    variant = Variant.objects.filter(room=room, prompt__isnull=False).order_by("-created_at", "-pk").first()
    return variant.prompt if variant else None
