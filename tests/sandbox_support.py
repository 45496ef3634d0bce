"""Whether bubblewrap can confine a command on this machine, for the tests that need the real sandbox."""

from __future__ import annotations

import functools

from mnemo.policy import SandboxUnavailable
from mnemo.policy import sandbox as sb


@functools.cache
def bwrap_works() -> bool:
    try:
        sb._bwrap()
    except SandboxUnavailable:
        return False
    return True
