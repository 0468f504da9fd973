from __future__ import annotations

import pytest
from django.urls import reverse

from orbchat.accounts import services
from orbchat.accounts.models import User
from tests.factories import PASSWORD, make_owner

pytestmark = pytest.mark.django_db


def setup_post(client, username="owner", password=PASSWORD):
    return client.post(
        reverse("accounts:setup"), {"username": username, "password1": password, "password2": password}
    )


@pytest.mark.parametrize("path", ["/", "/characters/", "/settings/", "/login/", "/admin/"])
def test_every_page_leads_to_setup_while_no_account_exists(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:setup")


def test_setup_creates_the_owner_and_signs_them_in(client):
    response = setup_post(client)
    assert response.status_code == 302 and response["Location"] == reverse("home")
    owner = User.objects.get()
    assert owner.role == User.Role.OWNER and owner.is_superuser
    assert client.get(reverse("home")).status_code == 200


def test_setup_refuses_mismatched_and_weak_passwords_and_saves_nothing(client):
    response = client.post(
        reverse("accounts:setup"), {"username": "owner", "password1": PASSWORD, "password2": "other"}
    )
    assert "The two passwords differ." in response.content.decode()
    response = setup_post(client, password="123")
    assert "too short" in response.content.decode()
    assert not User.objects.exists()


def test_setup_cannot_run_twice(client):
    make_owner()
    response = setup_post(client, username="intruder")
    assert response.status_code == 302 and response["Location"] == reverse("accounts:login")
    assert list(User.objects.values_list("username", flat=True)) == ["owner"]


def test_the_database_refuses_a_second_owner():
    make_owner()
    with pytest.raises(services.SetupAlreadyDone):
        services.owner_create(username="second", password=PASSWORD)
    assert User.objects.filter(role=User.Role.OWNER).count() == 1


@pytest.mark.parametrize("path", ["/", "/characters/", "/corpus/", "/settings/", "/settings/users/"])
def test_login_is_required_once_set_up(client, path):
    make_owner()
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login") + "?next=")


def test_owner_signs_in_and_out(client):
    make_owner()
    response = client.post(reverse("accounts:login"), {"username": "owner", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == reverse("home")
    home = client.get(reverse("home")).content.decode()
    assert "Sign out owner" in home
    client.post(reverse("accounts:logout"))
    assert client.get(reverse("home")).status_code == 302


def test_wrong_password_is_refused(client):
    make_owner()
    response = client.post(reverse("accounts:login"), {"username": "owner", "password": "nope"})
    assert response.status_code == 200
    assert "correct username and password" in response.content.decode()


def test_home_leads_to_connecting_a_model_until_one_is_connected(client):
    client.force_login(make_owner())
    assert "Connect a model" in client.get(reverse("home")).content.decode()


def test_setup_gives_the_owner_a_default_persona_with_their_name(client):
    setup_post(client, username="Ada")
    persona = User.objects.get().personas.get(is_default=True)
    assert persona.name == "Ada"
