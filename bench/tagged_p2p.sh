#!/usr/bin/env bash
# Tagged point-to-point against untagged and against Open MPI, side by side
# in one run: 2 ranks on this host, alternating rounds, medians of rounds.
#   vigil    sendrecv      untagged vigilSend + vigilRecv in a group
#   vigil    sendrecv_tag  vigilSendRecv (tagged, named source)
#   vigil    sendrecv_any  vigilSendTag, vigilRecvTag from VIGIL_ANY_SOURCE (rank 1
#                          receives first: a ping-pong, two one-way trips per call)
#   Open MPI sendrecv      MPI_Sendrecv (build-bench/mpi_perf_openmpi, bench/build_peers.sh)
# each over vigil's shared memory (default) and over its TCP (VIGIL_TRANSPORT=tcp).
#   bench/tagged_p2p.sh [--rounds N]     (build/ and build-bench/ built first)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3
[ "${1:-}" = "--rounds" ] && ROUNDS=$2
SIZES=(8 65536 16777216)
export VIGIL_SOCKET_IFNAME=lo
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# time per call (us) for each size, from one run's output: "label size time"
collect() {  # label file
  awk -v label="$1" '$1 == "[0]" && $2 ~ /^[0-9]+$/ { print label, $2, $7 }
                     $1 == "openmpi" && $4 ~ /^[0-9]+$/ { print label, $4, $6 }' "$2"
}
for round in $(seq "$ROUNDS"); do
  for transport in shm tcp; do
    env=()
    [ "$transport" = tcp ] && env=(VIGIL_TRANSPORT=tcp)
    for coll in sendrecv sendrecv_tag sendrecv_any; do
      for size in "${SIZES[@]}"; do
        env "${env[@]}" build/vigil-run -n 2 -- build/vigil-perf -c "$coll" -b "$size" -e "$size" -n 20 -s 10 \
          >"$TMP/out" 2>&1
        collect "vigil-$transport $coll" "$TMP/out" >>"$TMP/all"
      done
    done
  done
  for size in "${SIZES[@]}"; do
    mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 build-bench/mpi_perf_openmpi -c sendrecv -b "$size" \
      -e "$size" -n 20 -s 10 >"$TMP/out" 2>&1
    collect "openmpi sendrecv" "$TMP/out" >>"$TMP/all"
  done
done
echo "| library, call | $(printf '%s B | ' "${SIZES[@]}")"
echo "|---|$(printf -- '---|%.0s' "${SIZES[@]}")"
/usr/bin/python3 - "$TMP/all" "${SIZES[@]}" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    *label, size, t = line.split()
    rows.setdefault(" ".join(label), {}).setdefault(size, []).append(float(t))
for label, by in rows.items():
    cells = [f"{statistics.median(by[s]):.2f} us" if s in by else "-" for s in sys.argv[2:]]
    print(f"| {label} | " + " | ".join(cells) + " |")
EOF
