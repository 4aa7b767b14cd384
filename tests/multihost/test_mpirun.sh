#!/usr/bin/env bash
# The collective checks (vigil-collective-suite) on 4 hosts x 2 ranks = 8 ranks started by
# Open MPI's mpirun:
#
#   test_mpirun.sh PROG [VAR=VALUE...]
#
# mpirun starts all 8 processes on this machine; each is mpirun_rank.sh, which moves itself
# into its host's network namespace (host = OMPI_COMM_WORLD_RANK / 2) and sets
# VIGIL_SOCKET_IFNAME before it execs PROG. vigil does not call MPI_Init: it reads
# OMPI_COMM_WORLD_RANK/SIZE, and rank 0 serves the rendezvous at VIGIL_ROOT_ADDR
# (<host 0>:<port>, given to every rank with -x). VAR=VALUE arguments go to every rank.
# On real machines the same job is
#   mpirun -np 8 -H a:2,b:2,c:2,d:2 -x VIGIL_ROOT_ADDR=a:29500 -x VIGIL_SOCKET_IFNAME=eth0 PROG
# Passes when every rank exits 0; otherwise prints mpirun's output (lines tagged with the
# rank). Exit 77 (skipped) without Open MPI's mpirun, root or network namespaces.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

PROG=${1:?usage: $0 PROG [VAR=VALUE...]}
shift
EXTRA=("$@")
[[ -x $PROG ]] || { echo "FAIL: $PROG is not executable"; exit 1; }
for a in "${EXTRA[@]}"; do
  [[ $a == *=* ]] || { echo "extra argument '$a' is not VAR=VALUE"; exit 2; }
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hosts.sh
source "$HERE/hosts.sh"

# MH_MPIRUN picks another mpirun; by default /usr/bin/mpirun, else the one on PATH.
if [[ -n ${MH_MPIRUN:-} ]]; then
  MPIRUN=$MH_MPIRUN
else
  MPIRUN=/usr/bin/mpirun
  [[ -x $MPIRUN ]] || MPIRUN=$(command -v mpirun || echo /usr/bin/mpirun)
fi
[[ -x $MPIRUN ]] || mh_skip "$MPIRUN is not installed (Open MPI's mpirun: apt-get install openmpi-bin)"
"$MPIRUN" --version 2>&1 | grep -q "Open MPI" ||
  mh_skip "$MPIRUN is not Open MPI's mpirun (vigil reads OMPI_COMM_WORLD_RANK/SIZE)"

HOSTS=4
PER_HOST=2
NRANKS=$((HOSTS * PER_HOST))
PORT=29500       # every namespace has its own ports: a fixed port is always free
JOB_LIMIT_S=100  # hard limit for the whole mpirun (a hang becomes exit 124)

hosts_require
hosts_create "$HOSTS"

export MH_RANKS_PER_HOST=$PER_HOST MH_HOST_NS="" MH_HOST_IF="" MH_UTS
for ((k = 0; k < HOSTS; k++)); do
  MH_HOST_NS+="$(host_ns "$k") "
  MH_HOST_IF+="$(host_ifname "$k") "
done

# As root mpirun wants --allow-run-as-root; --oversubscribe lets 8 ranks start on 2 cores
# and --bind-to none keeps them from being pinned to the same cores. The ranks never
# call MPI_Init, so the byte transfer layers (--mca btl) are never used.
# shellcheck disable=SC2054  # "self,tcp" is one argument
args=(--allow-run-as-root --oversubscribe --bind-to none --mca btl self,tcp --tag-output
  -np "$NRANKS"
  -x "VIGIL_ROOT_ADDR=$(host_addr 0):$PORT" -x MH_HOST_NS -x MH_HOST_IF -x MH_RANKS_PER_HOST -x MH_UTS)
for a in "${EXTRA[@]}"; do args+=(-x "$a"); done

echo "== $NRANKS ranks of $(basename "$PROG") under $MPIRUN ($("$MPIRUN" --version 2>&1 | head -1)) ${EXTRA[*]}"
echo "   mpirun ${args[*]} bash mpirun_rank.sh $(basename "$PROG")"
start=$SECONDS
# In the background, so that a SIGTERM to this script runs its cleanup at once (bash
# defers traps until a foreground command ends, but `wait` returns for them).
timeout -k 5 "$JOB_LIMIT_S" "$MPIRUN" "${args[@]}" bash "$HERE/mpirun_rank.sh" "$PROG" \
  >"$MH_TMP/mpirun.out" 2>&1 </dev/null &
MH_PIDS+=($!)
rc=0
wait $! || rc=$?

# The suite's summary lines, e.g. "[1,3]<stdout>:rank 3/8: 1234 checks, 0 failed".
passed=$(grep -cE '<stdout>:rank [0-9]+/8: [0-9]+ checks, 0 failed$' "$MH_TMP/mpirun.out" || true)
if [[ $rc -eq 0 && $passed -eq $NRANKS ]]; then
  grep -E '<stdout>:rank [0-9]+/8:' "$MH_TMP/mpirun.out" | sort -t, -k2n | sed 's/^/  /'
  echo "$NRANKS of $NRANKS ranks passed in $((SECONDS - start)) s"
  exit 0
fi
why="mpirun exit code $rc"
[[ $rc -eq 124 ]] && why="mpirun still running after ${JOB_LIMIT_S} s (killed)"
echo "FAIL: $why, $passed of $NRANKS ranks reported all checks passed; mpirun's output:"
sed 's/^/  /' "$MH_TMP/mpirun.out"
exit 1
