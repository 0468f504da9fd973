from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from orbchat.interop import cards as card_codec
from orbchat.library.models import Character
from tests.library.cards import png_card, v2_card

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, int]:
    out = StringIO()
    try:
        call_command(*args, stdout=out)
    except SystemExit as exc:
        return out.getvalue(), exc.code
    return out.getvalue(), 0


def test_import_prints_a_line_per_file_and_fails_on_a_refusal(owner, tmp_path):
    good = tmp_path / "mira.png"
    good.write_bytes(png_card(v2_card()))
    book = tmp_path / "lore.json"
    book.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["x"], "content": "y"}}}))
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    output, code = run("import_sillytavern", str(good), str(book), str(bad), "--user", owner.username)
    lines = output.strip().splitlines()
    mira = Character.objects.get(name="Mira")
    assert lines[0] == f"imported card {mira.pk} Mira"
    assert lines[1].startswith("imported worldbook ") and lines[1].endswith(" lore")
    assert lines[2].startswith(f"refused {bad}: ") and "JSON is invalid" in lines[2]
    assert code == 1


def test_import_exits_zero_when_all_files_import(owner, tmp_path):
    good = tmp_path / "mira.json"
    good.write_text(json.dumps(v2_card()))
    assert run("import_sillytavern", str(good), "--user", owner.username)[1] == 0


def test_export_a_card_as_png_and_json(owner, tmp_path):
    character = owner.characters.get()
    run("export_sillytavern", "card", str(character.pk), "--out", str(tmp_path / "c.png"))
    run("export_sillytavern", "card", str(character.pk), "--out", str(tmp_path / "c.json"))
    from_png = card_codec.parse_card_png((tmp_path / "c.png").read_bytes())[0]
    from_json = card_codec.parse_card_json((tmp_path / "c.json").read_bytes())
    assert from_png["name"] == from_json["name"] == character.name
    assert from_png["character_book"]["entries"]


def test_export_worldbook_and_preset(owner, tmp_path):
    book = owner.world_books.get()
    preset = owner.presets.get()
    run("export_sillytavern", "worldbook", str(book.pk), "--out", str(tmp_path / "b.json"))
    run("export_sillytavern", "preset", str(preset.pk), "--out", str(tmp_path / "p.json"))
    assert json.loads((tmp_path / "b.json").read_text())["entries"]
    assert "prompt_order" in json.loads((tmp_path / "p.json").read_text())
