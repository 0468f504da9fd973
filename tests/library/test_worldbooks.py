from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from orbchat.interop import worldbooks as wi_codec
from orbchat.library import services
from orbchat.library.models import WorldBook, WorldEntry

pytestmark = pytest.mark.django_db


def world_info(entries: dict) -> bytes:
    return json.dumps({"entries": entries}).encode()


def test_minimal_world_info_takes_sillytavern_defaults(owner, fixture_file):
    book = services.import_file(
        owner=owner, filename="eldoria.json", content=fixture_file("eldoria_minimal.json")
    ).obj
    entry = book.entries.order_by("uid").first()
    assert book.name == "eldoria"
    # No `useProbability` in the file: SillyTavern never rolls for such an entry.
    assert (entry.probability, entry.use_probability, entry.depth, entry.role) == (100, False, 4, 0)
    assert entry.match_whole_words is None and entry.sticky is None


def test_full_world_info_round_trips_every_field(owner, fixture_file):
    raw = fixture_file("eldoria_full.json")
    book = services.import_file(owner=owner, filename="eldoria_full.json", content=raw).obj
    exported = json.loads(services.worldbook_export(book=book))
    assert wi_codec.parse_world_info(exported) == wi_codec.parse_world_info(json.loads(raw))


def test_unknown_entry_fields_survive(owner):
    content = world_info({"7": {"uid": 7, "key": ["moon"], "content": "Pale.", "futureThing": {"a": 1}}})
    book = services.import_file(owner=owner, filename="moon.json", content=content).obj
    exported = json.loads(services.worldbook_export(book=book))
    assert exported["entries"]["7"]["futureThing"] == {"a": 1}


def test_a_ten_thousand_entry_book_imports_and_pages(signed_in, owner):
    entries = {str(i): {"uid": i, "key": [f"word{i}"], "content": f"Lore {i}."} for i in range(10_000)}
    response = signed_in.post(
        reverse("library:import"), {"files": [SimpleUploadedFile("big.json", world_info(entries))]}
    )
    assert "Imported a SillyTavern World Info book" in response.content.decode()
    book = WorldBook.objects.get(name="big")
    assert book.entries.count() == 10_000
    page = signed_in.get(reverse("library:worldbook", args=[book.pk]))
    assert len(page.context["page"].object_list) == 50
    assert "Page 1 of 200" in page.content.decode()


def test_an_entry_made_in_the_form_activates_in_the_try_panel(signed_in, owner):
    book = services.worldbook_create(owner=owner, name="Beasts")
    signed_in.post(
        reverse("library:entry_create", args=[book.pk]),
        {
            "comment": "Dragons",
            "keys": "dragon, wyrm",
            "secondary_keys": "",
            "selective_logic": 0,
            "content": "Dragons hoard memories, not gold.",
            "enabled": "on",
            "order": 100,
            "position": 0,
            "depth": 4,
            "probability": 100,
            "use_probability": "on",
            "group_weight": 100,
            "delay_until_recursion": 0,
            "case_sensitive": "unknown",
            "match_whole_words": "unknown",
        },
    )
    entry = WorldEntry.objects.get(book=book)
    assert entry.keys == ["dragon", "wyrm"] and entry.uid == 0
    result = signed_in.post(
        reverse("library:worldbook_try", args=[book.pk]), {"messages": "Hello\nA dragon lands."}
    )
    text = result.content.decode()
    assert "Activated (1)" in text and "Dragons" in text
    quiet = signed_in.post(reverse("library:worldbook_try", args=[book.pk]), {"messages": "Nothing here."})
    assert "Nothing activated." in quiet.content.decode()


def test_a_catastrophic_regex_key_does_not_hang_the_try_panel(signed_in, owner):
    book = services.worldbook_create(owner=owner, name="Regex")
    services.entry_save(book=book, data={"keys": ["/(a+)+$/"], "content": "boom", "comment": "Evil"})
    response = signed_in.post(reverse("library:worldbook_try", args=[book.pk]), {"messages": "a" * 40 + "!"})
    assert response.status_code == 200


def test_a_non_world_info_json_is_refused(owner):
    message = 'not a file OrbChat can import: a JSON object with the fields "hello"'
    with pytest.raises(services.ImportRefused, match=message):
        services.import_file(owner=owner, filename="x.json", content=b'{"hello": 1}')
