"""403, 404 and 500 pages in the site's layout, with its navigation, never a raw error."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import client_for, make_owner, make_user

pytestmark = pytest.mark.django_db

NAV = 'aria-label="Main"'


@pytest.fixture
def owner():
    return make_owner()


@pytest.mark.urls("tests.crash_urls")
def test_a_server_error_gets_the_layout_with_navigation_and_no_detail(owner):
    client = client_for(owner)
    client.raise_request_exception = False
    response = client.get("/crash/")
    page = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in page and NAV in page and "Back to your chats" in page
    assert "secret internal detail" not in page and "Traceback" not in page


@pytest.mark.urls("tests.crash_urls")
def test_a_server_error_for_someone_signed_out_still_gets_the_layout(owner):
    client = Client(raise_request_exception=False)
    response = client.get("/crash/")
    assert response.status_code == 500 and "Something went wrong" in response.content.decode()


def test_not_found_has_the_navigation(owner):
    response = client_for(owner).get("/no-such-page/")
    assert response.status_code == 404 and NAV in response.content.decode()


def test_a_refused_page_has_the_navigation(owner):
    member = make_user(actor=owner, username="member")
    response = client_for(member).get(reverse("accounts:users"))
    assert response.status_code in (403, 404)
    assert NAV in response.content.decode()


def test_a_stale_form_gets_the_403_page_in_the_layout(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    response = client.post(reverse("accounts:logout"))
    page = response.content.decode()
    assert response.status_code == 403 and NAV in page
    assert "This form had expired or came from another site. Reload the page and try again." in page
