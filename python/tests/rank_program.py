"""One rank of the multi-process tests: `python3 rank_program.py MODE`.

It joins from the launcher's environment (vigil.init()) and prints one JSON
line with what it saw; test_processes.py starts it and checks the lines."""

import json
import os
import signal
import sys
import time

import numpy as np

import vigil


def collectives(comm):
    r, n = comm.rank, comm.size
    total = comm.all_reduce(np.arange(4, dtype=np.float64) + r)
    gathered = comm.all_gather(np.array([r * 10], np.int32))
    work = comm.broadcast(np.full(2, r, np.int64), root=n - 1, async_op=True)
    return {"sum": total.tolist(), "gathered": gathered.ravel().tolist(), "bcast": work.wait().tolist()}


def peer_dies(comm):
    comm.barrier()
    if comm.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # no goodbye: a crash
    try:
        comm.all_reduce(np.ones(4, np.float32))
    except vigil.RemoteError as error:
        return {"error_id": error.error_id, "class": type(error).__name__, "cause": error.cause}
    return {"error_id": None}


def peer_ends(comm, how):
    comm.barrier()
    if comm.rank == 1:
        if how == "raises":
            print(1 / 0)  # uncaught: the program dies of it, without closing the communicator
        global KEPT
        KEPT = comm  # as a script's top-level `comm = vigil.init()`: alive until the interpreter ends
        sys.exit(0)  # a normal end, also without closing it
    try:
        comm.all_reduce(np.ones(4, np.float32))
    except vigil.RemoteError as error:
        return {"error_id": error.error_id, "cause": error.cause, "remedy": error.remedy}
    return {"error_id": None}


def interrupted(comm):
    # Rank 0 blocks in an allreduce that rank 1 never joins; the test sends it
    # SIGINT after each "blocking" line (again if it came before the call waited).
    comm.barrier()
    if comm.rank == 0:
        while True:
            try:
                print("blocking", flush=True)
                comm.all_reduce(np.ones(4, np.float32))
            except KeyboardInterrupt as interrupt:
                if not comm.closed:
                    continue  # raised before the call started to wait: nothing was aborted
                try:
                    comm.all_reduce(np.ones(4, np.float32))
                    after = None
                except vigil.Error as error:
                    after = error.error_id
                return {"raised": type(interrupt).__name__, "notes": getattr(interrupt, "__notes__", []),
                        "after": after}
    print("waiting", flush=True)
    sys.stdin.readline()  # the test's word: rank 0 was interrupted
    started = time.monotonic()
    first = None
    try:
        first = comm.all_reduce(np.ones(4, np.float32)).tolist()
        # Rank 0 published its input before it aborted and the abort notice may
        # still be on its way: then this result is right (2.0 each), and the next
        # operation, which rank 0 never joins, hears the abort.
        comm.barrier()
    except vigil.Error as error:
        return {"error_id": error.error_id, "class": type(error).__name__, "text": str(error),
                "seconds": time.monotonic() - started, "first": first}
    return {"error_id": None, "first": first}


def main():
    mode = sys.argv[1]
    comm = vigil.init()
    report = {"rank": comm.rank, "size": comm.size}
    modes = {"collectives": collectives, "peer_dies": peer_dies, "interrupted": interrupted,
             "peer_raises": lambda c: peer_ends(c, "raises"), "peer_exits": lambda c: peer_ends(c, "exits")}
    report.update(modes[mode](comm))
    comm.close()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
