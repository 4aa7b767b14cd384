#!/usr/bin/env bash
# The collective checks (vigil-collective-suite) on 4 hosts x 2 ranks = 8 ranks, each
# host a network namespace (hosts.sh), the ranks started the way a launcher would:
#
#   test_launch_env.sh torchrun PROG [VAR=VALUE...]
#   test_launch_env.sh slurm    PROG [VAR=VALUE...]
#
# torchrun  the environment torchrun gives each worker: RANK, WORLD_SIZE, LOCAL_RANK,
#           LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID and
#           TORCHELASTIC_USE_AGENT_STORE=True (torchrun's agent serves its own store on
#           MASTER_PORT, so vigil's root listens on MASTER_PORT+1).
# slurm     the environment srun gives each task: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
#           SLURM_NODEID, SLURM_NNODES, SLURM_JOB_ID, SLURM_STEP_ID, ... There is no Slurm
#           here: this script sets them itself. srun has no rendezvous address, so every
#           task also gets VIGIL_ROOT_ADDR=<host 0>:<port>.
#
# Every rank runs in its host's namespace (ip netns exec) with VIGIL_SOCKET_IFNAME set to
# that host's interface. VAR=VALUE arguments go to every rank (e.g. VIGIL_ALGO=ring).
# Passes when every rank exits 0 (all collectives correct); otherwise prints the output
# of each failing rank. Exit 77 (skipped) without root or network namespaces.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

LAUNCHER=${1:?usage: $0 torchrun|slurm PROG [VAR=VALUE...]}
PROG=${2:?usage: $0 torchrun|slurm PROG [VAR=VALUE...]}
shift 2
EXTRA=("$@")
[[ $LAUNCHER == torchrun || $LAUNCHER == slurm ]] || { echo "unknown launcher '$LAUNCHER'"; exit 2; }
[[ -x $PROG ]] || { echo "FAIL: $PROG is not executable"; exit 1; }
for a in "${EXTRA[@]}"; do
  [[ $a == *=* ]] || { echo "extra argument '$a' is not VAR=VALUE"; exit 2; }
done

HERE=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=hosts.sh
source "$HERE/hosts.sh"

HOSTS=4
PER_HOST=2
NRANKS=$((HOSTS * PER_HOST))
PORT=29500        # every namespace has its own ports: a fixed port is always free
RANK_LIMIT_S=100  # hard limit per rank (a hang becomes exit 124)

hosts_require
hosts_create "$HOSTS"

# rank_env R: prints the launcher's environment for global rank R, one VAR=VALUE a line.
rank_env() {
  local r=$1 node=$(($1 / PER_HOST)) local_rank=$(($1 % PER_HOST))
  case $LAUNCHER in
    torchrun)
      echo "MASTER_ADDR=$(host_addr 0)"
      echo "MASTER_PORT=$PORT"
      echo "RANK=$r"
      echo "WORLD_SIZE=$NRANKS"
      echo "LOCAL_RANK=$local_rank"
      echo "LOCAL_WORLD_SIZE=$PER_HOST"
      echo "GROUP_RANK=$node"
      echo "ROLE_RANK=$r"
      echo "ROLE_WORLD_SIZE=$NRANKS"
      echo "TORCHELASTIC_RUN_ID=mh$MH_ID"
      echo "TORCHELASTIC_USE_AGENT_STORE=True"
      ;;
    slurm)
      echo "SLURM_PROCID=$r"
      echo "SLURM_NTASKS=$NRANKS"
      echo "SLURM_LOCALID=$local_rank"
      echo "SLURM_NODEID=$node"
      echo "SLURM_NNODES=$HOSTS"
      echo "SLURM_JOB_NUM_NODES=$HOSTS"
      echo "SLURM_NTASKS_PER_NODE=$PER_HOST"
      echo "SLURM_TASKS_PER_NODE=$PER_HOST(x$HOSTS)"
      echo "SLURM_JOB_ID=$MH_ID"
      echo "SLURM_STEP_ID=0"
      echo "SLURMD_NODENAME=host$node"
      echo "VIGIL_ROOT_ADDR=$(host_addr 0):$PORT"
      ;;
  esac
  echo "VIGIL_SOCKET_IFNAME=$(host_ifname "$node")"
}

echo "== $NRANKS ranks of $(basename "$PROG") with $LAUNCHER-style environment ${EXTRA[*]}"
start=$SECONDS
pids=()
for ((r = 0; r < NRANKS; r++)); do
  mapfile -t vars < <(rank_env "$r")
  host_spawn $((r / PER_HOST)) "$MH_TMP/rank$r.out" "$RANK_LIMIT_S" env "${vars[@]}" "${EXTRA[@]}" "$PROG"
  pids+=("$MH_SPAWNED")
done

failed=0
for ((r = 0; r < NRANKS; r++)); do
  rc=0
  wait "${pids[r]}" || rc=$?
  if [[ $rc -ne 0 ]]; then
    failed=$((failed + 1))
    why="exit code $rc"
    [[ $rc -eq 124 ]] && why="still running after ${RANK_LIMIT_S} s (killed)"
    echo "FAIL: rank $r on host $((r / PER_HOST)): $why; its output:"
    sed "s/^/  [$r] /" "$MH_TMP/rank$r.out"
  else
    # The suite's summary line, e.g. "rank 3/8: 1234 checks, 0 failed".
    echo "  [$r] $(grep -E '^rank [0-9]+/[0-9]+:' "$MH_TMP/rank$r.out" || echo '(no summary line)')"
  fi
done
echo "$((NRANKS - failed)) of $NRANKS ranks passed in $((SECONDS - start)) s"
[[ $failed -eq 0 ]]
