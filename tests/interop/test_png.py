from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from orbchat.interop import png
from orbchat.interop.errors import InteropError

FIXTURES = Path("/work/shared/fixtures/sillytavern")


def fixture(name: str) -> bytes:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"the SillyTavern fixture {name} is not available")
    return path.read_bytes()


def make_png(size: tuple[int, int] = (8, 12), **text: str) -> bytes:
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    for keyword, value in text.items():
        info.add_text(keyword, value)
    out = io.BytesIO()
    Image.new("RGB", size, (200, 40, 90)).save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def chunk_list(data: bytes) -> list[tuple[bytes, bytes, int]]:
    """Return (type, body, stored crc) for each chunk, parsed independently of the module."""
    pos, out = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        out.append((kind, body, crc))
        pos += 12 + length
    return out


def test_is_png():
    assert png.is_png(make_png())
    assert not png.is_png(b"\xff\xd8\xff\xe0 a JPEG")
    assert not png.is_png(b"")


def test_read_text_chunks_lower_cases_keywords_and_ignores_other_chunks():
    data = make_png(Chara="abc", Software="Pillow")
    assert png.read_text_chunks(data) == {"chara": "abc", "software": "Pillow"}


def test_read_text_chunks_keeps_the_first_of_repeated_keywords():
    data = png.write_text_chunks(make_png(), [("chara", "first"), ("CHARA", "second")], drop=set())
    assert png.read_text_chunks(data) == {"chara": "first"}


def test_write_inserts_in_order_before_iend_with_correct_crcs():
    data = make_png(Comment="keep me")
    written = png.write_text_chunks(data, [("chara", "v2"), ("ccv3", "v3")], drop={"chara", "ccv3"})
    chunks = chunk_list(written)
    assert [kind for kind, _, _ in chunks][-3:] == [b"tEXt", b"tEXt", b"IEND"]
    assert [body for _, body, _ in chunks[-3:-1]] == [b"chara\0v2", b"ccv3\0v3"]
    for kind, body, crc in chunks:
        assert zlib.crc32(kind + body) == crc
    assert png.read_text_chunks(written) == {"comment": "keep me", "chara": "v2", "ccv3": "v3"}
    with Image.open(io.BytesIO(written)) as image:
        image.load()
        assert image.size == (8, 12)


def test_write_drops_old_chunks_case_insensitively():
    data = make_png(CHARA="old", CcV3="old too", Title="stays")
    written = png.write_text_chunks(data, [("chara", "new")], drop={"chara", "ccv3"})
    assert png.read_text_chunks(written) == {"title": "stays", "chara": "new"}
    without_title = png.write_text_chunks(data, [], drop={"TITLE"})
    assert png.read_text_chunks(without_title) == {"chara": "old", "ccv3": "old too"}


def test_write_refuses_text_that_tEXt_cannot_hold():
    with pytest.raises(InteropError, match="cannot be stored in a PNG text chunk"):
        png.write_text_chunks(make_png(), [("chara", "snowman ☃")], drop=set())
    with pytest.raises(InteropError, match="not a valid PNG text keyword"):
        png.write_text_chunks(make_png(), [("", "x")], drop=set())


@pytest.mark.parametrize("cut", [5, 20, 40])
def test_a_truncated_png_is_refused(cut):
    data = make_png(chara="abc")
    with pytest.raises(InteropError, match="^the PNG is truncated$"):
        png.read_text_chunks(data[:-cut])
    with pytest.raises(InteropError, match="^the PNG is truncated$"):
        png.write_text_chunks(data[:-cut], [], drop=set())


def test_a_signature_alone_is_truncated():
    with pytest.raises(InteropError, match="truncated"):
        png.read_text_chunks(png.SIGNATURE)


def test_a_huge_length_field_is_truncated_not_a_crash():
    data = make_png()
    broken = data[:8] + b"\xff\xff\xff\xf0" + data[12:]
    with pytest.raises(InteropError, match="truncated"):
        png.read_text_chunks(broken)


def test_not_a_png_is_refused():
    with pytest.raises(InteropError, match="^not a PNG image$"):
        png.read_text_chunks(b"GIF89a and more")
    with pytest.raises(InteropError, match="^not a PNG image$"):
        png.write_text_chunks(b"", [], drop=set())


def test_a_crc_mismatch_is_ignored_when_reading():
    data = png.write_text_chunks(make_png(), [("chara", "abc")], drop=set())
    index = data.index(b"chara\0abc") + len(b"chara\0abc")
    broken = data[:index] + b"\0\0\0\0" + data[index + 4 :]
    assert png.read_text_chunks(broken)["chara"] == "abc"


def test_bytes_after_iend_are_not_read():
    data = make_png() + b"trailing garbage"
    assert png.read_text_chunks(data) == {}
    assert png.write_text_chunks(data, [], drop=set()) == make_png()


def test_sillytavern_pngs_hold_the_card_chunks():
    assert set(png.read_text_chunks(fixture("seraphina_v2.png"))) == {"chara"}
    assert set(png.read_text_chunks(fixture("seraphina_v2_v3.png"))) == {"chara", "ccv3"}
