"""Reads of a user's library. Every lookup is scoped to its owner: another user's item is a 404."""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Count, Model, Q, QuerySet
from django.shortcuts import get_object_or_404

from orbchat.accounts.models import User
from orbchat.library.models import (
    Character,
    ContextTemplate,
    InstructTemplate,
    Persona,
    Preset,
    SystemPrompt,
    WorldBook,
    WorldEntry,
)

M = TypeVar("M", bound=Model)


def owned(model: type[M], *, user: User, pk: int) -> M:
    """Return the user's own object, or raise Http404 (never reveal that another user's exists)."""
    return get_object_or_404(model, pk=pk, owner=user)


def character_list(
    *, user: User, q: str = "", tag: str = "", favourites: bool = False
) -> QuerySet[Character]:
    characters = Character.objects.filter(owner=user).annotate(book_count=Count("world_books"))
    if q:
        characters = characters.filter(
            Q(name__icontains=q)
            | Q(description__icontains=q)
            | Q(creator__icontains=q)
            | Q(tags__icontains=q)
        )
    if favourites:
        characters = characters.filter(favourite=True)
    if tag:
        # JSON containment is not portable to SQLite; tags lists are short, so filter in Python.
        ids = [c.pk for c in characters.only("pk", "tags") if tag.lower() in (t.lower() for t in c.tags)]
        characters = characters.filter(pk__in=ids)
    return characters


def character_tags(*, user: User) -> list[str]:
    tags: set[str] = set()
    for row in Character.objects.filter(owner=user).values_list("tags", flat=True):
        tags.update(t for t in row if isinstance(t, str) and t)
    return sorted(tags, key=str.lower)


def persona_list(*, user: User) -> QuerySet[Persona]:
    return Persona.objects.filter(owner=user)


def persona_default(*, user: User) -> Persona | None:
    return Persona.objects.filter(owner=user, is_default=True).first()


def preset_list(*, user: User) -> QuerySet[Preset]:
    return Preset.objects.filter(owner=user)


def worldbook_list(*, user: User) -> QuerySet[WorldBook]:
    return WorldBook.objects.filter(owner=user).annotate(entry_count=Count("entries"))


def entry_list(*, book: WorldBook, q: str = "") -> QuerySet[WorldEntry]:
    entries = book.entries.all()
    if q:
        entries = entries.filter(Q(comment__icontains=q) | Q(content__icontains=q) | Q(keys__icontains=q))
    return entries.order_by("uid")


def template_groups(*, user: User) -> list[dict]:
    """Return the user's instruct templates, context templates and system prompts, one group each."""
    return [
        {"kind": kind, "title": title, "items": list(model.objects.filter(owner=user))}
        for kind, title, model in (
            ("instruct", "Instruct templates", InstructTemplate),
            ("context", "Context templates", ContextTemplate),
            ("system_prompt", "System prompts", SystemPrompt),
        )
    ]
