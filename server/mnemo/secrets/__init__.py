"""Secret scanning for memory files: find, locate (line/column ranges) and redact secrets.

Rules are data (``data/*.json``): gitleaks' public rule set converted for Python ``regex`` (MIT,
see ``data/LICENSE-gitleaks``) plus mnemo's own keyword, URL-credential, connection-string and PEM
rules and an allowlist of placeholders and documented example keys. What only a percent-decoded,
look-alike-folded or unwrapped view of a text shows is found by :mod:`mnemo.secrets.views` (the outbound
filter's; not imported here: its tables cost every other importer ~9 ms).
"""

from mnemo.secrets.rules import RuleSet, default_ruleset, shannon_entropy
from mnemo.secrets.scanner import SecretFinding, finding_at, mask, redact_text, scan_text, utf16_col

__all__ = [
    "RuleSet",
    "SecretFinding",
    "default_ruleset",
    "finding_at",
    "mask",
    "redact_text",
    "scan_text",
    "shannon_entropy",
    "utf16_col",
]
