"""The Prompts section of Memory tuning: shown, saved, refused, reset, and only for the owner and admins."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory import prompts
from memory.models import MemoryTuning
from tests.factories import client_for, join, make_user
from tests.memory.conftest import tuning_data

OWN = "Summarise this for {{pov}} in French.\r\n\r\n{{messages}}\r\n\r\nJSON now."


@pytest.fixture
def client(host):
    return client_for(host)


def test_the_prompts_show_the_built_in_text_and_their_placeholders(client):
    page = client.get(reverse("memory:tuning")).content.decode()
    assert '<h2 id="prompts-title">Prompts</h2>' in page
    assert "You keep the memory of a long roleplay chat. You are shown one stretch" in page
    assert "You are shown several consecutive memory notes" in page
    assert "<code>{{messages}}</code>" in page and "<code>{{notes}}</code>" in page
    assert "Reset to built-in" not in page  # nothing to reset while both are built-in


def test_the_built_in_text_saved_as_shown_stays_the_built_in(client):
    shown = {f"prompt_{kind}": spec.builtin.replace("\n", "\r\n") for kind, spec in prompts.KINDS.items()}
    assert client.post(reverse("memory:tuning"), {**tuning_data(), **shown}).status_code == 302
    assert MemoryTuning.objects.get().custom_prompts == {}


def test_a_valid_prompt_is_saved_and_shown_as_the_hosts_own(client):
    response = client.post(reverse("memory:tuning"), {**tuning_data(), "prompt_block": OWN})
    assert response.status_code == 302
    assert MemoryTuning.objects.get().custom_prompts == {"block": OWN.replace("\r\n", "\n")}
    page = client.get(reverse("memory:tuning")).content.decode()
    assert "Summarise this for {{pov}} in French." in page
    assert page.count("Reset to built-in") == 1


def test_an_invalid_prompt_is_refused_by_field_and_nothing_is_saved(client):
    data = {**tuning_data(), "block_size": 12, "prompt_rollup": "Roll these up for {{char}}."}
    response = client.post(reverse("memory:tuning"), data)
    assert response.status_code == 200
    errors = response.context["form"].errors["prompt_rollup"]
    assert errors[0].startswith("Unknown placeholder {{char}}.")
    assert errors[1].startswith("The prompt needs {{notes}}")
    assert "Unknown placeholder {{char}}." in response.content.decode()
    assert not MemoryTuning.objects.exists()


def test_reset_puts_the_built_in_prompt_back(client):
    own = {"prompt_block": OWN, "prompt_rollup": "Arc:\n{{notes}}"}
    client.post(reverse("memory:tuning"), {**tuning_data(), **own})
    response = client.post(reverse("memory:tuning"), {**tuning_data(), "reset": "block"}, follow=True)
    assert "Block summaries: the built-in prompt is back in use." in response.content.decode()
    assert MemoryTuning.objects.get().custom_prompts == {"rollup": "Arc:\n{{notes}}"}
    assert client.post(reverse("memory:tuning"), {"reset": "nonsense"}).status_code == 400


def test_members_can_neither_save_nor_reset_prompts(host, room):
    member = make_user(actor=host, username="member")
    join(room, member)
    MemoryTuning.objects.create(pk=1, custom_prompts={"block": OWN})
    outsider = client_for(member)
    data = {**tuning_data(), "prompt_block": "{{messages}}"}
    assert outsider.post(reverse("memory:tuning"), data).status_code == 403
    assert outsider.post(reverse("memory:tuning"), {"reset": "block"}).status_code == 403
    assert MemoryTuning.objects.get().custom_prompts == {"block": OWN}
