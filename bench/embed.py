"""Compare the built-in embedder's backends: `python -m bench embed --out FILE.json`.

Loads all-MiniLM-L6-v2 on torch, on ONNX Runtime (fp32) and on ONNX Runtime (int8) in one
process and measures, on the same texts: batch throughput (batches of 32 memory-summary-length
texts, the backends taking turns round by round), the latency of a single short query (p50, p95)
and how close each backend's vectors are to torch's (cosine, min and mean over the batch texts
and the queries). Prints a table and writes the JSON, with the default the numbers pick: of the
backends within their quality bar, the one with the best batch speed-up over torch times its query
p95 speed-up.
"""

from __future__ import annotations

import random
import statistics
import time

from bench import kit

BACKENDS = ("torch", "onnx", "onnx-int8")
QUALITY_BAR = {"onnx": 0.999, "onnx-int8": 0.99}  # least cosine to torch
TARGETS = {"batch_ratio": 2.5, "query_p95_ratio": 0.5}  # against torch
NAMES = ["Maren", "Tobin", "Harrow", "Ilse", "Corwin", "Esk", "Wren", "Dunmore"]
PLACES = ["the lighthouse", "Inchfallow", "the customs house", "the seal rocks", "the fog bell", "the ferry"]
THINGS = ["brass key", "tide ledger", "lamp wick", "sea chart", "iron lantern", "salt box", "signal flag"]
VERBS = ["found", "hid", "lost", "mended", "sold", "stole", "buried", "carried"]
QUESTIONS = ["Where is the {}?", "Who took the {}?", "What happened to the {}?", "{} at night", "the {}"]
SHORT = ["Hm.", "Thanks.", "*nods*", "Go on.", "ok"]  # recall's query is often a one-word reply


def summary(rng: random.Random) -> str:
    """A memory summary's length: a heading and four to six facts, 50-90 words."""
    lines = [f"{rng.choice(NAMES)} and {rng.choice(NAMES)} at {rng.choice(PLACES)}."]
    for _ in range(rng.randint(4, 6)):
        who, did, what, where = rng.choice(NAMES), rng.choice(VERBS), rng.choice(THINGS), rng.choice(PLACES)
        lines.append(f"{who} {did} the {what} near {where} before the tide turned.")
    return " ".join(lines)


def query(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return rng.choice(SHORT)
    return rng.choice(QUESTIONS).format(rng.choice(THINGS))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


class Bench:
    help = "Benchmark the built-in embedder on torch, ONNX and int8 ONNX (table + JSON)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", required=True)
        parser.add_argument("--batch", type=int, default=32)
        parser.add_argument("--batches", type=int, default=8, help="batches per round")
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--queries", type=int, default=200)

    def handle(self, *, out: str, batch: int, batches: int, rounds: int, queries: int) -> None:
        results = self._run(batch, batches, rounds, queries)
        kit.write_json(out, results)
        self._print(results)
        print(f"wrote {out}")

    def _run(self, batch: int, batches: int, rounds: int, queries: int) -> dict:
        import numpy as np

        from orbchat.connections import embedder

        rng = random.Random(22)
        texts = [summary(rng) for _ in range(batch * batches)]
        questions = [query(rng) for _ in range(queries)]
        encoders, load_s = {}, {}
        for name in BACKENDS:
            clock = time.perf_counter()
            encoders[name] = embedder.load(name)
            encoders[name].embed(texts[:batch])  # first run allocates: not timed
            load_s[name] = time.perf_counter() - clock

        seconds = dict.fromkeys(BACKENDS, 0.0)
        for _ in range(rounds):
            for name in BACKENDS:  # taking turns: a busy spell on the machine hits them alike
                clock = time.perf_counter()
                for start in range(0, len(texts), batch):
                    encoders[name].embed(texts[start : start + batch])
                seconds[name] += time.perf_counter() - clock

        latencies = {name: [] for name in BACKENDS}
        for text in questions:
            for name in BACKENDS:
                clock = time.perf_counter()
                encoders[name].embed_query(text)
                latencies[name].append((time.perf_counter() - clock) * 1000)

        vectors = {
            name: np.asarray(
                [*encoders[name].embed(texts), *(encoders[name].embed_query(q) for q in questions)]
            )
            for name in BACKENDS
        }
        backends = {}
        for name in BACKENDS:
            row = {
                "batch_per_s": round(rounds * len(texts) / seconds[name], 1),
                "query_p50_ms": round(statistics.median(latencies[name]), 2),
                "query_p95_ms": round(percentile(latencies[name], 0.95), 2),
                "load_s": round(load_s[name], 2),
            }
            if name != "torch":
                cosines = (vectors[name] * vectors["torch"]).sum(axis=1)
                row["cosine_to_torch"] = {
                    "min": round(float(cosines.min()), 5),
                    "mean": round(float(cosines.mean()), 5),
                }
                row["batch_ratio"] = round(row["batch_per_s"] / backends["torch"]["batch_per_s"], 2)
                row["query_p95_ratio"] = round(row["query_p95_ms"] / backends["torch"]["query_p95_ms"], 2)
                row["within_quality_bar"] = row["cosine_to_torch"]["min"] >= QUALITY_BAR[name]
            backends[name] = row
        eligible = ["torch", *(name for name in QUALITY_BAR if backends[name]["within_quality_bar"])]
        speed_up = {
            name: backends[name].get("batch_ratio", 1.0) / backends[name].get("query_p95_ratio", 1.0)
            for name in eligible
        }
        return {
            "texts": len(texts),
            "batch": batch,
            "rounds": rounds,
            "queries": len(questions),
            "quality_bar": QUALITY_BAR,
            "targets": TARGETS,
            "backends": backends,
            "default": max(eligible, key=speed_up.__getitem__),
        }

    def _print(self, results: dict) -> None:
        print(f"{results['texts']} texts in batches of {results['batch']}, {results['queries']} queries")
        print(
            f"{'backend':<10} {'texts/s':>8} {'x torch':>8} {'q p50 ms':>9} {'q p95 ms':>9} {'x torch':>8}"
            f" {'cos min':>8} {'cos mean':>9} {'load s':>7}"
        )
        for name, row in results["backends"].items():
            cosine = row.get("cosine_to_torch", {"min": 1.0, "mean": 1.0})
            speed = f"{row['batch_per_s']:>8} {row.get('batch_ratio', 1.0):>8} {row['query_p50_ms']:>9}"
            print(
                f"{name:<10} {speed} {row['query_p95_ms']:>9} {row.get('query_p95_ratio', 1.0):>8}"
                f" {cosine['min']:>8} {cosine['mean']:>9} {row['load_s']:>7}"
            )
        print(f"default: {results['default']}")
