"""The permission walk: every room URL and every socket action, as host, member, outsider and anonymous.

The rules (rooms/permissions.py): the host may do everything; an active member may read the room,
write and change their own messages; anyone else learns nothing (404, as if the room did not
exist) and anonymous visitors are sent to the login page. A refused call changes nothing.

The tables below are this test's own statement of those rules, checked against the URLconf and
the socket's handlers so that a URL or action added later without a rule here fails the walk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import resolve, reverse

from orbchat.accounts import services as account_services
from orbchat.asgi import application
from orbchat.library import services as library_services
from rooms import members, permissions, services, turns
from rooms import urls as room_urls
from rooms.consumers import RoomConsumer
from rooms.models import Invite, Member, Message, Presence, Room, Seat, Variant
from tests.factories import make_user

HOST, MEMBER, OUTSIDER, ANONYMOUS = "host", "member", "outsider", "anonymous"
MISSING_ROOM = 999_999


# The room ---------------------------------------------------------------------------------------


@dataclass
class World:
    host: object
    member: object
    outsider: object
    room: Room
    seat: Seat
    spare: object  # a character of the host's that is not seated
    greeting: Message
    host_message: Message
    member_message: Message
    invite: Invite  # the open link the member joined through

    def user(self, standing: str):
        return None if standing == ANONYMOUS else getattr(self, standing)


def build_world(host, room, character) -> World:
    member = make_user(actor=host, username="member")
    outsider = make_user(actor=host, username="outsider")
    invite, token = members.invite_link_create(room=room, by=host)
    members.invite_accept(invite=Invite.objects.get(token_hash=members.token_hash(token)), user=member)
    host_message = services.message_create(room=room, author=host, text="The host speaks first.")
    member_message = services.message_create(room=room, author=member, text="The member answers.")
    return World(
        host=host,
        member=member,
        outsider=outsider,
        room=Room.objects.get(pk=room.pk),
        seat=room.seats.get(),
        spare=library_services.character_duplicate(character=character),
        greeting=room.messages.get(seq=0),
        host_message=host_message,
        member_message=member_message,
        invite=invite,
    )


@pytest.fixture
def world(host, room, character) -> World:
    return build_world(host, room, character)


def snapshot() -> dict:
    """Everything a refused call must leave as it was, in every room of the database."""
    messages = list(Message.objects.order_by("pk").prefetch_related("variants"))
    return {
        "rooms": list(
            Room.objects.order_by("pk").values_list(
                "pk", "title", "settings", "tags", "host_id", "host_offer_to_id", "archived_at", "next_seq"
            )
        ),
        "seats": list(Seat.objects.order_by("pk").values_list("pk", "room_id", "talkativeness", "muted")),
        "presences": list(
            Presence.objects.order_by("pk").values_list("pk", "seat_id", "joined_seq", "left_seq")
        ),
        "members": list(
            Member.objects.order_by("pk").values_list("pk", "room_id", "user_id", "state", "persona_id")
        ),
        "invites": list(
            Invite.objects.order_by("pk").values_list("pk", "room_id", "user_id", "uses", "revoked_at")
        ),
        "messages": [
            (
                m.pk,
                m.room_id,
                m.seq,
                m.hidden,
                m.active_index,
                next((v.text for v in m.variants.all() if v.index == m.active_index), None),
            )
            for m in messages
        ],
        "variants": list(
            Variant.objects.order_by("pk").values_list("pk", "message_id", "index", "text", "state")
        ),
    }


# The URL table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One request to a room URL and the answers it gets; a member's or host's 302 lands on `lands`."""

    name: str
    method: str = "post"
    note: str = ""
    args: Callable[[World], dict] = lambda w: {}
    data: Callable[[World], dict] = lambda w: {}
    host: int = 302
    member: int = 403
    lands: str = "people"  # where an allowed 302 goes: people, room, home or fork (a new room)
    writes: bool = True  # an allowed call changes the room

    @property
    def id(self) -> str:
        return f"{self.method.upper()} {self.name}" + (f" [{self.note}]" if self.note else "")

    def url(self, w: World, pk: int | None = None) -> str:
        return reverse(f"rooms:{self.name}", kwargs={"pk": pk or w.room.pk, **self.args(w)})


