"""Reading a GGUF file's metadata up to the values mnemo needs (mnemo.embeddings.gguf_meta), checked
against gguf's own reader on files gguf's writer makes and on the converted MiniLM model."""

from __future__ import annotations

import threading
from pathlib import Path

import gguf
import numpy as np
import pytest

from mnemo.embeddings.base import EmbeddingError
from mnemo.embeddings.gguf_convert import ensure_default_gguf
from mnemo.embeddings.gguf_meta import DEFAULT_CONTEXT_LENGTH, GGUFError, context_length, metadata
from mnemo.embeddings.local import gguf_context_length


@pytest.fixture(scope="module")
def minilm_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled all-MiniLM-L6-v2 converted as mnemo converts it (no llama.cpp needed)."""
    return ensure_default_gguf(tmp_path_factory.mktemp("models"))[0]


def write_gguf(
    path: Path,
    *,
    arch: str = "llama",
    context: int | None = 4096,
    vocab_first: bool = False,
    endianess: gguf.GGUFEndian = gguf.GGUFEndian.LITTLE,
) -> Path:
    """A small GGUF file with one tensor, a 5,000-entry string vocabulary and arrays of numbers."""
    writer = gguf.GGUFWriter(str(path), arch, endianess=endianess)
    vocab = [f"tok{i}" for i in range(5000)]
    if vocab_first:  # the values wanted after the arrays: they must be skipped, not stopped at
        writer.add_token_list(vocab)
        writer.add_array("test.scores", [float(i) for i in range(100)])
    writer.add_uint32("test.count", 7)
    writer.add_string("test.name", "naïve ünïcode")
    writer.add_bool("test.flag", True)
    writer.add_float32("test.ratio", 0.5)
    writer.add_int64("test.big", -(2**40))
    if context is not None:
        writer.add_context_length(context)
    if not vocab_first:
        writer.add_token_list(vocab)
        writer.add_array("test.scores", [float(i) for i in range(100)])
    writer.add_tensor("weight", np.ones((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def gguf_reader_scalars(path: Path) -> dict[str, object]:
    """gguf's reading of every field that is not an array (arrays are None in :func:`metadata`)."""
    reader = gguf.GGUFReader(str(path))
    return {
        name: None if field.types[0] == gguf.GGUFValueType.ARRAY else field.contents()
        for name, field in reader.fields.items()
        if not name.startswith("GGUF.")
    }


@pytest.mark.parametrize("vocab_first", [False, True])
def test_every_pair_reads_as_gguf_reads_it(tmp_path: Path, vocab_first: bool) -> None:
    path = write_gguf(tmp_path / "m.gguf", vocab_first=vocab_first)
    ours = dict(metadata(path))
    theirs = gguf_reader_scalars(path)
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value) if isinstance(value, float) else ours[key] == value, key
    assert ours["test.name"] == "naïve ünïcode" and ours["test.big"] == -(2**40)
    assert ours["tokenizer.ggml.tokens"] is None  # an array: skipped
    assert context_length(path) == 4096


def test_big_endian_files_are_read(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "be.gguf", context=2048, endianess=gguf.GGUFEndian.BIG)
    assert context_length(path) == 2048
    assert dict(metadata(path))["test.count"] == 7


def test_a_model_without_a_context_length_gets_the_default(tmp_path: Path) -> None:
    assert context_length(write_gguf(tmp_path / "m.gguf", context=None)) == DEFAULT_CONTEXT_LENGTH


def test_the_converted_minilm_model_reads_as_gguf_reads_it(minilm_gguf: Path) -> None:
    assert dict(metadata(minilm_gguf)) == gguf_reader_scalars(minilm_gguf)
    assert context_length(minilm_gguf) == 512


def test_the_walk_stops_once_the_context_length_is_known(tmp_path: Path) -> None:
    """Files written by gguf's writer have it before the vocabulary: nothing after it is read."""
    path = write_gguf(tmp_path / "m.gguf")
    pairs = metadata(path)
    keys = []
    for key, _ in pairs:
        keys.append(key)
        if key == "llama.context_length":
            break
    assert "tokenizer.ggml.tokens" not in keys
    assert context_length(path) == 4096


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: b"not a model at all, just text" * 4,
        lambda data: data[:4] + (99).to_bytes(4, "little") + data[8:],  # an unknown version
        lambda data: data[:40],  # cut inside the first key
        lambda data: data[: len(data) // 3],  # cut inside the vocabulary
        lambda data: data[:24] + b"\xff" * 8 + data[32:],  # a key "longer" than the file
    ],
)
def test_a_broken_file_is_a_clear_error_quickly(tmp_path: Path, damage: object) -> None:
    good = write_gguf(tmp_path / "good.gguf", vocab_first=True).read_bytes()
    path = tmp_path / "bad.gguf"
    path.write_bytes(damage(good))  # type: ignore[operator]
    outcome: list[BaseException | int] = []

    def read() -> None:
        try:
            outcome.append(context_length(path))
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive(), "reading a damaged file did not end"
    assert len(outcome) == 1 and isinstance(outcome[0], GGUFError), outcome
    with pytest.raises(EmbeddingError, match="is not a readable GGUF model"):
        gguf_context_length(path)


def test_a_missing_file_is_an_embedding_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="is not a readable GGUF model"):
        gguf_context_length(tmp_path / "absent.gguf")
