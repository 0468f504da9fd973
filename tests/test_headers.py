"""Every response carries the Content-Security-Policy and the usual security headers."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import client_for, make_owner

pytestmark = pytest.mark.django_db

POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data: blob:",
    "connect-src": "'self' ws: wss:",
    "object-src": "'none'",
    "base-uri": "'self'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}


def policy(response) -> dict[str, str]:
    directives = (part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))
    return {name: value for name, value in directives}


@pytest.mark.parametrize("signed_in", [False, True])
def test_pages_allow_only_the_sites_own_scripts_and_styles(client, signed_in):
    owner = make_owner()
    if signed_in:
        client = client_for(owner)
    response = client.get(reverse("home") if signed_in else reverse("accounts:login"))
    assert response.status_code == 200
    assert policy(response) == POLICY


def test_responses_carry_the_usual_security_headers(client):
    make_owner()
    response = client.get(reverse("accounts:login"))
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def test_api_answers_and_not_found_pages_carry_the_policy_too(client):
    owner = make_owner()
    assert "Content-Security-Policy" in client.get("/api/v1/memories/1")
    assert policy(client_for(owner).get("/chats/999999/")) == POLICY


def test_no_template_holds_inline_script_handlers_or_styles():
    """The policy refuses them, so one left in a template would silently break its page."""
    from django.conf import settings

    inline = re.compile(r"<script>|<script(?![^>]*\ssrc=)[^>]*>|<style|\son[a-z]+=|\sstyle=|javascript:")
    offenders = [
        f"{path.relative_to(settings.BASE_DIR)}: {found.group()}"
        for path in (settings.BASE_DIR / "templates").rglob("*.html")
        for found in inline.finditer(path.read_text())
    ]
    assert offenders == []
