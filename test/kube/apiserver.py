#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for kube-apiserver's GET pod endpoint, and nothing more.

It serves GET /api/v1/namespaces/{ns}/pods/{name} from DIR/{ns}/{name}.json
over HTTPS on 127.0.0.1, plus the three discovery documents (/api, /apis,
/api/v1) that kubectl reads to map "pod" to that endpoint, so that a real
client checks the stand-in and the kubeconfig the tests use. No other path,
verb, watch, list or selector exists here. Test code only (test/kube/).

Authentication as kube-apiserver does it: a bearer token listed in the tokens
file (read on every request, so tests rotate tokens), or a client certificate
signed by the client CA (its CN is the user); otherwise 401 with a Status
object, as the API answers.

Listeners, each on an ephemeral port of 127.0.0.1, written to --ports as
"NAME PORT" lines once all listen:
  good       the server certificate (SAN IP:127.0.0.1, DNS:localhost)
  wrongname  a certificate of the same CA for another name
  otherca    a certificate for the right names from another CA
  closed     a port that was bound and closed again: nothing listens there

Faults of the pod endpoint, from the --mode file, read on every request; one
line "WHAT [COUNT [RETRY_AFTER]]". With a COUNT, the fault answers COUNT
requests and then the endpoint serves normally again (the file is rewritten
with the count left, so tests see how many were used):
  ok              serve the pod (also an empty or missing file)
  status CODE     answer CODE (401, 403, 500, 503...) with a Status object
  429 [N [S]]     429 Too Many Requests with Retry-After: S (default 1)
  type            the pod with Content-Type: text/html
  big             a 2 MiB application/json body, with Content-Length
  bigchunked      a 2 MiB application/json body, chunked (no length)
  badjson         a truncated JSON body
  stall           read the request, never answer
  stallbody       send the headers and half the body, then stall

