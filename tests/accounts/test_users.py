from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from orbchat.accounts import services
from orbchat.accounts.models import User
from tests.factories import PASSWORD, make_owner, make_user

pytestmark = pytest.mark.django_db


def create_form(username, role="user"):
    return {"username": username, "password1": PASSWORD, "password2": PASSWORD, "role": role}


def test_owner_creates_an_admin_and_a_user_in_the_browser_form(client):
    owner = make_owner()
    client.force_login(owner)
    client.post(reverse("accounts:users"), create_form("ada", "admin"))
    client.post(reverse("accounts:users"), create_form("bob"))
    roles = dict(User.objects.values_list("username", "role"))
    assert roles == {"owner": "owner", "ada": "admin", "bob": "user"}
    page = client.get(reverse("accounts:users")).content.decode()
    assert "ada" in page and "bob" in page


def test_a_taken_username_is_refused_with_a_message(client):
    owner = make_owner()
    make_user(actor=owner, username="bob")
    client.force_login(owner)
    response = client.post(reverse("accounts:users"), create_form("BOB"))
    assert "is taken" in response.content.decode()
    assert User.objects.count() == 2


def test_an_admin_creates_users_but_not_admins():
    owner = make_owner()
    admin = make_user(actor=owner, username="ada", role=User.Role.ADMIN)
    assert make_user(actor=admin, username="carl").role == User.Role.USER
    with pytest.raises(PermissionDenied):
        make_user(actor=admin, username="dora", role=User.Role.ADMIN)


def test_a_user_cannot_reach_account_management(client):
    owner = make_owner()
    user = make_user(actor=owner)
    client.force_login(user)
    assert client.get(reverse("accounts:users")).status_code == 403
    response = client.post(reverse("accounts:users"), create_form("sneaky"))
    assert response.status_code == 403
    assert not User.objects.filter(username="sneaky").exists()


def test_a_deactivated_user_is_signed_out_and_cannot_sign_in(client):
    owner = make_owner()
    user = make_user(actor=owner)
    client.force_login(user)
    services.user_set_active(actor=owner, user=user, active=False)
    assert client.get(reverse("home")).status_code == 302
    response = client.post(reverse("accounts:login"), {"username": user.username, "password": PASSWORD})
    assert response.status_code == 200  # the form again, not a redirect into the site


def test_owner_deactivates_and_reactivates_through_the_page(client):
    owner = make_owner()
    user = make_user(actor=owner)
    client.force_login(owner)
    client.post(reverse("accounts:user_set_active", args=[user.pk]), {"active": "0"})
    user.refresh_from_db()
    assert not user.is_active
    client.post(reverse("accounts:user_set_active", args=[user.pk]), {"active": "1"})
    user.refresh_from_db()
    assert user.is_active


def test_nobody_deactivates_the_owner_or_themselves():
    owner = make_owner()
    admin = make_user(actor=owner, username="ada", role=User.Role.ADMIN)
    with pytest.raises(PermissionDenied):
        services.user_set_active(actor=admin, user=owner, active=False)
    with pytest.raises(PermissionDenied):
        services.user_set_active(actor=owner, user=owner, active=False)
    other_admin = make_user(actor=owner, username="eve", role=User.Role.ADMIN)
    with pytest.raises(PermissionDenied):
        services.user_set_active(actor=admin, user=other_admin, active=False)


def test_change_password(client):
    owner = make_owner()
    client.force_login(owner)
    new = "another long passphrase"
    response = client.post(
        reverse("accounts:password_change"),
        {"old_password": PASSWORD, "new_password1": new, "new_password2": new},
    )
    assert response.status_code == 302
    client.logout()
    assert client.login(username="owner", password=new)
    assert not client.login(username="owner", password=PASSWORD)


def test_a_new_account_gets_a_default_persona_with_its_own_name(client):
    owner = make_owner()
    client.force_login(owner)
    client.post(reverse("accounts:users"), create_form("bob"))
    bob = User.objects.get(username="bob")
    assert [(p.name, p.is_default) for p in bob.personas.all()] == [("bob", True)]
    assert owner.personas.get(is_default=True).name == "owner"
