#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for hpn-rdma-agent's lookup socket (doc/agent.md, "The lookup
protocol"), test code: listens on SOCKET, writes SOCKET.ready once it does,
and answers every request line that the kubelet allocated the pod DEVICES (a
JSON array of device IDs, in order), appending what it was sent to SOCKET.got.
Run as the user the test wants the listener to be (the plugin checks
SO_PEERCRED).

usage: lookup-stub.py SOCKET DEVICES_JSON
"""
import json
import socket
import sys


def main():
    path, devices = sys.argv[1], json.loads(sys.argv[2])
    reply = json.dumps({"version": 1, "resource": "rdma/hpn", "podKnown": True,
                        "devices": devices, "gpus": []}).encode()
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
            c.sendall(reply)
        except OSError:
            pass
        c.close()


if __name__ == "__main__":
    main()