Every request is logged to --log as one line: LISTENER PATH USER STATUS TIME
(CLOCK_MONOTONIC seconds); a failed TLS handshake as LISTENER - - tls:ERROR.
The server exits by itself after --lifetime seconds (default 600).
"""
import argparse
import http.server
import json
import os
import socket
import ssl
import sys
import threading
import time

STOP = threading.Event()


def status_object(code, reason, message):
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class Mode:
    """The --mode file, consumed under a lock (requests run in threads)."""

    lock = threading.Lock()

    def __init__(self, path):
        self.path = path

    def take(self):
        with self.lock:
            try:
                with open(self.path) as f:
                    words = f.read().split()
            except FileNotFoundError:
                words = []
            if not words or words[0] == "ok":
                return ["ok"]
            what = words[0]
            # "status CODE [COUNT]": the count is the third word.
            at = 2 if what == "status" else 1
            if len(words) > at:
                left = int(words[at])
                if left <= 0:
                    return ["ok"]
                words[at] = str(left - 1)
                tmp = self.path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(" ".join(words) + "\n")
                os.replace(tmp, self.path)
            return words


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hpn-test-apiserver"
    # TCP_NODELAY, as Go's net/http (kube-apiserver) sets it: the headers and
    # the body go out as two writes, and with Nagle the body would wait for
    # the client's delayed ACK (40 ms) of the headers.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        pass

    def record(self, user, code):
        cfg = self.server.cfg
        with cfg.log_lock:
            with open(cfg.log, "a") as f:
                f.write(f"{self.server.name} {self.path} {user or '-'} {code} "
                        f"{time.monotonic():.3f}\n")

    def user(self):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):]
            try:
                with open(self.server.cfg.tokens) as f:
                    tokens = f.read().split()
            except FileNotFoundError:
                tokens = []
            return "token:" + token[:8] if token in tokens else None
        cert = self.connection.getpeercert()
        for rdn in (cert or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    return "cert:" + value
        return None

    def send(self, code, body, ctype="application/json", user=None, extra=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.record(user, code)

    def fail(self, code, message, user=None, extra=()):
        self.send(code, status_object(code, REASONS.get(code, "Unknown"), message), user=user,
                  extra=extra)

    def do_GET(self):
        user = self.user()
        if not user:
            return self.fail(401, "Unauthorized")
        path = self.path.split("?", 1)[0]
        port = self.server.server_address[1]
        if path == "/api":
            return self.send(200, {"kind": "APIVersions", "versions": ["v1"],
                                   "serverAddressByClientCIDRs": [
                                       {"clientCIDR": "0.0.0.0/0",
                                        "serverAddress": f"127.0.0.1:{port}"}]}, user=user)
        if path == "/apis":
            return self.send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
                             user=user)
        if path == "/api/v1":
            return self.send(200, {"kind": "APIResourceList", "groupVersion": "v1",
                                   "resources": [{"name": "pods", "singularName": "pod",
                                                  "namespaced": True, "kind": "Pod",
                                                  "verbs": ["get"], "shortNames": ["po"]}]},
                             user=user)
        parts = path.split("/")
        # ['', 'api', 'v1', 'namespaces', NS, 'pods', NAME]
        if len(parts) != 7 or parts[1:4] != ["api", "v1", "namespaces"] or parts[5] != "pods":
            return self.fail(404, "the server could not find the requested resource", user)
        ns, name = parts[4], parts[6]
        self.pod(ns, name, user)

    def pod(self, ns, name, user):
        mode = self.server.cfg.mode.take()
        what = mode[0]
        if what == "status":
            code = int(mode[1])
            return self.fail(code, f"stand-in fault: {code}", user)
        if what == "429":
            after = mode[2] if len(mode) > 2 else "1"
            return self.fail(429, "stand-in fault: too many requests", user,
                             extra=[("Retry-After", after)])
        if what == "stall":
            STOP.wait()
            return
        if what in ("big", "bigchunked"):
            return self.big(what == "bigchunked", user)
        file = os.path.join(self.server.cfg.dir, ns, name + ".json")
        if not (ns.isprintable() and "/" not in ns + name and os.path.isfile(file)):
            return self.fail(404, f'pods "{name}" not found', user)
        with open(file, "rb") as f:
            body = f.read()
        if what == "type":
            return self.send(200, body, ctype="text/html", user=user)
        if what == "badjson":
            return self.send(200, body[: len(body) // 2], user=user)
        if what == "stallbody":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.record(user, 200)
            STOP.wait()
            return
        self.send(200, body, user=user)

    def big(self, chunked, user):
        size = 2 << 20
        chunk = b" " * 65536
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        self.record(user, 200)
        try:
            for _ in range(size // len(chunk)):
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    self.wfile.write(chunk)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client stopped reading, as it should


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, name, cfg, ctx):
        self.name = name
        self.cfg = cfg
        super().__init__(("127.0.0.1", 0), Handler)
        # The handshake in the request's thread: a client that stalls in it
        # (or fails it) does not hold up the others.
        self.socket = ctx.wrap_socket(self.socket, server_side=True,
                                      do_handshake_on_connect=False)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ssl.SSLError, ConnectionError, BrokenPipeError)):
            with self.cfg.log_lock:
                with open(self.cfg.log, "a") as f:
                    f.write(f"{self.name} - - tls:{type(exc).__name__}\n")
            if isinstance(exc, ssl.SSLError):
                linger(request)
            return
        super().handle_error(request, client_address)


def linger(request):
    """After a failed handshake (the alert is sent), read what the client
    still sends until it closes (1 s at most) before closing: closed with
    unread data, the socket would send a reset that can overtake the alert
    (TLS 1.3 verifies the client certificate after the client's handshake is
    done), so the client could not tell a refused certificate from a crash.
    kube-apiserver does not linger; the plugin's message says so when it
    retries on such resets (kube.c)."""
    try:
        raw = socket.socket(fileno=os.dup(request.fileno()))
    except OSError:
        return
    with raw:
        raw.settimeout(1)
        try:
            raw.shutdown(socket.SHUT_WR)
            while raw.recv(65536):
                pass
        except OSError:
            pass


def context(cert, key, client_ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(client_ca)
    # As kube-apiserver (Go's VerifyClientCertIfGiven): a certificate is
    # optional, but one that is given must verify.
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True, help="pods: DIR/NS/NAME.json")
    p.add_argument("--pki", required=True,
                   help="dir with ca.crt, server.{crt,key}, wrongname.{crt,key}, other.{crt,key}")
    p.add_argument("--tokens", required=True)
    p.add_argument("--mode", required=True)
    p.add_argument("--ports", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--lifetime", type=float, default=600)
    cfg = p.parse_args()
    cfg.log_lock = threading.Lock()
    cfg.mode = Mode(cfg.mode)
    pki = cfg.pki
    ca = os.path.join(pki, "ca.crt")
    servers = {
        "good": Server("good", cfg, context(f"{pki}/server.crt", f"{pki}/server.key", ca)),
        "wrongname": Server("wrongname", cfg,
                            context(f"{pki}/wrongname.crt", f"{pki}/wrongname.key", ca)),
        "otherca": Server("otherca", cfg, context(f"{pki}/other.crt", f"{pki}/other.key", ca)),
    }
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    for srv in servers.values():
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = cfg.ports + ".tmp"
    with open(tmp, "w") as f:
        for name, srv in servers.items():
            f.write(f"{name} {srv.server_address[1]}\n")
        f.write(f"closed {closed}\n")
    os.replace(tmp, cfg.ports)
    # Ends by itself: a test that dies never leaves it behind for long.
    STOP.wait(cfg.lifetime)
    STOP.set()
    os._exit(0)


if __name__ == "__main__":
    main()
