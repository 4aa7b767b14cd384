"""Ctrl-C reaches a rank blocked in a call: the call wakes at once, aborts its
communicator (the peers hear which rank aborted) and raises KeyboardInterrupt,
instead of waiting for the operation's timeout."""

import json
import os
import queue
import signal
import subprocess
import threading
import time

import vigil

from test_processes import PROGRAM, PYTHON, clean_env


class Rank:
    """A rank_program.py process whose stdout lines arrive in a queue."""

    def __init__(self, mode, env):
        self.process = subprocess.Popen([PYTHON, PROGRAM, mode], env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def next_line(self, timeout):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no line from the rank within %s s" % timeout) from None


def test_ctrl_c_aborts_a_blocked_call_and_raises_keyboard_interrupt():
    root = vigil.root_info()
    # The default operation timeout, 600 s: only the interrupt can end the call in time.
    ranks = [Rank("interrupted", clean_env(VIGIL_ROOT_INFO=root, VIGIL_RANK=r, VIGIL_WORLD_SIZE=2,
                                           VIGIL_TIMEOUT_MS=600000)) for r in range(2)]
    try:
        assert ranks[1].next_line(60) == "waiting"
        line = ranks[0].next_line(60)
        while line == "blocking":
            sent = time.monotonic()
            os.kill(ranks[0].process.pid, signal.SIGINT)
            line = ranks[0].next_line(30)
        woke = time.monotonic() - sent
        assert line is not None, ranks[0].process.stderr.read()
        report = json.loads(line)
        assert woke < 10, woke
        assert report["raised"] == "KeyboardInterrupt", report
        note = "\n".join(report["notes"])
        assert note.startswith("vigil: rank 0/2: all_reduce was interrupted (SIGINT): this rank aborted the "
                               "communicator and its peers were told. The call returned: VG-COMM-001: "), note
        assert "the communicator was aborted (KeyboardInterrupt: SIGINT in Python) while this operation waited" in note
        assert report["after"] == "VG-API-007", report  # the communicator is closed

        ranks[1].process.stdin.write("go\n")
        ranks[1].process.stdin.flush()
        peer = json.loads(ranks[1].next_line(60))
        # Its allreduce either fails with the abort, or (rank 0's input was
        # published before it aborted) completes right and the barrier fails.
        assert peer["first"] in (None, [2.0, 2.0, 2.0, 2.0]), peer
        assert peer["error_id"] == "VG-PEER-003", peer
        assert "rank 0 aborted the communicator (KeyboardInterrupt: SIGINT in Python)" in peer["text"], peer
        assert peer["seconds"] < 10, peer
        for rank in ranks:
            assert rank.process.wait(timeout=60) == 0, rank.process.stderr.read()
    finally:
        for rank in ranks:
            if rank.process.poll() is None:
                rank.process.kill()
                rank.process.wait()
