"""Memory work in a real Celery worker: enqueued on commit, retried, resumed after a kill."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import channel_layers

from memory import index, selectors, tasks
from memory.models import Fact, MemoryTuning, RoomMemory, Summary
from orbchat import redis
from orbchat.celery import WORKER_NICE
from orbchat.connections import services as connection_services
from orbchat.consumers import user_group
from rooms import services as room_services
from tests import services as test_services
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(check, *, timeout: float = 90, what: str = "it") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def set_utility(host, fake_llm):
    connection = connection_services.connection_create(
        owner=host, name="Fake utility", provider="local", model="fake-utility", api_base=fake_llm.base_url
    )
    connection_services.model_roles_update(
        user=host, chat=None, utility=connection, embedding=None, rerank_kind="builtin"
    )


def finish_a_reply(room) -> None:
    """A character reply commits, as at the end of a streamed turn."""
    variant = room_services.turn_begin(room=room, mode="reply", seat=room.seats.first())
    room_services.turn_finish(
        variant_id=variant.pk, text="The lamp is lit.", state="done", finish_reason="stop"
    )


def test_a_step_longer_than_the_lock_goes_on_when_nobody_took_the_room(settings):
    settings.MEMORY_LOCK_TTL = 1
    beats = []

    def work(beat) -> None:
        time.sleep(1.5)  # e.g. a cold worker loading the embedding model: the lock expires
        beat()
        beats.append("took it again")

    assert tasks.locked_runs(9101, work) and beats == ["took it again"]
    assert not redis.sync_client().exists(redis.memory_lock_key(9101))  # released at the end


def test_a_run_that_lost_the_room_to_another_stops_and_leaves_it_to_that_run(settings):
    settings.MEMORY_LOCK_TTL = 1
    other = redis.sync_client().lock(redis.memory_lock_key(9102), timeout=30)
    after_beat = []

    def work(beat) -> None:
        time.sleep(1.5)
        assert other.acquire(blocking=False)  # another run takes the room meanwhile
        beat()
        after_beat.append("went on")

    try:
        assert tasks.locked_runs(9102, work) is False and after_beat == []
        assert other.owned()  # untouched
        assert redis.sync_client().exists(redis.memory_dirty_key(9102))  # the other run looks again
    finally:
        other.release()
        redis.sync_client().delete(redis.memory_dirty_key(9102))


def test_a_committed_reply_gets_its_summary_from_the_worker(room, celery_worker):
    story_room(room, 15)
    finish_a_reply(room)  # message 16 of 16: block 0 is now complete
    wait_for(lambda: Summary.objects.filter(room=room, tier=0, block=0).exists(), what="the first summary")
    summary = Summary.objects.get(room=room, tier=0, block=0)
    assert summary.source == Summary.Source.EXTRACTIVE
    wait_for(lambda: Summary.objects.get(pk=summary.pk).indexed_hash != "", what="indexing")


def test_the_worker_and_its_pool_run_below_the_web_process_priority(room, celery_worker):
    story_room(room, 15)
    finish_a_reply(room)  # a pool process, if the worker forks one, is up once it has done a task
    wait_for(lambda: Summary.objects.filter(room=room, tier=0, block=0).exists(), what="the first summary")
    worker = celery_worker.popen.pid
    pool = [int(pid) for pid in Path(f"/proc/{worker}/task/{worker}/children").read_text().split()]
    for pid in [worker, *pool]:
        assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICE


def test_a_failing_utility_model_is_retried_then_the_host_is_told(room, host, fake_llm, celery_worker):
    set_utility(host, fake_llm)
    fake_llm.script(*[Reply(status=503) for _ in range(20)])
    # A layer of the test's own: receiving binds it to this event loop, which others must not share.
    layer = channel_layers.make_backend("default")
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(host.pk), channel)
    story_room(room, 15)
    finish_a_reply(room)

    async def first_notice() -> dict:
        while True:  # past the cycle's progress, shown to the host as it runs
            event = await layer.receive(channel)
            if event["type"] != "user.memory":
                return event

    notice = async_to_sync(first_notice)()
    assert notice["type"] == "user.notice"
    assert "Utility model failed" in notice["text"] and room.title in notice["text"]
    assert len(fake_llm.requests) >= 4  # the first try and three retries
    summary = Summary.objects.get(room=room, tier=0, block=0)
    assert summary.source == Summary.Source.EXTRACTIVE  # memory did not stop
    assert (
        "overloaded" in RoomMemory.objects.get(room=room).last_error.lower()
        or RoomMemory.objects.get(room=room).last_error
    )


def test_a_worker_killed_mid_backfill_resumes_without_duplicates(
    room, host, fake_llm, service_dir, child_env
):
    set_utility(host, fake_llm)
    fake_llm.default = Reply(
        '{"heading": "A scene", "facts": ["Something mattered."], "keywords": ["lamp"]}',
        first_token_delay=0.3,
    )
    story_room(room, 200)
    worker = test_services.start_worker(service_dir, child_env, queues="killtest")
    try:
        tasks.backfill.apply_async((room.pk,), queue="killtest")
        wait_for(lambda: Summary.objects.filter(room=room).count() >= 4, what="a few summaries")
    finally:
        os.killpg(worker.popen.pid, signal.SIGKILL)
        worker.popen.wait()
    written = Summary.objects.filter(room=room).count()
    assert 0 < written < 31
    worker = test_services.start_worker(service_dir, child_env, queues="killtest")
    try:
        tasks.backfill.apply_async((room.pk,), queue="killtest")
        wait_for(lambda: Summary.objects.filter(room=room).count() == 31, timeout=120, what="the rest")
        wait_for(
            lambda: RoomMemory.objects.get(room=room).backfill == RoomMemory.Backfill.DONE, what="the end"
        )
    finally:
        worker.stop()
    tiers = sorted(Summary.objects.filter(room=room).values_list("tier", "block"))
    assert len(tiers) == len(set(tiers)) == 31
    generation = selectors.reading_generation(host)
    assert index._collection(generation, "memories").count() == 31


def test_a_reply_updates_the_scene_note_with_the_built_in_reader(room, celery_worker):
    story_room(room, 5, plant={4: "We wait at the Old Lighthouse until dawn. Will the ferry come?"})
    finish_a_reply(room)  # message 5
    wait_for(lambda: RoomMemory.objects.filter(room=room, scene_note_seq=5).exists(), what="the scene note")
    state = RoomMemory.objects.get(room=room)
    assert state.scene_note_source == "reader"
    assert state.scene_note["where"] == "the Old Lighthouse" and state.scene_note["when"] == "dawn"


def test_a_reply_updates_the_scene_note_with_the_utility_model(room, host, fake_llm, celery_worker):
    set_utility(host, fake_llm)
    note = {"where": "the fog bell tower", "who": ["Maren"], "when": "dusk", "open_threads": ["Who rang it?"]}
    fake_llm.script(Reply(f"```json\n{json.dumps(note)}\n```"))
    story_room(room, 5)
    finish_a_reply(room)
    wait_for(lambda: RoomMemory.objects.filter(room=room, scene_note_seq=5).exists(), what="the scene note")
    state = RoomMemory.objects.get(room=room)
    assert state.scene_note_source == "model" and state.scene_note == note
    assert "#5 " in fake_llm.requests[0].body["messages"][-1]["content"]


def test_the_scene_note_is_asked_for_with_the_hosts_own_prompt(room, host, fake_llm, celery_worker):
    set_utility(host, fake_llm)
    MemoryTuning.objects.update_or_create(
        pk=1, defaults={"custom_prompts": {"scene": "Track the scene, briefly.\n\n{{material}}"}}
    )
    fake_llm.script(Reply('{"where": "the quay", "who": [], "when": "", "open_threads": []}'))
    story_room(room, 5)
    finish_a_reply(room)
    wait_for(lambda: RoomMemory.objects.filter(room=room, scene_note_seq=5).exists(), what="the scene note")
    sent = fake_llm.requests[0].body["messages"]
    assert sent[0] == {"role": "system", "content": "Track the scene, briefly."}
    assert RoomMemory.objects.get(room=room).scene_note["where"] == "the quay"


def test_a_memory_manager_answering_in_prose_saves_nothing_and_tells_the_host(
    room, host, fake_llm, celery_worker
):
    set_utility(host, fake_llm)
    summary = {"heading": "At the lighthouse", "facts": ["The lamp was lit."], "keywords": []}
    fake_llm.script(
        Reply('{"where": "the lighthouse"}'), Reply(json.dumps(summary)), Reply("I think it is fine.")
    )
    layer = channel_layers.make_backend("default")
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(host.pk), channel)
    story_room(room, 15)
    finish_a_reply(room)  # message 16: block 0 is summarised, then read for facts
    heard = []
    notice = {"type": ""}
    while notice["type"] != "user.notice" and len(heard) < 40:  # the cycle panel hears its stages too
        notice = async_to_sync(asyncio.wait_for)(layer.receive(channel), 20)
        heard.append((notice["type"], notice.get("stage"), notice.get("state"), notice.get("text", "")[:80]))
    assert notice["type"] == "user.notice" and room.title in notice["text"], heard
    assert "Nothing was saved: the memory manager answered in prose" in notice["text"]
    assert not Fact.objects.filter(room=room).exists()
