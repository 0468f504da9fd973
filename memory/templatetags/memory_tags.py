"""Template tags of memory for pages of other apps (the room's brain-icon popover)."""

from __future__ import annotations

from django import template

from memory.selectors import summariser_status

register = template.Library()


@register.inclusion_tag("memory/_summariser.html", takes_context=True)
def memory_summariser(context) -> dict:
    """Who writes the signed-in person's summaries, with the one click to use their Chat model."""
    request = context["request"]
    return {"summariser": summariser_status(request.user), "request": request}
