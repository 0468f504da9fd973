"""A V3 card's fields at work in chats: nickname, group-only greetings, the Character's Note,
creator notes by language and an embedded book's own settings."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from orbchat.library import services as library_services
from rooms import prompting, services

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in_host(client, host):
    client.force_login(host)
    return client


def v3(name: str, **data) -> dict:
    fields = {
        "name": name,
        "description": "{{char}} keeps the harbour light.",
        "personality": "",
        "scenario": "",
        "first_mes": "{{char}} waves at {{user}}.",
        "mes_example": "",
        "creator_notes": "Notes in English.",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": ["{{char}} nods."],
        "group_only_greetings": ["{{char}} greets the whole crew."],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {},
        **data,
    }
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": fields}


def card(host, name: str, **data):
    content = json.dumps(v3(name, **data)).encode()
    return library_services.import_file(owner=host, filename=f"{name}.json", content=content).obj


def greeting_texts(room, seat_name: str) -> list[str]:
    message = room.messages.filter(speaker_name=seat_name).order_by("seq").first()
    return list(message.variants.order_by("index").values_list("text", flat=True))


def plan(room, seat):
    return prompting.plan_turn(turn=prompting.TurnContext.of(room), seat=seat)


def contents(prompt) -> list[str]:
    return [m["content"] for m in prompt.messages]


def user_name(host) -> str:
    return host.personas.get(is_default=True).name


# Nickname


def test_a_nickname_is_char_in_the_greeting_and_the_prompt(host, connected):
    mira = card(host, "Mira Holloway", nickname="Mimi")
    room = services.room_create_from_character(host=host, character=mira)
    assert greeting_texts(room, "Mira Holloway")[0] == f"Mimi waves at {user_name(host)}."
    services.message_create(room=room, author=host, text="Hello there.")
    text = "\n".join(contents(plan(room, room.seats.get()).prompt))
    assert "Mimi keeps the harbour light." in text
    assert "Mira Holloway keeps" not in text


def test_the_greeting_preview_uses_the_nickname(signed_in_host, host):
    mira = card(host, "Mira Holloway", nickname="Mimi")
    page = signed_in_host.get(reverse("library:character", args=[mira.pk])).content.decode()
    assert f"Mimi waves at {user_name(host)}." in page


# Group-only greetings


def test_group_only_greetings_are_not_offered_in_a_one_character_chat(host):
    mira = card(host, "Mira")
    room = services.room_create_from_character(host=host, character=mira)
    assert greeting_texts(room, "Mira") == [
        f"Mira waves at {user_name(host)}.",
        "Mira nods.",
    ]


def test_seating_a_second_character_before_the_chat_begins_offers_the_group_greetings(host):
    mira, tobin = card(host, "Mira"), card(host, "Tobin")
    room = services.room_create_from_character(host=host, character=mira)
    services.seat_add(room=room, character=tobin)
    assert greeting_texts(room, "Tobin") == [
        f"Tobin waves at {user_name(host)}.",
        "Tobin nods.",
        "Tobin greets the whole crew.",
    ]
    assert greeting_texts(room, "Mira")[-1] == "Mira greets the whole crew."
    services.seat_add(room=room, character=card(host, "Ione"))
    assert greeting_texts(room, "Mira").count("Mira greets the whole crew.") == 1


def test_a_character_seated_after_the_chat_began_does_not_greet(host):
    mira, tobin = card(host, "Mira"), card(host, "Tobin")
    room = services.room_create_from_character(host=host, character=mira)
    services.message_create(room=room, author=host, text="Let's begin.")
    services.seat_add(room=room, character=tobin)
    assert not room.messages.filter(speaker_name="Tobin").exists()
    assert "Mira greets the whole crew." not in greeting_texts(room, "Mira")


# The Character's Note


def depth_note(prompt: str, depth: int, role: str) -> dict:
    return {"depth_prompt": {"prompt": prompt, "depth": depth, "role": role}}


def test_the_characters_note_is_sent_at_its_depth_and_role(host, connected):
    mira = card(host, "Mira", extensions=depth_note("  {{char}} hides the key from {{user}}.  ", 1, "user"))
    room = services.room_create_from_character(host=host, character=mira)
    for line in ("First line.", "Second line.", "Third line."):
        services.message_create(room=room, author=host, text=line)
    messages = plan(room, room.seats.get()).prompt.messages
    note = next(i for i, m in enumerate(messages) if "hides the key" in m["content"])
    assert messages[note] == {"role": "user", "content": f"Mira hides the key from {user_name(host)}."}
    assert messages[note - 1]["content"].endswith("Second line.")
    assert messages[note + 1]["content"].endswith("Third line.")


def test_a_note_without_depth_or_role_is_a_system_message_four_deep(host, connected):
    mira = card(host, "Mira", extensions={"depth_prompt": {"prompt": "Rain all day."}})
    room = services.room_create_from_character(host=host, character=mira)
    for i in range(6):
        services.message_create(room=room, author=host, text=f"Line {i}.")
    messages = plan(room, room.seats.get()).prompt.messages
    note = next(i for i, m in enumerate(messages) if m["content"] == "Rain all day.")
    assert messages[note]["role"] == "system"
    assert messages[note + 1]["content"].endswith("Line 2.")


def test_in_a_group_every_seated_note_is_sent_with_its_own_char_but_a_muted_ones(host, connected):
    mira = card(host, "Mira", extensions=depth_note("{{char}} watches the door.", 2, "system"))
    tobin = card(host, "Tobin", extensions=depth_note("{{char}} counts the coins.", 2, "system"))
    ione = card(host, "Ione", extensions=depth_note("{{char}} hums.", 2, "system"))
    room = services.room_create_from_character(host=host, character=mira)
    services.message_create(room=room, author=host, text="Let's begin.")
    tobin_seat = services.seat_add(room=room, character=tobin)
    ione_seat = services.seat_add(room=room, character=ione)
    services.seat_update(seat=ione_seat, muted=True)
    services.message_create(room=room, author=host, text="Everyone here?")
    text = contents(plan(room, tobin_seat).prompt)
    assert "Mira watches the door." in text and "Tobin counts the coins." in text
    assert "Ione hums." not in text
    assert "Ione hums." in contents(plan(room, ione_seat).prompt)


# Creator notes in the person's language


@pytest.mark.parametrize(
    ("accept", "shown"),
    [
        ("fr-FR,fr;q=0.9,en;q=0.8", "Notes en français."),
        ("pt-BR", "Notas em português."),
        ("de;q=0.9, ja", "日本語のノート。"),
        ("de", "Notes in English."),
        ("", "Notes in English."),
    ],
)
def test_creator_notes_are_shown_in_the_persons_language(signed_in_host, host, accept, shown):
    notes = {"fr": "Notes en français.", "pt": "Notas em português.", "ja": "日本語のノート。"}
    mira = card(host, "Mira", creator_notes_multilingual=notes)
    page = signed_in_host.get(
        reverse("library:character", args=[mira.pk]), HTTP_ACCEPT_LANGUAGE=accept
    ).content.decode()
    notes_block = page.split('<div class="creator-notes">', 1)[1].split("</div>", 1)[0]
    assert notes_block == shown


# An embedded book's own settings


def book_card(host, **book_settings):
    book = {
        "name": "Harbour lore",
        **book_settings,
        "entries": [
            {
                "id": 1,
                "keys": ["lighthouse"],
                "secondary_keys": [],
                "comment": "The lighthouse",
                "content": "The lighthouse has been dark for a year.",
                "constant": False,
                "selective": False,
                "insertion_order": 100,
                "enabled": True,
                "position": "before_char",
                "extensions": {},
            }
        ],
    }
    return card(host, "Mira", character_book=book)


def test_an_embedded_books_scan_depth_and_recursion_are_its_own(host):
    mira = book_card(host, scan_depth=6, token_budget=300, recursive_scanning=False)
    book = mira.world_books.get()
    assert (book.scan_depth, book.token_budget, book.recursive) == (6, 300, False)
    exported = json.loads(library_services.character_export(character=mira, fmt="json"))["data"]
    assert {
        k: exported["character_book"][k] for k in ("scan_depth", "token_budget", "recursive_scanning")
    } == {
        "scan_depth": 6,
        "token_budget": 300,
        "recursive_scanning": False,
    }


def test_a_book_without_its_own_settings_takes_the_defaults_and_exports_none(host):
    mira = book_card(host)
    book = mira.world_books.get()
    assert (book.scan_depth, book.token_budget, book.recursive) == (2, 0, True)
    exported = json.loads(library_services.character_export(character=mira, fmt="json"))["data"]
    assert not {"scan_depth", "token_budget", "recursive_scanning"} & exported["character_book"].keys()


@pytest.mark.parametrize(("scan_depth", "found"), [(6, True), (2, False)])
def test_the_books_scan_depth_decides_how_far_back_a_chat_is_read(host, connected, scan_depth, found):
    mira = book_card(host, scan_depth=scan_depth)
    room = services.room_create_from_character(host=host, character=mira)
    services.message_create(room=room, author=host, text="Is the lighthouse still dark?")
    for i in range(3):
        services.message_create(room=room, author=host, text=f"Unrelated line {i}.")
    text = "\n".join(contents(plan(room, room.seats.get()).prompt))
    assert ("The lighthouse has been dark for a year." in text) is found


def test_a_books_own_budget_is_the_chats_world_info_budget(host, connected):
    long_entry = "word " * 400
    mira = book_card(host, token_budget=50)
    book = mira.world_books.get()
    book.entries.update(content=long_entry)
    room = services.room_create_from_character(host=host, character=mira)
    services.message_create(room=room, author=host, text="The lighthouse?")
    assert plan(room, room.seats.get()).world_info == []
    book.token_budget = 0
    book.save()
    assert plan(room, room.seats.get()).world_info != []
