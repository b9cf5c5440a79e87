#!/usr/bin/env python3
"""Describe the running Tide cluster to Slurm's test suite.

In local-config mode the suite's atf library reads slurm.conf (node and
partition lines, and the settings its require_config_parameter checks)
and gres.conf from SlurmConfigDir, and testsuite.conf for where Slurm is
installed. Tide has neither file: this writes them from what Tide's own
commands report (`scontrol show config`, `scontrol --json show nodes`,
`scontrol --json show partitions`), so they say only what the cluster
under test does.

Usage: genconf.py --prefix PREFIX --slurm-src DIR --out RUNDIR
Writes PREFIX/etc/slurm.conf, PREFIX/etc/gres.conf and RUNDIR/testsuite.conf.
"""
import argparse
import json
import os
import re
import subprocess
import sys

# `scontrol show config` lines that are not slurm.conf settings: facts of
# the running controller, and Tide's own additions.
NOT_SETTINGS = {"BOOT_TIME", "SLURM_VERSION", "SLURM_CONF", "HASH_VAL", "NEXT_JOB_ID", "MULTIPLE_SLURMD"}

# Settings written differently for the suite, each with its reason.
OVERRIDES = {
    # The suite's require_accounting() asks for slurmdbd by name before it
    # runs any test of sacct. Tide keeps its accounting in the controller
    # (SQLite) and serves sacct from it: the tests of what sacct prints
    # apply. (Those that change the database with sacctmgr still skip in
    # local-config mode.)
    "AccountingStorageType": "accounting_storage/slurmdbd",
}


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"genconf: {' '.join(cmd)} failed (exit {r.returncode}): {r.stderr.strip()}")
    return r.stdout


def config():
    out = {}
    for line in run("scontrol", "show", "config").splitlines():
        m = re.match(r"^(\S+)\s*=\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def setting(value):
    """A `show config` value as slurm.conf writes it ("30 sec" is 30)."""
    m = re.match(r"^(\d+) (sec|min|percent|usec)$", value)
    return m.group(1) if m else value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--slurm-src", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    cfg = config()
    lines = ["# Written by Tide's scripts/conformance/genconf.py from the running",
             "# cluster, for Slurm's test suite (local-config mode). Tide does not read it."]
    for k, v in cfg.items():
        if k in NOT_SETTINGS or k.startswith("Tide") or v in ("", "(null)"):
            continue
        if k == "SlurmctldHost[0]":
            k = "SlurmctldHost"
        if k in OVERRIDES:
            lines.append(f"# {k} is {v} in Tide; see genconf.py")
            v = OVERRIDES[k]
        lines.append(f"{k}={setting(v)}")

    # Where scripts/up.sh sends the daemons' logs: the suite looks there
    # for core files when a test fails.
    lines.append(f"SlurmctldLogFile={os.path.join(a.out, 'tidectld.log')}")
    lines.append(f"SlurmdLogFile={os.path.join(a.out, 'nodes', '%n.log')}")

    nodes = json.loads(run("scontrol", "--json", "show", "nodes"))["nodes"]
    gres = []
    for n in nodes:
        words = [f"NodeName={n['name']}", f"NodeHostname={n['hostname'] or n['name']}",
                 f"CPUs={n['cpus']}", f"Sockets={n['sockets']}", "CoresPerSocket=1",
                 "ThreadsPerCore=1", f"RealMemory={n['real_memory']}", f"Port={n['port']}"]
        if n["gres"]:
            words.append(f"Gres={n['gres']}")
            m = re.match(r"^gpu:(?:(\w+):)?(\d+)$", n["gres"])
            if m:
                t = f" Type={m.group(1)}" if m.group(1) else ""
                gres.append(f"NodeName={n['name']} Name=gpu{t} Count={m.group(2)}")
        if n["features"]:
            words.append("Feature=" + ",".join(n["features"]))
        lines.append(" ".join(words))

    parts = json.loads(run("scontrol", "--json", "show", "partitions"))["partitions"]
    for p in parts:
        words = [f"PartitionName={p['name']}", f"Nodes={p['nodes']['configured']}"]
        if "DEFAULT" in p["partition"]["state"]:
            words.append("Default=YES")
        t = p["maximums"]["time"]
        words.append("MaxTime=" + ("INFINITE" if t["infinite"] or not t["set"] else str(t["number"])))
        d = p["defaults"]["time"]
        if d["set"]:
            words.append(f"DefaultTime={d['number']}")
        words.append("State=" + p["partition"]["state"][0])
        lines.append(" ".join(words))

    etc = os.path.join(a.prefix, "etc")
    os.makedirs(etc, exist_ok=True)
    with open(os.path.join(etc, "slurm.conf"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(etc, "gres.conf"), "w") as f:
        f.write("# Tide's fake or NVML GPUs, as scontrol reports them (no device files named).\n")
        f.write("\n".join(gres) + "\n")
    with open(os.path.join(a.out, "testsuite.conf"), "w") as f:
        f.write(f"SlurmSourceDir={a.slurm_src}\nSlurmBuildDir={a.slurm_src}\n"
                f"SlurmInstallDir={a.prefix}\nSlurmConfigDir={etc}\n")


if __name__ == "__main__":
    main()
