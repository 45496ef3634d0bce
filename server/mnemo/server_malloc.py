"""glibc malloc settings for mnemo's long-lived servers (the language server, the daemon, the gateway),
and :func:`release_freed_heap` after a large piece of work (a workspace diagnostics pass).

glibc gives each thread that allocates an arena of its own (up to 8 per core) and keeps what is freed
there for reuse; it also raises its mmap threshold after each large block is freed, so later large blocks
(NumPy matrices, llama.cpp buffers) come from those arenas too and their pages stay behind. A server's
threads (the event loop's pool, the embedding and decode threads, the index host) each held some: at
2,000 notes with the local model, 311-318 MB after 50 searches and a 344-350 MB peak, against 288-289 and
319 MB with two arenas and a fixed 1 MiB threshold (``python benchmarks/bench_lsp.py``, docs/benchmarks.md).

Settings a user gives in the environment (``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``, or any
``GLIBC_TUNABLES``) are left as they are; on a C library that is not glibc nothing is done.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
MMAP_THRESHOLD = 1 << 20
"""Blocks of 1 MiB and more are mapped on their own and go back to the kernel when freed."""

_USER_SETTINGS = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return None


def release_freed_heap() -> None:
    """Give the heap pages freed by a large piece of work back to the kernel (``malloc_trim``): glibc
    keeps them otherwise, and a long-lived server's RSS stays at that work's peak."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def tune_for_server() -> bool:
    """Apply the settings above to this process, as early as possible (before its threads allocate).
    True when they were applied."""
    if any(os.environ.get(name) for name in _USER_SETTINGS):
        return False
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = bool(mallopt(M_ARENA_MAX, ARENAS)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    if not applied:
        log.debug("glibc refused the server's malloc settings")
    return applied
