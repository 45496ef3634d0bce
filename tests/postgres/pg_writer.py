"""``python -m tests.postgres.pg_writer ROOT STAGE``: ``mnemo index`` that stops inside a transaction.

STAGE ``file``: inside the first file's transaction (an incremental sync, after its chunks and postings
are written, before its ``files`` row); ``build``: inside the first batch of a full build. It prints
``inside`` and waits to be killed, as a writer killed mid-transaction (power cut, OOM kill) would be.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from mnemo.index import pg_store


def _stop_after(name: str) -> None:
    original = getattr(pg_store.PgStore, name)

    def stopping(self: pg_store.PgStore, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        print("inside", flush=True)
        time.sleep(120)
        return result

    setattr(pg_store.PgStore, name, stopping)


def main() -> int:
    root, stage = sys.argv[1], sys.argv[2]
    _stop_after("upsert_file" if stage == "file" else "insert_chunks")
    from mnemo.cli.main import main as mnemo

    return mnemo(["index", "--workspace", root, *sys.argv[3:]])


if __name__ == "__main__":
    sys.exit(main())
