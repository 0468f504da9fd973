"""In-tree character cards for tests, built with the project's own writer."""

from __future__ import annotations

import base64
import io
import json

from PIL import Image

from orbchat.interop import png


def portrait(colour: str = "#335577") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 60), colour).save(out, format="PNG")
    return out.getvalue()


def v2_card(**data) -> dict:
    fields = {
        "name": "Mira",
        "description": "A cartographer of drowned cities.",
        "personality": "curious, dry",
        "scenario": "A flooded library at dusk.",
        "first_mes": "You found my maps, {{user}}. Careful—the ink is still wet.",
        "mes_example": "<START>\n{{user}}: Hello\n{{char}}: *looks up* Hello.",
        "creator_notes": "Test card.",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": ["Oh! A visitor.", "The tide is early tonight."],
        "tags": ["fantasy", "maps"],
        "creator": "tests",
        "character_version": "1.2",
        "extensions": {"talkativeness": "0.7", "fav": False, "custom_tool": {"keep": [1, 2, 3]}},
        "some_future_field": {"nested": True},
    }
    fields.update(data)
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": fields, "top_level_unknown": "kept"}


def lorebook() -> dict:
    return {
        "name": "Drowned Atlas",
        "entries": [
            {
                "id": 0,
                "keys": ["atlas"],
                "secondary_keys": [],
                "comment": "The atlas",
                "content": "The Drowned Atlas maps every sunken street.",
                "constant": False,
                "selective": False,
                "insertion_order": 100,
                "enabled": True,
                "position": "before_char",
                "extensions": {"position": 0, "depth": 4, "probability": 100, "useProbability": True},
            },
            {
                "id": 1,
                "keys": ["tide"],
                "secondary_keys": [],
                "comment": "Tides",
                "content": "The tide rises at dusk.",
                "constant": False,
                "selective": False,
                "insertion_order": 90,
                "enabled": True,
                "position": "after_char",
                "extensions": {},
            },
        ],
    }


def png_card(card: dict | None = None, *, keyword: str = "chara", image: bytes | None = None) -> bytes:
    card = card or v2_card()
    encoded = base64.b64encode(json.dumps(card).encode()).decode()
    return png.write_text_chunks(image or portrait(), [(keyword, encoded)], drop={"chara", "ccv3"})


def raw_chunk_card(value: str, keyword: str = "chara") -> bytes:
    """A PNG whose card chunk holds exactly `value` (for malformed-card tests)."""
    return png.write_text_chunks(portrait(), [(keyword, value)], drop=set())
