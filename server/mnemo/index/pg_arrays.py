"""Integer arrays from PostgreSQL straight into NumPy: postings come back as one ``array_agg`` per term."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import psycopg
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format


class _IntArray(Loader):
    """A binary ``int8[]``/``int4[]`` (one dimension, no NULLs) as an int64 NumPy array, without a Python
    object per element (a common term's postings run to tens of thousands)."""

    format = Format.BINARY
    element = ">i8"

    def load(self, data: Buffer) -> np.ndarray:
        buf = bytes(data)
        ndim = struct.unpack_from(">i", buf, 0)[0]
        if ndim == 0:
            return np.zeros(0, np.int64)
        count = struct.unpack_from(">i", buf, 12)[0]
        items = np.frombuffer(buf, np.dtype([("size", ">i4"), ("value", self.element)]), count, 12 + 8 * ndim)
        return items["value"].astype(np.int64)


class _Int4Array(_IntArray):
    element = ">i4"


_INT8_ARRAY, _INT4_ARRAY = 1016, 1007  # built-in type oids


def array_cursor(con: psycopg.Connection) -> psycopg.Cursor[Any]:
    """A binary cursor that loads ``int8[]`` and ``int4[]`` as int64 NumPy arrays."""
    cur = con.cursor(binary=True)
    cur.adapters.register_loader(_INT8_ARRAY, _IntArray)
    cur.adapters.register_loader(_INT4_ARRAY, _Int4Array)
    return cur
