"""Template tags of memory for pages of other apps (the room's brain-icon popover)."""

from __future__ import annotations

from django import template

from memory.selectors import builtin_rewrite, summariser_status
from memory.services import runs

register = template.Library()


@register.inclusion_tag("memory/_summariser.html", takes_context=True)
def memory_summariser(context, room=None) -> dict:
    """Who writes the signed-in person's summaries, with the one click to use their Chat model;
    for the host of `room`, the offer to rewrite its built-in summaries with their Utility model."""
    request = context["request"]
    host = room is not None and room.host_id == request.user.pk
    return {
        "summariser": summariser_status(request.user),
        "rewrite": builtin_rewrite(room) if host else None,
        "room": room,
        "request": request,
    }


def _is_host(context, room) -> bool:
    return room is not None and room.host_id == context["request"].user.pk


@register.inclusion_tag("memory/_cycle.html", takes_context=True)
def memory_cycle(context, room) -> dict:
    """For the host of `room`: the "Update memory?" prompt while a batch waits, and the panel of a
    running memory cycle (as it stands when the page opens, then live from the socket). Nothing at
    all for anyone else."""
    host = _is_host(context, room)
    return {
        "host": host,
        "room": room,
        "ask": runs.ask_prompt(room) if host else None,
        "running": runs.cycle_now(room.pk) if host else None,
    }


@register.inclusion_tag("memory/_update_now.html", takes_context=True)
def memory_update_now(context, room) -> dict:
    """For the host of `room` when memory does not run by itself: "Update memory now"."""
    host = _is_host(context, room)
    return {"host": host, "room": room, "mode": runs.run_mode(room) if host else ""}
