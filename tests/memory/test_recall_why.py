"""Why nothing was recalled, through the real turn memory, recall log and the host's views."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.recall import recaller
from memory.recall.why import Fit, memory_starts_at
from memory.services import catch_up as passes
from memory.services import recall_log
from memory.turn_memory import recall_dry_run
from orbchat.connections import services as connection_services
from tests.factories import client_for, join, make_user
from tests.memory.conftest import story_room
from tests.memory.test_recaller import tune

pytestmark = pytest.mark.django_db(transaction=True)


def detail_after(room, text: str) -> dict:
    """Log a dry run as the last reply's recall and read the host's recall detail."""
    outcome = recall_dry_run(room=room, seat=None, text=text)
    recall_log.log_save(room_id=room.pk, variant_id=None, speaker="Narrator", outcome=outcome)
    response = client_for(room.host).get(reverse("memory:recall_detail", args=[room.pk]))
    assert response.status_code == 200
    return response.json()


def test_a_young_chat_is_told_when_the_first_summary_comes(room, chat):
    story_room(room, 6)
    assert detail_after(room, "Hello there.")["why"] == "no summaries yet (first at message 16)"


def test_a_chat_that_still_fits_says_so_with_its_numbers(room, chat):
    story_room(room, 40)
    passes.catch_up(room.pk)
    room.refresh_from_db()
    detail = detail_after(room, "What happened at the harbour?")
    fit = detail["fit"]
    assert fit["fits"] and fit["history_tokens"] < fit["history_budget"]
    assert detail["why"].startswith(
        f"everything still fits in the prompt ({fit['history_tokens']:,} of "
        f"{fit['history_budget']:,} history tokens) — memory starts at about message "
    )
    starts = memory_starts_at(Fit(**fit))
    assert detail["why"].endswith(f"message {starts:,}") and starts > fit["messages"] > 40


def test_a_long_chat_names_the_built_in_summariser_then_the_best_score(room, host, chat):
    # The query is the message sent alone, so the story's own words (its keywords, its quotes)
    # cannot match it.
    tune(query_window=1)
    story_room(room, 400)
    passes.catch_up(room.pk)
    room.refresh_from_db()
    recaller.forget_cached_vectors()
    question = "Zebra quantum spreadsheets compile in Fortran?"
    assert detail_after(room, question)["why"] == (
        "built-in summariser — connect a Utility model for better memory"
    )
    connection_services.model_roles_utility_from_chat(user=host)
    detail = detail_after(room, question)
    assert (
        detail["count"] == 0
        and detail["why"] == f"nothing close enough (best {round(detail['best'] * 100)} %)"
    )


def test_a_member_gets_neither_the_reason_nor_the_summariser_switch(room, host, chat):
    member = make_user(actor=host, username="member")
    join(room, member)
    story_room(room, 6)
    detail_after(room, "Hello there.")
    assert client_for(member).get(reverse("memory:recall_detail", args=[room.pk])).status_code in (403, 404)
    page = client_for(member).get(reverse("rooms:room", args=[room.pk])).content.decode()
    assert "Use my Chat model for memory" not in page and "built-in summariser" not in page


def test_the_hosts_popover_and_panel_offer_the_switch_until_it_is_used(room, host, chat):
    popover = client_for(host).get(reverse("rooms:room", args=[room.pk])).content.decode()
    panel = client_for(host).get(reverse("memory:panel", args=[room.pk])).content.decode()
    for page in (popover, panel):
        assert "written by the built-in summariser" in page and "Use my Chat model for memory" in page
    response = client_for(host).post(
        reverse("connections:use_chat_for_memory"),
        {"next": reverse("memory:panel", args=[room.pk])},
        follow=True,
    )
    assert "Fake now writes your memory summaries." in response.content.decode()
    assert (
        "Use my Chat model for memory"
        not in client_for(host).get(reverse("rooms:room", args=[room.pk])).content.decode()
    )
