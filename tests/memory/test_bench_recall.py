"""The recall benchmark: its pure helpers, and the benchmark end to end on a tiny LoCoMo-shaped file.

The real LoCoMo file is non-commercial and never copied here: the benchmark runs on a synthetic
file written into tmp_path, through the real database, Chroma server and embedding model.
"""

from __future__ import annotations

import json

import pytest

import bench
from bench import locomo
from bench.recall import SYSTEMS
from memory.models import Summary
from rooms.models import Room

pytestmark = pytest.mark.bench

# Helpers -----------------------------------------------------------------------------------------


def test_containment_normalises_case_punctuation_and_stopwords():
    assert locomo.content_words("The Sunrise, over a LAKE!") == ["sunrise", "lake"]
    assert locomo.containment("a lake sunrise", "Melanie painted the sunrise over the lake.") == 1.0
    assert locomo.containment("7 May 2023", "Caroline and Melanie, 8 May 2023") == pytest.approx(2 / 3)
    assert locomo.containment("2022", "painted in 2022") == 1.0
    assert locomo.containment("the of", "anything") is None  # no content words: not scored
    assert locomo.containment("Sweden", "") == 0.0


def test_evidence_ids_are_normalised_and_dangling_ones_dropped():
    known = {"D8:6", "D9:17", "D11:26", "D30:5", "D1:2", "D1:3"}
    raw = ["D8:6; D9:17", "D", "D:11:26", "D30:05", "D1:2 D1:3", "D99:1", "D1:2"]
    assert locomo.normalise_evidence(raw, known) == ("D8:6", "D9:17", "D11:26", "D30:5", "D1:2", "D1:3")
    assert locomo.normalise_evidence([], known) == ()


def test_evidence_coverage_counts_seqs_inside_ranges():
    assert locomo.evidence_coverage([3, 10, 40], [(0, 7), (8, 15)]) == pytest.approx(2 / 3)
    assert locomo.evidence_coverage([3], []) == 0.0
    assert locomo.evidence_coverage([], [(0, 7)]) is None
    assert locomo.set_coverage([3, 4], {4, 9}) == 0.5


def test_budget_filling_takes_by_rank_and_cuts_the_last_item_exactly():
    ranked = [[(5, "one two three")], [(2, "four five six seven")], [(9, "eight")]]
    text, seqs, used = locomo.fill_budget(ranked, 5)
    assert used == 5 and text.split() == ["one", "two", "three", "four", "five"]
    assert seqs == {5, 2}
    # A chunk of several turns: only the turns that got words count as returned.
    chunk = [[(0, "a b"), (1, "c d"), (2, "e f")]]
    text, seqs, used = locomo.fill_budget(chunk, 3)
    assert (text.split(), seqs, used) == (["a", "b", "c"], {0, 1}, 3)
    assert locomo.fill_budget(ranked, 0) == ("", set(), 0)
    assert locomo.fill_budget(ranked, 100)[2] == 8


def test_percentile_and_category_means():
    assert locomo.percentile([1, 2, 3, 4], 50) == 2.5
    assert locomo.percentile([10], 95) == 10.0
    assert locomo.percentile([], 95) == 0.0
    means = locomo.by_category([("1", 1.0), ("4", 0.0), ("5", 1.0), ("2", None)])
    assert means[locomo.POOLED] == 0.5 and means["5"] == 1.0 and means["2"] is None


def test_baselines_rank_sensibly():
    bm25 = locomo.BM25(["Caroline went hiking.", "Melanie painted a lake sunrise.", "Nice!"])
    assert bm25.rank("Who painted the sunrise?")[0] == 1
    assert locomo.aligned_chunks([3, 5, 8, 9, 17], 8) == [[3, 5], [8, 9], [17]]
    assert locomo.recency_order([1, 7, 3]) == [7, 3, 1]


# The benchmark end to end ----------------------------------------------------------------------------

NAMES = ("Avery", "Bruno")
PLACES = ["Lisbon", "Oslo", "Kyoto", "Quito", "Tromso", "Nairobi", "Hobart", "Bergen"]


