"""Local llama.cpp embeddings of our converted GGUF, checked against a pure-numpy BERT forward pass."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mnemo.config import EmbeddingSettings
from mnemo.embeddings import EmbeddingError, build_embedder
from mnemo.embeddings.gguf_convert import default_model_zip
from mnemo.embeddings.local import LocalEmbedder, llama_cpp_available

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(
        not llama_cpp_available(), reason="llama-cpp-python is not installed (run `make install`)"
    ),
]

SENTENCES = [
    "The cat sits on the mat.",
    "A kitten is resting on a rug.",
    "Quarterly tax filings are due at the end of March.",
    "mnemo indexes Markdown notes into DuckDB and serves them over LSP; unbelievably fast!",
]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hf")
    with zipfile.ZipFile(default_model_zip()) as archive:
        archive.extractall(out)
    return out


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEmbedder]:
    cache = tmp_path_factory.mktemp("cache")
    built = build_embedder(EmbeddingSettings(provider="local", threads=2), cache_dir=cache)
    assert isinstance(built, LocalEmbedder)
    yield built
    built.close()


class NumpyBert:
    """A minimal BertModel forward pass (float32) + mean pooling + L2 normalisation."""

    def __init__(self, model_dir: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = {
            k.removeprefix("bert."): v.astype(np.float32)
            for k, v in load_file(str(model_dir / "model.safetensors")).items()
        }
        self.cfg: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()  # tokenizer.json pads/truncates to 128: we want the plain ids
        self.tokenizer.no_truncation()

    @staticmethod
    def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g + b

    @staticmethod
    def _gelu(x: np.ndarray) -> np.ndarray:
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(np.float32)

    def ids(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text).ids)

    def embed(self, text: str) -> np.ndarray:
        w, cfg = self.w, self.cfg
        ids = self.ids(text)
        eps = float(cfg["layer_norm_eps"])
        n_heads = int(cfg["num_attention_heads"])
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][: len(ids)]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = self._layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)

        def dense(h: np.ndarray, name: str) -> np.ndarray:
            return h @ w[f"{name}.weight"].T + w[f"{name}.bias"]

        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}"
            n, d = x.shape
            hd = d // n_heads
            q = dense(x, f"{p}.attention.self.query").reshape(n, n_heads, hd).transpose(1, 0, 2)
            k = dense(x, f"{p}.attention.self.key").reshape(n, n_heads, hd).transpose(1, 0, 2)
            v = dense(x, f"{p}.attention.self.value").reshape(n, n_heads, hd).transpose(1, 0, 2)
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(1, 0, 2).reshape(n, d)
            attn = dense(ctx, f"{p}.attention.output.dense")
            x = self._layer_norm(
                x + attn,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
                eps,
            )
            h = self._gelu(dense(x, f"{p}.intermediate.dense"))
            x = self._layer_norm(
                x + dense(h, f"{p}.output.dense"),
                w[f"{p}.output.LayerNorm.weight"],
                w[f"{p}.output.LayerNorm.bias"],
                eps,
            )
        pooled = x.mean(axis=0)  # one unpadded sequence: the attention mask is all ones
        return (pooled / np.linalg.norm(pooled)).astype(np.float32)


@pytest.fixture(scope="module")
def reference(hf_dir: Path) -> NumpyBert:
    return NumpyBert(hf_dir)


def test_matches_numpy_reference(embedder: LocalEmbedder, reference: NumpyBert) -> None:
    vectors = embedder.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    for text, vector in zip(SENTENCES, vectors, strict=True):
        assert embedder.token_windows(text) == [reference.ids(text)]  # same WordPiece tokens
        cosine = float(vector @ reference.embed(text))
        assert cosine >= 0.99, (text, cosine)


def test_related_sentences_score_higher(embedder: LocalEmbedder) -> None:
    cat, kitten, tax, _ = embedder.embed(SENTENCES)
    assert cat @ kitten > cat @ tax + 0.3
    assert cat @ kitten > kitten @ tax + 0.3


def test_identity_dims_and_token_count(embedder: LocalEmbedder, reference: NumpyBert) -> None:
    assert embedder.provider == "local"
    assert embedder.model.startswith("all-MiniLM-L6-v2.f16@") and len(embedder.model.split("@")[1]) == 12
    assert embedder.dims == 384 and embedder.max_tokens == 512
    text = "Unbelievable tokenization of naïve café text, 12345."
    assert embedder.count_tokens(text) == len(reference.ids(text)) - 2  # without [CLS]/[SEP]
    assert embedder.count_tokens("") == 0


def test_long_text_is_windowed_not_truncated(embedder: LocalEmbedder) -> None:
    first = " ".join(["Cats purr and nap in the warm afternoon sun."] * 60)  # ~660 tokens
    second = " ".join(["Income tax returns need receipts and signed forms."] * 60)
    text = first + " " + second
    windows = embedder.token_windows(text)
    n_tokens = embedder.count_tokens(text)
    assert n_tokens > 1000 and len(windows) == math.ceil(n_tokens / 510)
    assert all(len(w) <= 512 and w[0] == 101 and w[-1] == 102 for w in windows)
    assert sum(len(w) - 2 for w in windows) == n_tokens  # every token is embedded once

    (vector,) = embedder.embed([text])
    parts = embedder._embed_sequences(windows)
    parts /= np.linalg.norm(parts, axis=1, keepdims=True)
    weights = np.asarray([len(w) - 2 for w in windows], dtype=np.float32)
    mean = (parts * weights[:, None]).sum(axis=0)
    np.testing.assert_allclose(vector, mean / np.linalg.norm(mean), atol=1e-5)
    # the tail counts: the text's vector is not just its first window's
    assert float(vector @ parts[0]) < 0.99
    tax = embedder.embed(["Income tax returns need receipts and signed forms."])[0]
    head_only = embedder.embed([first])[0]
    assert vector @ tax > head_only @ tax + 0.1


RESIDENT_AFTER_LONG_TEXTS = """
import json, sys
from pathlib import Path
from mnemo.config import EmbeddingSettings
from mnemo.embeddings import build_embedder

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024

