#!/usr/bin/env python3
"""boundaries.py BUILD: the build refuses an include that crosses a boundary
upward (doc/architecture.md): for a file of each target, a one-line file
including a header of a target above it does not compile with that file's
own command (from BUILD/compile_commands.json), and one including a header
the target may use does, which proves the probe itself sound.

Exit 0 when every case holds, 1 with a FAIL line for each that does not.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

# (target, a file of it, headers it must not reach, headers it reaches)
CASES = [
    ("hpn", "lib/util.c", ["loop.h", "node.h", "dra.h", "install.h"], ["err.h"]),
    ("hpn-agent-install", "agent/install/install.c", ["loop.h", "node.h", "dra.h"],
     ["conf.h", "sakubeconfig.h"]),
    ("hpn-dra-model", "agent/dra/model/dra.c", ["loop.h", "node.h", "drakubelet.h"],
     ["util.h", "draslice.h"]),
    ("hpn-agent-core", "agent/core/loop.c", ["node.h", "deviceplugin.h", "drakubelet.h", "dra.h"],
     ["rpc.h"]),
    ("hpn-agent-node", "agent/node/node.c", ["deviceplugin.h", "lookup.h", "drakubelet.h", "dra.h"],
     ["loop.h"]),
    ("hpn-agent-dra", "agent/dra/drakubelet.c",
     ["deviceplugin.h", "lookup.h", "metrics.h", "install.h"], ["node.h", "dra.h", "rpc.h"]),
    ("hpn-agent-nri-wire", "agent/nri/mux.c",
     ["loop.h", "node.h", "deviceplugin.h", "dra.h", "install.h"],
     ["err.h", "ttrpc.h", "nri.pb-c.h"]),
    ("hpn-agent-services", "agent/lookup.c",
     ["drakubelet.h", "draclaims.h", "dra.h", "install.h"], ["node.h", "podwatch.h"]),
]


def main(build):
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    db = os.path.join(build, "compile_commands.json")
    # A file compiled by more than one target (a unit test's own copy): its target's entry.
    cmds = {}
    for e in json.load(open(db)):
        cmd = " ".join(e["arguments"]) if "arguments" in e else e["command"]
        for target, src, _, _ in CASES:
            if os.path.relpath(e["file"], root) == src and f"/{target}.dir/" in cmd:
                cmds[src] = e
    fails, n = [], 0
    with tempfile.TemporaryDirectory() as t:
        for _, src, refused, reached in CASES:
            e = cmds.get(src)
            if e is None:
                print(f"skip: {src} is not in this build (its target was not built)")
                continue
            args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
            # The file's command without its output and input; its own directory
            # searched first for quoted includes, as for the file itself.
            keep, skip = [], False
            for a in args:
                if skip:
                    skip = False
                elif a in ("-o", "-c", "-MF", "-MT", "-MQ"):
                    skip = a != "-c"
                elif a not in (e["file"], src) and not a.endswith(os.path.basename(src)):
                    keep.append(a)
            keep += ["-iquote", os.path.dirname(os.path.join(root, src)), "-fsyntax-only"]
            for header, want in [(h, False) for h in refused] + [(h, True) for h in reached]:
                n += 1
                probe = os.path.join(t, f"probe{n}.c")
                with open(probe, "w") as f:
                    f.write(f'#include "{header}"\n')
                r = subprocess.run(keep + [probe], cwd=e["directory"], capture_output=True,
                                   text=True)
                if (r.returncode == 0) != want:
                    what = "compiles" if r.returncode == 0 else "does not compile"
                    fails.append(f"FAIL: #include \"{header}\" in {src}'s target {what}"
                                 + ("" if want else ": a boundary crossed upward") +
                                 ("" if r.returncode == 0 else f" ({r.stderr.strip()[:200]})"))
    print("\n".join(fails))
    if fails:
        return 1
    print(f"ok: {n} includes, each refused or taken as its target's boundary says")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
