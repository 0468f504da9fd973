"""Connecting a model turns memory on: the connect form's choice and the one-click switch."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from orbchat.connections import selectors, services
from orbchat.connections.models import Connection, ModelRoles
from tests.factories import client_for, make_owner, make_user

pytestmark = pytest.mark.django_db

FORM = {"name": "", "provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-test-key"}


@pytest.fixture
def owner():
    return make_owner()


def connection_for(user, name="Mine") -> Connection:
    return services.connection_create(owner=user, name=name, provider="openai", model="gpt-4o-mini")


def test_the_connect_form_offers_memory_ticked(owner):
    page = client_for(owner).get(reverse("connections:create") + "?provider=openai").content.decode()
    assert "Also write memory summaries with it" in page
    assert 'name="also_utility"' in page and "checked" in page.split('name="also_utility"')[1].split(">")[0]


def test_connecting_the_first_model_fills_chat_and_utility(owner):
    client_for(owner).post(reverse("connections:create"), FORM | {"also_utility": "on"})
    roles = selectors.model_roles_get(user=owner)
    connection = Connection.objects.get(owner=owner)
    assert roles.chat == connection and roles.utility == connection


def test_unticked_the_first_model_fills_only_chat(owner):
    client_for(owner).post(reverse("connections:create"), FORM)
    roles = selectors.model_roles_get(user=owner)
    assert roles.chat == Connection.objects.get(owner=owner) and roles.utility is None


def test_the_choice_is_not_offered_once_a_utility_model_is_set(owner):
    client_for(owner).post(reverse("connections:create"), FORM | {"also_utility": "on"})
    page = client_for(owner).get(reverse("connections:create")).content.decode()
    assert 'name="also_utility"' not in page


def test_use_my_chat_model_for_memory_sets_the_utility_role(owner):
    connection = connection_for(owner)
    response = client_for(owner).post(reverse("connections:use_chat_for_memory"), {"next": "/"})
    assert response.status_code == 302 and response.url == "/"
    assert selectors.model_roles_get(user=owner).utility == connection


def test_the_switch_changes_only_the_signed_in_persons_roles(owner):
    member = make_user(actor=owner, username="member")
    connection_for(owner)
    theirs = connection_for(member, name="Theirs")
    client_for(member).post(reverse("connections:use_chat_for_memory"))
    assert selectors.model_roles_get(user=owner).utility is None
    assert selectors.model_roles_get(user=member).utility == theirs


def test_the_switch_refuses_a_chat_connection_of_someone_else(owner):
    member = make_user(actor=owner, username="member")
    ModelRoles.objects.create(user=member, chat=connection_for(owner))
    with pytest.raises(ValidationError, match="not yours"):
        services.model_roles_utility_from_chat(user=member)
    assert selectors.model_roles_get(user=member).utility is None


def test_the_switch_without_a_chat_model_says_so(owner):
    response = client_for(owner).post(reverse("connections:use_chat_for_memory"), follow=True)
    assert "Connect a Chat model first." in response.content.decode()
    assert selectors.model_roles_get(user=owner).utility is None


def test_the_switch_needs_a_post(owner):
    connection_for(owner)
    assert client_for(owner).get(reverse("connections:use_chat_for_memory")).status_code == 405
    assert selectors.model_roles_get(user=owner).utility is None
