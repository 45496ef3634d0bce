"""The typed results that cross the index-sharing socket (:mod:`mnemo.memory.sharing`), as plain JSON
and back into the same types: a follower's search returns the :class:`SearchOutcome` the writer made.

Not the wire format of the fronts (mnemo.wire, camelCase): field names are the dataclasses' own, so a
field added to a result crosses the socket without a change here. A hit's ``focus`` (the ranking's
internal view of its lines) stays with the writer: a rebuilt hit has none.

A decoder imports only its own types: the command line that prints a running server's search (the
daemon's client) loads the search results' module, not the status's, the feedback's or the index API's
(~20 ms of the client's ~0.12 s of CPU).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from mnemo.errors import IndexUnavailable
from mnemo.search.results import ScoreParts, SearchHit, SearchOutcome

if TYPE_CHECKING:
    from mnemo.memory.status import IndexStatus
    from mnemo.memory.turns import FeedbackResult


def encode_outcome(outcome: SearchOutcome) -> dict[str, Any]:
    return asdict(replace(outcome, results=[replace(hit, focus=None) for hit in outcome.results]))


def decode_outcome(data: dict[str, Any]) -> SearchOutcome:
    try:
        hits = [
            SearchHit(**{**hit, "parts": ScoreParts(**hit["parts"]), "focus": None})
            for hit in data["results"]
        ]
        return SearchOutcome(**{**data, "results": hits})
    except (KeyError, TypeError) as exc:
        raise _skew(exc) from exc


def encode_status(status: IndexStatus) -> dict[str, Any]:
    return asdict(status)


def decode_status(data: dict[str, Any]) -> IndexStatus:
    from mnemo.index.api import FileProblem
    from mnemo.memory.status import IndexStatus, SyncProgress, VectorProgress

    try:
        return IndexStatus(
            **{
                **data,
                "progress": SyncProgress(**data["progress"]),
                "vectors": VectorProgress(**data["vectors"]),
                "file_problems": [FileProblem(**p) for p in data["file_problems"]],
            }
        )
    except (KeyError, TypeError) as exc:
        raise _skew(exc) from exc


def _skew(exc: Exception) -> IndexUnavailable:
    return IndexUnavailable(
        f"the index writer (another mnemo process) answered in a form this version cannot read ({exc}); "
        "restart the editor's server or the gateway so both run the same mnemo"
    )


def encode_feedback(result: FeedbackResult) -> dict[str, Any]:
    return asdict(result)


def decode_feedback(data: dict[str, Any]) -> FeedbackResult:
    from mnemo.index.feedback import RetrievedChunk
    from mnemo.memory.turns import FeedbackResult

    try:
        return FeedbackResult(**{**data, "chunks": [RetrievedChunk(**c) for c in data["chunks"]]})
    except (KeyError, TypeError) as exc:
        raise _skew(exc) from exc
