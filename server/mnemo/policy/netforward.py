"""The in-sandbox half of the network allowlist: 127.0.0.1:PORT relayed to the proxy's Unix socket.

A sandboxed command with ``policy.network_domains`` runs with its own network namespace (loopback only).
bubblewrap starts this file first, as ``python3 -I -S netforward.py PORT SOCKET CMD...``: it binds
``127.0.0.1:PORT`` (before the command starts, so no connection is lost), forks a relay that copies
each connection to the filtering proxy's Unix socket (:mod:`mnemo.policy.netproxy`, outside the
sandbox), and ``exec``\\ s the command in its own place, so the command keeps the sandbox's PID, exit code
and output. The relay dies with the sandbox's PID namespace when the command ends.

Standard library only, and no mnemo import: it runs under the system's Python inside the sandbox, where
mnemo's own environment may be hidden (a virtualenv in the home folder). Written for Python 3.8 and later.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading


def pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until EOF, then half-close ``dst`` (the other direction goes on)."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def splice(client: socket.socket, upstream: socket.socket) -> None:
    """Copy both ways until both directions end (the proxy outside the sandbox relays with it too)."""
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()


def _relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    splice(client, upstream)
    client.close()
    upstream.close()


def serve(listener: socket.socket, path: str) -> None:
    """Accept forever; one thread per connection."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        sys.stderr.write("usage: netforward.py PORT SOCKET COMMAND...\n")
        return 2
    port, path, command = int(argv[0]), argv[1], argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:  # the relay: detached from the command's output, so it never holds the pipes open
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            serve(listener, path)
        finally:
            os._exit(0)
    listener.close()
    os.execv(command[0], command)
    return 127  # not reached: execv raises on failure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
