"""Text utilities shared by indexing and search."""

from mnemo.text.terms import TERMS_VERSION, index_terms, query_terms, terms_string, token_set

__all__ = ["TERMS_VERSION", "index_terms", "query_terms", "terms_string", "token_set"]
