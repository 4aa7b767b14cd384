# shellcheck shell=bash
# hosts.sh: a multi-host test bed made of network namespaces. Source it from a
# test script (bash, `set -euo pipefail`), then:
#
#   hosts_require             exit 77 (ctest: skipped) unless root with netns, veth, bridge
#   hosts_create N            N hosts, each a namespace with loopback up and one veth whose
#                             other end is a port of a bridge in a "switch" namespace
#   host_ns K                 host K's namespace name (K = 0..N-1)
#   host_addr K               host K's IPv4 address (10.A.B.K+1 in a private /24 of this run)
#   host_ifname K             host K's interface name (for VIGIL_SOCKET_IFNAME)
#   host_exec K cmd...        run cmd in host K (ip netns exec)
#   host_spawn K OUT S cmd... start cmd in host K in the background, stdout+stderr to OUT,
#                             killed after S seconds (exit 124); its pid is in MH_SPAWNED;
#                             its host name is host K's namespace name
#   host_link_down K          unplug host K: its switch port goes down, so every packet to or
#                             from it vanishes without an error (a network partition)
#   host_link_up K            plug it back in (returns once the port forwards again)
#   proc_done PID             true when the background process PID has exited
#   mono_ns                   CLOCK_MONOTONIC in ns (the clock of vigil-test-rank's mono_ns)
#
# Names carry this shell's pid ($$), so concurrent test runs never collide:
# namespaces vigil-mh<pid>-h<k> and vigil-mh<pid>-sw, interfaces mh<pid>h<k> (host side),
# mh<pid>s<k> (switch side) and mh<pid>br (the bridge), at most 14 characters.
# The root namespace's network is never touched: every interface is created in the
# switch namespace and its peer is created directly inside the host namespace.
#
# Everything is removed on exit (trap EXIT INT TERM): the processes in the hosts are
# killed, the namespaces deleted (which deletes their interfaces). A run that was killed
# with SIGKILL cannot clean up; the next run removes namespaces whose owner pid is gone.
# Set MH_KEEP=1 to keep the rank outputs (the directory is printed).

MH_ID=$$
MH_NS_PREFIX="vigil-mh${MH_ID}"
MH_IF_PREFIX="mh${MH_ID}"
# A private /24 derived from the pid: 10.(100..249).(0..255).0/24. It only exists inside
# this run's namespaces, so it cannot clash with the machine's own networks either.
MH_NET="10.$((100 + (MH_ID / 256) % 150)).$((MH_ID % 256))"
MH_HOSTS=0
MH_PIDS=()
MH_SPAWNED=
MH_UTS=0  # 1: the hosts get their own host names (hosts_require checks unshare --uts)
MH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/vigil-mh${MH_ID}.XXXXXX")
trap hosts_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A rank must see only the launcher variables the test gives it: clear those of
# every launcher vigil knows (the caller may itself run under one).
unset VIGIL_RANK VIGIL_WORLD_SIZE VIGIL_LOCAL_RANK VIGIL_LOCAL_SIZE VIGIL_ROOT_INFO VIGIL_ROOT_ADDR \
  VIGIL_ROOT_PORT VIGIL_SOCKET_IFNAME VIGIL_TRANSPORT VIGIL_ALGO VIGIL_PORT_RANGE \
  RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT \
  TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_RUN_ID \
  OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_MCA_ess_base_jobid
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(SLURM_|SLURMD_|PMI_|PMIX_)' || true)

mh_skip() {  # mh_skip reason...: the test cannot run here; ctest shows it as skipped
  echo "SKIP: $*"
  exit 77
}

# ---- preconditions -----------------------------------------------------------------

