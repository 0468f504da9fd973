from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from orbchat.interop import cards as card_codec
from orbchat.library import services
from orbchat.library.models import Character, WorldBook
from tests.factories import make_user
from tests.library.cards import lorebook, png_card, portrait, raw_chunk_card, v2_card

pytestmark = pytest.mark.django_db


def upload(client, *files):
    uploads = [SimpleUploadedFile(name, content) for name, content in files]
    return client.post(reverse("library:import"), {"files": uploads})


def counts():
    return Character.objects.count(), WorldBook.objects.count()


def test_a_new_account_starts_with_the_starter_character_and_its_book(owner):
    character = owner.characters.get()
    assert character.first_mes and character.avatar
    assert character.world_books.get().entries.count() >= 5
    assert owner.personas.get().is_default
    assert owner.presets.count() == 1


def test_import_png_card_shows_its_greeting_and_lorebook(signed_in):
    card = v2_card(character_book=lorebook())
    response = upload(signed_in, ("mira.png", png_card(card)))
    assert "Imported a character card" in response.content.decode()
    mira = Character.objects.get(name="Mira")
    page = signed_in.get(reverse("library:character", args=[mira.pk])).content.decode()
    assert "Careful—the ink is still wet." in page
    assert "Drowned Atlas" in page
    assert mira.world_books.get().entries.count() == 2
    assert mira.talkativeness == pytest.approx(0.7)
    assert mira.alternate_greetings == ["Oh! A visitor.", "The tide is early tonight."]


def test_ccv3_wins_over_chara(owner):
    v3 = v2_card(name="Mira Three")
    v3.update(spec="chara_card_v3", spec_version="3.0")
    data = png_card(v2_card(name="Mira Two"))
    data = png_card(v3, keyword="ccv3", image=data)
    imported = services.import_file(owner=owner, filename="mira.png", content=data)
    assert imported.obj.name == "Mira Three"


def test_png_export_reimports_with_every_field(owner):
    original = services.import_file(
        owner=owner, filename="m.png", content=png_card(v2_card(character_book=lorebook()))
    )
    exported = services.character_export(character=original.obj, fmt="png")
    again = services.import_file(owner=owner, filename="again.png", content=exported).obj
    first = services.character_to_card(original.obj)
    second = services.character_to_card(again)
    # extra["spec"] records the source format: a V2 card comes back from our V3 export as V3.
    assert (first["extra"].pop("spec"), second["extra"].pop("spec")) == ("v2", "v3")
    assert first == second
    assert second["extra"]["data"]["some_future_field"] == {"nested": True}
    assert second["extensions"]["custom_tool"] == {"keep": [1, 2, 3]}


def test_json_export_keeps_unknown_fields_at_every_level(owner):
    character = services.import_file(
        owner=owner, filename="m.json", content=json.dumps(v2_card()).encode()
    ).obj
    exported = json.loads(services.character_export(character=character, fmt="json"))
    assert exported["data"]["some_future_field"] == {"nested": True}
    assert exported["top_level_unknown"] == "kept"
    assert exported["data"]["extensions"]["custom_tool"] == {"keep": [1, 2, 3]}


def test_real_sillytavern_cards_import(owner, fixture_file):
    seraphina = services.import_file(
        owner=owner, filename="s.png", content=fixture_file("seraphina_v2.png")
    ).obj
    assert seraphina.name == "Seraphina"
    assert seraphina.world_books.get().entries.count() == 4
    both = services.import_file(
        owner=owner, filename="s3.png", content=fixture_file("seraphina_v2_v3.png")
    ).obj
    card = services.character_to_card(both)
    again = card_codec.parse_card_png(services.character_export(character=both, fmt="png"))[0]
    assert again["extensions"] == card["extensions"]
    assert again["extra"]["data"] == card["extra"]["data"]


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("truncated.png", png_card()[:60], "truncated"),
        ("photo.png", b"GIF89a not a png at all", "not a PNG"),
        ("plain.png", portrait(), "no character card"),
        ("badb64.png", raw_chunk_card("%%%not base64%%%"), "base64"),
        ("broken.json", b'{"spec": "chara_card_v2", "data": {"name": "x",}', "JSON is invalid"),
        ("future.json", json.dumps({"spec": "chara_card_v9", "data": {"name": "x"}}).encode(), "spec"),
    ],
)
def test_bad_files_are_refused_by_name_and_nothing_is_saved(signed_in, name, content, problem):
    before = counts()
    response = upload(signed_in, (name, content))
    text = response.content.decode()
    assert f"Refused: {name}:" in text
    assert problem in text
    assert counts() == before


