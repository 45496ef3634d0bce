"""The safetensors -> GGUF converter for the bundled all-MiniLM-L6-v2 (no llama.cpp needed)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from mnemo.embeddings.gguf_convert import (
    default_gguf_path,
    ensure_default_gguf,
    read_sidecar,
    sha256_file,
    verify_gguf,
)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return ensure_default_gguf(tmp_path_factory.mktemp("models"))


def field(reader: gguf.GGUFReader, key: str) -> object:
    return reader.fields[key].contents()


def test_metadata_and_vocab(converted: tuple[Path, str]) -> None:
    path, digest = converted
    assert path == default_gguf_path(path.parent)
    assert sha256_file(path) == digest == read_sidecar(path)
    reader = gguf.GGUFReader(str(path))
    assert field(reader, "general.architecture") == "bert"
    assert field(reader, "bert.context_length") == 512
    assert field(reader, "bert.embedding_length") == 384
    assert field(reader, "bert.feed_forward_length") == 1536
    assert field(reader, "bert.block_count") == 6
    assert field(reader, "bert.attention.head_count") == 12
    assert field(reader, "bert.attention.causal") is False
    assert field(reader, "bert.pooling_type") == int(gguf.PoolingType.MEAN)
    assert field(reader, "general.file_type") == int(gguf.LlamaFileType.MOSTLY_F16)
    assert field(reader, "tokenizer.ggml.model") == "bert"
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert isinstance(tokens, list) and len(tokens) == 30522
    assert tokens[0] == "[PAD]" and tokens[101] == "[CLS]" and tokens[1] == "[unused0]"
    assert tokens[1996] == "\u2581the"  # whole words get the phantom space
    assert "##ing" not in tokens and "ing" in tokens  # continuation pieces lose "##"
    types = field(reader, "tokenizer.ggml.token_type")
    assert isinstance(types, list) and types[101] == int(gguf.TokenType.CONTROL)
    assert types[1996] == int(gguf.TokenType.NORMAL)
    assert field(reader, "tokenizer.ggml.bos_token_id") == 101
    assert field(reader, "tokenizer.ggml.seperator_token_id") == 102
    assert field(reader, "tokenizer.ggml.unknown_token_id") == 100
    assert field(reader, "tokenizer.ggml.padding_token_id") == 0
    assert field(reader, "tokenizer.ggml.mask_token_id") == 103


def test_tensors(converted: tuple[Path, str]) -> None:
    import zipfile

    from safetensors.numpy import load

    from mnemo.embeddings.gguf_convert import default_model_zip

    reader = gguf.GGUFReader(str(converted[0]))
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 5 + 6 * 16
    assert not any("pooler" in name or "position_ids" in name for name in tensors)
    for name, tensor in tensors.items():
        if name.startswith(("position_embd.", "token_types.")) or len(tensor.shape) == 1:
            assert tensor.tensor_type == gguf.GGMLQuantizationType.F32, name
        else:
            assert tensor.tensor_type == gguf.GGMLQuantizationType.F16, name
    # values survive the trip (through F16)
    with zipfile.ZipFile(default_model_zip()) as archive:
        source = load(archive.read("model.safetensors"))
    q = np.asarray(tensors["blk.3.attn_q.weight"].data, dtype=np.float32)
    np.testing.assert_allclose(q, source["encoder.layer.3.attention.self.query.weight"], atol=1e-3)
    bias = np.asarray(tensors["blk.0.ffn_up.bias"].data)
    np.testing.assert_array_equal(bias, source["encoder.layer.0.intermediate.dense.bias"])


def test_corrupt_cache_is_reconverted_and_output_is_deterministic(
    converted: tuple[Path, str], tmp_path: Path
) -> None:
    path, digest = ensure_default_gguf(tmp_path)
    assert digest == converted[1]  # same bytes every time: cache keys stay stable
    assert ensure_default_gguf(tmp_path) == (path, digest)  # reused, not rewritten
    with path.open("r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xff\xfe\xfd")
    assert verify_gguf(path) is None
    again, digest2 = ensure_default_gguf(tmp_path)
    assert again == path and digest2 == digest and sha256_file(path) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".sha256"]  # no temp left
