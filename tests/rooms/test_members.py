"""People in a room: invites, joining, kicking, handing off host, leaving."""

from __future__ import annotations

import datetime as dt

import pytest

from orbchat.library import services as library_services
from rooms import members, permissions, selectors, services
from rooms.models import Invite, Member
from tests.factories import make_user


@pytest.fixture
def guest(host):
    return make_user(actor=host, username="guest")


def join(room, host, user):
    invite, _ = members.invite_link_create(room=room, by=host)
    return members.invite_accept(invite=invite, user=user)


def test_an_invite_link_stores_only_a_hash_of_its_token(room, host):
    invite, token = members.invite_link_create(room=room, by=host)
    assert len(token) >= 32
    assert invite.token_hash == members.token_hash(token)
    assert token not in str(Invite.objects.filter(pk=invite.pk).values().get())


def test_accepting_a_link_makes_a_member_who_may_enter(room, host, guest):
    assert not permissions.can_enter(guest, room)
    join(room, host, guest)
    assert permissions.standing(guest, room) == permissions.MEMBER
    assert room in selectors.chat_list(user=guest)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [({"expires_in": dt.timedelta(seconds=-1)}, "expired"), ({"max_uses": 1}, "used up")],
)
def test_expired_and_used_up_links_are_refused_by_name(room, host, guest, kwargs, problem):
    invite, _ = members.invite_link_create(room=room, by=host, **kwargs)
    if "max_uses" in kwargs:
        members.invite_accept(invite=invite, user=make_user(actor=host, username="first"))
    with pytest.raises(services.ActionRefused, match=problem):
        members.invite_accept(invite=invite, user=guest)
    assert not Member.objects.filter(user=guest).exists()


def test_a_revoked_link_no_longer_admits(room, host, guest):
    invite, _ = members.invite_link_create(room=room, by=host)
    members.invite_revoke(invite=invite)
    with pytest.raises(services.ActionRefused, match="revoked"):
        members.invite_accept(invite=invite, user=guest)


def test_an_invite_by_username_is_for_that_person_only(room, host, guest):
    invite = members.invite_user_create(room=room, by=host, username="GUEST")
    assert list(selectors.pending_invitations(user=guest)) == [invite]
    other = make_user(actor=host, username="other")
    with pytest.raises(services.ActionRefused, match="someone else"):
        members.invite_accept(invite=invite, user=other)
    members.invite_accept(invite=invite, user=guest)
    assert permissions.standing(guest, room) == permissions.MEMBER
    assert list(selectors.pending_invitations(user=guest)) == []


def test_inviting_an_unknown_username_names_it(room, host):
    with pytest.raises(services.ActionRefused, match="nobody-here"):
        members.invite_user_create(room=room, by=host, username="nobody-here")


def test_a_kicked_member_loses_access_and_cannot_rejoin_by_link(room, host, guest):
    join(room, host, guest)
    members.member_kick(room=room, user_id=guest.pk)
    assert not permissions.can_enter(guest, room)
    with pytest.raises(services.ActionRefused, match="removed you"):
        join(room, host, guest)


def test_a_member_who_left_may_come_back(room, host, guest):
    join(room, host, guest)
    members.room_leave(room=room, user=guest)
    assert not permissions.can_enter(guest, room)
    join(room, host, guest)
    assert permissions.can_enter(guest, room)


def test_host_hand_off_waits_for_acceptance_then_swaps(room, host, guest):
    join(room, host, guest)
    members.host_offer(room=room, user_id=guest.pk)
    room.refresh_from_db()
    assert room.host_id == host.pk
    members.host_accept(room=room, user=guest)
    room.refresh_from_db()
    assert room.host_id == guest.pk
    assert permissions.standing(host, room) == permissions.MEMBER
    assert room.preset is None and room.persona is None  # the new host's own defaults apply


def test_only_the_offered_member_can_accept_host(room, host, guest):
    join(room, host, guest)
    with pytest.raises(services.ActionRefused, match="no host offer"):
        members.host_accept(room=room, user=guest)


def test_when_the_only_host_leaves_the_room_is_archived(room, host, guest):
    join(room, host, guest)
    members.room_leave(room=room, user=host)
    room.refresh_from_db()
    assert room.archived_at is not None
    assert permissions.can_enter(guest, room)  # members still read
    assert not permissions.may_act(guest, room, "reply")


def test_members_write_under_their_own_persona(room, host, guest):
    join(room, host, guest)
    persona = library_services.persona_create(owner=guest, name="Wren", description="A courier.")
    members.member_set_persona(room=room, user=guest, persona=persona)
    message = services.message_create(room=room, author=guest, text="Hello all.")
    assert message.speaker_name == "Wren"
    assert services.message_create(room=room, author=host, text="Hi.").speaker_name != "Wren"


def test_two_new_accounts_post_under_their_own_names_in_a_shared_room(room, host, guest):
    join(room, host, guest)
    assert services.message_create(room=room, author=host, text="Welcome.").speaker_name == "host"
    assert services.message_create(room=room, author=guest, text="Thanks.").speaker_name == "guest"
