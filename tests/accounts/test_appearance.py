"""Settings → Appearance: the theme, text size and the phone's Enter key are stored per account
and reach every page as attributes of <html>."""

from __future__ import annotations

import pytest

from orbchat.accounts.models import User
from tests.factories import make_owner, make_user

pytestmark = pytest.mark.django_db


def test_a_saved_appearance_shows_on_every_page_of_that_account_only(client):
    owner = make_owner()
    other = make_user(actor=owner, username="other")
    client.force_login(owner)
    response = client.post(
        "/settings/appearance/", {"theme": "light", "text_size": "large", "enter_sends_on_phone": "on"}
    )
    assert response.status_code == 302
    page = client.get("/").content.decode()
    assert 'data-theme="light"' in page and 'data-text-size="large"' in page
    assert "data-enter-sends-on-phone" in page
    client.force_login(other)
    page = client.get("/").content.decode()
    assert 'data-theme="system"' in page and 'data-text-size="normal"' in page
    assert "data-enter-sends-on-phone" not in page


def test_an_unknown_theme_is_refused_with_a_message_and_nothing_changes(client):
    owner = make_owner()
    client.force_login(owner)
    response = client.post("/settings/appearance/", {"theme": "neon", "text_size": "normal"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert User.objects.get(pk=owner.pk).theme == User.Theme.SYSTEM


def test_the_sign_in_page_follows_the_device(client):
    make_owner()
    page = client.get("/login/").content.decode()
    assert 'data-theme="system"' in page
