"""Draw the starter character's avatar: the Stillwater Light on a misty night.

Run `python -m orbchat.library.starter.make_avatar` (or this file directly) to rewrite
avatar.png beside it. The drawing is seeded, so the same Pillow gives the same picture.
"""

from __future__ import annotations

import random
from pathlib import Path

from PIL import Image, ImageChops, ImageDraw, ImageFilter

WIDTH, HEIGHT = 400, 600
SCALE = 2  # drawn at twice the size and scaled down, for smooth edges without antialiasing support
SEED = 1729
HORIZON = 418
LANTERN = (142, 168)  # centre of the lantern room, in final-image pixels
OUTPUT = Path(__file__).resolve().parent / "avatar.png"

Color = tuple[int, int, int]


def s(value: float) -> int:
    """Scale a final-image coordinate to the drawing canvas."""
    return round(value * SCALE)


def points(*coords: tuple[float, float]) -> list[tuple[int, int]]:
    return [(s(x), s(y)) for x, y in coords]


def vertical_gradient(size: tuple[int, int], stops: list[tuple[float, Color]]) -> Image.Image:
    """Return an RGB image whose rows blend through the (position 0..1, colour) stops."""
    width, height = size
    column = Image.new("RGB", (1, height))
    for y in range(height):
        t = y / max(1, height - 1)
        for (t0, c0), (t1, c1) in zip(stops, stops[1:], strict=False):
            if t0 <= t <= t1:
                k = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
                column.putpixel((0, y), tuple(round(a + (b - a) * k) for a, b in zip(c0, c1, strict=True)))
                break
    return column.resize((width, height))


def layer() -> tuple[Image.Image, ImageDraw.ImageDraw]:
    image = Image.new("RGBA", (s(WIDTH), s(HEIGHT)), (0, 0, 0, 0))
    return image, ImageDraw.Draw(image)


def blurred(image: Image.Image, radius: float) -> Image.Image:
    return image.filter(ImageFilter.GaussianBlur(s(radius)))


