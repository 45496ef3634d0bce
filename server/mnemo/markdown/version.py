"""The chunker's version, apart from the chunker: every index records it (:mod:`mnemo.index.identity`),
and a read that only compares it (a one-shot search) need not load the chunker and the front matter
parser."""

CHUNKER_VERSION = "3"
"""2: a heading-only section opens the next section's chunk instead of being a chunk of its own. 3: a ``#``
or fence line inside a multi-line HTML comment (``<!--`` to ``-->``) is text, not a heading or a fence.
Raise it with any change to :mod:`mnemo.markdown.chunker` that gives other chunks: indexes are rebuilt."""
