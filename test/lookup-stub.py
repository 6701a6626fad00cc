#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for hpn-rdma-agent's lookup socket (doc/agent.md, "The lookup
protocol"), test code: listens on SOCKET, writes SOCKET.ready once it does,
and answers every request line that the kubelet allocated the pod DEVICES (a
JSON array of device IDs, in order), appending what it was sent to SOCKET.got.
Run as the user the test wants the listener to be (the plugin checks
SO_PEERCRED).

DEVICES may instead be @FILE: a JSON object whose keys are pods,
"<namespace>/<name>", and whose values are the fields of that pod's reply
over the defaults (e.g. {"devices": [...], "source": "dra", "shared": [...]},
as the agent answers for a pod's DRA claims); FILE is read again for every
request, so a test changes the answers between runs. A pod it does not name
holds nothing ("podKnown": false).

usage: lookup-stub.py SOCKET DEVICES_JSON|@FILE
"""
import json
import socket
import sys

BASE = {"version": 1, "resource": "rdma/hpn", "podKnown": True, "devices": [], "gpus": []}


def answer(spec, got):
    """The reply to request line got: fixed devices, or the pod's fields from the file."""
    if not spec.startswith("@"):
        return dict(BASE, devices=json.loads(spec))
    try:
        req = json.loads(got)
        with open(spec[1:], encoding="utf-8") as f:
            pods = json.load(f)
    except (OSError, ValueError) as e:
        return {"version": 1, "error": "lookup-stub: %s" % e}
    pod = pods.get("%s/%s" % (req.get("namespace"), req.get("name")))
    if pod is None:
        return dict(BASE, podKnown=False)
    return dict(BASE, **pod)


def main():
    path, spec = sys.argv[1], sys.argv[2]
    if not spec.startswith("@"):
        json.loads(spec)  # a bad argument fails at start, not at the first request
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    open(path + ".ready", "w").close()
    while True:
        c, _ = s.accept()
        c.settimeout(2)
        got = b""
        try:
            while not got.endswith(b"\n"):
                b = c.recv(4096)
                if not b:
                    break
                got += b
        except OSError:
            pass
        with open(path + ".got", "ab") as f:
            f.write(got)
        try:
            c.sendall(json.dumps(answer(spec, got)).encode())
        except OSError:
            pass
        c.close()


if __name__ == "__main__":
    main()
