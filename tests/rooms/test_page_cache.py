"""The room page serves each message's rendered partial from a cache that can never be stale."""

from __future__ import annotations

import re
import time

import pytest
from django.core.cache import caches
from django.db import connection
from django.template.loader import render_to_string
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from bench import kit
from memory.selectors import tuning_get
from rooms import presenters, rendering, services
from rooms.models import Message
from tests.factories import client_for, join, make_user

pytestmark = pytest.mark.django_db

MARKDOWN = '*She looks up.* "The fog is **thick** tonight." [map](https://example.com/map)\n\n- one\n- two'


@pytest.fixture(autouse=True)
def cold_cache():
    """Each test starts with nothing rendered: this process's caches and Django's are empty."""
    presenters.clear_caches()
    caches["default"].clear()
    yield
    presenters.clear_caches()
    caches["default"].clear()


def page(client, room) -> str:
    response = client.get(reverse("rooms:room", args=[room.pk]))
    assert response.status_code == 200
    return response.content.decode()


def message_list(html: str) -> str:
    """The page's list of messages (message text may hold lists of its own)."""
    start = html.index(">", html.index('<ol id="messages"')) + 1
    return html[start : html.rindex("</ol>", start, html.index('id="notice"'))].strip()


def same_but_tokens(a: str, b: str) -> bool:
    (token_a,), (token_b,) = tokens(a), tokens(b)
    return a.replace(token_a, "T") == b.replace(token_b, "T")


def tokens(html: str) -> set[str]:
    return set(re.findall(r'name="csrfmiddlewaretoken" value="([^"]+)"', html))


def fill(room, count: int) -> None:
    kit.bulk_history(room, range(1, count + 1), text_for=lambda seq: f"Line {seq}: {MARKDOWN}", tokens=20)


def test_a_page_served_from_the_cache_is_the_html_a_fresh_render_gives(room, host):
    fill(room, 12)
    client = client_for(host)
    first = page(client, room)
    second = page(client, room)
    (token,) = tokens(message_list(second))

    presenters.clear_caches()
    caches["default"].clear()
    fresh = "".join(
        render_to_string("rooms/_message.html", {"m": view, "csrf_token": token})
        for view in presenters.room_views(room)
    )
    assert message_list(second) == fresh.strip()
    assert message_list(first).count("<li ") == message_list(second).count("<li ") == 13
    assert '<span class="speech">' in fresh and "<strong>thick</strong>" in fresh


def test_a_page_whose_messages_are_all_cached_renders_no_markdown(room, host):
    fill(room, 20)
    client = client_for(host)
    before = rendering.render_count()
    page(client, room)
    assert rendering.render_count() - before == 21  # the greeting and 20 messages

    before = rendering.render_count()
    page(client, room)
    page(client_for(host), room)
    assert rendering.render_count() == before


def test_a_new_message_is_the_only_one_rendered_on_the_next_view(room, host):
    fill(room, 20)
    client = client_for(host)
    page(client, room)
    services.message_create(room=room, author=host, text="A *new* line.")
    before = rendering.render_count()
    html = page(client, room)
    assert rendering.render_count() - before == 1
    assert "A <em>new</em> line." in html


def test_an_edit_shows_the_new_text_on_the_next_view(room, host):
    client = client_for(host)
    message = services.message_create(room=room, author=host, text="The **old** words.")
    assert "<strong>old</strong>" in page(client, room)
    services.message_edit(message=message, text="The **new** words.")
    html = page(client, room)
    assert "<strong>new</strong>" in html and "old" not in message_list(html)


def test_a_swipe_shows_the_other_variant_on_the_next_view(room, host):
    client = client_for(host)
    greeting = room.messages.get(seq=0)
    first, second = (v.text for v in greeting.variants.order_by("index")[:2])
    html = page(client, room)
    services.swipe(message=greeting, direction=1)
    swiped = page(client, room)
    services.swipe(message=Message.objects.get(pk=greeting.pk), direction=-1)
    back = page(client, room)
    escaped = lambda text: rendering.render_message(text)  # noqa: E731
    assert escaped(first) in message_list(html) and escaped(second) not in message_list(html)
    assert escaped(second) in message_list(swiped) and escaped(first) not in message_list(swiped)
    assert same_but_tokens(message_list(back), message_list(html))


def test_hiding_a_message_shows_on_the_next_view(room, host):
    client = client_for(host)
    message = services.message_create(room=room, author=host, text="Quiet, please.")
    assert "hidden from the prompt" not in page(client, room)
    services.message_set_hidden(message=message, hidden=True)
    assert "hidden from the prompt" in page(client, room)


def test_a_member_after_the_host_gets_their_own_csrf_token_not_the_hosts(room, host):
    member = make_user(actor=host, username="member")
    join(room, member)
    services.message_create(room=room, author=host, text="Hello, crew.")
    host_page = message_list(page(client_for(host), room))
    member_page = message_list(page(client_for(member), room))
    (host_token,) = tokens(host_page)
    assert host_token not in member_page and tokens(member_page)
    assert same_but_tokens(member_page, host_page)


def test_the_fork_form_of_a_cached_page_carries_a_working_csrf_token(room, host):
    message = services.message_create(room=room, author=host, text="Fork from here.")
    client = Client(enforce_csrf_checks=True)
    client.force_login(host)
    page(client, room)  # rendered and cached
    html = page(client, room)  # served from the cache
    url = reverse("rooms:fork", args=[room.pk, message.pk])
    form = re.search(
        rf'action="{re.escape(url)}"[^>]*><input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)"',
        html,
    )
    response = client.post(url, {"csrfmiddlewaretoken": form.group(1)})
    assert response.status_code == 302


@pytest.mark.parametrize("cached", [False, True])
def test_the_room_page_makes_as_many_queries_for_200_messages_as_for_3(room, host, cached):
    client = client_for(host)
    client.get(reverse("home"))  # the session's first request does more: not what is measured
    tuning_get()  # made on first use
    small = services.room_create_from_character(host=host, character=room.seats.get().character)
    fill(small, 2)
    fill(room, 250)
    counts = []
    for target in (small, room):
        if cached:
            page(client, target)
        with CaptureQueriesContext(connection) as queries:
            page(client, target)
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_with_a_shared_cache_a_fresh_process_reuses_what_another_rendered(
    room, host, settings, real_services
):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": real_services["redis"],
            "KEY_PREFIX": f"test-{room.pk}-{time.time_ns()}",
            "TIMEOUT": 60,
        }
    }
    fill(room, 10)
    page(client_for(host), room)
    presenters.clear_caches()  # what a newly started web process has: nothing of its own
    before = rendering.render_count()
    html = page(client_for(host), room)
    assert rendering.render_count() == before and "Line 10:" in html
