"""Personal access tokens: made, listed and revoked in Settings; kept only as a hash."""

from __future__ import annotations

import hashlib
import re

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from orbchat.accounts import selectors, services
from orbchat.accounts.models import AccessToken
from tests.factories import make_owner, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return make_owner()


def shown_token(page: str) -> str | None:
    """The token in the page's one-time box, if the page has one."""
    found = re.search(r'value="([^"]+)" aria-label="New token"', page)
    return found.group(1) if found else None


def test_creating_a_token_shows_it_once(client, owner):
    client.force_login(owner)
    response = client.post(reverse("accounts:token_create"), {"name": "backup script"})
    assert response.status_code == 200
    page = response.content.decode()
    token = shown_token(page)
    assert token and "it is not shown again" in page
    row = AccessToken.objects.get(user=owner)
    assert row.name == "backup script" and token.startswith(row.prefix) and len(row.prefix) == 8
    later = client.get(reverse("accounts:settings")).content.decode()
    assert token not in later and shown_token(later) is None
    assert "backup script" in later and row.prefix in later


def test_the_token_is_stored_only_as_its_sha256(owner):
    row, token = services.token_create(user=owner, name="ci")
    row.refresh_from_db()
    assert row.hashed == hashlib.sha256(token.encode()).hexdigest()
    stored = [str(v) for v in AccessToken.objects.filter(pk=row.pk).values().get().values()]
    assert token not in stored
    assert len(token) >= 40  # 32 random bytes


def test_a_token_needs_a_name_of_at_most_100_characters(client, owner):
    client.force_login(owner)
    for name in ("", "   ", "n" * 101):
        response = client.post(reverse("accounts:token_create"), {"name": name})
        assert response.status_code == 200 and shown_token(response.content.decode()) is None
    assert not AccessToken.objects.exists()
    with pytest.raises(ValidationError):
        services.token_create(user=owner, name=" ")
    with pytest.raises(ValidationError):
        services.token_create(user=owner, name="n" * 101)
    assert services.token_create(user=owner, name="n" * 100)[0].name == "n" * 100


def test_the_list_shows_each_token_with_its_state(client, owner):
    used, used_token = services.token_create(user=owner, name="used one")
    services.token_authenticate(plaintext=used_token)
    gone, _ = services.token_create(user=owner, name="gone one")
    services.token_revoke(user=owner, token_id=gone.pk)
    services.token_create(user=make_user(actor=owner, username="bob"), name="bob's")
    client.force_login(owner)
    page = client.get(reverse("accounts:settings")).content.decode()
    assert "used one" in page and "gone one" in page and "bob&#x27;s" not in page
    used_row = page.split("used one")[1].split("</tr>")[0]
    assert "Revoked" in page and "ago" in used_row
    assert [t.name for t in selectors.token_list(user=owner)] == ["gone one", "used one"]


def test_revoking_asks_first_then_the_token_stops_working(client, owner):
    row, token = services.token_create(user=owner, name="laptop")
    client.force_login(owner)
    url = reverse("accounts:token_revoke", args=[row.pk])
    confirm = client.get(url)
    assert confirm.status_code == 200 and "Revoke the token" in confirm.content.decode()
    row.refresh_from_db()
    assert not row.revoked
    response = client.post(url)
    assert response.status_code == 302 and response["Location"] == reverse("accounts:settings")
    row.refresh_from_db()
    assert row.revoked and services.token_authenticate(plaintext=token) is None


def test_revoking_twice_keeps_the_first_time(owner):
    row, _ = services.token_create(user=owner, name="laptop")
    first = services.token_revoke(user=owner, token_id=row.pk).revoked_at
    assert services.token_revoke(user=owner, token_id=row.pk).revoked_at == first


def test_nobody_revokes_another_persons_token(client, owner):
    bob = make_user(actor=owner, username="bob")
    row, token = services.token_create(user=bob, name="bob's")
    client.force_login(owner)
    url = reverse("accounts:token_revoke", args=[row.pk])
    assert client.get(url).status_code == 404
    assert client.post(url).status_code == 404
    with pytest.raises(AccessToken.DoesNotExist):
        services.token_revoke(user=owner, token_id=row.pk)
    assert services.token_authenticate(plaintext=token) == bob


def test_a_token_authenticates_its_active_user_only(owner):
    bob = make_user(actor=owner, username="bob")
    _, token = services.token_create(user=bob, name="bob's")
    assert services.token_authenticate(plaintext=token) == bob
    assert services.token_authenticate(plaintext="") is None
    assert services.token_authenticate(plaintext=token + "x") is None
    services.user_set_active(actor=owner, user=bob, active=False)
    assert services.token_authenticate(plaintext=token) is None


def test_token_pages_need_a_signed_in_user(client, owner):
    response = client.post(reverse("accounts:token_create"), {"name": "x"})
    assert response.status_code == 302 and reverse("accounts:login") in response["Location"]
    assert not AccessToken.objects.exists()
