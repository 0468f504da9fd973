from __future__ import annotations

import os

from orbchat.connections import embedder


def test_the_bundled_model_embeds_offline_and_ranks_by_meaning():
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    query, near, far = embedder.embed(
        ["The knight lost the key to the tower.", "She misplaced the tower key.", "Bake bread at dawn."]
    )
    assert len(query) == embedder.DIMENSIONS

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(query, near) > cosine(query, far) + 0.2


def test_no_texts_no_work():
    assert embedder.embed([]) == []
