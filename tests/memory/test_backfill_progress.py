"""A backfill whose worker died reads as interrupted, and Continue finishes it without duplicates."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from memory import index, selectors, tasks
from memory.models import RoomMemory, Summary
from memory.selectors import backfill_phase
from tests import services as test_services
from tests.factories import client_for
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room
from tests.memory.test_tasks import set_utility, wait_for

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_a_running_backfill_whose_heartbeat_is_stale_reads_as_interrupted():
    old = NOW - timedelta(seconds=9)
    assert backfill_phase(state="running", beat_at=old, now=NOW) == "interrupted"
    assert backfill_phase(state="running", beat_at=None, now=NOW) == "interrupted"


def test_a_running_backfill_with_a_fresh_heartbeat_reads_as_running():
    assert backfill_phase(state="running", beat_at=NOW - timedelta(seconds=3), now=NOW) == "running"


@pytest.mark.parametrize("state", ["idle", "queued", "cancelled", "done"])
def test_a_backfill_that_is_not_running_needs_no_heartbeat(state):
    assert backfill_phase(state=state, beat_at=None, now=NOW) == state


def status_text(client, room) -> str:
    return client.get(reverse("memory:backfill_status", args=[room.pk])).content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_killed_backfill_shows_interrupted_within_10_s_and_continue_finishes_it(
    room, host, fake_llm, service_dir, child_env, celery_worker
):
    set_utility(host, fake_llm)
    fake_llm.default = Reply(
        '{"heading": "A scene", "facts": ["Something mattered."], "keywords": ["lamp"]}',
        first_token_delay=0.3,
    )
    story_room(room, 200)
    page = client_for(host)
    worker = test_services.start_worker(service_dir, child_env, queues="killtest")
    try:
        tasks.backfill.apply_async((room.pk,), queue="killtest")
        wait_for(lambda: Summary.objects.filter(room=room).count() >= 4, what="a few summaries")
        running = status_text(page, room)
        assert "Interrupted" not in running and 'hx-trigger="every 2s"' in running
    finally:
        os.killpg(worker.popen.pid, signal.SIGKILL)
        worker.popen.wait()
    killed = time.monotonic()
    wait_for(lambda: "Interrupted" in status_text(page, room), timeout=15, what="interrupted")
    assert time.monotonic() - killed < 10
    settings_page = page.get(reverse("rooms:settings", args=[room.pk])).content.decode()
    assert "Interrupted at" in settings_page and ">Continue</button>" in settings_page
    written = Summary.objects.filter(room=room).count()
    assert 0 < written < 31

    continued = time.monotonic()
    assert page.post(reverse("memory:backfill", args=[room.pk])).status_code == 302
    assert "Interrupted" not in status_text(page, room)
    wait_for(
        lambda: Summary.objects.filter(room=room).count() > written, timeout=10, what="the first new one"
    )
    assert time.monotonic() - continued < 10  # the dead worker's lock did not hold it up
    wait_for(
        lambda: RoomMemory.objects.get(room=room).backfill == RoomMemory.Backfill.DONE,
        timeout=120,
        what="the end",
    )
    assert "Backfill done." in status_text(page, room)
    tiers = sorted(Summary.objects.filter(room=room).values_list("tier", "block"))
    assert len(tiers) == len(set(tiers)) == 31
    assert index._collection(selectors.reading_generation(host), "memories").count() == 31


@pytest.mark.django_db(transaction=True)
def test_a_backfill_in_a_long_model_call_still_reads_as_running(room, host, fake_llm, celery_worker):
    set_utility(host, fake_llm)
    fake_llm.default = Reply(
        '{"heading": "A scene", "facts": ["Something mattered."], "keywords": ["lamp"]}',
        first_token_delay=12,
    )
    story_room(room, 16)
    page = client_for(host)
    tasks.backfill_start(room.pk)
    wait_for(lambda: len(fake_llm.requests) >= 1, timeout=60, what="the model call")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert "Interrupted" not in status_text(page, room)
        time.sleep(1)
    wait_for(
        lambda: RoomMemory.objects.get(room=room).backfill == RoomMemory.Backfill.DONE,
        timeout=60,
        what="the end",
    )
