from __future__ import annotations

import time

import pytest
from django.test import Client
from django.urls import reverse

from orbchat import redis
from orbchat.accounts import throttle
from tests.factories import PASSWORD, make_owner, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_earlier_failures():
    client = redis.sync_client()
    keys = list(client.scan_iter(f"{redis.LOGIN_PREFIX}:*"))
    if keys:
        client.delete(*keys)
    yield


def sign_in(client: Client, username: str, password: str, address: str = "10.1.0.1"):
    form = {"username": username, "password": password}
    return client.post(reverse("accounts:login"), form, REMOTE_ADDR=address)


def signed_in(client: Client) -> bool:
    return client.get(reverse("home")).status_code == 200


def test_the_delay_doubles_after_the_free_failures_up_to_the_cap():
    delays = [throttle.delay_seconds(n, free=5, cap=900) for n in range(1, 17)]
    assert delays == [0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]
    assert throttle.delay_seconds(10_000, free=5, cap=900) == 900


def test_addresses_of_one_ipv6_network_count_together():
    assert throttle.address_key("2001:db8::1") == throttle.address_key("2001:db8::ffff") == "2001:db8::/64"
    assert throttle.address_key("::ffff:10.0.0.7") == "10.0.0.7"


def test_the_refusal_says_how_long_to_wait():
    assert throttle.wait_message(32, scope="account") == (
        "Too many failed sign-ins for this account. Try again in 32 seconds."
    )
    assert throttle.wait_message(900, scope="address").endswith("from this address. Try again in 15 minutes.")


def test_after_six_wrong_passwords_even_the_right_one_is_refused_and_the_page_says_so(client):
    make_owner()
    for _ in range(5):
        assert sign_in(client, "owner", "wrong guess").status_code == 200
    assert sign_in(client, "owner", "wrong guess").status_code == 429
    response = sign_in(client, "owner", PASSWORD)
    assert response.status_code == 429
    assert "Too many failed sign-ins for this account. Try again in 1 second." in response.content.decode()
    assert response["Retry-After"] == "1"
    assert not signed_in(client)


def test_the_right_password_works_once_the_delay_has_passed(client, settings):
    settings.LOGIN_MAX_DELAY_SECONDS = 1
    make_owner()
    for _ in range(6):
        sign_in(client, "owner", "wrong guess")
    assert sign_in(client, "owner", PASSWORD).status_code == 429
    time.sleep(1.2)
    response = sign_in(client, "owner", PASSWORD)
    assert response.status_code == 302 and signed_in(client)


def test_a_success_starts_the_account_count_afresh(settings):
    settings.LOGIN_MAX_DELAY_SECONDS = 1
    make_owner()
    for _ in range(4):
        sign_in(Client(), "owner", "wrong guess")
    assert sign_in(Client(), "owner", PASSWORD).status_code == 302
    for _ in range(4):
        sign_in(Client(), "owner", "wrong guess")
    assert sign_in(Client(), "owner", PASSWORD).status_code == 302


def test_the_lockout_holds_for_the_account_from_any_address(client):
    make_owner()
    for n in range(6):
        sign_in(client, "owner", "wrong guess", address=f"10.2.0.{n}")
    assert sign_in(client, "owner", PASSWORD, address="10.3.0.1").status_code == 429


def test_one_address_trying_many_accounts_is_throttled_after_more_failures(client):
    owner = make_owner()
    make_user(actor=owner, username="member")
    for n in range(19):
        sign_in(client, f"guess{n}", "wrong guess", address="10.4.0.1")
    assert sign_in(Client(), "member", PASSWORD, address="10.4.0.1").status_code == 302
    sign_in(client, "guess19", "wrong guess", address="10.4.0.1")
    response = sign_in(client, "owner", PASSWORD, address="10.4.0.1")
    assert response.status_code == 429
    assert "Too many failed sign-ins from this address." in response.content.decode()
    assert sign_in(client, "owner", PASSWORD, address="10.5.0.1").status_code == 302


def test_the_admin_signs_in_through_the_throttled_page(client):
    make_owner()
    response = client.get("/admin/login/?next=/admin/")
    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:login") + "?next=%2Fadmin%2F"
