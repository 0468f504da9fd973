"""Run modes and the memory cycle, in a real Celery worker with the fake Utility model: ask first
(once per batch, Skip, a reload, Start now), manual, automatic, Cancel, and members kept out."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import pytest
from channels.layers import channel_layers
from django.urls import reverse

from memory import runmodes
from memory.models import MemoryTuning, Summary
from memory.selectors import block_tuning, tuning_get
from memory.services import catch_up as passes
from memory.services import runs
from memory.services.summaries import write_summary
from orbchat.connections.selectors import model_roles_get
from orbchat.consumers import user_group
from tests.factories import client_for, join, make_user
from tests.fakes.llm import Reply
from tests.memory.conftest import add_story, story_room
from tests.memory.test_tasks import finish_a_reply, set_utility, wait_for
from tests.memory.test_writing import answer, text_utility  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = '{"heading": "The lamp", "facts": ["Maren keeps the light burning."], "keywords": ["lamp"]}'


def run_modes(*, solo: str = "automatic", group: str = "automatic") -> None:
    MemoryTuning.objects.update_or_create(pk=1, defaults={"run_solo": solo, "run_group": group})


OPEN: list[Inbox] = []


class Inbox:
    """What reaches one person's sockets (their per-user group), gathered by a thread of its own
    on a channel layer of its own (receiving binds a layer to one event loop)."""

    def __init__(self, user) -> None:
        self.events: list[dict] = []
        self.stop = threading.Event()
        ready = threading.Event()

        async def listen() -> None:
            layer = channel_layers.make_backend("default")
            channel = await layer.new_channel()
            await layer.group_add(user_group(user.pk), channel)
            ready.set()
            while not self.stop.is_set():
                try:
                    self.events.append(await asyncio.wait_for(layer.receive(channel), 0.2))
                except TimeoutError:
                    pass

        self.thread = threading.Thread(target=lambda: asyncio.run(listen()), daemon=True)
        self.thread.start()
        ready.wait(10)
        OPEN.append(self)

    def memory(self, wait: float = 0.5) -> list[dict]:
        """The memory events that arrived since the last look (after waiting `wait` seconds)."""
        time.sleep(wait)
        events, self.events[:] = list(self.events), []
        return [e for e in events if e["type"] == "user.memory"]


@pytest.fixture(autouse=True)
def inboxes_closed():
    yield
    while OPEN:
        inbox = OPEN.pop()
        inbox.stop.set()
        inbox.thread.join(5)


def prompt_shown(client, room) -> bool:
    html = client.get(reverse("rooms:room", args=[room.pk])).content.decode()
    tag = re.search(r'<div id="memory-ask"[^>]*>', html)
    return tag is not None and "hidden" not in tag.group(0)


def test_ask_first_asks_the_host_once_per_batch_and_the_prompt_survives_a_reload(room, host):
    run_modes(solo="ask")
    inbox = Inbox(host)
    story_room(room, 15)
    finish_a_reply(room)  # message 16: block 0 (8 messages) is due
    asks = [e for e in inbox.memory() if e["kind"] == "ask"]
    assert [(e["messages"], e["upto"]) for e in asks] == [(8, 7)]
    finish_a_reply(room)  # the same batch is still due: not asked again
    assert inbox.memory() == []
    page = client_for(host)
    assert prompt_shown(page, room)  # reopening the room shows it again
    assert prompt_shown(page, room)
    html = page.get(reverse("rooms:room", args=[room.pk])).content.decode()
    assert "8 new messages" in html
    assert not Summary.objects.filter(room=room).exists()  # nothing ran


def test_skip_hides_the_prompt_until_more_messages_make_a_new_batch_due(room, host):
    run_modes(solo="ask")
    story_room(room, 15)
    finish_a_reply(room)
    page = client_for(host)
    assert page.post(reverse("memory:cycle_skip", args=[room.pk])).status_code == 302
    assert not prompt_shown(page, room)
    inbox = Inbox(host)
    add_story(room, 7)  # up to message 23: block 1 not yet due (the fresh window)
    finish_a_reply(room)  # message 24 of 24: block 1 becomes due
    asks = [e for e in inbox.memory() if e["kind"] == "ask"]
    assert [(e["messages"], e["upto"]) for e in asks] == [(16, 15)]  # the new batch, both blocks
    assert prompt_shown(page, room)


def test_a_group_chat_takes_the_group_mode(room, host):
    run_modes(solo="automatic", group="ask")
    assert runs.run_mode(room) == runmodes.AUTOMATIC
    join(room, make_user(actor=host, username="guest"))
    assert runs.run_mode(room) == runmodes.ASK


def test_a_member_never_gets_the_prompt_and_may_not_start_skip_or_cancel(room, host):
    run_modes(solo="ask", group="ask")
    guest = make_user(actor=host, username="guest")
    join(room, guest)
    inbox = Inbox(guest)
    story_room(room, 15)
    finish_a_reply(room)
    assert inbox.memory() == []
    page = client_for(guest)
    html = page.get(reverse("rooms:room", args=[room.pk])).content.decode()
    assert "memory-cycle" not in html and "Update memory" not in html
    for name in ("memory:cycle_start", "memory:cycle_skip", "memory:cycle_cancel"):
        assert page.post(reverse(name, args=[room.pk])).status_code == 403
    assert prompt_shown(client_for(host), room)  # the host's prompt is untouched


def test_a_page_opened_mid_cycle_shows_the_host_its_panel_as_it_stands_and_a_member_nothing(room, host):
    guest = make_user(actor=host, username="guest")
    join(room, guest)
    running = {"state": "running", "stage": "summaries", "done": 1, "total": 3, "tokens": 42, "speed": 9.5}
    runs.cycle_state_save(room.pk, {**running, "text": "Maren keeps", "stages": [["scene", 1, 1]]})

    def page_of(person) -> str:
        return client_for(person).get(reverse("rooms:room", args=[room.pk])).content.decode()

    try:
        html = page_of(host)
        now = re.search(r'<script id="memory-cycle-now" type="application/json">(.*?)</script>', html)
        assert now and '"stage": "summaries"' in now[1] and '"tokens": 42' in now[1]
        assert "Maren keeps" in now[1]
        assert "memory-cycle-now" not in page_of(guest)
        runs.cycle_state_save(room.pk, {**running, "state": "done"})  # an ended cycle: no panel to restore
        assert "memory-cycle-now" not in page_of(host)
    finally:
        runs.cycle_state_save(room.pk, {"state": "done"})


def test_the_streamed_summary_is_the_same_as_the_one_written_without_streaming(room, host, fake_llm):
    set_utility(host, fake_llm)
    utility = model_roles_get(user=host).utility
    story_room(room, 16)
    fake_llm.script(Reply(ANSWER), Reply(ANSWER, token_delay=0.01))
    t = block_tuning(tuning_get())
    plain = write_summary(room=room, scope="shared", tier=0, block=0, t=t, pov=None, utility=utility)
    Summary.objects.filter(pk=plain.pk).update(stale=True)
    pieces: list[str] = []
    streamed = write_summary(
        room=room, scope="shared", tier=0, block=0, t=t, pov=None, utility=utility, on_text=pieces.append
    )
    assert fake_llm.requests[-1].body.get("stream") is True
    assert "".join(pieces) == ANSWER and len([p for p in pieces if p]) > 5
    assert (
        streamed.pk == plain.pk and streamed.text == plain.text and "Maren keeps the light" in streamed.text
    )


def test_a_text_completion_utility_model_streams_in_its_template_and_writes_the_same(
    room,
    text_utility,  # noqa: F811 - the fixture imported above
    fake_llm,
):
    fake_llm.script(answer())
    story_room(room, 16)
    pieces: list[str] = []
    stages: list[tuple[str, int, int]] = []
    passes.catch_up(room.pk, on_text=pieces.append, on_stage=lambda *stage: stages.append(stage))
    summary = Summary.objects.get(room=room, tier=0, block=0)
    assert summary.facts == ["The brass key opens the cellar."]
    request, manager = fake_llm.completions()  # the summary, streamed; then the memory manager's reading
    assert request.body["stream"] is True and request.body["prompt"].startswith("<|im_start|>system\n")
    assert "Facts kept" in manager.body["prompt"] and manager.body["stream"] is True
    # The summary's answer, whole, then the memory manager's (the fake's default "OK.").
    assert "".join(pieces) == answer().text + "OK."
    assert stages == [
        ("summaries", 0, 1),
        ("summaries", 1, 1),
        ("facts", 0, 1),
        ("facts", 1, 1),
        ("index", 0, 1),
        ("index", 1, 1),
    ]


class TestInTheWorker:
    def test_manual_never_runs_after_replies_and_update_now_runs_it(self, room, host, celery_worker):
        run_modes(solo="manual")
        inbox = Inbox(host)
        story_room(room, 15)
        finish_a_reply(room)
        finish_a_reply(room)
        time.sleep(4)
        assert not Summary.objects.filter(room=room).exists()
        assert inbox.memory() == []  # no prompt either
        page = client_for(host)
        html = page.get(reverse("rooms:room", args=[room.pk])).content.decode()
        assert "Update memory now" in html and not prompt_shown(page, room)
        page.post(reverse("memory:cycle_start", args=[room.pk]))
        wait_for(lambda: Summary.objects.filter(room=room, tier=0, block=0).exists(), what="the summary")

    def test_automatic_runs_after_a_reply_and_shows_the_host_its_stages(self, room, host, celery_worker):
        run_modes(solo="automatic")
        inbox = Inbox(host)
        story_room(room, 15)
        finish_a_reply(room)
        wait_for(lambda: Summary.objects.filter(room=room, tier=0, block=0).exists(), what="the summary")
        events = []
        wait_for(lambda: events.extend(inbox.memory()) or any(e.get("state") == "done" for e in events))
        stages = [(e["stage"], e["done"], e["total"]) for e in events if e["kind"] == "cycle"]
        assert ("summaries", 1, 1) in stages and ("index", 1, 1) in stages
        html = client_for(host).get(reverse("rooms:room", args=[room.pk])).content.decode()
        assert "Update memory now" not in html

    def test_start_now_runs_the_cycle_with_live_tokens_and_the_prompt_goes_away(
        self, room, host, fake_llm, celery_worker
    ):
        run_modes(solo="ask")
        set_utility(host, fake_llm)
        fake_llm.default = Reply(ANSWER, token_delay=0.02)
        story_room(room, 15)
        finish_a_reply(room)
        page = client_for(host)
        assert prompt_shown(page, room)
        inbox = Inbox(host)
        response = page.post(
            reverse("memory:cycle_start", args=[room.pk]), headers={"Accept": "application/json"}
        )
        assert response.json()["ok"]
        events = []
        wait_for(lambda: events.extend(inbox.memory()) or any(e.get("state") == "done" for e in events))
        cycle_events = [e for e in events if e["kind"] == "cycle"]
        # Every call of the cycle streams to the panel: the scene note's, the summary's and the
        # memory manager's (the fake gives each the same answer).
        assert max(e["tokens"] for e in cycle_events) == 3 * len(Reply(ANSWER).tokens())
        assert any(e["speed"] > 0 for e in cycle_events)
        assert cycle_events[-1]["state"] == "done" and cycle_events[-1]["speed"] > 0  # the call's, kept
        assert "".join(e["text"] for e in cycle_events) == 3 * ANSWER  # the live output, whole
        summary = Summary.objects.get(room=room, tier=0, block=0)
        assert summary.source == Summary.Source.UTILITY and "Maren keeps the light" in summary.text
        assert not prompt_shown(page, room)

    def test_cancel_mid_cycle_stops_after_the_current_call_and_leaves_nothing_half_written(
        self, room, host, fake_llm, celery_worker
    ):
        run_modes(solo="manual")
        set_utility(host, fake_llm)
        fake_llm.default = Reply(ANSWER, token_delay=0.15)  # about 3 s a summary
        story_room(room, 32)  # blocks 0, 1 and 2 are due
        page = client_for(host)
        inbox = Inbox(host)
        page.post(reverse("memory:cycle_start", args=[room.pk]))
        # The cycle reads the scene note first, then writes the first summary.
        wait_for(lambda: len(fake_llm.requests) >= 2, what="the first summary's model call")
        html = page.get(reverse("rooms:room", args=[room.pk])).content.decode()
        assert 'id="memory-cycle-now"' in html and '"stage": "summaries"' in html  # a reload shows it
        assert page.post(reverse("memory:cycle_cancel", args=[room.pk])).status_code == 302
        events = []
        wait_for(lambda: events.extend(inbox.memory()) or any(e.get("state") == "cancelled" for e in events))
        written = list(Summary.objects.filter(room=room))
        assert [(s.tier, s.block) for s in written] == [(0, 0)]  # the call under way finished, whole
        assert written[0].source == Summary.Source.UTILITY and "Maren keeps the light" in written[0].text
        assert len(fake_llm.requests) == 2  # the scene note's and the summary's: no further call
        assert "memory-cycle-now" not in page.get(reverse("rooms:room", args=[room.pk])).content.decode()
        # Nothing else is written later either; the next Start goes on where it stopped.
        time.sleep(2)
        assert Summary.objects.filter(room=room).count() == 1
        fake_llm.default = Reply(ANSWER)
        page.post(reverse("memory:cycle_start", args=[room.pk]))
        wait_for(lambda: Summary.objects.filter(room=room, tier=0).count() == 3, what="the rest")
