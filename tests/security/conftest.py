"""Fixtures of the network tests: loopback sites for the allowed and denied names, and a TLS one.

``tls_site`` writes its CA certificate into the ``ws`` fixture of the test module that asks for it."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.sites import Site


@pytest.fixture
def sites() -> Iterator[tuple[Site, Site]]:
    allowed, denied = Site("allowed"), Site("denied")
    for site in (allowed, denied):
        threading.Thread(target=site.serve_forever, daemon=True).start()
    yield allowed, denied
    for site in (allowed, denied):
        site.shutdown()
        site.server_close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for allowed.test, denied.test and *.wild.test."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=allowed.test",
            "-addext",
            "subjectAltName=DNS:allowed.test,DNS:denied.test,DNS:*.wild.test",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_site(certificate: tuple[Path, Path], ws: Path) -> Iterator[Site]:
    """An HTTPS server for the names of the certificate, whose CA the sandbox finds as ``ca.pem``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    (ws / "ca.pem").write_bytes(certificate[0].read_bytes())
    site = Site("tls", context)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    yield site
    site.shutdown()
    site.server_close()
