"""Composition root: the only place that reads configuration and wires the core together."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from mnemo.config import ConfigProblem, Settings, load_settings
from mnemo.embeddings import build_embedder
from mnemo.memory_service import MemoryService
from mnemo.workspace.layout import Workspace

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings
    problems: list[ConfigProblem]
    workspace: Workspace
    memory: MemoryService

    def close(self) -> None:
        self.memory.close()


def build_services(root: Path, *, provider: str | None = None) -> Services:
    """Read ``root/mnemo.toml`` once and build the services. Nothing heavy loads here."""
    settings, problems = load_settings(root)
    for problem in problems:
        log.warning("%s", problem)
    if provider is not None:
        settings.embedding.provider = provider  # type: ignore[assignment]
    index_dir = settings.index.dir
    workspace = Workspace(
        root,
        ignore=[*settings.index.ignore, index_dir],
        extra_paths=settings.index.extra_paths,
        include_sessions=settings.index.include_sessions,
    )
    embedder = build_embedder(settings.embedding)
    memory = MemoryService(workspace, settings, embedder, problems)
    return Services(settings, problems, workspace, memory)
