"""Template tags of memory for pages of other apps (the room's brain-icon popover)."""

from __future__ import annotations

from django import template

from memory.selectors import builtin_rewrite, summariser_status

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