def read(name: str, *, member: int = 403, note: str = "", args=lambda w: {}) -> Call:
    return Call(name, "get", note=note, args=args, host=200, member=member, writes=False)


def on_host_message(w: World) -> dict:
    return {"message_pk": w.host_message.pk}


def on_member_message(w: World) -> dict:
    return {"message_pk": w.member_message.pk}


SETTINGS = {
    "title": "Renamed by the caller",
    "authors_note": "",
    "authors_note_depth": 4,
    "authors_note_role": "system",
    "tags": "walked",
    "reply_mode": "per_speaker",
    "turn_order": "everyone",
    "auto_turns": 0,
    "auto_delay": 1.5,
}

CALLS = [
    read("room", member=200),
    read("messages", member=200),
    read("people", member=200),
    read("seat_avatar", member=200, args=lambda w: {"seat_pk": w.seat.pk}),
    read("person_avatar", member=200, note="host's", args=lambda w: {"user_pk": w.host.pk}),
    read("person_avatar", member=200, note="member's", args=lambda w: {"user_pk": w.member.pk}),
    read(
        "persona_avatar", member=200, note="host's", args=lambda w: {"persona_pk": w.host_message.persona_id}
    ),
    read(
        "persona_avatar",
        member=200,
        note="member's",
        args=lambda w: {"persona_pk": w.member_message.persona_id},
    ),
    read("settings"),
    Call("settings", data=lambda w: SETTINGS, lands="room"),
    Call("controls", data=lambda w: {"field": "turn_order", "turn_order": "everyone"}, host=200),
    read("delete"),
    Call("delete", lands="home"),
    read("preview"),
    read("export", note="jsonl", args=lambda w: {"fmt": "jsonl"}),
    read("export", note="txt", args=lambda w: {"fmt": "txt"}),
    Call("message_edit", note="host's", args=on_host_message, data=lambda w: {"text": "Edited"}, host=200),
    Call(
        "message_edit",
        note="member's own",
        args=on_member_message,
        data=lambda w: {"text": "Edited"},
        host=200,
        member=200,
    ),
    Call("message_hide", args=on_host_message, data=lambda w: {"hidden": "1"}, host=200),
    Call("message_delete", note="host's", args=on_host_message, host=200),
    Call("message_delete", note="member's own", args=on_member_message, host=200, member=200),
    Call(
        "message_delete",
        note="host's, after=1",
        args=on_host_message,
        data=lambda w: {"after": "1"},
        host=200,
    ),
    Call(
        "message_delete",
        note="member's own, after=1",
        args=on_member_message,
        data=lambda w: {"after": "1"},
        host=200,
    ),
    Call("fork", args=on_host_message, lands="fork"),
    Call("seat_add", data=lambda w: {"character": w.spare.pk}),
    Call(
        "seat_update",
        args=lambda w: {"seat_pk": w.seat.pk},
        data=lambda w: {"talkativeness": "0.9", "muted": "on"},
    ),
    Call("seat_remove", args=lambda w: {"seat_pk": w.seat.pk}),
    Call("invite_link_create", data=lambda w: {"max_uses": "3"}),
    Call("invite_user_create", data=lambda w: {"username": w.outsider.username}),
    Call("invite_revoke", args=lambda w: {"invite_pk": w.invite.pk}),
    Call("kick", args=lambda w: {"user_pk": w.member.pk}),
    Call("host_offer", data=lambda w: {"user": w.member.pk}),
    # The host's persona lives in the room's settings; a member picks their own here.
    Call("member_persona", data=lambda w: {"persona": w.member.personas.get().pk}, host=403, member=302),
    # Nobody was offered the host role: allowed, refused in words, nothing changes.
    Call("host_accept", host=302, member=302, lands="room", writes=False),
    Call("leave", host=302, member=302, lands="home"),
]
CALL_IDS = [c.id for c in CALLS]
NOT_ROOM_SCOPED = {"start", "import", "import_resolve", "new", "invite", "invitation"}


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def call(client: Client, c: Call, w: World, *, pk: int | None = None, method: str | None = None):
    method = method or c.method
    url = c.url(w, pk)
    return getattr(client, method)(url, c.data(w) if method == "post" else None)


