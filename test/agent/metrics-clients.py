#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Clients of the agent's metrics listener for metrics-listener.sh, run in the
scenario's host netns: idle connections held open (slow clients that never
send a request), churn of many connection attempts, and scrapes counted.
Each subcommand prints one JSON object on stdout; nothing else.

  hold HOST PORT SOURCES PER_SOURCE SECONDS
      PER_SOURCE idle connections from each source address (comma-separated,
      all local: 127.0.0.2,127.0.0.3,...), held SECONDS without a byte sent;
      says how many connected, how many the server closed (and how many of
      those within a second of connecting: refused by a limit), how many were
      still open at the end. All are closed on exit.
  attempts HOST PORT SOURCES N MAX_HELD SECONDS
      N connection attempts, the sources taken in turn, none sending a byte;
      at most MAX_HELD held at once (the oldest closed to make room), the last
      MAX_HELD held SECONDS more: the churn of a hostile pod.
  scrape HOST PORT N TIMEOUT
      N scrapes of /metrics one after another, each given TIMEOUT seconds;
      says how many were answered (HTTP 200 with the exporter's own
      families) and how long the slowest answered one took.
"""
import json
import selectors
import socket
import sys
import time


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def dial(host, port, source):
    """A non-blocking connect from source; the socket, or None when refused at once."""
    s = socket.socket(family(host), socket.SOCK_STREAM)
    s.setblocking(False)
    if source:
        s.bind((source, 0))
    err = s.connect_ex((host, port))
    if err not in (0, 115):  # EINPROGRESS
        s.close()
        return None
    return s


class Held:
    """Idle connections watched for the server closing them."""

    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.at = {}  # socket -> when it was opened
        self.closed = 0
        self.closed_fast = 0

    def add(self, s):
        self.at[s] = time.monotonic()
        self.sel.register(s, selectors.EVENT_READ)

    def drop(self, s):
        self.sel.unregister(s)
        del self.at[s]
        s.close()

    def poll(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0 or not self.at:
                return
            for key, _ in self.sel.select(min(left, 0.2)):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if data:
                    continue  # an answer to a request never sent: not expected, not counted
                if time.monotonic() - self.at[s] < 1.0:
                    self.closed_fast += 1
                self.closed += 1
                self.drop(s)

    def close_all(self):
        for s in list(self.at):
            self.drop(s)


def hold(host, port, sources, per_source, seconds):
    h = Held()
    opened = refused = 0
    for src in sources.split(","):
        for _ in range(per_source):
            s = dial(host, port, src)
            if s is None:
                refused += 1
                continue
            opened += 1
            h.add(s)
    h.poll(seconds)
    out = {"opened": opened, "refused": refused, "closed_by_server": h.closed,
           "closed_within_1s": h.closed_fast, "still_open": len(h.at)}
    h.close_all()
    return out


def attempts(host, port, sources, n, max_held, seconds):
    h = Held()
    srcs = sources.split(",")
    opened = refused = 0
    t0 = time.monotonic()
    for i in range(n):
        while len(h.at) >= max_held:
            h.drop(min(h.at, key=h.at.get))
        s = dial(host, port, srcs[i % len(srcs)])
        if s is None:
            refused += 1
        else:
            opened += 1
            h.add(s)
        if i % 50 == 49:
            h.poll(0.01)
    churn = time.monotonic() - t0
    h.poll(seconds)
    out = {"attempts": n, "connected": opened, "refused": refused,
           "closed_by_server": h.closed, "churn_seconds": round(churn, 2),
           "still_open": len(h.at)}
    h.close_all()
    return out


def scrape(host, port, n, timeout):
    answered = 0
    slowest = 0.0
    errors = []
    name = "[%s]" % host if ":" in host else host
    req = ("GET /metrics HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n"
           % (name, port)).encode()
    for _ in range(n):
        t0 = time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=timeout) as s:
                s.settimeout(max(0.01, timeout - (time.monotonic() - t0)))
                s.sendall(req)
                body = b""
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    body += b
                    s.settimeout(max(0.01, timeout - (time.monotonic() - t0)))
            if body.startswith(b"HTTP/1.1 200") and b"hpn_rdma_agent_build_info" in body:
                answered += 1
                slowest = max(slowest, time.monotonic() - t0)
            else:
                errors.append(body[:60].decode(errors="replace"))
        except OSError as e:
            errors.append(type(e).__name__ + ": " + str(e))
    return {"scrapes": n, "answered": answered, "slowest_answered_s": round(slowest, 3),
            "errors": errors[:3]}


def main(argv):
    cmd, host, port = argv[1], argv[2], int(argv[3])
    if cmd == "hold":
        out = hold(host, port, argv[4], int(argv[5]), float(argv[6]))
    elif cmd == "attempts":
        out = attempts(host, port, argv[4], int(argv[5]), int(argv[6]), float(argv[7]))
    elif cmd == "scrape":
        out = scrape(host, port, int(argv[4]), float(argv[5]))
    else:
        sys.exit("usage: see the header of " + argv[0])
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
