"""Hybrid memory search: candidates, ranking parts, decay, MMR."""
