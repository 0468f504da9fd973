from __future__ import annotations

import pytest

from orbchat.connections import services as connection_services
from orbchat.library.models import Character
from rooms import services
from tests.factories import make_owner


@pytest.fixture
def host(db):
    return make_owner(username="host")


@pytest.fixture
def character(host) -> Character:
    return host.characters.get()


@pytest.fixture
def room(host, character):
    return services.room_create_from_character(host=host, character=character)


@pytest.fixture
def connected(host, fake_llm):
    """The host's Chat model is the fake provider."""
    return connection_services.connection_create(
        owner=host, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
    )


@pytest.fixture
def signed_in(client, host):
    """The test client, signed in as the host."""
    client.force_login(host)
    return client
