"""A chat whose memory the built-in summariser wrote, once its host has a Utility model: the
host is told how many summaries are the built-in ones and can have them rewritten."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.models import RoomMemory, Summary
from memory.services import catch_up as passes
from rooms import services as room_services
from tests.factories import client_for, join, make_user
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room
from tests.memory.test_tasks import set_utility, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SUMMARY = '{"heading": "A scene", "facts": ["Maren lit the lamp."], "keywords": ["lamp"]}'


@pytest.fixture
def imported(room):
    """A long chat whose memory was built before any model was connected."""
    story_room(room, 80)
    passes.catch_up(room.pk)
    return room


def builtin(room) -> int:
    return Summary.objects.filter(room=room, source=Summary.Source.EXTRACTIVE).count()


def panel(user, room) -> str:
    return client_for(user).get(reverse("memory:panel", args=[room.pk])).content.decode()


def popover(user, room) -> str:
    return client_for(user).get(reverse("rooms:room", args=[room.pk])).content.decode()


def test_the_host_with_a_utility_model_is_offered_the_rewrite_with_the_count(imported, host, fake_llm):
    n = builtin(imported)
    assert n > 1
    set_utility(host, fake_llm)
    for page in (panel(host, imported), popover(host, imported)):
        assert f"{n} of this chat's summaries were written by the built-in summariser." in page
        assert "Rewrite them with Fake utility" in page
        assert reverse("memory:backfill", args=[imported.pk]) in page
        assert "Use my Chat model for memory" not in page


def test_without_a_utility_model_the_usual_notice_shows_instead(imported, host, chat):
    page = panel(host, imported)
    assert "Memory summaries are written by the built-in summariser" in page
    assert "Use my Chat model for memory" in page
    assert "of this chat's summaries" not in page and "Rewrite them with" not in page


def test_a_chat_with_no_built_in_summaries_has_no_offer(room, host, fake_llm):
    story_room(room, 80)
    set_utility(host, fake_llm)
    assert "Rewrite them with" not in panel(host, room)


def test_a_member_never_sees_the_offer_and_may_not_start_it(imported, host, fake_llm):
    set_utility(host, fake_llm)
    member = make_user(actor=host, username="member")
    join(imported, member)
    room_services.room_update(room=imported, settings={**imported.settings, "members_see_memory": True})
    for page in (panel(member, imported), popover(member, imported)):
        assert "Rewrite them with" not in page and "of this chat's summaries" not in page
    refused = client_for(member).post(
        reverse("memory:backfill", args=[imported.pk]), {"next": reverse("memory:panel", args=[imported.pk])}
    )
    assert refused.status_code == 403
    assert not RoomMemory.objects.filter(room=imported, backfill=RoomMemory.Backfill.QUEUED).exists()


def test_the_button_rewrites_every_built_in_summary(imported, host, fake_llm, celery_worker):
    set_utility(host, fake_llm)
    fake_llm.default = Reply(SUMMARY)
    before = Summary.objects.filter(room=imported).count()
    page = client_for(host)
    there = reverse("memory:panel", args=[imported.pk])
    response = page.post(reverse("memory:backfill", args=[imported.pk]), {"next": there})
    assert response.status_code == 302 and response.url == there
    wait_for(
        lambda: RoomMemory.objects.get(room=imported).backfill == RoomMemory.Backfill.DONE,
        timeout=120,
        what="the rewrite",
    )
    assert builtin(imported) == 0
    assert Summary.objects.filter(room=imported, source=Summary.Source.UTILITY).count() == before
    assert "Rewrite them with" not in panel(host, imported)
