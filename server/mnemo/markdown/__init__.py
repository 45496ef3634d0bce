"""Markdown handling: chunking for the index and front matter of skills and notes."""

from mnemo.markdown.chunker import CHUNKER_VERSION, Chunk, approx_tokens, chunk_markdown
from mnemo.markdown.frontmatter import FrontMatter, parse_front_matter

__all__ = ["CHUNKER_VERSION", "Chunk", "FrontMatter", "approx_tokens", "chunk_markdown", "parse_front_matter"]
