"""sha256 of large files (model weights), remembered by path, size and mtime so it is computed once."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached_sha256(path: Path, memo_file: Path) -> str:
    """sha256 of ``path``, remembered in the JSON ``memo_file``; raises OSError if the file is unreadable."""
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    memo: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(memo_file.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            memo = {str(k): str(v) for k, v in loaded.items()}
    if key in memo:
        return memo[key]
    digest = sha256_file(path)
    memo[key] = digest
    with contextlib.suppress(OSError):
        memo_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo_file.with_name(f"{memo_file.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(memo, indent=1), encoding="utf-8")
        os.replace(tmp, memo_file)
    return digest
