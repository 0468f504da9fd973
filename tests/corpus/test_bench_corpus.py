"""The Corpus benchmark end to end on a tiny LoCoMo-shaped file (the real one never comes here)."""

from __future__ import annotations

import json

import pytest

import bench
from bench import corpus as bench_corpus
from memory.models import Scene, Summary
from rooms.models import Room
from tests.memory.test_bench_recall import _conversation

pytestmark = pytest.mark.bench

KEYS = {"all_1_4", "1", "2", "3", "4", "5"}


def test_calibration_picks_the_cosine_that_separates_best():
    chosen = bench_corpus.calibrate([0.5, 0.6, 0.7, 0.4], [0.1, 0.2, 0.45])
    assert chosen["threshold"] == pytest.approx(0.46)
    assert chosen["answered_close"] == 0.75 and chosen["off_topic_close"] == 0.0


def test_scene_lines_are_read_back_with_their_speakers():
    text = "#16 Avery: Hello there.\n#17 Bruno: Hi: again,\nover two lines."
    assert bench_corpus._lines_of(text) == [
        ("Avery", "Hello there."),
        ("Bruno", "Hi: again,\nover two lines."),
    ]


@pytest.mark.django_db(transaction=True)
def test_the_benchmark_writes_hits_per_category_and_latency(tmp_path, capsys):
    data = tmp_path / "tiny_locomo.json"
    data.write_text(json.dumps([_conversation(1), _conversation(2)]))
    out = tmp_path / "result.json"

    bench.main(
        [
            "corpus",
            f"--data={data}",
            f"--out={out}",
            "--memories",
            "--scale-rooms=2",
            "--scale-messages=120",
            "--scale-queries=12",
        ]
    )

    result = json.loads(out.read_text())
    assert set(result["scenes_hit_at_10"]) == KEYS
    for key in ("all_1_4", "1", "2", "4", "5"):
        assert 0.0 <= result["scenes_hit_at_10"][key] <= 1.0
    assert result["scenes_hit_at_10"]["3"] is None  # no open-domain question in the tiny file
    assert result["n_questions"] == 8
    assert set(result["variants"]) == {*bench_corpus.VARIANTS, "memories_fused"}
    assert 0 < result["search_ms"]["p50"] <= result["search_ms"]["p95"]
    assert result["scale"]["scenes"] == 2 * 15 and result["scale"]["queries"] == 12
    assert set(result["closeness"]) == {"scenes", "memories"}
    assert 0.0 <= result["closeness"]["scenes"]["threshold"] <= 1.0
    printed = capsys.readouterr().out
    for name in bench_corpus.VARIANTS:
        assert name in printed
    assert "p95" in printed
    # Its rooms, scenes and memories are gone again.
    assert not Room.objects.exists() and not Scene.objects.exists() and not Summary.objects.exists()
