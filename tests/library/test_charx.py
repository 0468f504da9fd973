"""CHARX cards (a zip with card.json and assets), built here as the CCv3 spec describes them."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from orbchat.library import services
from orbchat.library.models import Character, CharacterAsset
from tests.library.cards import portrait

pytestmark = pytest.mark.django_db


def webp(colour: str = "#aa3300") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (24, 32), colour).save(out, format="WEBP")
    return out.getvalue()


def v3_card(**data) -> dict:
    fields = {
        "name": "Mira",
        "description": "A cartographer of drowned cities.",
        "personality": "",
        "scenario": "",
        "first_mes": "You found my maps.",
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "group_only_greetings": ["Hello, all of you."],
        "tags": ["maps"],
        "creator": "tests",
        "character_version": "1",
        "extensions": {"talkativeness": "0.5"},
        "nickname": "Mi",
        "assets": [
            {"type": "icon", "uri": "embeded://assets/icon/images/main.webp", "name": "main", "ext": "webp"},
            {
                "type": "emotion",
                "uri": "embeded://assets/emotion/images/happy.png",
                "name": "happy",
                "ext": "png",
            },
            {"type": "background", "uri": "https://example.invalid/bg.png", "name": "bg", "ext": "png"},
        ],
        **data,
    }
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": fields}


def charx(card: dict | bytes | None, files: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        if card is not None:
            archive.writestr("card.json", card if isinstance(card, bytes) else json.dumps(card))
        for path, content in (files or {}).items():
            archive.writestr(path, content)
    return out.getvalue()


ICON = webp()
HAPPY = portrait("#00ff00")
FILES = {
    "assets/icon/images/main.webp": ICON,
    "assets/emotion/images/happy.png": HAPPY,
    "module.risum": b"\x00risu module bytes",
}


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def imported(owner, card=None, files=None) -> Character:
    content = charx(card or v3_card(), FILES if files is None else files)
    return services.import_file(owner=owner, filename="mira.charx", content=content).obj


def test_a_charx_card_imports_with_its_icon_as_the_avatar(signed_in, owner):
    response = signed_in.post(
        reverse("library:import"), {"files": [SimpleUploadedFile("mira.charx", charx(v3_card(), FILES))]}
    )
    assert "Refused" not in response.content.decode()
    character = Character.objects.get(owner=owner, name="Mira")
    assert character.name == "Mira"
    with character.avatar.open("rb") as handle:
        avatar = Image.open(io.BytesIO(handle.read()))
        assert avatar.size == (24, 32)
        assert avatar.getpixel((3, 3))[:3] == Image.open(io.BytesIO(ICON)).convert("RGB").getpixel((3, 3))
    assert sorted(CharacterAsset.objects.values_list("path", flat=True)) == sorted(FILES)


def test_a_charx_exports_back_with_the_same_card_and_every_asset(owner):
    card = v3_card()
    character = imported(owner, card)
    exported = members(services.character_export(character=character, fmt="charx"))
    assert set(exported) == {"card.json", *FILES}
    for path, content in FILES.items():
        assert exported[path] == content, path
    assert json.loads(exported["card.json"])["data"]["assets"] == card["data"]["assets"]
    assert json.loads(exported["card.json"])["data"]["nickname"] == "Mi"


def test_a_charx_download_from_the_character_page(signed_in, owner):
    character = imported(owner)
    response = signed_in.get(reverse("library:character_export", args=[character.pk, "charx"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].endswith('.charx"')
    assert "card.json" in members(response.content)


def test_a_replaced_avatar_becomes_the_exported_icon(owner):
    character = imported(owner)
    card = services.character_to_card(character)
    services.character_update(character=character, card=card, avatar=portrait("#0000ff"))
    exported = members(services.character_export(character=character, fmt="charx"))
    assert "assets/icon/images/main.webp" not in exported
    icon = Image.open(io.BytesIO(exported["assets/icon/images/main.png"]))
    assert icon.convert("RGB").getpixel((1, 1)) == (0, 0, 255)
    assets = json.loads(exported["card.json"])["data"]["assets"]
    assert [a for a in assets if a["type"] == "icon"] == [
        {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"}
    ]
    assert exported["assets/emotion/images/happy.png"] == HAPPY


def test_a_png_card_exports_as_charx_with_its_avatar_as_the_icon(owner):
    card = v3_card(assets=[])
    content = json.dumps(card).encode()
    character = services.import_file(owner=owner, filename="mira.json", content=content).obj
    services.character_update(
        character=character, card=services.character_to_card(character), avatar=portrait("#123456")
    )
    exported = members(services.character_export(character=character, fmt="charx"))
    assert set(exported) == {"card.json", "assets/icon/images/main.png"}
    assert json.loads(exported["card.json"])["data"]["assets"][0]["type"] == "icon"


def test_duplicating_a_charx_character_copies_its_assets(owner):
    character = imported(owner)
    copy_ = services.character_duplicate(character=character)
    assert sorted(copy_.assets.values_list("path", flat=True)) == sorted(FILES)
    exported = members(services.character_export(character=copy_, fmt="charx"))
    assert exported["assets/icon/images/main.webp"] == ICON


def test_deleting_a_character_deletes_its_asset_files(owner):
    character = imported(owner)
    storage_names = [asset.file.name for asset in character.assets.all()]
    storage = character.assets.first().file.storage
    services.character_delete(character=character)
    assert CharacterAsset.objects.count() == 0
    assert not any(storage.exists(name) for name in storage_names)


def test_a_charx_without_an_embedded_icon_imports_without_an_avatar(owner):
    card = v3_card(assets=[{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}])
    character = imported(owner, card, files={})
    assert not character.avatar
    exported = members(services.character_export(character=character, fmt="charx"))
    assert json.loads(exported["card.json"])["data"]["assets"] == card["data"]["assets"]


def bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", json.dumps(v3_card()))
        archive.writestr("assets/other/big.bin", b"\0" * (3 * 1024 * 1024))
    return out.getvalue()


def encrypted() -> bytes:
    data = bytearray(charx(v3_card(), {}))
    data[6] |= 0x1  # the local header's "encrypted" flag
    central = data.rfind(b"PK\x01\x02")
    data[central + 8] |= 0x1
    return bytes(data)


def crc_damaged() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("card.json", json.dumps(v3_card()))
        archive.writestr("assets/x.bin", b"A" * 64)
    data = bytearray(out.getvalue())
    at = data.find(b"A" * 64)
    data[at] = ord("B")
    return bytes(data)


def traversal() -> bytes:
    return charx(v3_card(), {"../../etc/evil": b"x"})


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"PK\x03\x04 this is not really a zip", "not a readable zip archive"),
        (b"just text", "not a zip archive"),
        (charx(None, {"assets/icon/images/main.png": b"x"}), "has no card.json at its top level"),
        (charx(None, {"mira/card.json": b"{}"}), "(it holds mira/card.json)"),
        (charx(b'{"spec": "chara_card_v3", "data": {"name": "x",}'), "card.json is invalid JSON"),
        (charx(b"\xff\xfe not utf-8"), "card.json is not UTF-8 text"),
        (charx(json.dumps({"name": "Mira"}).encode()), "no spec field"),
        (charx(json.dumps({"spec": "chara_card_v3", "data": {"name": ""}}).encode()), "no name"),
        (bomb(), "unpacks to"),
        (encrypted(), "is encrypted"),
        (crc_damaged(), "'assets/x.bin' is damaged"),
        (traversal(), "unsafe path"),
        (
            charx(v3_card(), {"assets/icon/images/main.webp": b"not an image"}),
            "not an image",
        ),
    ],
)
def test_bad_charx_files_are_refused_naming_the_problem(owner, settings, content, problem):
    settings.MAX_UPLOAD_MB = 2
    before = Character.objects.count()
    with pytest.raises(services.ImportRefused) as refused:
        services.import_file(owner=owner, filename="bad.charx", content=content)
    assert str(refused.value).startswith("bad.charx: ")
    assert problem in str(refused.value)
    assert Character.objects.count() == before and CharacterAsset.objects.count() == 0


def test_a_zip_is_read_as_charx_whatever_its_name(owner):
    character = services.import_file(
        owner=owner, filename="download.zip", content=charx(v3_card(), FILES)
    ).obj
    assert character.name == "Mira" and character.assets.count() == len(FILES)