def _conversation(index: int) -> dict:
    speaker_a, speaker_b = f"{NAMES[0]}{index}", f"{NAMES[1]}{index}"
    convo: dict = {"speaker_a": speaker_a, "speaker_b": speaker_b}
    observation: dict = {}
    for session in (1, 2):
        turns = []
        facts: dict[str, list] = {speaker_a: [], speaker_b: []}
        for number in range(1, 41):
            speaker = speaker_a if number % 2 else speaker_b
            place = PLACES[(number + session) % len(PLACES)]
            text = f"Last week I visited {place} and bought a {['kite', 'lamp', 'drum'][number % 3]} there."
            turn = {"speaker": speaker, "dia_id": f"D{session}:{number}", "text": text}
            if session == 1 and number == 5:
                turn |= {
                    "img_url": ["https://example.invalid/a.jpg"],
                    "blip_caption": "a photo of a red kite",
                }
            turns.append(turn)
            if number % 4 == 1:
                facts[speaker].append(
                    [f"{speaker} visited {place} in session {session}.", f"D{session}:{number}"]
                )
        convo[f"session_{session}"] = turns
        convo[f"session_{session}_date_time"] = f"1:56 pm on {8 + session} May, 2023"
        observation[f"session_{session}_observation"] = facts
    convo["session_3_date_time"] = "2:00 pm on 1 June, 2023"  # a date with no session, as in conv-26
    qa = [
        {
            "question": f"Where did {speaker_a} go in the first week?",
            "answer": "Oslo",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": f"What did {speaker_a} buy in Kyoto?",
            "answer": "a drum",
            "evidence": ["D1:3; D1:5"],
            "category": 1,
        },
        {
            "question": f"When did {speaker_b} visit Quito?",
            "answer": "9 May 2023",
            "evidence": ["D1:02"],
            "category": 2,
        },
        {
            "question": f"What did {speaker_b} say about the red kite?",
            "adversarial_answer": "red kite",
            "evidence": ["D1:5", "D"],
            "category": 5,
        },
    ]
    return {"sample_id": f"conv-{index}", "conversation": convo, "observation": observation, "qa": qa}


@pytest.mark.django_db(transaction=True)
def test_the_benchmark_writes_every_system_with_scores_in_range(tmp_path, capsys):
    data = tmp_path / "tiny_locomo.json"
    data.write_text(json.dumps([_conversation(1), _conversation(2)]))
    out = tmp_path / "result.json"

    bench.main(["recall", f"--data={data}", f"--out={out}", "--scale-messages=2000", "--scale-turns=12"])

    result = json.loads(out.read_text())
    assert set(result["systems"]) == set(SYSTEMS)
    assert result["n_questions"] == 8
    for name, system in result["systems"].items():
        for metric in ("answer_containment", "evidence_coverage"):
            assert set(system[metric]) == {"all_1_4", "1", "2", "3", "4", "5"}, name
            for key in ("all_1_4", "1", "2", "4", "5"):
                assert 0.0 <= system[metric][key] <= 1.0, (name, metric, key)
            assert system[metric]["3"] is None  # no open-domain question in the tiny file
        assert system["words_mean"] >= 0 and system["words_p95"] >= 0
        assert 0 <= system["latency_ms"]["p50"] <= system["latency_ms"]["p95"]
    # The baselines are held to the words the default system injected.
    default = result["systems"]["mixC_observation"]
    assert default["words_mean"] > 0
    assert result["systems"]["bm25_turns"]["words_mean"] <= default["words_mean"]
    # The memory cycle gave both rooms facts: the stand-in's observations and the extractor's.
    assert result["facts_written"]["observation"] > 0 and result["facts_written"]["extractive"] >= 0
    assert result["default"] in ("mixC_observation", "facts_observation")
    scale = result["scale_100k"]
    assert scale["messages"] == 2000 and scale["pool"] > 0
    assert 0 < scale["latency_ms"]["p50"] <= scale["latency_ms"]["p95"]
    printed = capsys.readouterr().out
    for name in SYSTEMS:
        assert name in printed
    # Its rooms (and their summaries) are gone again.
    assert not Room.objects.exists() and not Summary.objects.exists()
