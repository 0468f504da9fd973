"""Every bad upload gets a clear message naming the problem: never a server error, nothing half-saved."""

from __future__ import annotations

import base64
import html
import json
import struct
import zlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from orbchat.interop import cards as card_codec
from orbchat.interop import png
from orbchat.interop.errors import InteropError
from orbchat.library.models import Character, Persona, Preset, WorldBook
from tests.library.cards import lorebook, png_card, portrait, v2_card

pytestmark = pytest.mark.django_db


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def huge_png(width: int = 13000, height: int = 13000) -> bytes:
    """A real 1-bit PNG of width×height pixels: a few tens of KB on disk, ~170 MB decoded."""
    row = b"\0" * (1 + (width + 7) // 8)  # filter byte + packed pixels
    pixels = zlib.compress(row * height, 9)
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return png.SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def damaged_png() -> bytes:
    """A PNG whose chunks are well formed but whose pixel data is garbage."""
    header = struct.pack(">IIBBBBB", 40, 60, 8, 2, 0, 0, 0)
    return png.SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", b"not zlib at all") + chunk(b"IEND", b"")


def huge_bmp(width: int = 13000, height: int = 13000) -> bytes:
    """The header of a 1-bit BMP of width×height pixels (no pixel data: it is never decoded)."""
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 1, 0, 0, 2835, 2835, 2, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(info) + 8, 0, 0, 14 + len(info) + 8) + info + b"\0" * 8


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def upload(client, *files):
    uploads = [SimpleUploadedFile(name, content) for name, content in files]
    return client.post(reverse("library:import"), {"files": uploads})


def counts() -> tuple[int, int, int]:
    return Character.objects.count(), WorldBook.objects.count(), Preset.objects.count()


BAD_FILES = [
    ("deep.json", nested(100_000).encode(), "the file's JSON is nested too deeply"),
    (
        "deep-card.json",
        json.dumps(v2_card(extensions={"x": json.loads(nested(600))})).encode(),
        "nested too deeply (more than 100 levels)",
    ),
    ("list.json", b"[1, 2, 3]", "not an object"),
    ("number.json", b"42", "not an object"),
    ("huge.png", png_card(image=huge_png()), "This image is 13000×13000 pixels; the limit is 16 megapixels."),
    ("damaged.png", png_card(image=damaged_png()), "damaged"),
    ("garbage.png", png.SIGNATURE + b"\x00\x00\x00\x0dIHDR" + b"\xff" * 40, "truncated"),
    ("no-header.png", png.SIGNATURE + chunk(b"IEND", b""), "no character card"),
    ("wrong-shape-card.json", json.dumps({"spec": "chara_card_v2", "data": "Mira"}).encode(), "no name"),
    ("book-entries.json", json.dumps({"entries": ["one", "two"]}).encode(), "not an object"),
    (
        "big-order.json",
        json.dumps({"entries": {"1": {"key": ["a"], "content": "x", "order": 10**30}}}).encode(),
        "a value in the file is out of the range that can be stored",
    ),
    (
        "big-preset.json",
        json.dumps(
            {"temperature": 1, "prompts": [], "prompt_order": [], "openai_max_tokens": 10**30}
        ).encode(),
        "out of the range",
    ),
]


@pytest.mark.parametrize(("name", "content", "problem"), BAD_FILES, ids=[f[0] for f in BAD_FILES])
def test_a_bad_file_is_refused_with_its_reason_and_nothing_is_saved(signed_in, name, content, problem):
    before = counts()
    response = upload(signed_in, (name, content))
    assert response.status_code == 200
    text = html.unescape(response.content.decode())
    assert f"Refused: {name}:" in text and problem in text
    assert counts() == before


