"""Avatar images: whatever comes in is stored as a PNG (a card's avatar must be one)."""

from __future__ import annotations

import io

MAX_SIDE = 2048


class NotAnImage(ValueError):
    pass


def to_png(data: bytes) -> bytes:
    """Return the image as PNG bytes (unchanged when it already is one and not oversized)."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise NotAnImage(str(exc)) from exc
    if image.format == "PNG" and max(image.size) <= MAX_SIDE:
        return data
    image.thumbnail((MAX_SIDE, MAX_SIDE))
    if image.mode not in ("RGB", "RGBA"):
        image = image.convert("RGBA")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
