from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from orbchat.interop import chats as chat_codec
from rooms import services
from rooms.models import Message, Room
from tests.factories import join, make_user

pytestmark = pytest.mark.django_db


def chat_jsonl(*lines) -> bytes:
    header = {
        "user_name": "Ann",
        "character_name": "Maren",
        "create_date": "2024-07-12@01h31m37s",
        "chat_metadata": {},
    }
    return (
        "\n".join(json.dumps(x) if not isinstance(x, str) else x for x in (header, *lines)) + "\n"
    ).encode()


def test_start_a_chat_from_the_character_page(signed_in, character):
    response = signed_in.post(reverse("rooms:start", args=[character.pk]))
    room = Room.objects.get()
    assert response["Location"] == reverse("rooms:room", args=[room.pk])
    page = signed_in.get(response["Location"]).content.decode()
    assert character.name in page and 'id="composer"' in page


def test_the_chat_list_searches_titles_characters_and_text(signed_in, room, host):
    services.message_create(room=room, author=host, text="The lantern went out at midnight")
    names = lambda r: [x.pk for x in r.context["rooms"]]  # noqa: E731
    assert names(signed_in.get(reverse("home"), {"q": "lantern"})) == [room.pk]
    assert names(signed_in.get(reverse("home"), {"q": room.seats.get().name[:4]})) == [room.pk]
    assert names(signed_in.get(reverse("home"), {"q": "zeppelin"})) == []


def test_delete_asks_first_then_deletes(signed_in, room):
    page = signed_in.get(reverse("rooms:delete", args=[room.pk])).content.decode()
    assert "cannot be undone" in page and Room.objects.filter(pk=room.pk).exists()
    signed_in.post(reverse("rooms:delete", args=[room.pk]))
    assert not Room.objects.filter(pk=room.pk).exists()


def test_message_actions_over_http(signed_in, room, host):
    one = services.message_create(room=room, author=host, text="First")
    services.message_create(room=room, author=host, text="Second")
    response = signed_in.post(
        reverse("rooms:message_edit", args=[room.pk, one.pk]), {"text": "First, better"}
    )
    assert "First, better" in response.content.decode()
    signed_in.post(reverse("rooms:message_hide", args=[room.pk, one.pk]), {"hidden": "1"})
    assert Message.objects.get(pk=one.pk).hidden
    response = signed_in.post(reverse("rooms:message_delete", args=[room.pk, one.pk]), {"after": "1"})
    assert len(response.json()["deleted"]) == 2
    assert list(room.messages.values_list("seq", flat=True)) == [0]


def test_fork_redirects_to_the_copy(signed_in, room, host):
    message = services.message_create(room=room, author=host, text="Branch here")
    response = signed_in.post(reverse("rooms:fork", args=[room.pk, message.pk]))
    fork = Room.objects.exclude(pk=room.pk).get()
    assert response["Location"] == reverse("rooms:room", args=[fork.pk])
    assert fork.messages.count() == 2 and room.messages.count() == 2


def test_markup_in_messages_is_inert_on_the_page(signed_in, room, host):
    services.message_create(room=room, author=host, text="<script>alert(1)</script> [x](javascript:alert(1))")
    page = signed_in.get(reverse("rooms:room", args=[room.pk])).content.decode()
    assert "<script>alert(1)</script>" not in page and 'href="javascript' not in page


def test_the_preview_shows_the_next_prompt_with_world_info_and_budget(signed_in, room, host, connected):
    services.message_create(room=room, author=host, text="Tell me about the Ledger of Passing.")
    page = signed_in.get(reverse("rooms:preview", args=[room.pk])).content.decode()
    assert "The next turn would send" in page and "Tell me about the Ledger of Passing." in page
    assert "Chat history" in page and "budget-bar" in page
    assert "Ledger" in page.split("<h3>World info</h3>")[1].split("<h3>")[0]


def test_the_preview_says_when_no_model_is_connected(signed_in, room):
    assert (
        "No Chat model is connected"
        in signed_in.get(reverse("rooms:preview", args=[room.pk])).content.decode()
    )


@pytest.mark.parametrize("name", ["rooms:room", "rooms:settings", "rooms:preview", "rooms:delete"])
def test_other_users_get_404_and_change_nothing(client, room, host, name):
    stranger = make_user(actor=host, username="stranger")
    client.force_login(stranger)
    assert client.get(reverse(name, args=[room.pk])).status_code == 404
    assert client.post(reverse(name, args=[room.pk])).status_code == 404
    assert Room.objects.filter(pk=room.pk).exists()


