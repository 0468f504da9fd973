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


def recall_last(room):
    """The latest recall log of the room (a reply's real count), or None."""
    from memory.models import RecallLog

    return RecallLog.objects.filter(room=room).order_by("-created_at", "-pk").first()


def recall_fresh_check(room) -> dict:
    """The host's recall detail: the last reply's query and live window, checked again now.

    A fresh check with the room's current settings (usually what happened; not a recording).
    The real count of that reply comes with it.
    """
    from memory import recaller
    from orbchat.connections.services import model_roles_get
    from orbchat.prompting.assemble import default_count_tokens
    from rooms import tokens
    from rooms.models import Seat

    last = recall_last(room)
    if last is None or last.state != "done":
        return {"state": "none" if last is None else last.state, "fresh": False}
    detail = last.detail
    seat = Seat.objects.filter(pk=detail.get("seat"), room=room).first() if detail.get("seat") else None
    chat = model_roles_get(user=room.host).chat
    count = tokens.counter_for(chat.model.split("/", 1)[-1]) if chat else default_count_tokens
    outcome = recaller.recall_for(
        room=room,
        seat=seat,
        query_texts=detail.get("messages") or [detail.get("query", "")],
        live_start=int(detail.get("live_start", 0)),
        budget=int(detail.get("budget", 0)),
        count=count,
    )
    return outcome.detail() | {
        "fresh": True,
        "turn_count": last.count,
        "speaker": last.speaker,
        "at": last.created_at.isoformat(),
    }
