#!/usr/bin/env python3
"""ctest's results, one line per tier (ctest label), for scripts/test.sh.

Usage: ctest-tiers.py PASS JUNIT TESTS_JSON
  PASS        the pass's name (asan, fuzz, release)
  JUNIT       ctest's --output-junit report of one run
  TESTS_JSON  `ctest --show-only=json-v1` of the same build dir (the labels)

Prints `tier PASS/LABEL: N passed, N failed, N skipped, S s` per label that
ran, S the tests' own seconds added (more than the wall clock under -j2). A
test ctest did not run because of its SKIP_RETURN_CODE (77 here) or DISABLED
is skipped; any other "not run" (a missing executable) is failed, as ctest
itself counts it. A test with no label is tier "unlabelled".
"""
import json
import sys
import xml.etree.ElementTree as ET


def labels_of(tests_json):
    with open(tests_json, encoding="utf-8") as f:
        tests = json.load(f).get("tests", [])
    labels = {}
    for t in tests:
        for p in t.get("properties", []):
            if p.get("name") == "LABELS" and p.get("value"):
                labels[t["name"]] = p["value"][0]
    return labels


def outcome(case):
    status = case.get("status")
    if status == "run":
        return "passed"
    if status == "disabled":
        return "skipped"
    if status == "notrun":
        skipped = case.find("skipped")
        msg = skipped.get("message", "") if skipped is not None else ""
        if msg.startswith(("SKIP_RETURN_CODE", "SKIP_REGULAR_EXPRESSION")):
            return "skipped"
    return "failed"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    run, junit, tests_json = sys.argv[1:]
    labels = labels_of(tests_json)
    tiers = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tier = tiers.setdefault(labels.get(case.get("name"), "unlabelled"),
                                {"passed": 0, "failed": 0, "skipped": 0, "s": 0.0})
        tier[outcome(case)] += 1
        tier["s"] += float(case.get("time") or 0)
    for label, t in tiers.items():
        print(f"tier {run}/{label}: {t['passed']} passed, {t['failed']} failed, "
              f"{t['skipped']} skipped, {round(t['s'])} s")


if __name__ == "__main__":
    main()
