"""Secret scanning for memory files: find, locate (line/column ranges) and redact secrets.

Rules are data (``data/*.json``): gitleaks' public rule set converted for Python ``regex`` (MIT,
see ``data/LICENSE-gitleaks``) plus mnemo's own keyword, URL-credential, connection-string and PEM
rules and an allowlist of placeholders and documented example keys. ``scan_disguised`` (``views``) finds
what only a percent-decoded, look-alike-folded or unwrapped view of a text shows.
"""

from mnemo.secrets.rules import RuleSet, default_ruleset, shannon_entropy
from mnemo.secrets.scanner import SecretFinding, finding_at, mask, redact_text, scan_text, utf16_col
from mnemo.secrets.views import scan_disguised

__all__ = [
    "RuleSet",
    "SecretFinding",
    "default_ruleset",
    "finding_at",
    "mask",
    "redact_text",
    "scan_disguised",
    "scan_text",
    "shannon_entropy",
    "utf16_col",
]
