"""A full build of the fts tables (:func:`mnemo.index.fts.rebuild`): NumPy and Arrow work, kept out of
:mod:`mnemo.index.fts`, which every read imports.

What ``create_fts_index`` would find (tests check it), in a sixth of its CPU time: the terms are split
and numbered in Arrow, each distinct token is stemmed once (the extension splits with a regex and stems
every occurrence), occurrences are counted into postings in NumPy, and they go in as Arrow arrays. Term
ids may be numbered in another order than the extension's; nothing depends on their order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

try:  # Arrow's compute functions by name: `pyarrow.compute` would wrap all ~300 of them first (~35 ms)
    from pyarrow._compute import call_function as _call
except ImportError:  # pragma: no cover - a pyarrow that moved it
    from pyarrow.compute import call_function as _call

from mnemo.index.batches import arrow_array, arrow_view
from mnemo.index.duckdb_native import duckdb
from mnemo.text.stems import porter_stem_list

TABLES = ("docs", "dict", "postings", "stats")


def fill(con: duckdb.DuckDBPyConnection, schema: str) -> None:
    """Replace the rows of the fts tables in ``schema`` with those of ``chunks.terms``."""
    got = con.execute("SELECT id, terms FROM chunks").to_arrow_table()
    doc_ids, tokens, vocabulary = _postings(got.column("terms"))
    stem_of, terms = _stems(vocabulary)
    lengths = np.bincount(doc_ids, minlength=got.num_rows).astype(np.int64)
    names = got.column("id").to_numpy()
    # Ordered by term: a search reads a few terms' rows, and DuckDB skips the row groups whose term ids
    # are out of its range (a one-shot search's BM25 over 2,000 notes: ~20% less time).
    term_docs, term_ids, counts = _counted(*_by_term(doc_ids, stem_of[tokens], len(terms)))
    new_docs = _table({"docid": np.arange(got.num_rows, dtype=np.int64), "name": names, "len": lengths})
    new_dict = _table(
        {
            "termid": np.arange(len(terms), dtype=np.int64),
            "term": terms,
            "df": np.bincount(term_ids, minlength=len(terms)).astype(np.int64),
        }
    )
    new_postings = _table(
        {
            "termid": term_ids.astype(np.int64),
            "name": names[term_docs].astype(np.int64),
            "tf": counts,
            "len": lengths[term_docs].astype(np.int32),
        }
    )
    for table in TABLES:
        con.execute(f"DELETE FROM {schema}.{table}")
    for table, columns, rows in (
        ("docs", "docid, name, len", new_docs),
        ("dict", "termid, term, df", new_dict),
        ("postings", "termid, name, tf, len", new_postings),
    ):
        with arrow_view(con, f"new_{table}", rows):
            con.execute(f"INSERT INTO {schema}.{table} ({columns}) SELECT * FROM new_{table}")
    # The extension's own statistics query (same division, same rounding).
    con.execute(
        f"INSERT INTO {schema}.stats SELECT count(docs.docid) AS num_docs, "
        f"sum(docs.len) / count(docs.len) AS avgdl FROM {schema}.docs AS docs"
    )


def _table(columns: dict[str, np.ndarray | pa.Array]) -> pa.Table:
    """An Arrow table of NumPy columns (:func:`mnemo.index.batches.arrow_array`) and Arrow ones."""
    return pa.table({k: arrow_array(v) if isinstance(v, np.ndarray) else v for k, v in columns.items()})


def _postings(texts: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """(document of each term occurrence, the occurrence as an index into the vocabulary, the vocabulary),
    occurrences in document order, documents numbered by row.

    The extension splits on ``\\s+`` and drops empty tokens; so does this, in Arrow (no Python string
    per occurrence). A terms string only has single spaces (see :mod:`mnemo.text.terms`)."""
    lists = _call("ascii_split_whitespace", [texts])
    tokens, docs = _call("list_flatten", [lists]), _call("list_parent_indices", [lists])
    kept = _call("not_equal", [tokens, pa.scalar("")])
    encoded = _call("dictionary_encode", [_call("filter", [tokens, kept])]).combine_chunks()
    doc_ids = _call("filter", [docs, kept]).to_numpy(zero_copy_only=False).astype(np.int32)
    return doc_ids, encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary


def _stems(vocabulary: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(term id of each vocabulary entry, the terms): tokens Porter-stemmed (:mod:`mnemo.text.stems`),
    once each."""
    if not len(vocabulary):
        return np.zeros(0, dtype=np.int32), pa.array([], pa.string())
    stems = pa.array(porter_stem_list(vocabulary.to_pylist()), pa.string())
    encoded = _call("dictionary_encode", [stems])
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary


def _by_term(doc_ids: np.ndarray, term_ids: np.ndarray, n_terms: int) -> tuple[np.ndarray, np.ndarray]:
    """The postings ordered by term, then by document: (documents, terms).

    ``doc_ids`` is in order, so a stable sort by term keeps each term's documents in order. It is a
    stable sort of 16-bit keys (the low half of the term id, then the high half when there are more than
    65,536 terms): NumPy sorts those by radix, twice as fast as sorting (document, term) pairs."""
    order = np.argsort((term_ids & 0xFFFF).astype(np.uint16), kind="stable")
    if n_terms > 0x10000:
        order = order[np.argsort((term_ids[order] >> 16).astype(np.uint16), kind="stable")]
    return doc_ids[order], term_ids[order]


def _counted(docs: np.ndarray, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct (document, term) pair once, with how often it occurs: (documents, terms, counts),
    from occurrences ordered by term then document (:func:`_by_term`), where a repeated pair is next to
    its twin. A term's document frequency is then how many pairs it has."""
    first = np.ones(len(terms), dtype=bool)
    first[1:] = (terms[1:] != terms[:-1]) | (docs[1:] != docs[:-1])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(terms))).astype(np.int32)
    return docs[starts], terms[starts], counts
