#!/usr/bin/python3
"""Runs PyTorch's own distributed test suite against the vigil backend and
against gloo, and compares them test by test.

The suite is torch.testing._internal.distributed.distributed_test (the
TestDistBackend / DistributedTest._DistTestBase tests that PyTorch runs as
test_distributed_spawn.py), as Debian's python3-torch ships it. Each backend
runs in its own worker process (the suite reads BACKEND when it is imported);
each test spawns WORLD_SIZE ranks.

    PYTHONPATH=build/python nice -n 10 /usr/bin/python3 torch/pytorch_suite/run_suite.py \\
        --world-size 2 --backends vigil,gloo --out /tmp/suite

    # a few tests, or the fixed CI subset:
    ... run_suite.py -k all_reduce -k broadcast
    ... run_suite.py --subset torch/pytorch_suite/ci_subset.txt --backends vigil

Backends: vigil, gloo, vigil-as-gloo (BACKEND=gloo, but every gloo group
is a vigil group: runs the ~20 tests the suite keeps for gloo; the ones that
need gloo-only features then fail by design), and vigil-as-mpi (BACKEND=mpi,
every group a vigil group: runs the CPU tests the suite keeps for MPI, such
as all_to_all and all_to_all_single; Debian's torch has no MPI backend to
compare with, and the tests that check the backend's name is "mpi" fail by
design).

Prints passed/failed/skipped/errors per backend, the tests that pass on gloo
but not on vigil (and the reverse), and writes results-<backend>.json (one
record per test: name, outcome, seconds, reason) and summary.md to --out.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER_FLAG = "VIGIL_SUITE_WORKER"
BACKENDS = ("vigil", "gloo", "vigil-as-gloo", "vigil-as-mpi")
ALIASES = {"vigil-as-gloo": "gloo", "vigil-as-mpi": "mpi"}  # the name the suite sees


# ---- worker side: runs in the worker and in every rank it spawns ----------

def _prepare_suite():
    """Imports the suite for os.environ["BACKEND"] with the vigil backend known to it."""
    sys.path.insert(0, os.path.join(HERE, "stubs"))  # expecttest
    saved_argv = sys.argv
    sys.argv = sys.argv[:1]  # common_utils parses the command line when imported
    try:
        import torch.distributed as dist
        import torch.nn.parallel._replicated_tensor_ddp_utils as replicated

        import vigil.torch  # noqa: F401  (registers "vigil")

        if os.environ.get("VIGIL_SUITE_AS_GLOO") == "1":
            from torch.distributed import distributed_c10d

            def gloo_is_vigil(store, rank, size, timeout):
                return vigil.torch.create_process_group(store, rank, size, timeout)

            # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps each group with a real gloo
            # helper group that checks the ranks' calls agree: keep that one gloo.
            real_gloo = distributed_c10d.ProcessGroupGloo
            create_wrapper = distributed_c10d._create_process_group_wrapper

            def wrapper_with_real_gloo(*args, **kwargs):
                distributed_c10d.ProcessGroupGloo = real_gloo
                try:
                    return create_wrapper(*args, **kwargs)
                finally:
                    distributed_c10d.ProcessGroupGloo = gloo_is_vigil

            distributed_c10d._create_process_group_wrapper = wrapper_with_real_gloo
            distributed_c10d.ProcessGroupGloo = gloo_is_vigil

        if os.environ.get("VIGIL_SUITE_AS_MPI") == "1":
            from torch.distributed import distributed_c10d

            # The suite asks for "mpi" by name (init_process_group, new_group):
            # every such group is a vigil group, set up through the suite's
            # own store (the MPI path would take ranks from an MPI launcher).
            def as_vigil(function):
                def call(*args, **kwargs):
                    if kwargs.get("backend") in ("mpi", distributed_c10d.Backend.MPI):
                        kwargs["backend"] = "vigil"
                    elif args and function.__name__ == "init_process_group" and args[0] == "mpi":
                        args = ("vigil",) + tuple(args[1:])
                    return function(*args, **kwargs)

                call.__name__ = function.__name__
                return call

            for name in ("init_process_group", "new_group"):
                patched = as_vigil(getattr(distributed_c10d, name))
                setattr(distributed_c10d, name, patched)
                setattr(dist, name, patched)

        # TestDistBackend._run turns on DDP with ReplicatedTensor, whose import
        # fails on Python 3.11 with this torch, for every backend: keep it off.
        replicated._set_ddp_with_replicated_tensor = lambda value: None

        from torch.testing._internal.common_distributed import DistTestCases

        for feature in ("plugin", "ddp", "subgroup"):
            DistTestCases.backend_feature[feature].add("vigil")

        from torch.testing._internal.distributed import distributed_test

        for allowlist in (distributed_test.PROFILING_SUPPORTED_BACKENDS,
                          distributed_test.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
            allowlist.append("vigil")
        if os.environ.get("VIGIL_SUITE_AS_GLOO") == "1":
            # The profiler shows vigil's events ("vigil:all_reduce") where the suite looks for gloo's.
            events_named = distributed_test.get_profiling_event
            distributed_test.get_profiling_event = lambda postfix, profiler: events_named(
                postfix.replace("gloo:", "vigil:", 1), profiler)
    finally:
        sys.argv = saved_argv

    class TestDistBackendWithSpawn(distributed_test.TestDistBackend, distributed_test.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()

    # Ranks unpickle the class by its module-level name.
    TestDistBackendWithSpawn.__module__ = __name__
    TestDistBackendWithSpawn.__qualname__ = "TestDistBackendWithSpawn"
    return dist, TestDistBackendWithSpawn


if os.environ.get(WORKER_FLAG) == "1":
    _dist, TestDistBackendWithSpawn = _prepare_suite()


def all_test_names():
    return unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)


def select(names, patterns, subset):
    if subset is not None:
        names = [n for n in names if n in subset]
    if patterns:
        names = [n for n in names if any(p in n for p in patterns)]
    return names


class Recorder(unittest.TestResult):
    """Keeps one record per test and prints a line as each one ends."""

    def __init__(self, progress, total):
        super().__init__()
        self.records = []
        self.progress = progress
        self.total = total
        self.started = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.started = time.monotonic()

    def _record(self, test, outcome, reason=""):
        name = test.id().rsplit(".", 1)[-1]
        seconds = round(time.monotonic() - self.started, 2)
        self.records.append({"test": name, "outcome": outcome, "seconds": seconds, "reason": reason})
        first = reason.strip().splitlines()[-1][:160] if reason.strip() else ""
        line = "[%d/%d] %s %s (%.1f s)%s\n" % (len(self.records), self.total, name, outcome, seconds,
                                               (": " + first) if outcome != "passed" and first else "")
        self.progress.write(line)
        self.progress.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test)[-6000:])

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test)[-6000:])

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "xfail", self._exc_info_to_string(err, test)[-2000:])

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "xpass")


def worker_main(args):
    names = select(all_test_names(), args.k, load_subset(args.subset))
    # The ranks write to the log; this worker's own lines go to the driver.
    progress = os.fdopen(os.dup(1), "w")
    log = open(args.log, "a")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    recorder = Recorder(progress, len(names))
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    suite.run(recorder)
    with open(args.json_out, "w") as out:
        json.dump(recorder.records, out, indent=1)
    return 0


# ---- driver side ------------------------------------------------------------

def load_subset(path):
    if not path:
        return None
    with open(path) as f:
        return {line.split("#")[0].strip() for line in f if line.split("#")[0].strip()}


def run_backend(backend, args):
    json_out = os.path.join(args.out, "results-%s.json" % backend)
    if args.reuse and os.path.exists(json_out):
        with open(json_out) as f:
            records = json.load(f)
        print("== %s: %s (earlier results, %s)" % (backend, counts_text(records), json_out), flush=True)
        return records
    env = dict(os.environ)
    env[WORKER_FLAG] = "1"
    env["BACKEND"] = ALIASES.get(backend, backend)
    env["VIGIL_SUITE_AS_GLOO"] = "1" if backend == "vigil-as-gloo" else "0"
    env["VIGIL_SUITE_AS_MPI"] = "1" if backend == "vigil-as-mpi" else "0"
    env["WORLD_SIZE"] = str(args.world_size)
    env.setdefault("VIGIL_SOCKET_IFNAME", "lo")
    env["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.test_timeout)
    log = os.path.join(args.out, "log-%s.txt" % backend)
    if os.path.exists(log):
        os.unlink(log)
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--json-out", json_out, "--log", log,
               "--world-size", str(args.world_size)]
    for pattern in args.k:
        command += ["-k", pattern]
    if args.subset:
        command += ["--subset", args.subset]
    print("== %s, world size %d (ranks' output: %s)" % (backend, args.world_size, log), flush=True)
    started = time.monotonic()
    code = subprocess.call(command, env=env)
    if code != 0 or not os.path.exists(json_out):
        print("== %s: the worker exited with %d; see %s" % (backend, code, log), flush=True)
        return None
    with open(json_out) as f:
        records = json.load(f)
    print("== %s: %s in %.0f s" % (backend, counts_text(records), time.monotonic() - started), flush=True)
    return records


def counts(records):
    c = {"passed": 0, "failed": 0, "skipped": 0, "error": 0, "xfail": 0, "xpass": 0}
    for r in records:
        c[r["outcome"]] += 1
    return c


def counts_text(records):
    c = counts(records)
    text = "%d passed, %d failed, %d skipped, %d errors" % (c["passed"], c["failed"], c["skipped"], c["error"])
    if c["xfail"] or c["xpass"]:
        text += ", %d xfail, %d xpass" % (c["xfail"], c["xpass"])
    return text


def short_reason(record):
    lines = [l.strip() for l in record["reason"].strip().splitlines() if l.strip()]
    for line in lines:  # vigil's own text, when there is one
        if "VG-" in line:
            return line[:300]
    raised = [l for l in lines if re.match(r"^[\w.]*(Error|Exception)\b", l)]
    return ((raised or lines or [""])[-1])[:300]


def compare(results, reference="gloo", subject="vigil"):
    """Tests that pass on one and not on the other."""
    if reference not in results or subject not in results:
        return [], []
    ref = {r["test"]: r for r in results[reference]}
    sub = {r["test"]: r for r in results[subject]}
    regressions = [(sub[n], ref[n]) for n in sub if n in ref and ref[n]["outcome"] == "passed"
                   and sub[n]["outcome"] != "passed"]
    gains = [(sub[n], ref[n]) for n in sub if n in ref and sub[n]["outcome"] == "passed"
             and ref[n]["outcome"] != "passed"]
    return regressions, gains


def not_covered(results):
    """Tests that pass on gloo and in neither vigil run (as its vigil-as-gloo record), or None."""
    if not all(b in results for b in ("vigil", "gloo", "vigil-as-gloo")):
        return None
    vigil = {r["test"]: r for r in results["vigil"]}
    alias = {r["test"]: r for r in results["vigil-as-gloo"]}
    return [alias[r["test"]] for r in results["gloo"] if r["outcome"] == "passed" and r["test"] in alias
            and alias[r["test"]]["outcome"] != "passed" and vigil.get(r["test"], {}).get("outcome") != "passed"]


def write_summary(results, args):
    lines = ["# PyTorch distributed suite: vigil vs gloo", "",
             "torch %s, world size %d, %s" % (_torch_version(), args.world_size, time.strftime("%Y-%m-%d %H:%M")),
             "", "| backend | passed | failed | skipped | errors |", "|---|---|---|---|---|"]
    for backend, records in results.items():
        c = counts(records)
        lines.append("| %s | %d | %d | %d | %d |" % (backend, c["passed"], c["failed"], c["skipped"], c["error"]))
    regressions, gains = compare(results)
    lines += ["", "## Pass on gloo, not on vigil (%d)" % len(regressions), ""]
    lines += ["- `%s`: %s — %s" % (s["test"], s["outcome"], short_reason(s)) for s, _ in regressions] or ["(none)"]
    uncovered = not_covered(results)
    if uncovered is not None:
        lines += ["", "## Pass on gloo, on neither vigil nor vigil-as-gloo (%d)" % len(uncovered), ""]
        lines += ["- `%s`: %s — %s" % (r["test"], r["outcome"], short_reason(r)) for r in uncovered] or ["(none)"]
    lines += ["", "## Pass on vigil, not on gloo (%d)" % len(gains), ""]
    lines += ["- `%s`: gloo %s — %s" % (s["test"], g["outcome"], short_reason(g)) for s, g in gains] or ["(none)"]
    for backend, records in results.items():
        bad = [r for r in records if r["outcome"] in ("failed", "error")]
        lines += ["", "## %s: failures and errors (%d)" % (backend, len(bad)), ""]
        lines += ["- `%s`: %s" % (r["test"], short_reason(r)) for r in bad] or ["(none)"]
        skipped = {}
        for r in records:
            if r["outcome"] == "skipped":
                skipped.setdefault(r["reason"].strip().splitlines()[0][:160] if r["reason"].strip() else "?",
                                   []).append(r["test"])
        lines += ["", "## %s: skips by reason" % backend, ""]
        lines += ["- %d × %s" % (len(v), k) for k, v in sorted(skipped.items(), key=lambda kv: -len(kv[1]))]
    path = os.path.join(args.out, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, regressions, gains


def _torch_version():
    try:
        import torch

        return torch.__version__
    except ImportError:
        return "?"


def driver_main(args):
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for backend in args.backends.split(","):
        if backend not in BACKENDS:
            sys.exit("unknown backend %r (one of %s)" % (backend, ", ".join(BACKENDS)))
        records = run_backend(backend, args)
        if records is not None:
            results[backend] = records
    print()
    for backend, records in results.items():
        print("%-14s %s" % (backend, counts_text(records)))
    path, regressions, gains = write_summary(results, args)
    if regressions:
        print("\npass on gloo, not on vigil:")
        for s, _ in regressions:
            print("  %s: %s — %s" % (s["test"], s["outcome"], short_reason(s)))
    if gains:
        print("\npass on vigil, not on gloo: " + ", ".join(s["test"] for s, _ in gains))
    uncovered = not_covered(results)
    if uncovered:
        print("\npass on gloo, on neither vigil nor vigil-as-gloo:")
        for r in uncovered:
            print("  %s: %s — %s" % (r["test"], r["outcome"], short_reason(r)))
    print("\nsummary: %s" % path)
    failed = [r for r in results.get("vigil", []) if r["outcome"] in ("failed", "error")]
    if "gloo" in results:
        failed = [s for s, _ in regressions]
    return 1 if failed or len(results) < len(args.backends.split(",")) else 0


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="vigil,gloo", help="comma-separated: " + ", ".join(BACKENDS))
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("-k", action="append", default=[], help="run tests whose name contains this (repeatable)")
    parser.add_argument("--subset", help="file with one test name per line (# comments)")
    parser.add_argument("--out", default="suite-results", help="directory for results and logs")
    parser.add_argument("--test-timeout", type=int, default=180, help="seconds before a test's ranks are killed")
    parser.add_argument("--reuse", action="store_true",
                        help="take a backend's results from --out when they are there (compare without rerunning)")
    parser.add_argument("--list", action="store_true", help="print the selected test names and exit")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json-out", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.list:
        env = dict(os.environ, **{WORKER_FLAG: "1", "BACKEND": "gloo", "WORLD_SIZE": str(args.world_size)})
        code = ("import runpy, sys; sys.argv = [sys.argv[0]]; m = runpy.run_path(%r, run_name='suite'); "
                "print('\\n'.join(m['select'](m['all_test_names'](), %r, m['load_subset'](%r))))"
                % (os.path.abspath(__file__), args.k, args.subset))
        return subprocess.call([sys.executable, "-c", code], env=env)
    return driver_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
