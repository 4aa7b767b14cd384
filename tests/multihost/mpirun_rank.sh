#!/usr/bin/env bash
# mpirun_rank.sh PROG [ARGS...]: one rank of test_mpirun.sh. mpirun starts every rank on
# this machine; the rank moves itself into its "host" (network namespace) before it
# becomes PROG: host K = OMPI_COMM_WORLD_RANK / MH_RANKS_PER_HOST. From the test script
# (mpirun -x): MH_HOST_NS and MH_HOST_IF, the namespaces and interface names of the hosts
# in order, separated by spaces, and MH_UTS. `ip netns exec` (and unshare, sh) exec PROG,
# so the pid mpirun started is PROG's pid.
set -euo pipefail

: "${OMPI_COMM_WORLD_RANK:?not started by Open MPI mpirun}"
read -ra ns <<<"${MH_HOST_NS:?}"
read -ra ifs <<<"${MH_HOST_IF:?}"
k=$((OMPI_COMM_WORLD_RANK / ${MH_RANKS_PER_HOST:?}))
# With MH_UTS=1 the rank also gets the host's name as its host name (see hosts.sh).
uts=()
# shellcheck disable=SC2016  # $0 and $@ are for that sh to expand
[[ ${MH_UTS:-0} == 1 ]] && uts=(unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "${ns[k]}")
exec ip netns exec "${ns[k]}" "${uts[@]}" env VIGIL_SOCKET_IFNAME="${ifs[k]}" "$@"
