"""Read and write the tEXt chunks of a PNG file, where character cards live."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from orbchat.interop.errors import InteropError

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The PNG spec caps a chunk at 2**31 - 1 bytes; anything larger is a corrupt length field.
_MAX_CHUNK = 2**31 - 1


def is_png(data: bytes) -> bool:
    """Tell whether the bytes start with the PNG signature."""
    return bytes(data[:8]) == SIGNATURE


def _chunks(data: bytes) -> Iterator[tuple[bytes, int, int]]:
    """Yield (type, start, end) for every chunk up to and including IEND; `data[start:end]` is the chunk."""
    if not is_png(data):
        raise InteropError("not a PNG image")
    pos = len(SIGNATURE)
    while True:
        if pos + 8 > len(data):
            raise InteropError("the PNG is truncated")
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = bytes(data[pos + 4 : pos + 8])
        end = pos + 12 + length
        if length > _MAX_CHUNK or end > len(data):
            raise InteropError("the PNG is truncated")
        yield kind, pos, end
        if kind == b"IEND":
            return
        pos = end


def image_size(data: bytes) -> tuple[int, int]:
    """Return (width, height) from the PNG's IHDR chunk, without decoding any pixels."""
    kind, start, end = next(_chunks(data))
    if kind != b"IHDR" or end - start != 25:
        raise InteropError("the PNG does not start with an image header")
    return struct.unpack(">II", data[start + 8 : start + 16])


def _decode_text(body: bytes) -> tuple[str, str] | None:
    keyword, sep, text = body.partition(b"\0")
    if not sep or not keyword:
        return None
    return keyword.decode("latin-1"), text.decode("latin-1")


def read_text_chunks(data: bytes) -> dict[str, str]:
    """Return the tEXt chunks as {lower-cased keyword: text}; the first of duplicate keywords wins."""
    found: dict[str, str] = {}
    for kind, start, end in _chunks(data):
        if kind != b"tEXt":
            continue
        decoded = _decode_text(bytes(data[start + 8 : end - 4]))
        if decoded is not None:
            found.setdefault(decoded[0].lower(), decoded[1])
    return found


def _text_chunk(keyword: str, text: str) -> bytes:
    try:
        key = keyword.encode("latin-1")
        value = text.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise InteropError(f"the text for '{keyword}' cannot be stored in a PNG text chunk") from exc
    if not 1 <= len(key) <= 79 or b"\0" in key:
        raise InteropError(f"'{keyword}' is not a valid PNG text keyword")
    body = b"tEXt" + key + b"\0" + value
    return struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))


def write_text_chunks(data: bytes, chunks: list[tuple[str, str]], drop: set[str]) -> bytes:
    """Return the PNG without the tEXt chunks named in `drop` and with `chunks` added before IEND."""
    dropped = {name.lower() for name in drop}
    new = b"".join(_text_chunk(keyword, text) for keyword, text in chunks)
    out = [SIGNATURE]
    for kind, start, end in _chunks(data):
        if kind == b"tEXt":
            decoded = _decode_text(bytes(data[start + 8 : end - 4]))
            if decoded is not None and decoded[0].lower() in dropped:
                continue
        if kind == b"IEND":
            out.append(new)
        out.append(bytes(data[start:end]))
    return b"".join(out)
