"""What the command groups share: the composition root's services for the workspace a command names."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnemo.services import Services


def workspace_services(args: argparse.Namespace) -> Services:
    """:func:`mnemo.services.build_services` for ``args.workspace`` (nothing heavy loads), its
    configuration problems said once on stderr; the caller closes it."""
    from mnemo.services import build_services

    services = build_services(args.workspace.resolve())
    for problem in services.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return services