hosts_require() {
  [[ $(id -u) -eq 0 ]] || mh_skip "multi-host tests need root for network namespaces (uid $(id -u))"
  command -v ip >/dev/null || mh_skip "multi-host tests need 'ip' (iproute2), which is not installed"
  mh_gc_stale
  # Probe what the test bed uses: a namespace, a bridge and a veth pair inside it.
  local probe="${MH_NS_PREFIX}-probe" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    mh_skip "network namespaces are not supported here: ip netns add: $err"
  fi
  if ! err=$( { ip -n "$probe" link add "${MH_IF_PREFIX}pb" type bridge &&
    ip -n "$probe" link add "${MH_IF_PREFIX}pa" type veth peer name "${MH_IF_PREFIX}pz"; } 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    mh_skip "veth pairs or bridges are not supported in network namespaces here: $err"
  fi
  if ! err=$(ip netns exec "$probe" true 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    mh_skip "cannot run a program in a network namespace here: ip netns exec: $err"
  fi
  ip netns del "$probe"
  unshare --uts -- sh -c "hostname vigil-mh-probe" 2>/dev/null && MH_UTS=1
  return 0
}

# Removes the namespaces (with any process still running inside them) and output
# directories of earlier runs whose shell no longer exists (killed by SIGKILL).
mh_gc_stale() {
  local ns pid
  while read -r ns _; do
    [[ $ns =~ ^vigil-mh([0-9]+)-(h[0-9]+|sw|probe)$ ]] || continue
    pid=${BASH_REMATCH[1]}
    [[ $pid -ne $MH_ID ]] && kill -0 "$pid" 2>/dev/null && continue
    echo "note: removing namespace $ns left by an earlier run (pid $pid is gone)"
    mh_kill_ns "$ns"
    ip netns del "$ns" 2>/dev/null || true
    [[ $pid -eq $MH_ID ]] || rm -rf "${TMPDIR:-/tmp}/vigil-mh${pid}".*
  done < <(ip netns list 2>/dev/null || true)
}

mh_kill_ns() {  # mh_kill_ns NS: SIGKILL every process inside namespace NS
  local pids
  mapfile -t pids < <(ip netns pids "$1" 2>/dev/null || true)
  ((${#pids[@]} == 0)) || kill -KILL "${pids[@]}" 2>/dev/null || true
}

# ---- the test bed ------------------------------------------------------------------

host_ns() { echo "${MH_NS_PREFIX}-h$1"; }
host_addr() { echo "${MH_NET}.$(($1 + 1))"; }
host_ifname() { echo "${MH_IF_PREFIX}h$1"; }
mh_switch_ns() { echo "${MH_NS_PREFIX}-sw"; }
mh_port_ifname() { echo "${MH_IF_PREFIX}s$1"; }  # host K's port on the switch

hosts_create() {  # hosts_create N
  local n=$1 k ns sw
  sw=$(mh_switch_ns)
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  # No spanning tree and no forwarding delay: a port forwards as soon as it is up.
  ip -n "$sw" link add "${MH_IF_PREFIX}br" type bridge stp_state 0 forward_delay 0
  ip -n "$sw" link set "${MH_IF_PREFIX}br" up
  for ((k = 0; k < n; k++)); do
    ns=$(host_ns "$k")
    ip netns add "$ns"
    MH_HOSTS=$((k + 1))  # from here on, cleanup removes it
    ip -n "$ns" link set lo up
    # IPv6 off: no link-local addresses, duplicate address detection or router
    # solicitations; the test bed is IPv4 only (ignored where IPv6 is absent).
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
      >/dev/null 2>&1 || true
    ip -n "$sw" link add "$(mh_port_ifname "$k")" type veth peer name "$(host_ifname "$k")" netns "$ns"
    ip -n "$sw" link set "$(mh_port_ifname "$k")" master "${MH_IF_PREFIX}br"
    ip -n "$sw" link set "$(mh_port_ifname "$k")" up
    ip -n "$ns" addr add "$(host_addr "$k")/24" dev "$(host_ifname "$k")"
    ip -n "$ns" link set "$(host_ifname "$k")" up
  done
  for ((k = 0; k < n; k++)); do mh_wait_link "$k"; done
  echo "test bed: $n hosts on ${MH_NET}.0/24 behind bridge ${MH_IF_PREFIX}br in namespace $sw"
  for ((k = 0; k < n; k++)); do
    echo "  host $k: namespace $(host_ns "$k"), $(host_ifname "$k") $(host_addr "$k")"
  done
}

# mh_wait_link K: waits (bounded, 10 s) until host K's link is really up: its
# interface has carrier and its switch port forwards. Both change asynchronously
# after `ip link set up`; this polls for the event, it is not a delay.
mh_wait_link() {
  local k=$1 deadline=$((SECONDS + 10)) state port
  while :; do
    state=$(ip -n "$(host_ns "$k")" -br link show dev "$(host_ifname "$k")" | awk '{print $2}')
    port=$(ip -n "$(mh_switch_ns)" -d link show dev "$(mh_port_ifname "$k")" | grep -o 'bridge_slave state [a-z]*')
    [[ $state == UP && $port == "bridge_slave state forwarding" ]] && return 0
    if ((SECONDS >= deadline)); then
      echo "FAIL: host $k's link is not up after 10 s (interface: $state, switch port: $port)"
      exit 1
    fi
    sleep 0.05
  done
}

host_exec() {  # host_exec K cmd...
  local k=$1
  shift
  ip netns exec "$(host_ns "$k")" "$@"
}

host_spawn() {  # host_spawn K OUT LIMIT_S cmd...
  local k=$1 out=$2 limit=$3 uts=()
  shift 3
  # Host K's namespace name as the host name (a UTS namespace of its own), so that
  # error texts name distinct hosts. Each command execs the next: the pid stays.
  # shellcheck disable=SC2016  # $0 and $@ are for that sh to expand
  [[ $MH_UTS == 1 ]] && uts=(unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$(host_ns "$k")")
  # `timeout` bounds every process this library starts: nothing outlives its test.
  ip netns exec "$(host_ns "$k")" "${uts[@]}" timeout -k 5 "$limit" "$@" >"$out" 2>&1 </dev/null &
  MH_SPAWNED=$!
  MH_PIDS+=("$MH_SPAWNED")
}

# The switch-side end goes down: the host keeps its address and route (its side only
# loses carrier), so its sends are dropped by the veth and the bridge no longer
# forwards to it. No RST, no ICMP error: packets silently vanish.
host_link_down() { ip -n "$(mh_switch_ns)" link set "$(mh_port_ifname "$1")" down; }
host_link_up() {  # returns once the link carries packets again
  ip -n "$(mh_switch_ns)" link set "$(mh_port_ifname "$1")" up
  mh_wait_link "$1"
}

# proc_done PID: true when PID, started in the background by this shell, has exited.
# bash reaps its children by itself; once it has, PID is gone or (reused) no longer
# this shell's child. A zombie counts as exited.
proc_done() {
  local stat state ppid
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  read -r state ppid _ <<<"${stat##*) }"
  [[ $ppid != "$MH_ID" || $state == Z ]]
}

mono_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }

# mh_signal SIG [hosts]: sends SIG to this shell's background processes that still run
# and, with "hosts", to every process inside the hosts. Only those: a pid that bash has
# already reaped may belong to someone else by now.
mh_signal() {
  local pid k pids
  for pid in "${MH_PIDS[@]}"; do proc_done "$pid" || kill "-$1" "$pid" 2>/dev/null; done
  [[ ${2:-} == hosts ]] || return 0
  for ((k = 0; k < MH_HOSTS; k++)); do
    mapfile -t pids < <(ip netns pids "$(host_ns "$k")" 2>/dev/null)
    ((${#pids[@]} == 0)) || kill "-$1" "${pids[@]}" 2>/dev/null
  done
}

mh_busy() {  # true while a background process of this shell or a process in a host runs
  local pid k
  for pid in "${MH_PIDS[@]}"; do proc_done "$pid" || return 0; done
  for ((k = 0; k < MH_HOSTS; k++)); do
    [[ -z $(ip netns pids "$(host_ns "$k")" 2>/dev/null) ]] || return 0
  done
  return 1
}

hosts_cleanup() {
  local rc=$? deadline k
  set +e
  trap - EXIT INT TERM
  exec 2>/dev/null  # no "Terminated"/"Killed" job notices for the processes stopped below
  # First ask: `timeout` passes SIGTERM on to its program (a rank, or mpirun, which
  # stops its ranks) and reaps it. Then force, everything in the hosts too. Both bounded.
  mh_signal TERM
  deadline=$((SECONDS + 3))
  while mh_busy && ((SECONDS < deadline)); do sleep 0.05; done
  deadline=$((SECONDS + 5))
  while mh_busy && ((SECONDS < deadline)); do
    mh_signal KILL hosts
    sleep 0.05
  done
  for ((k = 0; k < MH_HOSTS; k++)); do ip netns del "$(host_ns "$k")" 2>/dev/null; done
  ip netns del "$(mh_switch_ns)" 2>/dev/null
  if [[ ${MH_KEEP:-0} == 1 ]]; then
    echo "outputs kept in $MH_TMP"
  else
    rm -rf "$MH_TMP"
  fi
  exit "$rc"
}
