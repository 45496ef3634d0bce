"""Markdown handling: chunking for the index (:mod:`mnemo.markdown.chunker`, versioned by
:mod:`mnemo.markdown.version`) and front matter of skills and notes (:mod:`mnemo.markdown.frontmatter`).

Nothing is imported here: a reader that only compares the chunker's version loads neither module."""