embedder = build_embedder(EmbeddingSettings(provider="local", threads=1), cache_dir=Path(sys.argv[1]))
embedder.embed(["warm up"])
before = rss_mb()
embedder.embed(["word " * 600, "a short one"])  # two windows (512 + 94 tokens), then a short text
embedder.embed(["word " * 480, "word " * 100])
import llama_cpp
sequences = llama_cpp.llama_n_seq_max(embedder._llm._ctx.ctx)
print(json.dumps({"before": before, "after": rss_mb(), "sequences": sequences}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
def test_a_long_texts_unused_logits_do_not_stay_resident(embedder: LocalEmbedder) -> None:
    """llama.cpp keeps a logits row per token (~119 KiB for MiniLM) that a pooled model never reads:
    ~62 MB for a 512-token window, given back to the kernel once the buffer has grown. The release
    looked at the batch's last decode and was skipped when a shorter text came after the longest:
    the rows stayed resident (~60 MB)."""
    embedder.embed(["load the model once"])  # the converted model is in the fixture's cache
    done = subprocess.run(
        [sys.executable, "-c", RESIDENT_AFTER_LONG_TEXTS, str(embedder._models_dir.parent)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rss = json.loads(done.stdout.strip().splitlines()[-1])
    assert rss["after"] - rss["before"] < 30, rss
    # One sequence a context: llama-cpp-python's default of 256 made llama.cpp reserve and touch 256
    # rows of logits (31 MB) when the model loaded, although mnemo decodes one text at a time.
    assert rss["sequences"] == 1


PEAK_AFTER_PREPARE = """
import json, sys
from pathlib import Path
from mnemo.config import EmbeddingSettings
from mnemo.embeddings import build_embedder, prepare

def status_mb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024

embedder = build_embedder(EmbeddingSettings(provider="local", threads=1), cache_dir=Path(sys.argv[1]))
if sys.argv[2] == "prepared":
    prepare(embedder)
else:
    embedder.embed(["warm up"])
Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
before = status_mb("VmRSS")
vectors = embedder.embed(["word " * 600, "a short one"])  # a whole 512-token window, then 94 tokens
print(json.dumps({"before": before, "peak": status_mb("VmHWM"), "vectors": vectors.tolist()}))
"""


def _peak_of_a_long_text(embedder: LocalEmbedder, how: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PEAK_AFTER_PREPARE, str(embedder._models_dir.parent), how],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="resets VmHWM through /proc")
def test_a_prepared_model_embeds_a_whole_window_without_a_new_peak(embedder: LocalEmbedder) -> None:
    """llama.cpp zero-fills its output buffer, a logits row per token (62 MB for a 512-token window),
    each time the buffer grows. A server's first long text grew it on top of the loaded index: a
    320-324 MB peak at 2,000 notes. ``prepare`` grows it once, at load; the vectors are the same."""
    embedder.embed(["load the model once"])  # the converted model is in the fixture's cache
    lazy = _peak_of_a_long_text(embedder, "lazy")
    prepared = _peak_of_a_long_text(embedder, "prepared")
    assert lazy["peak"] - lazy["before"] > 40, lazy  # the growth this is about (62 MB for MiniLM)
    assert prepared["peak"] - prepared["before"] < 10, prepared
    np.testing.assert_allclose(prepared["vectors"], lazy["vectors"], atol=1e-6)


def test_prepare_grows_the_buffer_no_further_than_its_byte_budget(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model of a large vocabulary (1 MB of logits a token at 250,000) must not zero-fill a whole
    window's rows at start: the window prepared is cut to PREPARE_BYTES."""
    from mnemo.embeddings import local

    default = local.PREPARE_BYTES
    embedder.embed(["load the model once"])
    fresh = LocalEmbedder(None, embedder._models_dir, threads=1)
    try:
        decoded: list[int] = []
        real = fresh._decode
        monkeypatch.setattr(
            fresh, "_decode", lambda llm, seqs: decoded.extend(map(len, seqs)) or real(llm, seqs)
        )
        monkeypatch.setattr(local, "PREPARE_BYTES", 4 * 30522 * 100)  # 100 MiniLM rows
        fresh.prepare()
        fresh.prepare()  # once
        assert decoded == [100]
    finally:
        fresh.close()
    whole = LocalEmbedder(None, embedder._models_dir, threads=1)
    try:
        decoded.clear()
        real_whole = whole._decode
        monkeypatch.setattr(
            whole, "_decode", lambda llm, seqs: decoded.extend(map(len, seqs)) or real_whole(llm, seqs)
        )
        monkeypatch.setattr(local, "PREPARE_BYTES", default)
        whole.prepare()
        assert decoded == [512]  # MiniLM's whole window fits the default budget
    finally:
        whole.close()


def test_threads_share_one_model(embedder: LocalEmbedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    expected = embedder.embed(SENTENCES)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda s: embedder.embed([s])[0], SENTENCES * 3))
    np.testing.assert_allclose(np.asarray(results), np.concatenate([expected] * 3), atol=1e-5)


def test_every_decode_runs_on_the_embedders_one_thread(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenMP keeps a thread team per calling thread: callers from a pool must not each wake their own."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    seen: list[str] = []
    real = embedder._decode

    def recorded(llm: Any, sequences: list[list[int]]) -> Any:
        seen.append(threading.current_thread().name)
        return real(llm, sequences)

    monkeypatch.setattr(embedder, "_decode", recorded)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda s: embedder.embed([s]), SENTENCES * 2))
    embedder.embed(SENTENCES[:1])  # and from this thread
    assert len(seen) == 9 and len(set(seen)) == 1 and seen[0].startswith("mnemo-llama"), seen


def test_a_query_is_decoded_on_one_thread_and_a_chunk_on_every_thread(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads wait for each other at every barrier of a forward pass: for a few tokens that costs
    more than the second thread saves (mnemo.embeddings.local.ONE_THREAD_TOKENS)."""
    import llama_cpp

    from mnemo.embeddings.local import ONE_THREAD_TOKENS

    embedder.embed(["load the model once"])
    ctx = embedder._load()._ctx
    seen: list[int] = []
    real = ctx.decode

    def recorded(batch: Any) -> Any:
        seen.append(int(llama_cpp.llama_n_threads(ctx.ctx)))
        return real(batch)

    monkeypatch.setattr(ctx, "decode", recorded)
    chunk = " ".join(["Cats purr and nap in the warm afternoon sun."] * 8)
    assert len(embedder.token_windows("deploy staging")[0]) <= ONE_THREAD_TOKENS
    assert len(embedder.token_windows(chunk)[0]) > ONE_THREAD_TOKENS
    short, _, short_again = (
        embedder.embed([text])[0] for text in ("deploy staging", chunk, "deploy staging")
    )
    assert seen == [1, 2, 1]
    np.testing.assert_allclose(short, short_again, atol=1e-6)


def test_user_gguf_path_is_used_as_is(embedder: LocalEmbedder, tmp_path: Path) -> None:
    path, _ = embedder._resolve()
    copy = tmp_path / "my-model.gguf"
    copy.write_bytes(path.read_bytes())
    settings = EmbeddingSettings(provider="local", model_path=str(copy), threads=1)
    other = build_embedder(settings, cache_dir=tmp_path / "cache")
    try:
        assert other.model == "my-model@" + embedder.model.split("@")[1]
        np.testing.assert_allclose(other.embed(SENTENCES[:2]), embedder.embed(SENTENCES[:2]), atol=1e-4)
    finally:
        other.close()
    with pytest.raises(EmbeddingError, match="no such file"):
        build_embedder(EmbeddingSettings(provider="local", model_path=str(tmp_path / "nope.gguf")))


def test_loading_and_embedding_write_nothing_to_stdout_or_stderr(tmp_path: Path) -> None:
    """The LSP server speaks JSON-RPC on stdout: llama.cpp must not print there (nor on stderr)."""
    code = (
        "from pathlib import Path\n"
        "from mnemo.config import EmbeddingSettings\n"
        "from mnemo.embeddings import build_embedder\n"
        f"e = build_embedder(EmbeddingSettings(threads=1), cache_dir=Path({str(tmp_path)!r}))\n"
        "v = e.embed(['hello world'])\n"
        "assert v.shape == (1, 384)\n"
        "e.close()\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "server")
    env_path = {"PYTHONPATH": src + (":" + sys.path[0] if sys.path[0] else "")}
    import os

    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env_path},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ""
    assert done.stderr == ""


def test_a_decode_of_a_model_closed_meanwhile_is_refused_not_run(tmp_path: Path) -> None:
    """A search that had loaded the model when the server closed it (shutdown) went on to decode with
    the freed llama.cpp context on a new decode thread: a crash in native code. It gets an error now,
    and the embedder loads the model again for the next text."""
    from mnemo.embeddings.base import EmbeddingError

    own = build_embedder(EmbeddingSettings(provider="local", threads=2), cache_dir=tmp_path)
    assert isinstance(own, LocalEmbedder)
    try:
        llm = own._load()
        tokens = llm.tokenize(b"hello", add_bos=True, special=False)
        own.close()  # between the search's load and its decode
        with pytest.raises(EmbeddingError, match="closed"):
            own._on_decode_thread(lambda: own._decode(llm, [tokens]))
        assert own.embed(["hello"]).shape[0] == 1
    finally:
        own.close()
