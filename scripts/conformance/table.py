#!/usr/bin/env python3
"""Print the pass table of a conformance run: the results files that
conformance_plugin.py wrote (a directory of them, or one file).

Per test file: passed, failed, error, skipped, and excluded (left out:
they need a feature newer than Slurm 22.05 or Slurm's daemons; see
excluded.txt), then the totals and the pass rates:
  pass % of run  = passed / (passed + failed + error)
  pass % (all)   = passed / (every test not excluded, skips included)
With --failures, every test that did not pass follows with its message.
"""
import collections
import glob
import json
import os
import re
import sys

COLS = ("passed", "failed", "error", "skipped", "excluded")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    data = {"results": [], "excluded": []}
    paths = [args[0]]
    if os.path.isdir(args[0]):
        paths = sorted(glob.glob(os.path.join(args[0], "*.json")))
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        data["results"] += d["results"]
        data["excluded"] += d["excluded"]
    per = collections.OrderedDict()

    def row(nodeid):
        # tests/test_116_1.py is test_116_1.py; Slurm 22.05's
        # tests/commands/srun/test_--help.py keeps its command.
        name = nodeid.split("::")[0]
        name = name[len("tests/"):] if name.startswith("tests/") else name
        return per.setdefault(name, collections.Counter())

    for r in sorted(data["results"], key=lambda r: r["nodeid"]):
        o = r["outcome"] or "error"
        o = {"xfailed": "failed", "xpassed": "passed"}.get(o, o)
        row(r["nodeid"])[o] += 1
    for e in data["excluded"]:
        row(e["nodeid"])["excluded"] += 1

    def key(name):
        return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]

    width = max([len("file")] + [len(n) for n in per])
    head = f"| {'file':<{width}} | " + " | ".join(f"{c:>8}" for c in COLS) + " |"
    print(head)
    print("|" + "-" * (width + 2) + "|" + "|".join("-" * 9 + ":" for _ in COLS) + "|")
    total = collections.Counter()
    for name in sorted(per, key=key):
        c = per[name]
        total.update(c)
        print(f"| {name:<{width}} | " + " | ".join(f"{c[k]:>8}" for k in COLS) + " |")
    print(f"| {'total':<{width}} | " + " | ".join(f"{total[k]:>8}" for k in COLS) + " |")
    ran = total["passed"] + total["failed"] + total["error"]
    allt = ran + total["skipped"]
    pct = lambda n, d: f"{100.0 * n / d:.1f} %" if d else "n/a"
    print()
    print(f"pass % of run: {pct(total['passed'], ran)} ({total['passed']}/{ran}); "
          f"pass % (all, skips included): {pct(total['passed'], allt)} ({total['passed']}/{allt}); "
          f"excluded: {total['excluded']}")
    if "--failures" in sys.argv:
        print()
        for r in sorted(data["results"], key=lambda r: key(r["nodeid"])):
            if r["outcome"] not in ("passed", "xpassed"):
                print(f"{r['outcome']:8} {r['nodeid']}: {r['message']}")


if __name__ == "__main__":
    main()
