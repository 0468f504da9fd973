"""Memory pages: who may use them."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from memory.models import MemoryTuning
from tests.factories import client_for, join, make_user
from tests.memory.conftest import tuning_data


@pytest.fixture
def people(host, room):
    member = make_user(actor=host, username="member")
    join(room, member)
    return {"member": member, "outsider": make_user(actor=host, username="outsider")}


@pytest.mark.parametrize("name", ["memory:backfill", "memory:backfill_cancel"])
def test_only_the_host_starts_or_stops_a_backfill(host, room, people, name):
    url = reverse(name, args=[room.pk])
    assert client_for(people["member"]).post(url).status_code == 403
    assert client_for(people["outsider"]).post(url).status_code == 404
    assert Client().post(url).status_code == 302  # to the login page
    assert client_for(host).post(url).status_code == 302


def test_memory_tuning_is_for_the_owner_and_admins(host, people):
    url = reverse("memory:tuning")
    assert client_for(people["member"]).get(url).status_code == 403
    owner = client_for(host)
    assert owner.get(url).status_code == 200
    response = owner.post(url, {"block_size": 1, "fresh_window": 8, "fan_in": 4, "max_tier": 3})
    assert response.status_code == 200 and "block_size" in response.context["form"].errors
    assert not MemoryTuning.objects.filter(block_size=1).exists()


def test_memory_tuning_saves_valid_values(host):
    data = tuning_data(
        block_size=10,
        fresh_window=6,
        max_tier=2,
        mode="semantic",
        score_floor=0.4,
        quotes=2,
        run_solo="ask",
        run_group="manual",
    )
    assert client_for(host).post(reverse("memory:tuning"), data).status_code == 302
    tuning = MemoryTuning.objects.get()
    assert (tuning.run_solo, tuning.run_group) == ("ask", "manual")
    assert (tuning.block_size, tuning.fresh_window, tuning.mode) == (10, 6, "semantic")
    assert (tuning.quotes_on, tuning.quotes) == (True, 2)


def test_memory_tuning_turns_quotes_off_and_refuses_more_than_four(host):
    client = client_for(host)
    page = client.get(reverse("memory:tuning")).content.decode()
    assert "Quotes per reply" in page and "Also bring back short passages" in page
    data = tuning_data(quotes_on=False, quotes=5)
    refused = client.post(reverse("memory:tuning"), data)
    assert refused.status_code == 200
    assert "less than or equal to 4" in refused.content.decode()
    assert client.post(reverse("memory:tuning"), {**data, "quotes": 0}).status_code == 302
    tuning = MemoryTuning.objects.get()
    assert (tuning.quotes_on, tuning.quotes) == (False, 0)


def test_memory_tuning_sets_the_facts_per_reply_and_the_budget_order_and_names_a_bad_order(host):
    client = client_for(host)
    page = client.get(reverse("memory:tuning")).content.decode()
    assert "Facts per reply" in page and "Memory budget order" in page
    data = tuning_data(
        keyword_match=False,
        quotes_on=False,
        quotes=2,
        facts_per_reply=3,
        budget_priority="pinned, yours, facts, notes, summaries, quotes",
    )
    refused = client.post(reverse("memory:tuning"), data)
    assert refused.status_code == 200
    assert "Unknown part “notes” in the budget priority" in refused.content.decode()
    assert not MemoryTuning.objects.exists()
    data["budget_priority"] = "summaries, pinned, yours, scene, facts, quotes"
    assert client.post(reverse("memory:tuning"), data).status_code == 302
    tuning = MemoryTuning.objects.get()
    assert (tuning.facts_per_reply, tuning.budget_priority) == (
        3,
        "summaries, pinned, yours, scene, facts, quotes",
    )


def test_each_person_switches_their_own_memory(host, people):
    client_for(people["member"]).post(reverse("memory:remember"), {})
    people["member"].refresh_from_db()
    host.refresh_from_db()
    assert not people["member"].remember_long_chats and host.remember_long_chats