def login_redirect(url: str) -> str:
    return f"{reverse('accounts:login')}?next={url}"


def assert_lands(response, c: Call, w: World) -> None:
    location = response["Location"]
    if c.lands == "fork":
        match = resolve(location)
        assert match.view_name == "rooms:room" and match.kwargs["pk"] != w.room.pk
        assert Room.objects.filter(pk=match.kwargs["pk"], parent=w.room).exists()
    elif c.lands == "home":
        assert location == reverse("home")
    else:
        assert location == reverse(f"rooms:{c.lands}", kwargs={"pk": w.room.pk})


def test_the_table_has_a_rule_for_every_room_url():
    room_scoped = {p.name for p in room_urls.urlpatterns if "pk" in p.pattern.converters}
    others = {p.name for p in room_urls.urlpatterns} - room_scoped
    assert {c.name for c in CALLS} == room_scoped
    assert others == NOT_ROOM_SCOPED


@pytest.mark.parametrize("c", CALLS, ids=CALL_IDS)
def test_the_host_may_do_everything(world, c):
    before = snapshot()
    response = call(client_for(world.host), c, world)
    assert response.status_code == c.host
    if c.host == 302:
        assert_lands(response, c, world)
    assert (snapshot() != before) == (c.writes and c.host in (200, 302))


@pytest.mark.parametrize("c", CALLS, ids=CALL_IDS)
def test_a_member_reads_and_writes_their_own_but_is_refused_host_actions(world, c):
    before = snapshot()
    response = call(client_for(world.member), c, world)
    assert response.status_code == c.member
    if c.member == 302:
        assert_lands(response, c, world)
    assert (snapshot() != before) == (c.writes and c.member in (200, 302))


# Refused calls change nothing, so one room serves the whole walk; every wrong answer is listed.


def test_an_outsider_gets_404_from_every_room_url_and_changes_nothing(world):
    outsider = client_for(world.outsider)
    before = snapshot()
    wrong = [(c.id, s) for c in CALLS if (s := call(outsider, c, world).status_code) != 404]
    assert wrong == []
    assert snapshot() == before


def test_an_outsider_cannot_tell_a_room_from_a_missing_one_by_any_method(world):
    outsider = client_for(world.outsider)
    before = snapshot()
    answers = {
        (c.id, method): (
            call(outsider, c, world, method=method).status_code,
            call(outsider, c, world, pk=MISSING_ROOM, method=method).status_code,
        )
        for c in CALLS
        for method in ("get", "post")
    }
    assert {key: a for key, a in answers.items() if a[0] != a[1]} == {}
    # 405 only for a GET to a POST-only URL, which is refused before any room is looked up.
    assert {a[0] for a in answers.values()} <= {404, 405}
    assert snapshot() == before


def test_anonymous_visitors_are_sent_to_login_from_every_room_url_and_change_nothing(world):
    before = snapshot()
    wrong = []
    for c in CALLS:
        for method in ("get", "post"):
            response = call(Client(), c, world, method=method)
            if response.status_code != 302 or response["Location"] != login_redirect(c.url(world)):
                wrong.append((c.id, method, response.status_code, response.get("Location")))
    assert wrong == []
    assert snapshot() == before


