"""Writes of Memory's settings: the site's tuning and a host's own switch."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from memory import prompts
from memory.models import MemoryTuning, Scene
from memory.selectors import tuning_get


@transaction.atomic
def tuning_update(*, form) -> MemoryTuning:
    """Save validated Memory tuning (a ModelForm over the one row).

    A new block size cuts every chat's transcript chunks anew: each is read again on the next
    catch-up (`index_scenes`).
    """
    before = tuning_get().block_size
    tuning = form.save()
    if tuning.block_size != before:
        Scene.objects.update(indexed_hash="")
    return tuning


@transaction.atomic
def prompt_reset(*, kind: str) -> MemoryTuning:
    """Put the built-in prompt of `kind` (a key of `prompts.KINDS`) back in use."""
    if kind not in prompts.KINDS:
        raise ValueError(f"There is no {kind!r} prompt.")
    tuning = tuning_get()
    tuning.custom_prompts = {name: text for name, text in tuning.custom_prompts.items() if name != kind}
    tuning.save()
    return tuning


@transaction.atomic
def remember_set(*, user, on: bool) -> None:
    get_user_model().objects.filter(pk=user.pk).update(remember_long_chats=on)
