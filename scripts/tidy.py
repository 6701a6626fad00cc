#!/usr/bin/env python3
"""clang-tidy over FILES with BUILD's compile commands, a file skipped when a clean run saw the same input.

Usage: scripts/tidy.py BUILD FILE...

The input of a file's run is what clang-tidy reads: the file's preprocessed
text (every header it includes, as the compiler sees it), its command,
.clang-tidy and clang-tidy's version. Their hash names a mark in
BUILD/tidy-clean/, written only when the run printed nothing; a file whose mark
exists is not run again. So a warm tree re-lints only what a change reaches,
and a clean checkout (no marks) lints everything. Findings go to stdout; the
exit status is 1 when any run printed a warning or an error, or could not run.
"""
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

GENERATED = re.compile(r"^[0-9]+ warnings? generated\.$")


def preprocess(entry):
    """The file's text after the preprocessor, with its own command (-E for -c, no -o)."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        out.append("-E" if a == "-c" else a)
    r = subprocess.run(out, cwd=entry["directory"], capture_output=True)
    return r.stdout if r.returncode == 0 else None


def main():
    build, files = sys.argv[1], sys.argv[2:]
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = {os.path.realpath(e["file"]): e for e in json.load(f)}
    with open(".clang-tidy", "rb") as f:
        config = f.read()
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True).stdout
    marks = os.path.join(build, "tidy-clean")
    os.makedirs(marks, exist_ok=True)

    def one(path):
        entry = db.get(os.path.realpath(path))
        if entry is None:
            return f"{path}: error: no compile command in {build} (not built there)\n", True
        text = preprocess(entry)
        key = None
        if text is not None:
            h = hashlib.sha256()
            for part in (text, entry.get("command", "").encode(), config, version):
                h.update(len(part).to_bytes(8, "little") + part)
            key = os.path.join(marks, h.hexdigest())
            if os.path.exists(key):
                return "", False
        r = subprocess.run(["clang-tidy", "-p", build, "--quiet", path],
                           capture_output=True, text=True)
        out = "".join(line + "\n" for line in (r.stdout + r.stderr).splitlines()
                      if line and not GENERATED.match(line))
        if not out and r.returncode != 0:
            out = f"{path}: error: clang-tidy exited {r.returncode}\n"
        if not out and key:
            open(key, "w").close()
        return out, True

    bad = ran = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for out, run in pool.map(one, files):
            sys.stdout.write(out)
            bad += bool(out)
            ran += run
    print(f"clang-tidy: {len(files)} files, {ran} run (the rest unchanged since a clean run), "
          f"{bad} with findings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