def test_export_and_reimport_keep_messages_swipes_and_hidden_flags(signed_in, room, host, character):
    services.message_create(room=room, author=host, text="Hello")
    hidden = services.message_create(room=room, author=host, text="Psst")
    services.message_set_hidden(message=hidden, hidden=True)
    exported = signed_in.get(reverse("rooms:export", args=[room.pk, "jsonl"])).content
    parsed = chat_codec.parse_chat_jsonl(exported)
    assert [m.hidden for m in parsed.messages] == [False, False, True]
    assert len(parsed.messages[0].swipes) == room.messages.get(seq=0).variants.count()
    asked = signed_in.post(
        reverse("rooms:import"), {"file": SimpleUploadedFile("c.jsonl", exported), "character": character.pk}
    ).content.decode()
    assert "is already in your chats" in asked
    token = re.search(r'name="token" value="([^"]+)"', asked).group(1)
    response = signed_in.post(reverse("rooms:import_resolve"), {"token": token, "action": "copy"})
    copy = Room.objects.exclude(pk=room.pk).get()
    assert response["Location"] == reverse("rooms:room", args=[copy.pk])
    again = chat_codec.parse_chat_jsonl(
        signed_in.get(reverse("rooms:export", args=[copy.pk, "jsonl"])).content
    )
    assert [(m.name, m.is_user, m.hidden, m.swipes, m.swipe_id) for m in again.messages] == [
        (m.name, m.is_user, m.hidden, m.swipes, m.swipe_id) for m in parsed.messages
    ]
    text = signed_in.get(reverse("rooms:export", args=[room.pk, "txt"])).content.decode()
    assert "Hello" in text and "(hidden)" in text


def test_bad_chat_lines_are_reported_by_number(signed_in, character):
    content = chat_jsonl(
        {"name": "Ann", "is_user": True, "mes": "Hi"},
        "{broken",
        {"name": "Maren", "is_user": False, "mes": "Hello"},
    )
    response = signed_in.post(
        reverse("rooms:import"),
        {"file": SimpleUploadedFile("c.jsonl", content), "character": character.pk},
        follow=True,
    )
    page = response.content.decode()
    assert "line 3" in page
    assert Room.objects.get().messages.count() == 2


def test_import_chat_from_the_command_line(host, character, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_bytes(
        chat_jsonl({"name": "Ann", "is_user": True, "mes": "Hi", "swipes": ["Hi"], "swipe_id": 0})
    )
    out = StringIO()
    call_command(
        "import_sillytavern", str(path), "--user", host.username, "--character", str(character.pk), stdout=out
    )
    room = Room.objects.get()
    assert out.getvalue().strip() == f"imported chat {room.pk} {room.title}"


def test_a_chat_without_character_is_refused_by_the_command(host, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_bytes(chat_jsonl({"name": "Ann", "is_user": True, "mes": "Hi"}))
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command("import_sillytavern", str(path), "--user", host.username, stdout=out)
    assert out.getvalue().startswith(f"refused {path}: a chat needs --character")


def test_the_settings_page_shows_the_memory_card_once_and_a_plain_title(signed_in, room):
    html = signed_in.get(reverse("rooms:settings", args=[room.pk])).content.decode()
    assert html.count('class="card memory-status"') == 1
    title = html.split("<title>", 1)[1].split("</title>", 1)[0]
    assert "<" not in title and "Settings" in title


def test_a_guest_without_a_model_is_told_the_rooms_they_joined_work(client, room, host):
    guest = make_user(actor=host, username="guest")
    client.force_login(guest)
    alone = client.get(reverse("home")).content.decode()
    assert "No Chat model is connected yet" in alone and "rooms you joined" not in alone

    join(room, guest)
    page = client.get(reverse("home")).content.decode()
    assert "No Chat model is connected yet" not in page
    assert "You can play in the rooms you joined: there the host's Chat model answers." in page
    assert "Chats of your own need a model of your own" in page
    assert f'href="/chats/{room.pk}/"' in page and "hosted by host" in page


def test_the_host_sees_no_guest_notice_in_their_own_room(signed_in, room):
    page = signed_in.get(reverse("home")).content.decode()
    assert "No Chat model is connected yet" in page and "rooms you joined" not in page
    assert "hosted by" not in page
