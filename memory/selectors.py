"""Reads of memory."""

from __future__ import annotations

from django.db.models import Count

from memory.models import RoomMemory, Summary


def room_memory_status(room) -> dict:
    """What the host sees about a room's memory: counts by tier, stale, the last problem, a backfill."""
    by_tier = dict(
        Summary.objects.filter(room=room, scope="shared")
        .values_list("tier")
        .annotate(n=Count("pk"))
        .order_by("tier")
    )
    state = RoomMemory.objects.filter(room=room).first()
    return {
        "by_tier": sorted(by_tier.items()),
        "total": sum(by_tier.values()),
        "stale": Summary.objects.filter(room=room, stale=True).count(),
        "extractive": Summary.objects.filter(room=room, source=Summary.Source.EXTRACTIVE).count(),
        "state": state,
    }


def reindex_status(user):
    """The generation being built for a new embedding model, if any (with done/total)."""
    from memory.models import VectorIndex

    return VectorIndex.objects.filter(user=user, state=VectorIndex.State.BUILDING).order_by("-pk").first()
