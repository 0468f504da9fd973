"""Deactivating an account ends the person's sessions, from the settings page or the admin alike."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse

from orbchat.accounts import services
from tests.factories import client_for, make_owner, make_user


def sessions_of(user) -> list[Session]:
    return [s for s in Session.objects.all() if s.get_decoded().get(SESSION_KEY) == str(user.pk)]


def test_a_deactivated_persons_old_session_stays_signed_out_after_reactivation(db):
    owner = make_owner()
    user = make_user(actor=owner)
    cookie = client_for(user).cookies[settings.SESSION_COOKIE_NAME].value
    services.user_set_active(actor=owner, user=user, active=False)
    assert sessions_of(user) == []
    services.user_set_active(actor=owner, user=user, active=True)
    old = Client()
    old.cookies[settings.SESSION_COOKIE_NAME] = cookie
    response = old.get(reverse("home"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("accounts:login"))


def test_unchecking_active_in_the_admin_ends_the_persons_sessions(db):
    owner = make_owner()
    user = make_user(actor=owner, username="maren")
    client_for(user)
    assert sessions_of(user)
    admin = client_for(owner)
    response = admin.post(
        reverse("admin:accounts_user_change", args=[user.pk]),
        {
            "username": "maren",
            "role": "user",
            "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
            "_save": "Save",
        },  # "Active" unchecked
    )
    assert response.status_code == 302
    user.refresh_from_db()
    assert not user.is_active
    assert sessions_of(user) == []


def test_the_admin_cannot_deactivate_the_owner_and_says_why(db):
    owner = make_owner()
    admin = client_for(owner)
    response = admin.post(
        reverse("admin:accounts_user_change", args=[owner.pk]),
        {
            "username": "owner",
            "role": "owner",
            "is_staff": "on",
            "is_superuser": "on",
            "date_joined_0": owner.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": owner.date_joined.strftime("%H:%M:%S"),
            "_save": "Save",
        },
        follow=True,
    )
    owner.refresh_from_db()
    assert owner.is_active
    assert "You cannot deactivate your own account." in response.content.decode()