def draw_sky(canvas: Image.Image, rng: random.Random) -> None:
    sky = vertical_gradient(
        (s(WIDTH), s(HORIZON)),
        [(0.0, (7, 10, 32)), (0.45, (20, 30, 68)), (0.8, (46, 62, 104)), (1.0, (86, 98, 130))],
    )
    canvas.paste(sky, (0, 0))

    stars, draw = layer()
    for _ in range(170):
        x, y = rng.uniform(0, WIDTH), rng.uniform(0, HORIZON - 90)
        brightness = rng.randint(120, 255)
        # Fewer and dimmer stars towards the hazy horizon.
        fade = max(0.15, 1 - y / (HORIZON - 60))
        alpha = round(brightness * fade)
        radius = rng.choice((0.5, 0.6, 0.8, 0.8, 1.1, 1.4))
        draw.ellipse(
            (s(x - radius), s(y - radius), s(x + radius), s(y + radius)), fill=(255, 250, 230, alpha)
        )
        if radius >= 1.4:
            for dx, dy in ((4, 0), (0, 4)):
                draw.line(
                    (s(x - dx), s(y - dy), s(x + dx), s(y + dy)), fill=(255, 250, 230, alpha // 3), width=1
                )
    canvas.alpha_composite(blurred(stars, 0.6))
    canvas.alpha_composite(stars)


def draw_moon(canvas: Image.Image) -> None:
    cx, cy, r = 318, 92, 24
    glow, draw = layer()
    draw.ellipse((s(cx - 70), s(cy - 70), s(cx + 70), s(cy + 70)), fill=(200, 210, 255, 40))
    canvas.alpha_composite(blurred(glow, 28))

    disc = Image.new("L", canvas.size, 0)
    ImageDraw.Draw(disc).ellipse((s(cx - r), s(cy - r), s(cx + r), s(cy + r)), fill=255)
    bite = Image.new("L", canvas.size, 0)
    ImageDraw.Draw(bite).ellipse((s(cx - r + 11), s(cy - r - 6), s(cx + r + 11), s(cy + r - 6)), fill=255)
    crescent = ImageChops.subtract(disc, bite)
    moon = Image.new("RGBA", canvas.size, (246, 240, 214, 255))
    moon.putalpha(crescent)
    canvas.alpha_composite(moon)


def draw_far_shore(canvas: Image.Image) -> None:
    shore, draw = layer()
    draw.polygon(
        points(
            (170, HORIZON + 2),
            (205, HORIZON - 9),
            (240, HORIZON - 14),
            (268, HORIZON - 8),
            (300, HORIZON - 16),
            (340, HORIZON - 11),
            (400, HORIZON - 6),
            (400, HORIZON + 2),
        ),
        fill=(40, 50, 84, 255),
    )
    canvas.alpha_composite(shore)


def draw_sea(canvas: Image.Image, rng: random.Random) -> None:
    sea = vertical_gradient(
        (s(WIDTH), s(HEIGHT - HORIZON)),
        [(0.0, (52, 66, 102)), (0.25, (24, 36, 70)), (1.0, (7, 12, 30))],
    )
    canvas.paste(sea, (0, s(HORIZON)))

    ripples, draw = layer()
    for _ in range(260):
        y = rng.uniform(HORIZON + 3, HEIGHT)
        depth = (y - HORIZON) / (HEIGHT - HORIZON)
        x = rng.uniform(-20, WIDTH)
        length = rng.uniform(6, 22) * (0.6 + depth * 1.6)
        alpha = rng.randint(25, 60)
        draw.line((s(x), s(y), s(x + length), s(y)), fill=(150, 170, 210, alpha), width=s(0.6 + depth))

    # The moon's and the lamp's broken reflections, brightest near their source.
    for source_x, colour, spread, count in (
        (312, (240, 236, 206), 12, 150),
        (LANTERN[0], (255, 214, 130), 10, 70),
    ):
        for _ in range(count):
            y = rng.uniform(HORIZON + 3, HEIGHT - 20)
            depth = (y - HORIZON) / (HEIGHT - HORIZON)
            x = source_x + rng.gauss(0, spread * (0.6 + depth * 2.2))
            length = rng.uniform(4, 14) * (0.7 + depth)
            alpha = round(rng.randint(60, 140) * (1 - depth * 0.7))
            draw.line(
                (s(x - length / 2), s(y), s(x + length / 2), s(y)),
                fill=(*colour, alpha),
                width=s(0.8 + depth),
            )
    canvas.alpha_composite(blurred(ripples, 0.4))


def draw_beam(canvas: Image.Image) -> None:
    lx, ly = LANTERN
    beam, draw = layer()
    draw.polygon(
        points((lx, ly - 4), (WIDTH + 40, ly - 70), (WIDTH + 40, ly + 34), (lx, ly + 4)),
        fill=(255, 206, 110, 95),
    )
    draw.polygon(points((lx, ly - 3), (-60, ly - 42), (-60, ly + 10), (lx, ly + 3)), fill=(255, 206, 110, 34))
    canvas.alpha_composite(blurred(beam, 7))

    core, draw = layer()
    draw.polygon(
        points((lx, ly - 2), (WIDTH + 40, ly - 40), (WIDTH + 40, ly + 6), (lx, ly + 2)),
        fill=(255, 232, 170, 60),
    )
    canvas.alpha_composite(blurred(core, 4))

    halo, draw = layer()
    for radius, alpha in ((60, 35), (34, 70), (18, 120)):
        draw.ellipse(
            (s(lx - radius), s(ly - radius), s(lx + radius), s(ly + radius)), fill=(255, 214, 130, alpha)
        )
    canvas.alpha_composite(blurred(halo, 12))


def draw_mist(
    canvas: Image.Image, rng: random.Random, band: tuple[float, float], count: int, alpha: int
) -> None:
    mist, draw = layer()
    top, bottom = band
    for _ in range(count):
        cx = rng.uniform(-60, WIDTH + 60)
        cy = rng.uniform(top, bottom)
        rx, ry = rng.uniform(50, 130), rng.uniform(6, 16)
        draw.ellipse(
            (s(cx - rx), s(cy - ry), s(cx + rx), s(cy + ry)),
            fill=(170, 184, 214, rng.randint(alpha // 2, alpha)),
        )
    canvas.alpha_composite(blurred(mist, 10))


def draw_headland(canvas: Image.Image, rng: random.Random) -> None:
    land, draw = layer()
    cliff = (
        (0, 372),
        (40, 366),
        (82, 372),
        (110, 388),
        (182, 390),
        (226, 400),
        (262, 430),
        (290, 462),
        (318, 492),
        (300, 512),
        (250, 520),
        (0, 532),
    )
    draw.polygon(points(*cliff), fill=(22, 26, 44, 255))
    # Grass on the cliff top, a little lighter where the lamp and moon catch it.
    draw.polygon(
        points(
            (0, 372),
            (40, 366),
            (82, 372),
            (110, 388),
            (182, 390),
            (226, 400),
            (240, 412),
            (150, 404),
            (60, 392),
            (0, 394),
        ),
        fill=(38, 50, 58, 255),
    )
    # Rock strata, running with the slope of the cliff face.
    for _ in range(16):
        x = rng.uniform(120, 280)
        y = rng.uniform(425, 510)
        w = rng.uniform(12, 30)
        draw.line((s(x), s(y), s(x + w), s(y + w * 0.45)), fill=(34, 40, 62, 255), width=s(1))
    canvas.alpha_composite(land)

    # Surf breaking along the foot of the cliff where it meets the sea.
    foam, draw = layer()
    waterline = cliff[5:11]
    for (x0, y0), (x1, y1) in zip(waterline, waterline[1:], strict=False):
        for _ in range(14):
            t = rng.random()
            x, y = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
            length = rng.uniform(4, 12)
            y += rng.uniform(0, 3)
            draw.line(
                (s(x - length / 2), s(y), s(x + length / 2), s(y)),
                fill=(214, 224, 244, rng.randint(70, 170)),
                width=s(1),
            )
    canvas.alpha_composite(blurred(foam, 0.7))


def draw_cottage(canvas: Image.Image) -> None:
    house, draw = layer()
    draw.polygon(
        points((184, 392), (232, 392), (232, 372), (208, 358), (184, 372)), fill=(214, 208, 196, 255)
    )
    draw.polygon(
        points((208, 358), (232, 372), (232, 392), (220, 392), (220, 368)), fill=(150, 150, 160, 255)
    )
    draw.polygon(
        points((180, 373), (208, 355), (236, 373), (232, 375), (208, 360), (184, 375)), fill=(46, 44, 58, 255)
    )
    draw.rectangle((s(222), s(356), s(227), s(366)), fill=(60, 56, 66, 255))
    draw.rectangle((s(193), s(377), s(202), s(386)), fill=(255, 196, 104, 255))
    canvas.alpha_composite(house)

    glow, draw = layer()
    draw.ellipse((s(184), s(368), s(212), s(396)), fill=(255, 180, 90, 90))
    canvas.alpha_composite(blurred(glow, 6))

    smoke, draw = layer()
    for i in range(7):
        draw.ellipse(
            (s(222 + i * 5), s(346 - i * 8), s(232 + i * 6), s(354 - i * 7)), fill=(180, 186, 210, 60 - i * 7)
        )
    canvas.alpha_composite(blurred(smoke, 3))


def draw_lighthouse(canvas: Image.Image) -> None:
    lx, ly = LANTERN
    base_y, top_y = 396, 194
    base_half, top_half = 26, 16
    tower, draw = layer()
    body = (
        (lx - base_half, base_y),
        (lx - top_half, top_y),
        (lx + top_half, top_y),
        (lx + base_half, base_y),
    )
    draw.polygon(points(*body), fill=(236, 232, 222, 255))
    # The side away from the moon in shadow, with a soft edge.
    draw.polygon(
        points((lx + 4, base_y), (lx + 3, top_y), (lx + top_half, top_y), (lx + base_half, base_y)),
        fill=(156, 160, 180, 255),
    )
    for y in (260, 330):
        t = (y - top_y) / (base_y - top_y)
        half = top_half + (base_half - top_half) * t
        draw.line((s(lx - half), s(y), s(lx + half), s(y)), fill=(188, 186, 190, 255), width=s(1))
    draw.rectangle((s(lx - 6), s(376), s(lx + 6), s(396)), fill=(54, 48, 56, 255))
    for y in (228, 296):
        draw.rectangle((s(lx - 3), s(y), s(lx + 3), s(y + 9)), fill=(255, 206, 120, 255))
    draw.rectangle(
        (s(lx - base_half - 6), s(base_y - 2), s(lx + base_half + 6), s(base_y + 4)),
        fill=(120, 118, 130, 255),
    )

    # Gallery, lantern room and cap.
    draw.rectangle((s(lx - 24), s(186), s(lx + 24), s(194)), fill=(40, 38, 52, 255))
    for x in range(lx - 22, lx + 23, 5):
        draw.line((s(x), s(178), s(x), s(186)), fill=(40, 38, 52, 255), width=s(1))
    draw.line((s(lx - 24), s(178), s(lx + 24), s(178)), fill=(40, 38, 52, 255), width=s(1.4))
    draw.rectangle((s(lx - 14), s(152), s(lx + 14), s(186)), fill=(255, 226, 148, 255))
    draw.ellipse((s(lx - 8), s(160), s(lx + 8), s(178)), fill=(255, 252, 230, 255))
    for x in (lx - 14, lx - 5, lx + 5, lx + 14):
        draw.line((s(x), s(152), s(x), s(186)), fill=(70, 60, 60, 255), width=s(1.2))
    draw.pieslice((s(lx - 18), s(134), s(lx + 18), s(170)), 180, 360, fill=(48, 44, 62, 255))
    draw.rectangle((s(lx - 18), s(150), s(lx + 18), s(154)), fill=(48, 44, 62, 255))
    draw.line((s(lx), s(126), s(lx), s(136)), fill=(48, 44, 62, 255), width=s(2))
    draw.ellipse((s(lx - 2.5), s(122), s(lx + 2.5), s(127)), fill=(48, 44, 62, 255))
    canvas.alpha_composite(tower)

    glow, draw = layer()
    draw.ellipse((s(lx - 22), s(150), s(lx + 22), s(188)), fill=(255, 236, 170, 110))
    canvas.alpha_composite(blurred(glow, 5))


def draw_foreground_rocks(canvas: Image.Image) -> None:
    rocks, draw = layer()
    draw.polygon(
        points((0, 540), (36, 524), (70, 534), (96, 556), (132, 566), (150, 600), (0, 600)),
        fill=(12, 14, 26, 255),
    )
    draw.polygon(points((300, 600), (336, 572), (364, 566), (400, 578), (400, 600)), fill=(12, 14, 26, 255))
    draw.line(points((36, 524), (70, 534), (96, 556)), fill=(70, 80, 112, 180), width=s(1.2))
    draw.line(points((336, 572), (364, 566), (400, 578)), fill=(70, 80, 112, 160), width=s(1.2))
    canvas.alpha_composite(rocks)


def vignette(canvas: Image.Image) -> None:
    mask = Image.new("L", canvas.size, 0)
    ImageDraw.Draw(mask).ellipse((s(-90), s(-60), s(WIDTH + 90), s(HEIGHT + 80)), fill=255)
    mask = blurred(mask, 60)
    shade = Image.new("RGBA", canvas.size, (2, 4, 14, 255))
    shade.putalpha(ImageChops.invert(mask).point(lambda v: v * 150 // 255))
    canvas.alpha_composite(shade)


def render() -> Image.Image:
    """Return the finished 400x600 RGB illustration."""
    rng = random.Random(SEED)
    canvas = Image.new("RGBA", (s(WIDTH), s(HEIGHT)), (0, 0, 0, 255))
    draw_sky(canvas, rng)
    draw_moon(canvas)
    draw_mist(canvas, rng, (HORIZON - 40, HORIZON + 6), 16, 70)
    draw_far_shore(canvas)
    draw_sea(canvas, rng)
    draw_mist(canvas, rng, (HORIZON - 6, HORIZON + 30), 14, 60)
    draw_beam(canvas)
    draw_headland(canvas, rng)
    draw_cottage(canvas)
    draw_lighthouse(canvas)
    draw_mist(canvas, rng, (380, 470), 12, 45)
    draw_foreground_rocks(canvas)
    vignette(canvas)
    return canvas.convert("RGB").resize((WIDTH, HEIGHT), Image.Resampling.LANCZOS)


def save(image: Image.Image, path: Path) -> None:
    """Save as a palette PNG; dithering keeps the gradients smooth at a fraction of the size."""
    palette = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.FLOYDSTEINBERG)
    palette.save(path, format="PNG", optimize=True)


def main() -> None:
    save(render(), OUTPUT)
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