def test_a_multi_file_import_reports_every_file_and_keeps_the_good_ones(signed_in, owner):
    before = counts()
    files = [
        ("mira.json", json.dumps(v2_card()).encode()),
        ("deep.json", nested(50_000).encode()),
        ("atlas.json", json.dumps(lorebook()).encode()),
        ("huge.png", png_card(v2_card(name="Bomb"), image=huge_png())),
        ("damaged.png", png_card(v2_card(name="Broken"), image=damaged_png())),
        ("wren.png", png_card(v2_card(name="Wren"))),
    ]
    text = upload(signed_in, *files).content.decode()
    results = text[text.index("Results") :]
    positions = [
        results.index(f"({name})" if ok else f"Refused: {name}:")
        for name, ok in zip([f[0] for f in files], [True, False, True, False, False, True], strict=True)
    ]
    assert positions == sorted(positions)  # every file, in the order given
    assert "Imported a character card" in results and "Imported a SillyTavern World Info book" in results
    assert counts() == (before[0] + 2, before[1] + 1, before[2])
    assert set(owner.characters.values_list("name", flat=True)) >= {"Mira", "Wren"}
    assert not owner.characters.filter(name__in=["Bomb", "Broken"]).exists()


def test_an_avatar_over_the_pixel_limit_is_refused_on_the_character_form(signed_in, owner):
    response = signed_in.post(
        reverse("library:character_create"),
        {"name": "Tall", "talkativeness": "0.5", "avatar": SimpleUploadedFile("tall.png", huge_png())},
    )
    assert response.status_code == 200
    assert (
        "tall.png: This image is 13000×13000 pixels; the limit is 16 megapixels." in response.content.decode()
    )
    assert not owner.characters.filter(name="Tall").exists()


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        (huge_png(), "This image is 13000×13000 pixels; the limit is 16 megapixels."),
        (huge_bmp(5000, 5000), "This image is 5000×5000 pixels; the limit is 16 megapixels."),
        (huge_bmp(), "This image is too large; the limit is 16 megapixels."),
        (damaged_png(), "damaged"),
        (b"GIF89a" + b"\0" * 20, "not an image this site can read"),
    ],
    ids=["huge-png", "big-bmp", "huge-bmp", "damaged-png", "not-an-image"],
)
def test_a_persona_avatar_that_cannot_be_read_is_refused(signed_in, owner, image, problem):
    response = signed_in.post(
        reverse("library:personas"),
        {"name": "Ash", "description": "", "avatar": SimpleUploadedFile("ash.png", image)},
    )
    assert response.status_code == 200 and problem in response.content.decode()
    assert not Persona.objects.filter(owner=owner, name="Ash").exists()


def test_the_pixel_limit_comes_from_the_setting(signed_in, owner, settings):
    settings.MAX_IMAGE_PIXELS = 1000
    response = upload(signed_in, ("small.png", png_card(v2_card(name="Small"))))
    assert "This image is 40×60 pixels; the limit is 0.001 megapixels." in response.content.decode()


def test_an_image_under_the_limit_is_accepted(signed_in, owner):
    response = upload(signed_in, ("mira.png", png_card(image=portrait())))
    assert "Imported a character card" in response.content.decode()
    assert owner.characters.get(name="Mira").avatar


def test_an_unknown_export_format_is_not_found(signed_in, owner):
    character = owner.characters.first()
    response = signed_in.get(f"/characters/{character.pk}/export.xyz")
    assert response.status_code == 404
    for fmt, kind in (("png", "image/png"), ("json", "application/json")):
        response = signed_in.get(reverse("library:character_export", args=[character.pk, fmt]))
        assert response.status_code == 200 and response["Content-Type"] == kind


def test_a_base64_card_chunk_with_deep_json_is_refused(signed_in):
    encoded = base64.b64encode(nested(5000).encode()).decode()
    content = png.write_text_chunks(portrait(), [("chara", encoded)], drop=set())
    text = upload(signed_in, ("deep.png", content)).content.decode()
    assert "Refused: deep.png:" in text and "nested too deeply" in text


def test_a_card_exported_with_an_avatar_over_the_pixel_limit_is_refused():
    card = card_codec.parse_card_json(v2_card())
    with pytest.raises(InteropError, match="the avatar is 5000×5000 pixels; the limit is 16 megapixels"):
        card_codec.export_card_png(card, huge_bmp(5000, 5000))
