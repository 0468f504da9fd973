"""Each person in a room writes as their own persona: a message keeps the persona it was written
as (its name and its picture), even after its author switches to another one."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile

from orbchat.library import services as library_services
from orbchat.library.starter import AVATAR_PATH
from rooms import members, presenters, prompting, services
from rooms.models import Message
from tests.factories import join, make_user

pytestmark = pytest.mark.django_db

# A 1×1 GIF: a second picture, told apart from the starter avatar by its bytes.
OTHER_PICTURE = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)


@pytest.fixture
def member(host, room):
    user = make_user(actor=host, username="member")
    join(room, user)
    return user


def persona_with_picture(owner, name, picture, filename):
    persona = library_services.persona_create(owner=owner, name=name, description=f"{name}, a courier.")
    persona.avatar.save(filename, ContentFile(picture))
    return persona


def picture(client, url) -> bytes:
    response = client.get(url)
    assert response.status_code == 200
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_a_members_message_is_written_as_the_persona_they_chose(room, member):
    wren = persona_with_picture(member, "Wren", AVATAR_PATH.read_bytes(), "wren.png")
    members.member_set_persona(room=room, user=member, persona=wren)
    message = services.message_create(room=room, author=member, text="Hello all.")
    message.refresh_from_db()
    assert message.speaker_name == "Wren" and message.persona == wren


def test_a_member_without_a_chosen_persona_writes_as_their_default_one(room, member):
    sable = library_services.persona_create(owner=member, name="Sable", is_default=True)
    message = services.message_create(room=room, author=member, text="Evening.")
    assert (message.speaker_name, message.persona) == ("Sable", sable)


def test_the_hosts_message_is_written_as_the_rooms_persona(room, host):
    message = services.message_create(room=room, author=host, text="Welcome.")
    default = host.personas.get(is_default=True)
    assert (message.speaker_name, message.persona) == (default.name, default)


def test_switching_persona_keeps_the_earlier_messages_name_and_picture(client, host, room, member):
    wren = persona_with_picture(member, "Wren", AVATAR_PATH.read_bytes(), "wren.png")
    sable = persona_with_picture(member, "Sable", OTHER_PICTURE, "sable.gif")
    members.member_set_persona(room=room, user=member, persona=wren)
    earlier = services.message_create(room=room, author=member, text="Wren speaks.")
    members.member_set_persona(room=room, user=member, persona=sable)
    later = services.message_create(room=room, author=member, text="Sable speaks.")

    earlier.refresh_from_db()
    assert earlier.speaker_name == "Wren" and later.speaker_name == "Sable"
    client.force_login(host)
    earlier_url = presenters.message_view(earlier).avatar_url
    later_url = presenters.message_view(later).avatar_url
    assert picture(client, earlier_url) == AVATAR_PATH.read_bytes()
    assert picture(client, later_url) == OTHER_PICTURE
    page = client.get(f"/chats/{room.pk}/").content.decode()
    assert f'src="{earlier_url}"' in page and f'src="{later_url}"' in page


def test_a_message_without_a_persona_shows_its_authors_persona_now(client, host, room, member):
    wren = persona_with_picture(member, "Wren", AVATAR_PATH.read_bytes(), "wren.png")
    members.member_set_persona(room=room, user=member, persona=wren)
    message = services.message_create(room=room, author=member, text="Hello.")
    Message.objects.filter(pk=message.pk).update(persona=None)  # as an imported message has none
    message.refresh_from_db()
    url = presenters.message_view(message).avatar_url
    assert url == f"/chats/{room.pk}/people/{member.pk}/avatar/"
    client.force_login(host)
    assert picture(client, url) == AVATAR_PATH.read_bytes()


def test_a_personas_picture_is_only_for_the_rooms_people_and_only_where_it_spoke(client, host, room, member):
    wren = persona_with_picture(member, "Wren", AVATAR_PATH.read_bytes(), "wren.png")
    unused = persona_with_picture(member, "Unused", OTHER_PICTURE, "unused.gif")
    members.member_set_persona(room=room, user=member, persona=wren)
    services.message_create(room=room, author=member, text="Hello.")

    client.force_login(make_user(actor=host, username="stranger"))
    assert client.get(f"/chats/{room.pk}/personas/{wren.pk}/avatar/").status_code == 404
    client.force_login(host)
    response = client.get(f"/chats/{room.pk}/personas/{unused.pk}/avatar/")
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"


def test_the_prompt_names_each_person_by_the_persona_they_wrote_as(room, host, member, connected):
    wren = library_services.persona_create(owner=member, name="Wren")
    members.member_set_persona(room=room, user=member, persona=wren)
    services.message_create(room=room, author=host, text="Who rows in?")
    services.message_create(room=room, author=member, text="Only me.")
    host_name = host.personas.get(is_default=True).name
    plan = prompting.plan_turn(turn=prompting.TurnContext.of(room), seat=room.seats.get())
    lines = [m["content"] for m in plan.prompt.messages if m["role"] == "user"]
    assert f"{host_name}: Who rows in?" in lines and "Wren: Only me." in lines


def test_a_members_draft_is_written_in_their_personas_voice(room, host, member, connected):
    wren = library_services.persona_create(owner=member, name="Wren", description="A courier who hums.")
    members.member_set_persona(room=room, user=member, persona=wren)
    turn = prompting.TurnContext.of(room).as_writer(member)
    plan = prompting.plan_turn(turn=turn, seat=room.seats.get(), mode="impersonate")
    text = "\n".join(m["content"] for m in plan.prompt.messages)
    assert "Write the next message as Wren" in text and "A courier who hums." in text
    assert prompting.TurnContext.of(room).as_writer(host).persona == host.personas.get(is_default=True)


def test_a_member_without_any_persona_drafts_under_their_own_name(room, host, member, connected):
    member.personas.all().delete()  # an account can be without any
    turn = prompting.TurnContext.of(room).as_writer(member)
    plan = prompting.plan_turn(turn=turn, seat=room.seats.get(), mode="impersonate")
    text = "\n".join(m["content"] for m in plan.prompt.messages)
    assert "Write the next message as member" in text
    assert f"Write the next message as {host.get_username()}" not in text


def persona_text(plan) -> str:
    return "\n".join(m["content"] for m in plan.prompt.messages if m["role"] == "system")


def test_the_hosts_prompt_describes_every_active_member_by_their_persona(room, host, member, connected):
    wren = library_services.persona_create(owner=member, name="Wren", description="{{user}} rows the ferry.")
    members.member_set_persona(room=room, user=member, persona=wren)
    left = make_user(actor=host, username="left")
    join(room, left)
    library_services.persona_create(owner=left, name="Gone", description="Gone was here.", is_default=True)
    members.member_kick(room=room, user_id=left.pk)
    host_persona = host.personas.get(is_default=True)
    library_services.persona_update(
        persona=host_persona, name=host_persona.name, description="{{user}} keeps the light."
    )
    text = persona_text(prompting.plan_turn(turn=prompting.TurnContext.of(room), seat=room.seats.get()))
    assert f"{host_persona.name}: {host_persona.name} keeps the light.\nWren: Wren rows the ferry." in text
    assert "Gone was here." not in text


def test_a_members_draft_lists_the_host_among_the_others(room, host, member, connected):
    wren = library_services.persona_create(owner=member, name="Wren", description="A courier.")
    members.member_set_persona(room=room, user=member, persona=wren)
    host_persona = host.personas.get(is_default=True)
    library_services.persona_update(
        persona=host_persona, name=host_persona.name, description="The lighthouse keeper."
    )
    turn = prompting.TurnContext.of(room).as_writer(member)
    text = persona_text(prompting.plan_turn(turn=turn, seat=room.seats.get(), mode="impersonate"))
    assert f"Wren: A courier.\n{host_persona.name}: The lighthouse keeper." in text


def test_a_room_without_members_keeps_the_persona_as_written(room, host, connected):
    host_persona = host.personas.get(is_default=True)
    library_services.persona_update(
        persona=host_persona, name=host_persona.name, description="{{user}} keeps the light."
    )
    text = persona_text(prompting.plan_turn(turn=prompting.TurnContext.of(room), seat=room.seats.get()))
    assert f"{host_persona.name} keeps the light." in text
    assert f"{host_persona.name}: {host_persona.name} keeps" not in text