def test_a_kicked_member_is_an_outsider_again(world):
    members.member_kick(room=world.room, user_id=world.member.pk)
    member = client_for(world.member)
    before = snapshot()
    assert member.get(reverse("rooms:room", args=[world.room.pk])).status_code == 404
    edit = reverse("rooms:message_edit", args=[world.room.pk, world.member_message.pk])
    assert member.post(edit, {"text": "Sneaky"}).status_code == 404
    assert snapshot() == before


# URLs without a room pk ---------------------------------------------------------------------------


def test_a_member_cannot_start_a_chat_from_the_hosts_character(world):
    before = snapshot()
    url = reverse("rooms:start", args=[world.seat.character_id])
    assert client_for(world.member).post(url).status_code == 404
    assert snapshot() == before


def test_a_member_cannot_import_a_chat_onto_the_hosts_character(world):
    before = snapshot()
    chat = b'{"user_name": "Ann", "character_name": "Maren", "chat_metadata": {}}\n'
    chat += b'{"name": "Ann", "is_user": true, "mes": "Hi"}\n'
    response = client_for(world.member).post(
        reverse("rooms:import"),
        {"file": SimpleUploadedFile("c.jsonl", chat), "character": world.seat.character_id},
    )
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert snapshot() == before


def test_an_invitation_for_someone_else_is_404_and_stays_open(world):
    guest = make_user(actor=world.host, username="guest")
    invite = members.invite_user_create(room=world.room, by=world.host, username="guest")
    url = reverse("rooms:invitation", args=[invite.pk])
    outsider = client_for(world.outsider)
    before = snapshot()
    assert outsider.get(url).status_code == 404
    assert outsider.post(url).status_code == 404
    assert outsider.post(url, {"decline": "1"}).status_code == 404
    assert snapshot() == before
    assert client_for(guest).get(url).status_code == 200


def test_an_invite_link_with_a_wrong_token_does_not_exist_and_changes_nothing(world):
    url = reverse("rooms:invite", args=["not-the-token"])
    outsider = client_for(world.outsider)
    before = snapshot()
    for response in (outsider.get(url), outsider.post(url)):
        assert response.status_code == 404
        assert "does not exist" in response.content.decode()
        assert world.room.title not in response.content.decode()
    assert snapshot() == before


def test_anonymous_visitors_are_sent_to_login_from_the_other_room_urls(world):
    invite = members.invite_user_create(room=world.room, by=world.host, username="outsider")
    urls = [
        reverse("rooms:start", args=[world.seat.character_id]),
        reverse("rooms:import"),
        reverse("rooms:invite", args=["some-token"]),
        reverse("rooms:invitation", args=[invite.pk]),
    ]
    before = snapshot()
    for url in urls:
        for method in ("get", "post"):
            response = getattr(Client(), method)(url)
            assert response.status_code == 302 and response["Location"] == login_redirect(url)
    assert snapshot() == before


# The socket -------------------------------------------------------------------------------------

# Who may take each socket action: this test's statement of the rules.
SOCKET_RULES = {
    "send": MEMBER,
    "speak": MEMBER,
    "impersonate": MEMBER,
    "reply": HOST,
    "regenerate": HOST,
    "continue": HOST,
    "stop": HOST,
    "swipe": HOST,
    "speak_next": HOST,
}
HOST_ONLY = sorted(a for a, least in SOCKET_RULES.items() if least == HOST)
FOR_MEMBERS = sorted(a for a, least in SOCKET_RULES.items() if least == MEMBER)


def payload(w: World, action: str) -> dict:
    """A well-formed frame for the action, so a refusal can only come from the permission check."""
    return {
        "type": action,
        "text": "Hello from the socket",
        "seat": w.seat.pk,
        "message": w.greeting.pk,
        "direction": "left",
        "on": True,
    }


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def socket_for(user, room_id: int) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]
    if user is not None:
        cookie = await sync_to_async(cookie_for)(user)
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, f"/ws/rooms/{room_id}/", headers=headers)


