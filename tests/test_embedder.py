from __future__ import annotations

import os
import subprocess
import sys

import pytest

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


TEXTS = [
    "Maren hid the brass key near the fog bell before the storm came.",
    "Tobin and Ilse argued at the customs house; he sold the tide ledger to pay the ferryman.",
    "Where is the sea chart?",
    "Bake bread at dawn.",
]


def cosines(backend: str) -> list[float]:
    reference = embedder.load("torch").embed(TEXTS)
    return [
        sum(x * y for x, y in zip(a, b, strict=True))
        for a, b in zip(embedder.load(backend).embed(TEXTS), reference, strict=True)
    ]


@pytest.mark.parametrize("backend", embedder.BACKENDS)
def test_the_setting_chooses_the_backend(settings, backend):
    settings.EMBEDDER_BACKEND = backend
    assert embedder.load() is embedder.load(backend)


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="onnx, onnx-int8, torch"):
        embedder.load("tensorflow")


def test_onnx_vectors_are_torchs():
    assert min(cosines("onnx")) >= 0.999


def test_int8_vectors_stay_close_to_torchs():
    assert min(cosines("onnx-int8")) >= 0.99


def test_a_query_embeds_as_the_same_text_in_a_batch():
    single = embedder.embed_query(TEXTS[0])
    assert sum(x * y for x, y in zip(single, embedder.embed(TEXTS)[0], strict=True)) > 0.9999


def test_the_export_is_made_once_and_reused(monkeypatch):
    embedder.load("onnx")  # exported by now, by this test or an earlier one
    files = [embedder.onnx_dir() / name for name in embedder.ONNX_FILES.values()]
    written = [path.stat().st_mtime_ns for path in files]

    def export_again(folder):
        raise AssertionError(f"exported again into {folder}")

    monkeypatch.setattr(embedder, "_export_in_child", export_again)
    monkeypatch.setattr(embedder, "_models", {})
    assert len(embedder.load("onnx").embed(["The lamp wick burned low."])[0]) == embedder.DIMENSIONS
    assert [path.stat().st_mtime_ns for path in files] == written


WEB_PROCESS = """
import sys, time
import orbchat.asgi
from orbchat.connections import embedder, embedding
while embedder.state() != "ready":
    time.sleep(0.1)
embedder.embed(["The knight lost the key."])
embedding.embed_query(embedding.BUILTIN_KEY, "the key")
print(sorted(name for name in sys.modules if name == "torch" or name.startswith("torch.")))
"""


def test_the_web_process_serving_with_onnx_never_imports_torch(settings):
    embedder.load("onnx")  # the export exists: the child below only loads it
    environment = {**os.environ, "ORBCHAT_DATA_DIR": str(settings.DATA_DIR), "EMBEDDER_BACKEND": "onnx"}
    result = subprocess.run(
        [sys.executable, "-c", WEB_PROCESS],
        env=environment,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_a_failed_export_says_why(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(
        RuntimeError, match="exporting the embedding model to ONNX failed: NotADirectoryError"
    ):
        embedder._export_in_child(tmp_path / "a-file" / "embedder")


COLD_WEB_PROCESS = """
import time
import orbchat.asgi
from orbchat.connections import embedder
print("state", embedder.state(), flush=True)
start = time.monotonic()
try:
    embedder.embed_query("Where is the brass key?")
except embedder.StillWarming as exc:
    print("waited", round(time.monotonic() - start, 2), exc, flush=True)
from orbchat.connections import embedding
try:
    embedding.embed_with(embedding.BUILTIN_KEY, ["The brass key is under the stair."])
except embedding.EmbedderFailed as exc:
    print("recall hears:", exc, flush=True)
try:
    embedding.embed_query(embedding.BUILTIN_KEY, "Where is the brass key?")
except embedding.EmbedderFailed as exc:
    print("search hears:", exc, flush=True)
"""


def test_a_fresh_web_process_warms_the_model_and_waits_at_most_two_seconds_for_it(settings, tmp_path):
    """A first start exports the model (tens of seconds): a query meanwhile gives up within 2 s."""
    from tests.services import Process

    environment = {"ORBCHAT_DATA_DIR": str(settings.DATA_DIR), "EMBEDDER_DIR": str(tmp_path / "embedder")}
    process = Process("cold-web", [sys.executable, "-c", COLD_WEB_PROCESS], log_dir=tmp_path, env=environment)
    try:
        process.popen.wait(timeout=120)
    finally:
        process.stop()
    lines = process.log.read_text().splitlines()
    assert "state loading" in lines
    waited = next(line for line in lines if line.startswith("waited"))
    seconds = float(waited.split()[1])
    assert embedder.WARM_WAIT_SECONDS <= seconds < embedder.WARM_WAIT_SECONDS + 0.5
    assert "still warming up" in waited
    # Recall reports the warm-up as such, not as a provider to go and test.
    for caller in ("recall hears:", "search hears:"):
        heard = next(line for line in lines if line.startswith(caller))
        assert "still warming up" in heard and "provider" not in heard


THREADS_PROCESS = """
import sys, threading
if sys.argv[1] == "web":
    import orbchat.asgi
else:
    import django; django.setup()
import torch
from orbchat.connections import embedder
encoder = embedder.load("torch")
seen = set()
for _ in range(3):
    embedder.embed_query("Where is the brass key?")
    embedder.embed(["The knight lost the key.", "Bake bread at dawn."] * 8)
    seen.add(torch.get_num_threads())
print(sorted(seen))
"""


@pytest.mark.parametrize(("process", "threads"), [("web", 1), ("worker", len(os.sched_getaffinity(0)))])
def test_torch_threads_are_set_once_per_process_never_per_call(settings, process, threads):
    environment = {
        **os.environ,
        "ORBCHAT_DATA_DIR": str(settings.DATA_DIR),
        "EMBEDDER_BACKEND": "torch",
        "DJANGO_SETTINGS_MODULE": "orbchat.settings",
    }
    result = subprocess.run(
        [sys.executable, "-c", THREADS_PROCESS, process],
        env=environment,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == f"[{threads}]"
