"""pytest plugin of Tide's conformance run (scripts/conformance.sh).

It leaves out the tests listed in $CONFORMANCE_EXCLUDED (they need a
feature newer than Slurm 22.05, or Slurm's own daemons) and writes every
test's outcome to $CONFORMANCE_RESULTS as JSON, for table.py.

One adaptation of how the suite runs commands: atf runs commands "as"
the Slurm user or root through `sudo -u USER bash -lc`, and skips the
test when the invoking user lacks passwordless sudo. A login shell
resets PATH and the environment, so Tide's commands (first on PATH, and
finding the cluster through TIDE_SOCKET) would not be the ones run. When
the user asked for is the one running the suite, sudo would change
nothing but the environment: the command runs directly instead, and the
invoking user counts as having sudo rights when it is root. Commands for
any other user still go through sudo.
"""
import fnmatch
import json
import os
import pwd
import sys

_results = {}
_excluded = []


def _load_exclusions(path):
    rules = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 3 or not all(parts):
                raise ValueError(f"{path}:{n}: want 'PATTERN | CATEGORY | REASON', got {line!r}")
            rules.append(tuple(parts))
    return rules


def _match(rules, nodeid):
    for pattern, category, reason in rules:
        if "::" not in pattern:
            # A file: all of its tests.
            if nodeid.split("::")[0] == pattern or fnmatch.fnmatchcase(nodeid.split("::")[0], pattern):
                return category, reason
        elif fnmatch.fnmatchcase(nodeid, pattern) or nodeid == pattern:
            return category, reason
    return None


def pytest_sessionstart(session):
    atf = sys.modules.get("atf")
    if atf is None:
        return
    me = pwd.getpwuid(os.getuid()).pw_name
    if os.getuid() == 0:
        atf.properties["sudo-rights"] = True
    logs = os.environ.get("CONFORMANCE_LOGS_DIR")
    if logs and "slurm-logs-dir" not in atf.properties:
        # Where the daemons' logs are (SlurmctldLogFile's directory): the
        # suite's teardown looks there for core files.
        atf.properties["slurm-logs-dir"] = logs
    orig = atf.run_command

    def run_command(command, *args, **kwargs):
        if kwargs.get("user") in (me, str(os.getuid())):
            kwargs["user"] = None
        return orig(command, *args, **kwargs)

    run_command.__doc__ = orig.__doc__
    atf.run_command = run_command


def pytest_collection_modifyitems(session, config, items):
    path = os.environ.get("CONFORMANCE_EXCLUDED")
    if not path:
        return
    rules = _load_exclusions(path)
    keep, drop = [], []
    for item in items:
        hit = _match(rules, item.nodeid)
        if hit:
            drop.append(item)
            _excluded.append({"nodeid": item.nodeid, "category": hit[0], "reason": hit[1]})
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _message(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0][:300] if crash.message else ""
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2])[:300]  # a skip: (file, line, reason)
    return str(report.longrepr or "").splitlines()[-1][:300] if report.longrepr else ""


def pytest_runtest_logreport(report):
    r = _results.setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": None, "message": "", "duration": 0.0})
    r["duration"] += report.duration
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        else:
            outcome = report.outcome
        if r["outcome"] in (None, "passed"):
            r["outcome"] = outcome
            if outcome != "passed":
                r["message"] = _message(report)
    elif report.failed:
        # A setup or teardown failure is an error, whatever the call did.
        r["outcome"], r["message"] = "error", f"{report.when}: {_message(report)}"
    elif report.skipped and r["outcome"] is None:
        r["outcome"], r["message"] = "skipped", _message(report)


def pytest_collectreport(report):
    # A test file that fails to import counts once, as an error, unless
    # it is excluded as a whole.
    if report.failed and report.nodeid:
        path = os.environ.get("CONFORMANCE_EXCLUDED")
        hit = _match(_load_exclusions(path), report.nodeid) if path else None
        if hit:
            _excluded.append({"nodeid": report.nodeid, "category": hit[0], "reason": hit[1]})
            return
        _results[report.nodeid] = {"nodeid": report.nodeid, "outcome": "error",
                                   "message": "collect: " + _message(report), "duration": 0.0}


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("CONFORMANCE_RESULTS")
    if not path:
        return
    with open(path, "w") as f:
        json.dump({"results": list(_results.values()), "excluded": _excluded, "exitstatus": int(exitstatus)}, f, indent=1)
