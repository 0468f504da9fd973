"""A busy database loses nothing: big chat imports write in batches, and a send waits out a lock.

SQLite lets one connection write at a time; these tests hold its write lock for real, from a
second connection or a long import in another thread. PostgreSQL locks rows, not the database,
so the lock-specific tests do not apply there.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections

from orbchat.interop.errors import InteropError
from rooms import chatfiles, services
from rooms.models import Message, Room, Variant
from tests.rooms.test_turns import open_socket, settle, until

pytestmark = pytest.mark.django_db(transaction=True)

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="SQLite's database-wide write lock; PostgreSQL locks rows and never reports the database locked",
)

# How long a writer waits for SQLite's lock before it is told the database is locked. The
# deployed timeout is 20 s; a short one lets a test hold the lock past it in a second or two.
SHORT_BUSY_TIMEOUT = 0.3


@pytest.fixture
def short_busy_timeout():
    options = connection.settings_dict["OPTIONS"]
    saved = options["timeout"]
    options["timeout"] = SHORT_BUSY_TIMEOUT
    connections.close_all()  # connections opened from now on wait this long
    yield
    options["timeout"] = saved
    connections.close_all()


class WriteLock:
    """SQLite's write lock, taken by a connection of its own (as another process would)."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, timeout=20)

    def take(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")


@pytest.fixture
def write_lock():
    lock = WriteLock()
    yield lock
    lock.release()  # a test that failed while holding it must not lock the tests after it
    lock.db.close()


def chat_jsonl(count: int) -> bytes:
    lines = [json.dumps({"user_name": "You", "character_name": "Keeper", "chat_metadata": {}})]
    for i in range(count):
        line = {
            "name": "You" if i % 2 == 0 else "Keeper",
            "is_user": i % 2 == 0,
            "mes": f"Line {i} of the tale.",
        }
        lines.append(json.dumps(line))
    return "\n".join(lines).encode()


def test_a_big_import_is_saved_whole_with_every_message_in_order(host, character):
    room, problems = chatfiles.chat_import(host=host, character=character, content=chat_jsonl(4_500))
    assert problems == []
    assert room.messages.count() == 4_500 and Variant.objects.filter(room=room).count() == 4_500
    assert list(room.messages.order_by("seq").values_list("seq", flat=True)) == list(range(4_500))
    assert Room.objects.get(pk=room.pk).next_seq == 4_500
    last = room.messages.get(seq=4_499)
    assert last.variants.get().text == "Line 4499 of the tale." and last.seat is not None


def test_an_imported_message_over_the_limit_is_skipped_and_reported(host, character, settings):
    settings.MAX_MESSAGE_CHARS = 20
    lines = [{"name": "You", "is_user": True, "mes": text} for text in ("Short.", "x" * 21, "Also short.")]
    content = "\n".join(json.dumps(line) for line in lines).encode()
    room, problems = chatfiles.chat_import(host=host, character=character, content=content)
    assert problems == ["message 2: longer than 20 characters"]
    assert [m.variants.get().text for m in room.messages.order_by("seq")] == ["Short.", "Also short."]


@sqlite_only
def test_a_send_during_a_big_import_waits_at_most_about_a_second(host, character, room):
    content = chat_jsonl(30_000)
    failures = []

    def run_import() -> None:
        try:
            chatfiles.chat_import(host=host, character=character, content=content)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)
        finally:
            connections.close_all()

    importer = threading.Thread(target=run_import)
    importer.start()
    waits = []
    while importer.is_alive():
        started = time.monotonic()
        services.message_create(room=room, author=host, text=f"Sent while importing, {len(waits)}.")
        waits.append(time.monotonic() - started)
        time.sleep(0.05)
    importer.join()
    assert failures == []
    assert len(waits) >= 5  # the sends really ran while the import did
    # A batch holds the lock about half a second; the rest is two busy Python threads sharing
    # the interpreter on a loaded machine.
    assert max(waits) < 2.0, f"a send waited {max(waits):.2f} s: {sorted(waits)[-5:]}"
    assert sorted(waits)[len(waits) // 2] < 0.5
    assert room.messages.filter(kind="human").count() == len(waits)
    assert Room.objects.exclude(pk=room.pk).get().messages.count() == 30_000


@sqlite_only
def test_an_import_that_fails_midway_leaves_no_room_behind(host, character, short_busy_timeout, write_lock):
    rooms_before = Room.objects.count()
    errors = []

    def run_import() -> None:
        try:
            chatfiles.chat_import(host=host, character=character, content=chat_jsonl(40_000))
        except InteropError as exc:
            errors.append(str(exc))
        finally:
            connections.close_all()

    importer = threading.Thread(target=run_import)
    importer.start()
    while not Message.objects.filter(room__title__endswith="(imported)").exists():
        time.sleep(0.01)
    write_lock.take()  # the next batch waits past its busy timeout and fails
    time.sleep(1.0)
    write_lock.release()
    importer.join()
    assert errors == ["the database was busy, so nothing was imported; try again"]
    assert Room.objects.count() == rooms_before
    assert not Message.objects.filter(room__title__endswith="(imported)").exists()


@sqlite_only
@pytest.mark.asyncio
async def test_a_send_that_meets_a_locked_database_is_saved_once_the_lock_goes(
    room, host, short_busy_timeout, write_lock
):
    socket = await open_socket(host, room.pk)
    write_lock.take()
    await socket.send_json_to({"type": "send", "text": "Held up, but here."})
    await asyncio.sleep(1.5)  # five busy timeouts
    write_lock.release()
    frame, _ = await until(socket, lambda f: f["type"] == "message" and "Held up, but here." in f["html"])
    await settle()
    texts = await sync_to_async(
        lambda: list(Variant.objects.filter(room=room).values_list("text", flat=True))
    )()
    assert "Held up, but here." in texts
    await socket.disconnect()


@sqlite_only
@pytest.mark.asyncio
async def test_a_send_the_database_stays_too_busy_for_is_refused_plainly_and_the_socket_stays_open(
    room, host, short_busy_timeout, write_lock
):
    socket = await open_socket(host, room.pk)
    write_lock.take()
    await socket.send_json_to({"type": "send", "text": "Lost in the crowd?"})
    notice, _ = await until(socket, lambda f: f["type"] == "notice", timeout=20)
    write_lock.release()
    assert notice["text"] == "Your message was not saved: the database is busy. Try again."
    await socket.send_json_to({"type": "send", "text": "Trying again."})
    await until(socket, lambda f: f["type"] == "message" and "Trying again." in f["html"])
    await settle()
    texts = await sync_to_async(
        lambda: list(Variant.objects.filter(room=room).values_list("text", flat=True))
    )()
    assert "Trying again." in texts and "Lost in the crowd?" not in texts
    await socket.disconnect()
