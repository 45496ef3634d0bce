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

from mnemo.secrets import redact_text, scan_text
from mnemo.secrets.views import scan_disguised

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
    findings = scan_text(text)
    findings += scan_disguised(text, findings)
    if not findings:
        return text, 0
    return redact_text(text, findings, PLACEHOLDER), len(findings)


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
