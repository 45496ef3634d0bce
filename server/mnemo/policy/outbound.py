"""The outbound secret filter: text leaving the machine for a remote provider has its secrets redacted.

Every remote provider (the OpenAI-compatible embeddings endpoint, chat providers such as OpenAI or
Anthropic) calls :func:`redact_outbound` on each text it sends, whatever the host; the local llama.cpp
provider, which sends nothing anywhere, is exempt. Detection is :func:`mnemo.secrets.scan_text` (the
gitleaks-derived rules plus mnemo's keyword, URL-credential and PEM rules); each secret becomes
``<redacted:RULE_ID>`` so the model still sees that something was there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from mnemo.policy.outbound_views import views
from mnemo.secrets import scan_text

log = logging.getLogger(__name__)

PLACEHOLDER = "<redacted:{rule_id}>"


_INVISIBLE = dict.fromkeys(
    map(ord, "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff")
)
"""Characters that show nothing: one inside a key hid it from every rule (``ghp_ab\u200bcd…``), and a model
reads the key all the same. Text sent out loses them."""


def redact_outbound(text: str) -> tuple[str, int]:
    """``(text with every detected secret replaced, number of secrets replaced)``; invisible characters
    (zero-width spaces and joiners, soft hyphens) are dropped first."""
    if not text:
        return text, 0
    if not text.isascii():
        text = text.translate(_INVISIBLE)
    spans = [(f.start, f.end, f.rule_id) for f in scan_text(text)]
    for view in views(text):
        spans.extend((*view.original_span(f.start, f.end), f.rule_id) for f in scan_text(view.text))
    if not spans:
        return text, 0
    merged = _merged(spans)
    return _replaced(text, merged), len(merged)


def _merged(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Spans in order, overlapping ones as one (the first one's rule): one secret found in the text and
    in a view, or in two views, is replaced once and counted once."""
    out: list[tuple[int, int, str]] = []
    for start, end, rule_id in sorted(spans):
        if out and start < out[-1][1]:
            last = out[-1]
            out[-1] = (last[0], max(last[1], end), last[2])
        else:
            out.append((start, end, rule_id))
    return out


def _replaced(text: str, spans: list[tuple[int, int, str]]) -> str:
    parts: list[str] = []
    cursor = 0
    for start, end, rule_id in spans:
        parts += [text[cursor:start], PLACEHOLDER.format(rule_id=rule_id)]
        cursor = end
    parts.append(text[cursor:])
    return "".join(parts)


def redact_outbound_many(texts: Sequence[str], where: str = "remote provider") -> tuple[list[str], int]:
    """:func:`redact_outbound` over a batch; logs (without the values) how many secrets were held back."""
    out: list[str] = []
    total = 0
    for text in texts:
        clean, count = redact_outbound(text)
        out.append(clean)
        total += count
    if total:
        log.info("outbound filter: %d secret(s) redacted from text sent to %s", total, where)
    return out, total
