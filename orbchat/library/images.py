"""Avatar images: whatever comes in is stored as a PNG (a card's avatar must be one).

An image's size is checked against MAX_IMAGE_PIXELS before it is decoded: a small file can
describe a huge picture, and decoding one takes memory in proportion to its pixels.
"""

from __future__ import annotations

import io

from django.conf import settings

from orbchat.interop import png
from orbchat.interop.errors import InteropError

MAX_SIDE = 2048


class NotAnImage(ValueError):
    """The bytes are not an image this site will read; the message says why in plain words."""


def _megapixels(pixels: int) -> str:
    return f"{pixels / 1_000_000:g} megapixels"


def check_size(width: int, height: int) -> None:
    """Refuse a picture of more than MAX_IMAGE_PIXELS pixels."""
    limit = settings.MAX_IMAGE_PIXELS
    if width * height > limit:
        raise NotAnImage(f"This image is {width}×{height} pixels; the limit is {_megapixels(limit)}.")


def to_png(data: bytes) -> bytes:
    """Return the image as PNG bytes (unchanged when it already is one and not oversized)."""
    from PIL import Image, UnidentifiedImageError

    if png.is_png(data):
        try:
            check_size(*png.image_size(data))
        except InteropError as exc:
            raise NotAnImage(f"This PNG cannot be read: {exc}.") from exc
    try:
        image = Image.open(io.BytesIO(data))  # reads the header only
    except Image.DecompressionBombError as exc:
        raise NotAnImage(
            f"This image is too large; the limit is {_megapixels(settings.MAX_IMAGE_PIXELS)}."
        ) from exc
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise NotAnImage("This is not an image this site can read (PNG, JPEG or WebP).") from exc
    check_size(*image.size)
    try:
        image.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise NotAnImage("This image's data is damaged and cannot be read.") from exc
    if image.format == "PNG" and max(image.size) <= MAX_SIDE:
        return data
    image.thumbnail((MAX_SIDE, MAX_SIDE))
    if image.mode not in ("RGB", "RGBA"):
        image = image.convert("RGBA")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
