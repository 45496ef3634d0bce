"""What the network allowlist adds to a sandboxed command: a run of ``true`` with no network, and with
``policy.network_domains`` (the filtering proxy and the in-sandbox forwarder started for the run).

    python benchmarks/bench_sandbox_net.py [--runs 20]

Needs bubblewrap (as the sandbox does). Prints the median and p90 wall time of each and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from mnemo.policy.netproxy import NetworkAllowlist
from mnemo.policy.sandbox import run_sandboxed


def _times(workspace: Path, runs: int, allowlist: NetworkAllowlist | None) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        result = run_sandboxed("true", workspace, network_domains=allowlist)
        out.append(time.perf_counter() - start)
        assert result.exit_code == 0, result.stderr
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
        print(f"load before {os.getloadavg()[0]:.1f}")
        for name, allow in (("no network", None), ("allowlist", NetworkAllowlist(("example.org",)))):
            t = _times(ws, args.runs, allow)
            p90 = t[int(0.9 * (len(t) - 1))]
            print(
                f"{name:>10}: median {statistics.median(t) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms ({len(t)} runs)"
            )
        print(f"load after {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