def test_an_oversize_file_is_refused(signed_in, settings):
    settings.MAX_UPLOAD_MB = 1
    before = counts()
    response = upload(signed_in, ("big.json", b" " * (1024 * 1024 + 10)))
    assert "larger than 1 MB" in response.content.decode()
    assert counts() == before


def test_a_bad_lorebook_refuses_the_whole_card(owner):
    card = v2_card(character_book={"entries": "not a list"})
    before = counts()
    with pytest.raises(services.ImportRefused):
        services.import_file(owner=owner, filename="m.json", content=json.dumps(card).encode())
    assert counts() == before


def test_markup_in_fields_is_rendered_inert(signed_in):
    upload(
        signed_in,
        (
            "x.json",
            json.dumps(
                v2_card(name="<script>alert(1)</script>", first_mes="<img src=x onerror=alert(1)>")
            ).encode(),
        ),
    )
    character = Character.objects.get(name__startswith="<script>")
    page = signed_in.get(reverse("library:character", args=[character.pk])).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page
    listing = signed_in.get(reverse("library:characters")).content.decode()
    assert "<script>alert(1)</script>" not in listing


def test_search_tags_and_favourites(signed_in, owner):
    services.import_file(owner=owner, filename="m.json", content=json.dumps(v2_card()).encode())
    other = services.import_file(
        owner=owner, filename="o.json", content=json.dumps(v2_card(name="Osric", tags=["horror"])).encode()
    ).obj
    names = lambda response: [c.name for c in response.context["characters"]]  # noqa: E731
    assert names(signed_in.get(reverse("library:characters"), {"q": "osric"})) == ["Osric"]
    assert "Mira" in names(signed_in.get(reverse("library:characters"), {"tag": "maps"}))
    signed_in.post(reverse("library:character_favourite", args=[other.pk]))
    assert names(signed_in.get(reverse("library:characters"), {"favourites": "1"})) == ["Osric"]


def test_create_edit_duplicate_delete(signed_in, owner):
    response = signed_in.post(
        reverse("library:character_create"),
        {
            "name": "Ada",
            "first_mes": "Hi.",
            "talkativeness": "0.4",
            "tags": "a, b",
            "alternate_greetings": "One\n---\nTwo",
        },
    )
    ada = Character.objects.get(name="Ada")
    assert response.status_code == 302
    assert ada.tags == ["a", "b"] and ada.alternate_greetings == ["One", "Two"]
    signed_in.post(
        reverse("library:character", args=[ada.pk]), {"name": "Ada Lovelace", "talkativeness": "0.5"}
    )
    ada.refresh_from_db()
    assert ada.name == "Ada Lovelace"
    signed_in.post(reverse("library:character_duplicate", args=[ada.pk]))
    assert Character.objects.filter(name="Ada Lovelace (copy)").exists()
    signed_in.post(reverse("library:character_delete", args=[ada.pk]))
    assert not Character.objects.filter(pk=ada.pk).exists()


def test_another_users_character_is_not_found(client, owner):
    stranger = make_user(actor=owner, username="stranger")
    mine = owner.characters.get()
    client.force_login(stranger)
    for name in ("library:character", "library:character_avatar", "library:character_delete"):
        assert client.get(reverse(name, args=[mine.pk])).status_code == 404
    assert client.get(reverse("library:character_export", args=[mine.pk, "json"])).status_code == 404


def test_the_greeting_preview_fills_macros_with_the_default_persona(signed_in, owner):
    character = services.import_file(
        owner=owner, filename="m.json", content=json.dumps(v2_card()).encode()
    ).obj
    page = signed_in.get(reverse("library:character", args=[character.pk])).content.decode()
    persona = owner.personas.get(is_default=True)
    assert f"You found my maps, {persona.name}." in page