async def open_socket(user, room_id: int) -> WebsocketCommunicator:
    socket = await socket_for(user, room_id)
    connected, _ = await socket.connect()
    assert connected
    return socket


async def until(socket, predicate, timeout=10):
    """Receive frames until one matches; return it and the frames seen before it."""
    seen = []
    while True:
        frame = await socket.receive_json_from(timeout=timeout)
        if predicate(frame):
            return frame, seen
        seen.append(frame)


async def until_closed(socket, timeout=10):
    """Receive until the server closes the socket; return the close and the frames before it."""
    seen = []
    while True:
        output = await socket.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            return output, seen
        seen.append(output)


async def settle():
    while turns.running:
        await asyncio.sleep(0.05)


def test_the_socket_table_has_a_rule_for_every_action():
    handlers = {name.removeprefix("do_") for name in dir(RoomConsumer) if name.startswith("do_")}
    assert set(SOCKET_RULES) == set(permissions.SOCKET_ACTIONS) == handlers
    for action, least in SOCKET_RULES.items():
        allowed = {HOST, MEMBER} if least == MEMBER else {HOST}
        assert permissions.SOCKET_ACTIONS[action] == allowed, action


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
@pytest.mark.parametrize("action", HOST_ONLY)
async def test_a_member_is_refused_host_only_socket_actions_with_403(world, action):
    before = await sync_to_async(snapshot)()
    socket = await open_socket(world.member, world.room.pk)
    await socket.send_json_to(payload(world, action))
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert notice["status"] == 403
    assert await sync_to_async(snapshot)() == before
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
@pytest.mark.parametrize("action", FOR_MEMBERS)
async def test_a_member_may_take_member_socket_actions(world, action):
    socket = await open_socket(world.member, world.room.pk)
    await socket.send_json_to(payload(world, action))
    # No Chat model is connected: the action runs and fails in words, never with a 403.
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert "status" not in notice
    await settle()
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
@pytest.mark.parametrize("standing", [OUTSIDER, ANONYMOUS])
async def test_non_members_cannot_open_the_room_socket(world, standing):
    before = await sync_to_async(snapshot)()
    socket = await socket_for(world.user(standing), world.room.pk)
    connected, code = await socket.connect()
    assert not connected and code == 4404
    await socket.disconnect()
    assert await sync_to_async(snapshot)() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_kicked_members_socket_closes_and_cannot_reconnect(world):
    socket = await open_socket(world.member, world.room.pk)
    await sync_to_async(members.member_kick)(room=world.room, user_id=world.member.pk)
    closed, _ = await until_closed(socket)
    assert closed["code"] == 4404
    await socket.disconnect()
    again = await socket_for(world.member, world.room.pk)
    connected, code = await again.connect()
    assert not connected and code == 4404
    await again.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_deactivated_members_open_socket_is_refused_at_the_next_action(world):
    socket = await open_socket(world.member, world.room.pk)
    await sync_to_async(account_services.user_set_active)(actor=world.host, user=world.member, active=False)
    before = await sync_to_async(snapshot)()
    try:
        await socket.send_json_to(payload(world, "send"))
        closed, _ = await until_closed(socket, timeout=3)
        assert closed["code"] == 4404
        assert await sync_to_async(snapshot)() == before
    finally:
        await settle()
        await socket.disconnect()


def test_an_archived_room_refuses_changes_over_http(world):
    members.room_leave(room=world.room, user=world.host)
    before = snapshot()
    member = client_for(world.member)
    edit = reverse("rooms:message_edit", args=[world.room.pk, world.member_message.pk])
    assert member.post(edit, {"text": "Changed after the host left."}).status_code == 403
    host = client_for(world.host)
    hide = reverse("rooms:message_hide", args=[world.room.pk, world.host_message.pk])
    assert host.post(hide, {"hidden": "1"}).status_code == 403
    assert snapshot() == before
    assert member.get(reverse("rooms:room", args=[world.room.pk])).status_code == 200  # still readable
