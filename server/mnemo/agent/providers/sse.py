"""Server-sent events over httpx: ``event:``/``data:`` fields, one event per blank-line-terminated block."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from .base import ProviderError


def iter_sse(response: httpx.Response) -> Iterator[tuple[str, str]]:
    """(event name, data) for each event of a streamed response; data lines are joined with newlines."""
    event, data = "", list[str]()
    for line in response.iter_lines():
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", list[str]()
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data:
        yield event or "message", "\n".join(data)


def raise_for_status(response: httpx.Response, what: str) -> None:
    """Turn an HTTP error into a ProviderError with the endpoint's own message (never the request headers)."""
    if response.status_code < 400:
        return
    try:
        body = response.read().decode("utf-8", "replace")
    except httpx.HTTPError:
        body = ""
    detail = body[:500]
    try:
        parsed: Any = json.loads(body)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and error.get("message"):
            detail = str(error["message"])
        elif isinstance(error, str):
            detail = error
    except ValueError:
        pass
    raise ProviderError(f"{what} answered HTTP {response.status_code}: {detail}".rstrip(": "))
