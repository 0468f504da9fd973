from __future__ import annotations

import pytest
from django.urls import reverse

from orbchat.library import services
from orbchat.library.models import Persona

pytestmark = pytest.mark.django_db


def test_one_default_persona_per_user(signed_in, owner):
    starter = owner.personas.get()
    signed_in.post(reverse("library:personas"), {"name": "Knight", "description": "Sworn."})
    knight = Persona.objects.get(name="Knight")
    assert starter.is_default and not knight.is_default
    signed_in.post(reverse("library:persona_default", args=[knight.pk]))
    starter.refresh_from_db()
    knight.refresh_from_db()
    assert knight.is_default and not starter.is_default


def test_deleting_the_default_promotes_another(owner):
    starter = owner.personas.get()
    other = services.persona_create(owner=owner, name="Bard")
    services.persona_delete(persona=starter)
    other.refresh_from_db()
    assert other.is_default


def test_a_persona_can_carry_world_books(signed_in, owner):
    persona = owner.personas.get()
    book = owner.world_books.get()
    signed_in.post(
        reverse("library:persona", args=[persona.pk]), {"name": persona.name, "world_books": [book.pk]}
    )
    assert list(persona.world_books.all()) == [book]
