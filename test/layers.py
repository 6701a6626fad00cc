#!/usr/bin/env python3
"""layers.py [--self-test] [--build DIR] [ROOT]: what the build cannot check of
the layers of doc/architecture.md, in ROOT (default: this source tree).

The build refuses an include that crosses a boundary upward: lib/, and each
of agent/'s targets (agent/core/, agent/dra/, agent/install/, the services in
agent/), sees only its own headers and those of the targets it links. What
is left is checked here:

- the two tables (lib/'s between <!-- layers --> and <!-- /layers -->, the
  agent's between <!-- agent-layers --> and <!-- /agent-layers -->) place
  every file of lib/ (of agent/, subdirectories included) in exactly one
  row, name only files that exist, and no two files share a name;
- includes inside one target follow the rows (a file includes headers of its
  own layer and of the layers its row names; agent files may include any
  public lib/ header), and form no loop; programs never include session.h;
- with --build DIR, calls (read with nm from the objects the build made,
  listed by cmake in DIR/layers-objects.txt): a file calls functions (or
  reads globals) only of its own layer and of the layers its row names, no
  two files use each other directly or around a loop (lib/ and agent/
  together, as they are linked), lib/ never uses a program's file, agent/
  never uses lib/session.c;
- doc/layout.md has a line for every file of lib/, plugin/ and agent/ and
  names none that is gone.

Exit 0 when all hold, 1 with a FAIL line for each break. --self-test first
breaks a copy of the tree (and of the objects list) in each way above and
expects each break to add its own FAIL line.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = re.compile(r"\.[ch]$")
INCLUDE = re.compile(r'^#include "([a-z_0-9]+)\.h"', re.M)


class Check:
    def __init__(self, root):
        self.root = root
        self.fails = []
        self.layer_of = {}  # "lib/name" -> layer
        self.may = {}  # "lib/layer" -> {layers}
        self.files = {"lib": {}, "agent": {}}  # dir -> name -> [relative paths]

    def fail(self, msg):
        self.fails.append("FAIL: " + msg)

    def scan(self, top):
        """Every .c and .h under ROOT/top, by name (foo for foo.c and foo.h)."""
        names = self.files[top]
        for d, _, fs in os.walk(os.path.join(self.root, top)):
            for f in sorted(fs):
                if SRC.search(f):
                    rel = os.path.relpath(os.path.join(d, f), self.root)
                    names.setdefault(f[:-2], []).append(rel)
        for name, paths in names.items():
            dirs = {os.path.dirname(p) for p in paths}
            if len(dirs) > 1:
                self.fail(f"{top}/ has two files named {name}: {', '.join(sorted(paths))}")

    def read_table(self, top, mark):
        path = os.path.join(self.root, "doc", "architecture.md")
        text = open(path, encoding="utf-8").read()
        m = re.search(rf"<!-- {mark} -->(.*?)<!-- /{mark} -->", text, re.S)
        n = 0
        for row in (m.group(1).splitlines() if m else []):
            cells = row.split("|")
            if not row.startswith("|") or len(cells) < 4:
                continue
            layer, files, allowed = (c.strip() for c in cells[1:4])
            if not layer or layer == "layer" or layer.startswith("---"):
                continue
            self.may[f"{top}/{layer}"] = {layer} | {
                a.strip() for a in allowed.split(",") if a.strip() not in ("", "-")}
            for f in re.findall(r"`([a-z_0-9]+)`", files):
                key = f"{top}/{f}"
                if key in self.layer_of:
                    self.fail(f"{key} is in two layers ({self.layer_of[key]}, {layer})")
                self.layer_of[key] = layer
                n += 1
                if f not in self.files[top]:
                    self.fail(f"{top}/ layer {layer} names {f}, but no {top}/**/{f}.[ch] exists")
        if not n:
            self.fail(f"no table between <!-- {mark} --> and <!-- /{mark} --> in doc/architecture.md")

    def allowed(self, top, frm, to):
        return self.layer_of[to] in self.may[f"{top}/{self.layer_of[frm]}"]

    def only(self, top, frm, verb):
        layer = self.layer_of[frm]
        rest = sorted(self.may[f"{top}/{layer}"] - {layer})
        return f"{layer} may {verb} only {' '.join([layer] + rest)}"

    def loops(self, what, edges):
        """A FAIL line for each loop of edges {(a, b): why}: one per strongly
        connected component, the loop through it that the edges run."""
        graph = {}
        for a, b in edges:
            graph.setdefault(a, []).append(b)
            graph.setdefault(b, [])
        index, low, stack, on, sccs = {}, {}, [], set(), []

        def strong(v):
            index[v] = low[v] = len(index)
            stack.append(v)
            on.add(v)
            for w in sorted(graph[v]):
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(set(comp))

        sys.setrecursionlimit(10000)
        for v in sorted(graph):
            if v not in index:
                strong(v)
        for comp in sccs:
            # The shortest loop through the component's first file, as the edges run.
            start = min(comp)
            back, todo = {start: None}, [start]
            while todo and start not in [w for v in todo for w in graph[v]]:
                nxt = []
                for v in todo:
                    for w in sorted(graph[v]):
                        if w in comp and w not in back:
                            back[w] = v
                            nxt.append(w)
                todo = nxt
            last = min(v for v in todo if start in graph[v])
            path = [last]
            while back[path[-1]] is not None:
                path.append(back[path[-1]])
            path.reverse()
            steps = []
            for i, a in enumerate(path):
                b = path[(i + 1) % len(path)]
                steps.append((a, b, edges.get((a, b), "?")))
            if what == "calls":
                s = path[0] + ", which".join(f" calls {why} of {b}" for _, b, why in steps)
            else:
                s = path[0] + "".join(f" → {b}" for _, b, _ in steps)
            self.fail(f"{what} form a loop: {s}")

    def check_includes(self, top):
        edges = {}
        for name, paths in sorted(self.files[top].items()):
            for rel in paths:
                key = f"{top}/{name}"
                if key not in self.layer_of:
                    self.fail(f"{rel} is in no layer of doc/architecture.md")
                    continue
                text = open(os.path.join(self.root, rel), encoding="utf-8").read()
                for inc in INCLUDE.findall(text):
                    if inc == name:
                        continue
                    to = f"{top}/{inc}"
                    if inc not in self.files[top] and inc in self.files["lib"]:
                        continue  # a program's include of lib/: session.h is checked below
                    if to not in self.layer_of:
                        self.fail(f"{rel} includes {inc}.h, which is in no layer")
                    elif not self.allowed(top, key, to):
                        self.fail(f"{rel} ({self.layer_of[key]}) includes {inc}.h "
                                  f"({self.layer_of[to]}): {self.only(top, key, 'include')}")
                    edges[(key, to)] = inc
        self.loops(f"{top}/ includes", edges)

    def path_of(self, top, name):
        paths = self.files[top].get(name, [])
        return next((p for p in paths if p.endswith(".c")), None)

    def check_calls(self, listing):
        objs, gone, old = {}, [], []
        for line in open(listing, encoding="utf-8"):
            top, _, obj = line.strip().partition(" ")
            if top == "#":
                print("skip: " + obj.removeprefix("skipped: "))
                continue
            if not top or obj.endswith(".pb-c.c.o"):
                continue
            name = os.path.basename(obj)[: -len(".c.o")]
            src = self.path_of(top, name) or f"{top}/{name}.c"
            if not os.path.isfile(obj):
                gone.append(src)
                continue
            full = os.path.join(self.root, src)
            if os.path.exists(full) and os.path.getmtime(full) > os.path.getmtime(obj):
                old.append(src)
            objs[obj] = (top, name, src)
        if gone:
            self.fail("not built (build before this check): " + " ".join(gone))
        # Symbols of an object older than its source may be gone from the source.
        if old:
            self.fail("changed since they were built (build again): " + " ".join(old))
        if not objs:
            self.fail(f"{listing} names no object")
            return
        out = subprocess.run(["nm", "-A", *objs], capture_output=True, text=True,
                             check=True).stdout
        defined, used = {}, []
        for line in out.splitlines():
            m = re.match(r"^(.*?):(?:[0-9a-f]+)?\s+([A-Za-z])\s+(\S+)$", line)
            if not m or m.group(1) not in objs:
                continue
            who = objs[m.group(1)]
            if m.group(2) == "U":
                used.append((who, m.group(3)))
            elif m.group(2).isupper():
                defined[m.group(3)] = who
        edges = {}
        for who, sym in sorted(used):
            if sym not in defined or defined[sym] == who:
                continue
            edges.setdefault((who, defined[sym]), sym)
        for (a, b), sym in sorted(edges.items(), key=lambda e: (e[0][0][2], e[0][1][2])):
            (ta, na, sa), (tb, nb, sb) = a, b
            if ta == "lib" and tb != "lib":
                self.fail(f"{sa} calls {sym} of {sb}: lib/ never uses a program's file")
                continue
            if ta != "lib" and sb == "lib/session.c":
                self.fail(f"{sa} calls {sym} of {sb}, which is internal to lib/'s commands")
                continue
            if ta != tb:
                continue  # a program may call any public lib/ file
            ka, kb = f"{ta}/{na}", f"{tb}/{nb}"
            if ka not in self.layer_of or kb not in self.layer_of:
                continue  # a file in no layer fails already
            if not self.allowed(ta, ka, kb):
                self.fail(f"{sa} ({self.layer_of[ka]}) calls {sym} of {sb} "
                          f"({self.layer_of[kb]}): {self.only(ta, ka, 'call')}")
        self.loops("calls", {(a[2], b[2]): sym for (a, b), sym in edges.items()})

    def check_layout(self):
        layout = os.path.join(self.root, "doc", "layout.md")
        if not os.path.isfile(layout):
            self.fail(f"{layout} is missing")
            return
        text = open(layout, encoding="utf-8").read()
        mine = [p for top in ("lib", "agent") for ps in self.files[top].values() for p in ps]
        plugin = os.path.join(self.root, "plugin")
        mine += [f"plugin/{f}" for f in sorted(os.listdir(plugin)) if f.endswith(".c")]
        for rel in sorted(mine):
            stem = re.escape(rel[:-2])
            # A line may name a pair: lib/foo.c, .h, or lib/foo.[ch]
            if not re.search(rf"(^|[ `]){stem}\.(c|h|\[ch\])\b", text, re.M):
                self.fail(f"doc/layout.md has no line for {rel}")
        for rel in sorted(set(re.findall(r"\b(?:lib|plugin|agent)/[a-z_0-9/]+\.(?:c|h|\[ch\])", text))):
            stem = rel.rsplit(".", 1)[0]
            exts = ("c", "h") if rel.endswith("[ch]") else (rel.rsplit(".", 1)[1],)
            if not any(os.path.exists(os.path.join(self.root, f"{stem}.{e}")) for e in exts):
                self.fail(f"doc/layout.md names {rel}, which does not exist")

    def run(self, listing):
        if not os.path.isfile(os.path.join(self.root, "doc", "architecture.md")):
            self.fail(f"{self.root}/doc/architecture.md is missing")
            return self.fails
        self.scan("lib")
        self.scan("agent")
        self.read_table("lib", "layers")
        self.read_table("agent", "agent-layers")
        self.check_includes("lib")
        self.check_includes("agent")
        programs = [p for ps in self.files["agent"].values() for p in ps]
        programs += [f"plugin/{f}" for f in os.listdir(os.path.join(self.root, "plugin"))
                     if SRC.search(f)]
        for rel in sorted(programs):
            if re.search(r'^#include "session\.h"', open(os.path.join(self.root, rel)).read(), re.M):
                self.fail(f"{rel} includes session.h, which is internal to lib/'s commands")
        if not listing:
            print("skip: no --build DIR: the calls between files were not checked")
        elif not os.path.isfile(listing):
            self.fail(f"{listing} is missing: configure the build with cmake first")
        else:
            self.check_calls(listing)
        self.check_layout()
        return self.fails


def check(root, listing):
    return Check(root).run(listing)


def self_test(src, listing):
    """Break a copy of the tree each way; each break must add its own FAIL line."""
    bad = 0
    with tempfile.TemporaryDirectory() as t:
        for d in ("lib", "plugin", "agent"):
            if os.path.isdir(os.path.join(src, d)):
                shutil.copytree(os.path.join(src, d), os.path.join(t, "orig", d))
        os.makedirs(os.path.join(t, "doc"))
        for f in ("architecture.md", "layout.md"):
            shutil.copy2(os.path.join(src, "doc", f), os.path.join(t, "doc", f))
        tl = os.path.join(t, "list") if listing else None
        orig_list = open(listing).read() if listing and os.path.isfile(listing) else ""

        def repair():
            for d in ("lib", "plugin", "agent"):
                shutil.rmtree(os.path.join(t, d), ignore_errors=True)
                if os.path.isdir(os.path.join(t, "orig", d)):
                    # copy2: a source newer than its object fails the check
                    shutil.copytree(os.path.join(t, "orig", d), os.path.join(t, d))
            if tl:
                with open(tl, "w") as f:
                    f.write(orig_list)

        def edit(rel, old, new):
            p = os.path.join(t, rel)
            text = open(p).read()
            assert old in text, f"self-test: {rel} has no {old!r}"
            open(p, "w").write(text.replace(old, new, 1))
            os.utime(p, (os.stat(p).st_atime, os.stat(os.path.join(t, "orig", rel)).st_mtime))

        def add(rel, text):
            open(os.path.join(t, rel), "w").write(text)

        def expect(what, *patterns):
            nonlocal bad
            new = set(check(t, tl)) - base
            for p in patterns:
                if not any(re.search(p, line) for line in new):
                    print(f"FAIL: self-test: {what} went unnoticed ({p})")
                    bad = 1
            repair()

        counter = [0]

        def tiny(rel_src, defines, uses):
            """One more object for rel_src (lib/x.c), defining DEFINES, calling USES."""
            counter[0] += 1
            o = os.path.join(t, "o", str(counter[0]), os.path.basename(rel_src) + ".o")
            os.makedirs(os.path.dirname(o))
            code = f"void {uses}(void);\nvoid {defines}(void);\nvoid {defines}(void) {{ {uses}(); }}\n"
            subprocess.run([os.environ.get("HPN_CC", "cc"), "-c", "-x", "c", "-o", o, "-"],
                           input=code, text=True, check=True)
            with open(tl, "a") as f:
                f.write(f"{rel_src.split('/')[0]} {o}\n")

        def where(top, name):
            c = Check(t)
            c.scan(top)
            return c.files[top][name][0].rsplit(".", 1)[0]

        repair()
        base = set(check(t, tl))

        # A mechanism that knows the protocol's types.
        edit("lib/addr.h", '#include "types.h"', '#include "cni.h"\n#include "types.h"')
        expect("addr.h including cni.h", r"lib/addr\.h \(kernel\) includes cni\.h \(protocol\)")
        # Two files of one layer that include each other.
        edit("lib/nccl.h", '#include "err.h"', '#include "err.h"\n#include "store.h"')
        expect("a store <-> nccl include loop", r"lib/ includes form a loop: lib/(store|nccl) → ")
        # New files nobody placed, and the file list that misses them.
        loop_dir = os.path.dirname(where("agent", "loop"))
        add("lib/stray.c", '#include "types.h"\n')
        add(f"{loop_dir}/stray.c", '#include "loop.h"\n')
        expect("a file in no layer", r"lib/stray\.c is in no layer", r"no line for lib/stray\.c",
               rf"{loop_dir}/stray\.c is in no layer", rf"no line for {loop_dir}/stray\.c")
        # Two files of one name.
        os.makedirs(os.path.join(t, "agent", "selftest"))
        add("agent/selftest/loop.c", "\n")
        expect("two files of one name", r"agent/ has two files named loop")
        # The loop at the bottom that knows the node (inside one target the build cannot see it).
        loop_h = where("agent", "loop") + ".h"
        edit(loop_h, '#define HPN_AGENT_LOOP_H', '#define HPN_AGENT_LOOP_H\n#include "rpc.h"\n#include "node.h"')
        expect("loop.h including node.h", rf"{loop_h} \(core\) includes node\.h \(node\)")

        if not tl:
            print("skip: self-test of calls: no --build DIR")
        else:
            # Two files that call each other.
            tiny("lib/store.c", "hpn_selftest_store", "hpn_selftest_nccl")
            tiny("lib/nccl.c", "hpn_selftest_nccl", "hpn_selftest_store")
            expect("a store <-> nccl call loop",
                   r"calls form a loop: lib/(store|nccl)\.c calls [a-z_]+ of lib/(store|nccl)\.c,"
                   r" which calls [a-z_]+ of lib/(store|nccl)\.c$")
            # A mechanism that calls the protocol, the loop that calls main.c.
            tiny("lib/conf.c", "hpn_selftest_conf", "hpn_selftest_none")
            tiny("lib/addr.c", "hpn_selftest_addr", "hpn_selftest_conf")
            tiny("agent/main.c", "agent_selftest_main", "agent_selftest_none")
            tiny("agent/loop.c", "agent_selftest_loop", "agent_selftest_main")
            expect("a layer crossed by a call",
                   r"lib/addr\.c \(kernel\) calls hpn_selftest_conf of lib/conf\.c \(protocol\)",
                   r"agent/core/loop\.c \(core\) calls agent_selftest_main of agent/main\.c \(program\)")
            # lib/ that calls its program.
            tiny("agent/main.c", "agent_selftest_main2", "agent_selftest_none")
            tiny("lib/util.c", "hpn_selftest_util", "agent_selftest_main2")
            expect("lib/ calling agent/", r"lib/util\.c calls agent_selftest_main2 of agent/main\.c")

        if set(check(t, tl)) != base:
            print("FAIL: self-test: the repaired copy fails otherwise than the unbroken one")
            bad = 1
    if not bad:
        print("ok: the check catches crossed layers, loops, files in no layer and names twice,"
              " by includes and by calls")
    return bad


def main(argv):
    self, build, rest = False, None, []
    while argv:
        a = argv.pop(0)
        if a == "--self-test":
            self = True
        elif a == "--build":
            build = os.path.abspath(argv.pop(0))
        else:
            rest.append(a)
    root = os.path.abspath(rest[0] if rest else os.path.join(os.path.dirname(__file__), ".."))
    listing = os.path.join(build, "layers-objects.txt") if build else None
    bad = self_test(root, listing) if self else 0
    fails = check(root, listing)
    print("\n".join(fails))
    if fails or bad:
        return 1
    print("ok: lib/ and agent/ follow the layers of doc/architecture.md; "
          "doc/layout.md lists every file")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
