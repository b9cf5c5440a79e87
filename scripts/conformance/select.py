#!/usr/bin/env python3
"""Print the test files of a Slurm testsuite/python that select.txt names.

Usage: select.py SUITE_DIR SELECT_TXT. Paths are printed relative to
SUITE_DIR (pytest runs from there), sorted by test number.
"""
import glob
import os
import re
import sys


def number_key(path):
    # test_116_9 before test_116_10
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path)]


def main():
    suite, listing = sys.argv[1], sys.argv[2]
    found = set()
    with open(listing) as f:
        for line in f:
            pattern = line.split("#", 1)[0].strip()
            if not pattern:
                continue
            for p in glob.glob(os.path.join(suite, pattern)):
                if os.path.isfile(p):
                    found.add(os.path.relpath(p, suite))
    for p in sorted(found, key=number_key):
        print(p)


if __name__ == "__main__":
    main()
