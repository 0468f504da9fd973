"""Importing what the library holds already: the web import asks, the command skips or copies."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from orbchat.library import pending, services
from orbchat.library.models import Character, Preset, WorldBook
from tests.factories import make_user
from tests.library.cards import png_card, portrait, v2_card

pytestmark = pytest.mark.django_db

BOOK = json.dumps({"entries": {"0": {"uid": 0, "key": ["tide"], "content": "The tide is early."}}}).encode()
PRESET = json.dumps(
    {
        "temperature": 0.7,
        "prompts": [
            {"identifier": "main", "name": "Main Prompt", "content": "Be vivid.", "system_prompt": True}
        ],
        "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True}]}],
    }
).encode()


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path


def upload(client, name: str, content: bytes):
    return client.post(reverse("library:import"), {"files": [SimpleUploadedFile(name, content)]})


def token_of(response) -> str:
    return re.search(r'name="token" value="([^"]+)"', response.content.decode()).group(1)


def run(*args) -> str:
    out = StringIO()
    try:
        call_command(*args, stdout=out)
    except SystemExit:
        pass
    return out.getvalue()


# The rule ---------------------------------------------------------------------------------------


def test_the_same_card_is_a_duplicate_whatever_its_picture(owner):
    first = services.import_file(owner=owner, filename="mira.png", content=png_card(v2_card()))
    with pytest.raises(services.ImportDuplicate) as caught:
        services.import_file(
            owner=owner,
            filename="mira.png",
            content=png_card(v2_card(), image=portrait("#aa2211")),
            allow_duplicate=False,
        )
    assert caught.value.existing == first.obj
    assert Character.objects.filter(owner=owner, name="Mira").count() == 1


def test_a_card_with_other_text_is_not_a_duplicate(owner):
    services.import_file(owner=owner, filename="mira.png", content=png_card(v2_card()))
    services.import_file(
        owner=owner,
        filename="mira.png",
        content=png_card(v2_card(description="A cartographer, retired.")),
        allow_duplicate=False,
    )
    assert Character.objects.filter(owner=owner, name="Mira").count() == 2


def test_another_users_card_is_not_a_duplicate(owner):
    other = make_user(actor=owner, username="other")
    services.import_file(owner=other, filename="mira.png", content=png_card(v2_card()))
    services.import_file(owner=owner, filename="mira.png", content=png_card(v2_card()), allow_duplicate=False)
    assert Character.objects.filter(owner=owner, name="Mira").count() == 1


def test_the_same_world_book_and_preset_are_duplicates(owner):
    services.import_file(owner=owner, filename="lore.json", content=BOOK)
    services.import_file(owner=owner, filename="vivid.json", content=PRESET)
    for name, content in (("lore.json", BOOK), ("vivid.json", PRESET)):
        with pytest.raises(services.ImportDuplicate):
            services.import_file(owner=owner, filename=name, content=content, allow_duplicate=False)
    assert WorldBook.objects.filter(owner=owner, name="lore").count() == 1
    assert Preset.objects.filter(owner=owner, name="vivid").count() == 1


def test_a_world_book_with_an_edited_entry_is_not_a_duplicate(owner):
    book = services.import_file(owner=owner, filename="lore.json", content=BOOK).obj
    book.entries.update(content="The tide is late.")
    services.import_file(owner=owner, filename="lore.json", content=BOOK, allow_duplicate=False)
    assert WorldBook.objects.filter(owner=owner, name="lore").count() == 2


# The web import ---------------------------------------------------------------------------------


def test_a_second_upload_asks_and_imports_nothing_yet(signed_in, owner):
    upload(signed_in, "mira.png", png_card(v2_card()))
    response = upload(signed_in, "mira.png", png_card(v2_card()))
    page = response.content.decode()
    assert "“<a" in page and "is already in your library — import as a copy, or skip?" in page
    assert "Import as a copy" in page and "Skip" in page
    assert Character.objects.filter(owner=owner, name="Mira").count() == 1


def test_skip_imports_nothing_and_forgets_the_upload(signed_in, owner):
    upload(signed_in, "mira.png", png_card(v2_card()))
    token = token_of(upload(signed_in, "mira.png", png_card(v2_card())))
    page = signed_in.post(
        reverse("library:import_resolve"), {"token": token, "action": "skip"}
    ).content.decode()
    assert "Skipped mira.png" in page
    assert Character.objects.filter(owner=owner, name="Mira").count() == 1
    assert pending.get(user=owner, token=token) is None


def test_copy_imports_a_second_one(signed_in, owner):
    upload(signed_in, "mira.png", png_card(v2_card()))
    token = token_of(upload(signed_in, "mira.png", png_card(v2_card())))
    page = signed_in.post(
        reverse("library:import_resolve"), {"token": token, "action": "copy"}
    ).content.decode()
    assert "Imported" in page
    assert Character.objects.filter(owner=owner, name="Mira").count() == 2
    assert pending.get(user=owner, token=token) is None


def test_answering_copy_twice_imports_one_copy(signed_in, owner):
    upload(signed_in, "mira.png", png_card(v2_card()))
    token = token_of(upload(signed_in, "mira.png", png_card(v2_card())))
    signed_in.post(reverse("library:import_resolve"), {"token": token, "action": "copy"})
    again = signed_in.post(reverse("library:import_resolve"), {"token": token, "action": "copy"}, follow=True)
    assert "That upload is no longer waiting" in again.content.decode()
    assert Character.objects.filter(owner=owner, name="Mira").count() == 2


def test_another_user_cannot_answer_for_a_held_upload(signed_in, owner, client):
    upload(signed_in, "mira.png", png_card(v2_card()))
    token = token_of(upload(signed_in, "mira.png", png_card(v2_card())))
    other = make_user(actor=owner, username="other")
    client.force_login(other)
    response = client.post(reverse("library:import_resolve"), {"token": token, "action": "copy"})
    assert response.status_code == 302
    assert not Character.objects.filter(owner=other, name="Mira").exists()
    assert pending.get(user=owner, token=token) is not None


def test_an_unknown_token_says_so(signed_in):
    response = signed_in.post(
        reverse("library:import_resolve"), {"token": "../../etc", "action": "copy"}, follow=True
    )
    assert "no longer waiting" in response.content.decode()


# The command -----------------------------------------------------------------------------------


def test_the_command_skips_a_duplicate_by_default_and_says_so(owner, tmp_path):
    card = tmp_path / "mira.png"
    card.write_bytes(png_card(v2_card()))
    run("import_sillytavern", str(card), "--user", owner.username)
    output = run("import_sillytavern", str(card), "--user", owner.username)
    mira = Character.objects.get(owner=owner, name="Mira")
    assert output.strip() == f"skipped {card}: “Mira” is already in your library (card {mira.pk})"


def test_the_command_copies_a_duplicate_when_told(owner, tmp_path):
    card = tmp_path / "mira.png"
    card.write_bytes(png_card(v2_card()))
    run("import_sillytavern", str(card), "--user", owner.username)
    output = run("import_sillytavern", str(card), "--user", owner.username, "--on-duplicate", "copy")
    assert output.startswith("imported card ")
    assert Character.objects.filter(owner=owner, name="Mira").count() == 2
