from __future__ import annotations

import pytest
from django.urls import reverse

from orbchat.connections import selectors, services
from orbchat.connections.models import Connection
from tests.factories import make_owner, make_user
from tests.fakes.llm import Reply

pytestmark = pytest.mark.django_db

KEY = "sk-very-secret-test-key-123"


@pytest.fixture
def owner():
    return make_owner()


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


def local_connection(owner, fake_llm, key=KEY):
    return services.connection_create(
        owner=owner,
        name="Fake",
        provider="local",
        model="fake-model",
        api_base=fake_llm.base_url,
        api_key=key,
    )


def test_the_key_is_encrypted_at_rest_and_never_rendered(signed_in, owner, fake_llm):
    connection = local_connection(owner, fake_llm)
    assert KEY not in connection.api_key_encrypted
    for url in (reverse("connections:detail", args=[connection.pk]), reverse("connections:list")):
        page = signed_in.get(url).content.decode()
        assert KEY not in page and connection.api_key_encrypted not in page
        assert "key set" in page.lower() or "API key set" in page


def test_test_connection_shows_the_models_answer(signed_in, owner, fake_llm):
    connection = local_connection(owner, fake_llm)
    fake_llm.script(Reply("ready"))
    response = signed_in.post(reverse("connections:test", args=[connection.pk]), HTTP_HX_REQUEST="true")
    assert "The model answered: ready" in response.content.decode()
    assert fake_llm.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_test_connection_explains_a_refused_key(signed_in, owner, fake_llm):
    connection = local_connection(owner, fake_llm)
    fake_llm.script(Reply(status=401))
    response = signed_in.post(reverse("connections:test", args=[connection.pk]), HTTP_HX_REQUEST="true")
    assert (
        "The provider refused the API key. Check the key in Settings → Models." in response.content.decode()
    )


def test_test_connection_explains_an_unreachable_server(signed_in, owner):
    connection = services.connection_create(
        owner=owner, name="Gone", provider="local", model="m", api_base="http://127.0.0.1:9/v1"
    )
    response = signed_in.post(reverse("connections:test", args=[connection.pk]), HTTP_HX_REQUEST="true")
    assert "Could not reach the provider" in response.content.decode()


def test_the_first_connection_becomes_the_chat_model_and_the_site_says_when_none(signed_in, owner, fake_llm):
    assert "No Chat model is connected yet" in signed_in.get(reverse("connections:list")).content.decode()
    connection = local_connection(owner, fake_llm)
    assert selectors.model_roles_get(user=owner).chat == connection
    assert "No Chat model is connected yet" not in signed_in.get(reverse("connections:list")).content.decode()


def test_creating_through_the_quick_start_form_prefixes_the_model(signed_in, owner):
    signed_in.post(
        reverse("connections:create") + "?provider=openai",
        {"name": "", "provider": "openai", "model": "gpt-4o-mini", "api_key": KEY},
    )
    connection = Connection.objects.get(owner=owner)
    assert connection.model == "openai/gpt-4o-mini" and connection.has_api_key


def test_saving_without_a_key_keeps_the_old_one(signed_in, owner, fake_llm):
    connection = local_connection(owner, fake_llm)
    before = connection.api_key_encrypted
    signed_in.post(
        reverse("connections:detail", args=[connection.pk]),
        {"name": "Renamed", "provider": "local", "model": "openai/fake-model", "api_base": fake_llm.base_url},
    )
    connection.refresh_from_db()
    assert connection.name == "Renamed" and connection.api_key_encrypted == before


def test_context_size_comes_from_litellm_unless_set(owner):
    known = services.connection_create(owner=owner, name="o", provider="openai", model="gpt-4o-mini")
    from orbchat.connections import gateway

    assert gateway.context_size(known) == 128000
    known.context_size = 8192
    assert gateway.context_size(known) == 8192


def test_roles_refuse_another_users_connection(owner, fake_llm):
    stranger = make_user(actor=owner, username="stranger")
    theirs = local_connection(stranger, fake_llm)
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        services.model_roles_update(
            user=owner, chat=theirs, utility=None, embedding=None, rerank_kind="builtin"
        )


def test_another_users_connection_is_not_found(client, owner, fake_llm):
    stranger = make_user(actor=owner, username="stranger")
    mine = local_connection(owner, fake_llm)
    client.force_login(stranger)
    assert client.get(reverse("connections:detail", args=[mine.pk])).status_code == 404
    assert client.post(reverse("connections:test", args=[mine.pk])).status_code == 404
