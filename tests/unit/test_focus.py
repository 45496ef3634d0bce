"""The focus line of a chunk (mnemo.search.lines.focus) against the plain definition: over random chunks
and queries, the same line, the same query terms and the same ties as summing each line's query-term
weight from the weights themselves; the same redundancy (MMR) and updates (supersede) between them as
their definitions; a chunk's content lines are kept and given back unchanged."""

from __future__ import annotations

import random

from mnemo.search import lines
from mnemo.search.ranking import jaccard
from mnemo.text.terms import token_set

WORDS = [f"w{i}" for i in range(40)]


def _plain_focus(
    chunk: tuple[tuple[int, frozenset[str]], ...], weights: dict[str, float]
) -> lines.Focus | None:
    """The definition, as first written: every line's covered weight, the best and the lines tied with it."""
    scored = [(sum(weights[t] for t in terms & weights.keys()), offset, terms) for offset, terms in chunk]
    best = max((m for m, _, _ in scored), default=0.0)
    if best <= 0:
        return lines.Focus(chunk[0][0], frozenset(), chunk[0][1]) if len(chunk) == 1 else None
    tied = [(offset, terms) for m, offset, terms in scored if m >= best - 1e-9]
    matched = frozenset().union(*(t & weights.keys() for _, t in tied))
    return lines.Focus(tied[0][0], matched, tied[0][1], tuple(t for _, t in tied[1:]))


def _plain_redundancy(a: lines.Focus, b: lines.Focus) -> float:
    if not a.matched <= b.matched:
        return 0.0
    return min(max(jaccard(x, y) for y in (b.tokens, *b.ties)) for x in (a.tokens, *a.ties))


def _plain_updates(
    old: lines.Focus | None, new: lines.Focus | None, weights: dict[str, float], floor: float
) -> bool:
    if old is None or new is None or old.ambiguous or new.ambiguous:
        return False
    overlap = jaccard(old.tokens, new.tokens)
    if not old.matched:
        return overlap >= lines.SAME_LINE
    return old.matched <= new.matched and lines.mass(old, weights) >= floor and overlap >= lines.LINE_OVERLAP


def _chunk(rng: random.Random) -> str:
    rows = [" ".join(rng.choices(WORDS, k=rng.randint(1, 6))) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.3:
        rows.insert(0, "# heading " + rng.choice(WORDS))
    return "\n".join(row if rng.random() > 0.1 else "" for row in rows)


def _candidates(
    rng: random.Random, count: tuple[int, int], words: int
) -> tuple[list[tuple[tuple[int, frozenset[str]], ...]], dict[str, float]]:
    """A search's random candidates: their content lines, and a random query's term weights over them."""
    chunks = [lines.content_lines(_chunk(rng)) for _ in range(rng.randint(*count))]
    query = token_set(" ".join(rng.choices(WORDS, k=rng.randint(1, words))))
    return chunks, lines.term_weights(query, chunks)


def test_the_focus_is_the_plain_definitions_over_random_chunks() -> None:
    rng = random.Random(3)
    ambiguous = missing = 0
    for _ in range(300):
        chunks, weights = _candidates(rng, (1, 12), 5)
        for chunk in chunks:
            found = lines.focus(chunk, weights)
            assert found == _plain_focus(chunk, weights)
            ambiguous += bool(found and found.ambiguous)
            missing += found is None
    assert ambiguous > 50 and missing > 50, "ties and chunks without a focus both drawn"


def test_redundancy_and_updates_between_foci_are_their_definitions() -> None:
    rng = random.Random(4)
    checked = updating = 0
    for _ in range(200):
        chunks, weights = _candidates(rng, (2, 10), 4)
        foci = [lines.focus(chunk, weights) for chunk in chunks]
        floor = lines.update_floor(foci, weights)
        for a in foci:
            for b in foci:
                if a is not None and b is not None:
                    assert lines.redundancy(a, b) == _plain_redundancy(a, b)
                    checked += 1
                found = lines.updates(a, b, weights, floor)
                assert found == _plain_updates(a, b, weights, floor)
                updating += found
    assert checked > 1000 and updating > 20, "pairs that update drawn too"


def test_a_chunks_content_lines_are_kept_and_given_back_unchanged() -> None:
    text = "# Heading\n\n- first line w1\n   \n- second line w2\n"
    first = lines.content_lines(text)
    assert [offset for offset, _ in first] == [2, 4]
    assert lines.content_lines(text) is first
    assert first[1][1] == token_set("- second line w2")
