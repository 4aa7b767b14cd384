#!/usr/bin/env bash
# Checks `vigil-doctor logs`: the signature knowledge base (tools/log_signatures.json) proven
# against its own samples, and verdicts over the logs of failed jobs: per-rank torch/NCCL
# files with a straggler (one gzip-compressed), diverged collectives, a port in use on one of
# two hosts, ranks missing at init, launcher output with mpirun/srun/torchrun prefixes, time
# order across files, a vigil error id the knowledge base has no entry for, and two real vigil
# jobs under vigil-run (a rank killed with SIGKILL, a rank that stalls).
# The fixture lines reuse the wording of the knowledge base's samples (public sources) with
# other ranks, hosts and numbers.
# Usage: test_doctor_logs.sh vigil-doctor vigil-run vigil-test-rank source-dir
set -u

DOCTOR=${1:?usage: $0 vigil-doctor vigil-run vigil-test-rank source-dir}
RUN=${2:?usage: $0 vigil-doctor vigil-run vigil-test-rank source-dir}
RANK=${3:?usage: $0 vigil-doctor vigil-run vigil-test-rank source-dir}
SRC=${4:?usage: $0 vigil-doctor vigil-run vigil-test-rank source-dir}
KB=$SRC/tools/log_signatures.json
[[ -f $KB ]] || { echo "FAIL: $KB not found"; exit 1; }
TMP=$(mktemp -d)
trap '[[ -n ${KEEP_TMP:-} ]] || rm -rf "$TMP"' EXIT
# shellcheck source=../common/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/checks.sh"
export VIGIL_DOCS_DIR=$SRC/docs VIGIL_SIGNATURES=$KB VIGIL_SOCKET_IFNAME=lo
# doctor args...: runs vigil-doctor; sets RC, OUT (stdout), ERR (stderr).
doctor() {
  timeout 120 "$DOCTOR" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
  OUT=$(cat "$TMP/out")
  ERR=$(cat "$TMP/err")
}
show() { echo "  rc=$RC"; sed 's/^/  stdout: /' "$TMP/out"; sed 's/^/  stderr: /' "$TMP/err"; }
# has TEXT NEEDLE: TEXT contains NEEDLE literally (line breaks of wrapped text read as spaces)
has() { grep -qF -- "$2" <<<"$(tr -s ' \n' ' ' <<<"$1")"; }
verdict() { grep '^verdict: ' <<<"$OUT"; }

echo "== the knowledge base proves itself"
doctor logs --check-signatures
check "shipped knowledge base: rc 0 (got $RC)" test "$RC" -eq 0
check "every sample matches its own signature and no other" \
  has "$OUT" "signatures: all samples match their own signature and no other"
COUNT=$(sed -n 's/.*: \([0-9]*\) signatures (.*/\1/p' <<<"$OUT")
check "at least 60 signatures (got ${COUNT:-none})" test "${COUNT:-0}" -ge 60
for system in nccl hccl torch gloo mpi vigil launcher; do
  check "signatures of $system" grep -qE "[(, ]$system [1-9][0-9]*[,)]" <<<"$OUT"
done
check "every signature names the public source of its wording" \
  test "$(python3 -c 'import json,sys; kb=json.load(open(sys.argv[1])); print(sum(1 for s in kb if not s["source"].startswith(("https://","vigil:"))))' "$KB")" = 0
[[ $FAILED -eq 0 ]] || show

# A knowledge base of one's own: the check has teeth.
cat >"$TMP/kb-bad.json" <<'EOF'
[
 {"id": "x-one", "system": "nccl", "role": "cause", "needle": "socket closed", "pattern": "socket closed by ([0-9]+)",
  "fields": {"peer": 1}, "title": "t", "meaning": "m", "causes": ["c"], "remedy": "r",
  "source": "https://example.org/a", "samples": ["socket closed by 3", "socket closed by nobody"]},
 {"id": "x-two", "system": "nccl", "role": "cause", "needle": "closed", "pattern": "closed",
  "title": "t", "meaning": "m", "causes": ["c"], "remedy": "r", "source": "https://example.org/b",
  "samples": ["connection closed"]}
]
EOF
doctor logs --check-signatures "$TMP/kb-bad.json"
check "a failing knowledge base: rc 1 (got $RC)" test "$RC" -eq 1
check "a sample its pattern misses is named" has "$OUT" \
  "FAIL x-one: the pattern does not match its sample: socket closed by nobody"
check "a pattern that matches another signature's sample is named" has "$OUT" \
  "FAIL x-two: also matches a sample of 'x-one': socket closed by 3"
check "the count of problems" has "$OUT" "signatures: 3 problem(s)"
sed 's/"fields": {"peer": 1}/"fields": {"peer": 2}/' "$TMP/kb-bad.json" >"$TMP/kb-group.json"
doctor logs --check-signatures "$TMP/kb-group.json"
check "a field on a group the pattern lacks: rc 1 (got $RC)" test "$RC" -eq 1
check "  ... is named with the entry" has "$ERR" "entry 0 ('x-one'): field 'peer' names no capture group"
sed 's/"pattern": "closed"/"pattern": "(?<name>closed)"/' "$TMP/kb-bad.json" >"$TMP/kb-regex.json"
doctor logs --check-signatures "$TMP/kb-regex.json"
check "a pattern std::regex rejects: rc 1 (got $RC)" test "$RC" -eq 1
check "  ... is named with the entry" has "$ERR" "entry 1 ('x-two'): the pattern does not compile"
[[ $FAILED -eq 0 ]] || show

echo "== usage"
doctor logs
check "logs without input: rc 2 (got $RC)" test "$RC" -eq 2
doctor logs "$TMP/nowhere"
check "a missing input: rc 1 (got $RC)" test "$RC" -eq 1
check "  ... names it" has "$ERR" "$TMP/nowhere: no such file or directory"
doctor logs --signatures "$TMP/nowhere.json" "$KB"
check "a missing knowledge base: rc 1 (got $RC)" test "$RC" -eq 1
[[ $FAILED -eq 0 ]] || show

echo "== torch + NCCL, one file per rank: rank 3 never entered seq 1205"
mkdir -p "$TMP/straggler"
for r in 0 1 2 4 5; do
  cat >"$TMP/straggler/rank$r.log" <<EOF
[rank$r]:[I501 11:58:00.000000000 ProcessGroupNCCL.cpp:100] [PG 0 Rank $r] ProcessGroupNCCL initialization options: size: 6
[rank$r]:[E501 12:10:0$r.408271257 ProcessGroupNCCL.cpp:607] [Rank $r] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1205, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.
[rank$r]:[E501 12:10:0$r.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank $r] Exception (either an error or timeout) detected by watchdog at work: 1205, last enqueued NCCL work: 1205, last completed NCCL work: 1204.
[rank$r]:[E501 12:10:0$r.500000000 ProcessGroupNCCL.cpp:621] [Rank $r] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
EOF
done
cat >"$TMP/straggler/rank3.log" <<'EOF'
[rank3]:[I501 11:58:00.000000000 ProcessGroupNCCL.cpp:100] [PG 0 Rank 3] ProcessGroupNCCL initialization options: size: 6
[rank3]:[E501 12:10:09.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 3] Exception (either an error or timeout) detected by watchdog at work: 1204, last enqueued NCCL work: 1204, last completed NCCL work: 1204.
EOF
gzip "$TMP/straggler/rank2.log"
doctor logs "$TMP/straggler"
check "rc 0 (got $RC)" test "$RC" -eq 0
check "reads 6 files, one of them gzip" has "$OUT" "logs: 6 file(s), 22 lines; ranks with lines: 0-5"
check "verdict: rank 3 is the straggler" has "$(verdict)" \
  "rank 3 reached seq 1204 and never entered seq 1205; ranks 0-2,4,5 timed out in ALLREDUCE seq 1205 → rank 3 is the straggler or diverged"
check "the others only waited" has "$OUT" "only waited: ranks 0-2,4,5 (no failure of their own)"
check "evidence from the gzip file, with its line" has "$OUT" "straggler/rank2.log.gz:2 [rank 2] torch-nccl-watchdog-timeout:"
check "evidence in time order: rank 0's timeout first" \
  test "$(grep -m1 'torch-nccl-watchdog-timeout' <<<"$OUT" | grep -c 'rank0.log:2')" -eq 1
[[ $FAILED -eq 0 ]] || show

echo "== ranks ran different collectives at one seq"
mkdir -p "$TMP/diverged"
for r in 0 1 2; do
  op=ALLREDUCE
  [[ $r == 2 ]] && op=BROADCAST
  printf '[rank%d]:[E321 02:07:0%d.408271257 ProcessGroupNCCL.cpp:607] [Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=%s, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n' \
    "$r" "$r" "$r" "$op" >"$TMP/diverged/worker-$r.log"
done
doctor logs "$TMP/diverged"
check "diverged: names both operations and their ranks" has "$OUT" \
  "ranks ran different collectives at seq 7: ALLREDUCE of 1024 element(s) on ranks 0,1; BROADCAST of 1024 element(s) on rank 2; their programs diverged (vigil reports this as VG-OP-002"
[[ $FAILED -eq 0 ]] || show

echo "== two hosts: the store's port is in use on node0"
mkdir -p "$TMP/port/node0" "$TMP/port/node1"
cat >"$TMP/port/node0/rank0.log" <<'EOF'
2024-05-01 12:00:00,100 INFO starting worker
[rank0]: RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).
EOF
for r in 1 2 3; do
  printf '2024-05-01 12:01:0%d,000 ERROR worker failed\n[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to connect to (node0, 29500).\n' "$r" \
    >"$TMP/port/node1/rank$r.log"
done
doctor logs "$TMP/port"
check "verdict: the port on rank 0 (host node0)" has "$(verdict)" \
  "verdict: the first failure is on rank 0 (host node0) at 2024-05-01 12:00:00.100: TCPStore server could not bind MASTER_PORT (address already in use)"
check "the port, by host" has "$OUT" "port 29500 on host node0 failed for 1 line(s) of rank 0"
check "the vigil id of that situation" has "$OUT" "vigil: VG-NET-001"
check "ranks 1-3 only waited" has "$OUT" "only waited: ranks 1-3"
check "the remedy" has "$OUT" "remedy:"
[[ $FAILED -eq 0 ]] || show

echo "== the same verdicts for programs (--json) and in a browser (--html, rendered by headless Chromium)"
doctor logs "$TMP/port" --json
check "--json: rc 0 (got $RC)" test "$RC" -eq 0
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" <<<"$OUT"; }
check "--json: the verdict is a failure on rank 0, host node0" \
  test "$(jq_ "d['verdict']['kind'], d['verdict']['rank'], d['verdict']['host']")" = "failure 0 node0"
check "--json: the verdict's signature and vigil id" \
  test "$(jq_ "d['verdict']['signature']['id'], d['verdict']['signature']['vigil']")" = "torch-tcpstore-port-in-use VG-NET-001"
check "--json: ranks 1-3 only waited" test "$(jq_ "d['only_waited']")" = "[1, 2, 3]"
check "--json: every matched line, with file, line and fields" \
  test "$(jq_ "len(d['hits']), d['hits'][0]['file'].endswith('node0/rank0.log'), d['hits'][0]['line'], d['hits'][0]['fields']['port']")" = "4 True 2 29500"
doctor logs "$TMP/straggler" --json
check "--json: the straggler, by reasoning" \
  test "$(jq_ "d['verdict']['kind'], d['verdict']['rank'], d['findings'][d['verdict']['finding']]['rank']")" = "reasoning 3 3"

CHROME=$(command -v chromium || command -v chromium-browser || true)
render() {  # render REPORT.html: the DOM after the page ran, as headless Chromium gives it
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --user-data-dir="$TMP/chrome" --dump-dom "file://$1" \
    2>"$TMP/chrome.err"
}
if [[ -z $CHROME ]]; then
  fail "the HTML report needs chromium to be checked (Debian package chromium; build.sh installs it)"
else
  doctor logs "$TMP/port" --html "$TMP/port.html"
  check "--html: rc 0 (got $RC), the text report too" test "$RC" -eq 0 -a -n "$OUT"
  check "--html: self-contained (no src= or href=)" test "$(grep -cE 'src=|href=' "$TMP/port.html")" -eq 0
  DOM=$(render "$TMP/port.html")
  check "rendered: the page's script ran" has "$DOM" '<body class="rendered">'
  check "rendered: one timeline row per rank, the first failure drawn" has "$DOM" \
    "rendered: 4 rank rows, 4 events, first failure: torch-tcpstore-port-in-use"
  check "rendered: the first failure highlighted" grep -q '<circle class="mark cause first" id="first-failure"' <<<"$DOM"
  check "rendered: the verdict" has "$DOM" "the first failure is on rank 0 (host node0)"
  check "rendered: its evidence row highlighted" grep -q '<tr class="first-failure">' <<<"$DOM"
  doctor logs "$TMP/straggler" --html "$TMP/straggler.html"
  DOM=$(render "$TMP/straggler.html")
  check "rendered: the straggler's row marked" grep -q '<g class="row origin" data-rank="3">' <<<"$DOM"
  check "rendered: six rank rows" has "$DOM" "rendered: 6 rank rows, 16 events"
  [[ $FAILED -eq 0 ]] || sed 's/^/  chromium: /' "$TMP/chrome.err" | tail -5
fi
[[ $FAILED -eq 0 ]] || show

echo "== init: 3 of 4 clients joined; rank 3 wrote nothing"
mkdir -p "$TMP/init"
echo 'torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 3/4 clients joined.' \
  >"$TMP/init/rank0.log"
for r in 1 2; do echo "rank $r: waiting for the store" >"$TMP/init/rank$r.log"; done
doctor logs "$TMP/init"
check "init: names the missing rank" has "$OUT" \
  "init: 4 ranks expected, 3 arrived (TCPStore server: not all ranks connected in time); missing: rank 3 (the only ranks that wrote no log lines)"
check "verdict from the counts" has "$(verdict)" "reasoning across ranks: init: 4 ranks expected, 3 arrived"
echo 'torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 2/4 clients joined.' \
  >"$TMP/init/rank0.log"
doctor logs "$TMP/init"
check "init: counts that do not single ranks out are not turned into names" has "$OUT" \
  "rank 3 wrote no log lines, 2 are missing: the logs do not name them for certain"
[[ $FAILED -eq 0 ]] || show

echo "== ranks stop at different iterations (Megatron-LM's progress lines)"
mkdir -p "$TMP/iters"
for r in 0 1 2; do
  last=200
  [[ $r == 2 ]] && last=120
  for ((it = 10; it <= last; it += 10)); do
    printf ' [2024-05-01 12:%02d:00] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): 512.3 |\n' \
      $((it / 10)) "$it" 1000 $((it * 128))
  done >"$TMP/iters/rank$r.log"
done
doctor logs "$TMP/iters"
check "verdict: rank 2 stopped first" has "$(verdict)" \
  "rank 2 last logged iteration 120, while others reached 200 → rank 2 stopped (or fell behind) first"
echo 'RuntimeError: found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective' \
  >>"$TMP/iters/rank1.log"
doctor logs "$TMP/iters"
check "a NaN found on rank 1 is the failure, with vigil's id for it" has "$OUT" \
  "verdict: the first failure is on rank 1 at 2024-05-01 12:20:00.000: Megatron-LM: NaN in a rank's local gradients"
check "  ... VG-NUM-001" has "$OUT" "vigil: VG-NUM-001"
[[ $FAILED -eq 0 ]] || show

echo "== launcher prefixes: mpirun --tag-output, srun --label, torchrun --tee"
cat >"$TMP/mpirun.out" <<'EOF'
[1,0]<stdout>:step 10
[1,3]<stderr>:[g32n03:32314] *** An error occurred in MPI_Allreduce
[1,3]<stderr>:[g32n03:32314] *** MPI_ERR_TRUNCATE: message truncated
[1,1]<stdout>:step 11
EOF
doctor logs "$TMP/mpirun.out"
check "mpirun: the rank comes from the tag" has "$(verdict)" \
  "verdict: the first failure is on rank 3 (host g32n03): Open MPI: an MPI call returned an error"
check "mpirun: ranks with lines" has "$OUT" "ranks with lines: 0,1,3"
printf '0: starting\n 5: node7:4411:4411 [0] bootstrap.cc:48 NCCL WARN Bootstrap : no socket interface found\n' >"$TMP/srun.out"
doctor logs "$TMP/srun.out"
check "srun --label: rank 5, host from NCCL's prefix" has "$(verdict)" \
  "verdict: the first failure is on rank 5 (host node7)"
printf '[default2]:[W729 10:15:17.529361055 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=76, addr=[localhost]:60950, remote=[localhost]:29500): Connection reset by peer\n' >"$TMP/torchrun.out"
doctor logs "$TMP/torchrun.out"
check "torchrun --tee: rank 2" has "$(verdict)" "verdict: the first failure is on rank 2"
[[ $FAILED -eq 0 ]] || show

echo "== time order across files, HCCL plog timestamps"
mkdir -p "$TMP/hccl"
# a.log sorts first but its failure is later than b.log's.
echo '[ERROR] HCCL(7988,all_reduce_test):2025-03-19-04:16:15.978.995 [topoinfo_exchange_agent.cc:41] [7988][TopoInfoExchangeAgent][Setup]TopoExchangeAgent: connect server[127.10.0.1 : 60000] failed' \
  >"$TMP/hccl/a.log"
echo '[ERROR] HCCL(925892,alltoall_test):2025-03-19-04:16:14.634.432 [sal.cc:501] [925892][InitGroupStage][EnvConfig]set ifname to [abc] by HCCL_SOCKET_IFNAME, but not found in the environment, ifnames in the environment is as follows' \
  >"$TMP/hccl/b.log"
doctor logs "$TMP/hccl"
check "the earlier line wins across files" has "$(verdict)" "at 2025-03-19 04:16:14.634"
check "  ... and it is b.log's" has "$OUT" "line: $TMP/hccl/b.log:1"
check "  ... with its vigil id" has "$OUT" "vigil: VG-NET-002"
[[ $FAILED -eq 0 ]] || show

echo "== a vigil error id without an entry of its own"
echo 'RuntimeError: VG-MOE-003: rank 1/4 (comm '"'"'moe'"'"'): moe_dispatch seq 9: topk index 17 at token 3 slot 1 is outside [0, 16). Remedy: pass expert indices in [0, numExperts).' \
  >"$TMP/moe-rank1.log"
doctor logs "$TMP/moe-rank1.log"
check "recognised as vigil's own id with its meaning from errors.md" has "$(verdict)" \
  "verdict: the first failure is on rank 1: vigil VG-MOE-003:"
check "the world size from the id's rank field" has "$OUT" "ranks with lines: 1 of 4"
[[ $FAILED -eq 0 ]] || show

echo "== a real job: rank 2 killed with SIGKILL under vigil-run"
timeout 90 "$RUN" -n 3 --dump-grace 0 --timeout 60 "$RANK" loop --iters 5 --count 4 --leave-rank 2 --leave-iter 2 \
  --how kill >"$TMP/killed.log" 2>&1
doctor logs "$TMP/killed.log"
# Whether a survivor reports the lost peer before vigil-run stops it is a race: either line
# comes first in the log, and both put the verdict on rank 2.
check "verdict: rank 2 (killed, or reported lost by a survivor)" grep -qE \
  "^verdict: (the first failure is on rank 2: vigil-run: a rank was killed by a signal|rank 2 \(host [^)]+\) failed first: rank [01] reports it lost)" \
  <<<"$OUT"
check "rank 2 exited by signal 9" has "$OUT" "rank 2 exited (signal 9)"
check "the vigil id of that situation" has "$OUT" "vigil: VG-PEER-001"
[[ $FAILED -eq 0 ]] || { show; sed 's/^/  job: /' "$TMP/killed.log"; }

echo "== a real job: rank 2 stalls, ranks 0 and 1 time out"
VIGIL_TIMEOUT_MS=2000 timeout 90 "$RUN" -n 3 --dump-grace 0 --timeout 60 "$RANK" loop --iters 5 --count 4 \
  --leave-rank 2 --leave-iter 2 --how stall >"$TMP/stalled.log" 2>&1
doctor logs "$TMP/stalled.log"
# vigil-run stops the job when the first survivor exits: whether the other one printed its
# timeout by then is a race, so either or both of ranks 0 and 1 are among the waiting ranks.
# Both name rank 2 as the peer they wait for.
check "verdict: rank 2 is the straggler" grep -qE \
  "^verdict: .*(rank [01]|ranks 0,1) timed out in ALLREDUCE seq 3; (it|they) names? rank 2 as the peer still to answer, and it logged no timeout and no sequence number: it is the straggler" \
  <<<"$OUT"
check "ranks 0 and/or 1 only waited" grep -qE "^only waited: (rank [01]|ranks 0,1) " <<<"$OUT"
[[ $FAILED -eq 0 ]] || { show; sed 's/^/  job: /' "$TMP/stalled.log"; }

echo "== a peer reported lost: the verdict names the peer"
echo "[0] FAIL iter=2 rc=5 text=VG-PEER-001: rank 0/3 (comm 'cea2f8fd6'): allreduce seq 3: rank 1 (host vm, pid 11963) closed its connection without saying goodbye: its process exited, crashed or was killed (kill -9, OOM killer), or its host became unreachable." \
  >"$TMP/peer.log"
doctor logs "$TMP/peer.log"
check "verdict: rank 1 failed first, rank 0 reports it" has "$(verdict)" \
  "verdict: rank 1 (host vm) failed first: rank 0 reports it lost: vigil: a peer's process died"
[[ $FAILED -eq 0 ]] || show

echo "== many files: 16 ranks x 4000 lines, gzip, one failure"
mkdir -p "$TMP/many"
python3 - "$TMP/many" <<'EOF'
import gzip, sys
for r in range(16):
    lines = [f"2024-05-01 12:{i // 600:02d}:{i // 10 % 60:02d},{i % 10}00 INFO rank {r} step {i} loss 0.{i:04d}" for i in range(4000)]
    if r == 11:
        lines.insert(2500, "2024-05-01 12:04:10,500 ERROR srun: error: node3: task 11: Out Of Memory")
    with gzip.open(f"{sys.argv[1]}/rank{r}.log.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
EOF
doctor logs "$TMP/many"
check "16 files, 64001 lines" has "$OUT" "logs: 16 file(s), 64001 lines"
check "the one failure, on rank 11" has "$(verdict)" "verdict: the first failure is on rank 11 (host node3)"
check "  ... at its line" has "$OUT" "many/rank11.log.gz:2501"
[[ $FAILED -eq 0 ]] || show

echo "== logs of public bug reports (tests/tools/logs/public: SOURCE.md names each report)"
PUB=$(dirname "${BASH_SOURCE[0]}")/logs/public
doctor logs "$PUB"/ompi-2661-mpirun-signal9/*.log
check "ompi#2661: rank 0 killed by signal 9" has "$(verdict)" "verdict: the first failure is on rank 0 (host host01)"
check "ompi#2661: the exit" has "$OUT" "rank 0 exited (signal 9)"
doctor logs "$PUB"/nccl-1409-optype-mismatch-same-seq/*.log
check "nccl#1409: ranks ran different collectives at one seq" has "$OUT" \
  "ranks ran different collectives at seq 80078: ALLREDUCE of 2106881 element(s) on rank 3; BROADCAST of 5056 element(s) on rank 7"
doctor logs "$PUB"/uccl-303-gloo-connection-closed/*.log
check "uccl#303: rank 5, Gloo's connection closed by the peer" has "$(verdict)" \
  "verdict: the first failure is on rank 5 at 08-26 12:47:22.426: Gloo TCP: the peer closed the connection"
# A directory of a report: its SOURCE.md and EXPECTED.md are skipped, and the skip is said.
doctor logs "$PUB"/vllm-ascend-3389-tp16-hccl-ei0006
check "vllm-ascend#3389 (16 ranks): the documents next to the logs are skipped" has "$ERR" \
  "skipped 2 file(s) that are documents or images, not logs"
check "  ... 16 files, 15 ranks with lines" has "$OUT" "logs: 16 file(s), 87 lines; ranks with lines: 0-12,14,15;"
check "  ... the cause the software states, on rank 11" has "$(verdict)" \
  "verdict: the first failure is on rank 11 at 2025-10-11 11:32:59.000: vLLM-Ascend: ACL graph capture ran out of NPU streams"
check "  ... the ranks that did not answer, and the silent one" has "$(tr -s ' \n' ' ' <<<"$OUT")" \
  "ranks 11,12,15 waited for ranks 8-10,14 (their lines name the peer that did not answer), and they logged no failure or wait of their own → read their logs: stuck, slower, or in another operation or phase; rank 13 wrote no log lines at all"
doctor logs "$PUB"/vllm-ascend-1565-tp2-hccl-ei0006
check "vllm-ascend#1565: rank 1's unpickling error at 00:38:05, before rank 0's EI0006" has "$(verdict)" \
  "verdict: the first failure is on rank 1 at 2025-07-01 00:38:05.000: torch: an object collective received bytes that are not a pickle"
check "  ... rank 0 only waited" has "$OUT" "only waited: rank 0 "
doctor logs "$PUB"/vllm-ascend-5493-2node-aicore-timeout
check "vllm-ascend#5493: torch_npu's pid in brackets is not a rank" has "$OUT" "ranks with lines: 0,1,7,9,14;"
check "  ... AI Core timeout first on rank 0 of node0" has "$(verdict)" \
  "verdict: the first failure is on rank 0 (host node0) at 2025-12-29 13:22:33.992: torch_npu: a device kernel ran past the AI Core execution timeout (error 507014)"
doctor logs "$PUB"/vllm-ascend-5993-2node-ei0007-qp-exhausted
check "vllm-ascend#5993: EI0007 on rank 15, before the Gloo victims" has "$(verdict)" \
  "verdict: the first failure is on rank 15 (host 100.97.1.32) at 2026-01-19 05:52:40.052: HCCL EI0007"
check "  ... ranks 9-11 lost one peer host (three ports): the other node went away" has "$(tr -s ' \n' ' ' <<<"$OUT")" \
  "peer 135.173.74.3 (ports 46499, 59824, 8628) failed for 4 line(s) of ranks 9-11: Gloo TCP: the peer closed the connection; several ranks lost the same peer"
doctor logs "$PUB"/funasr-2317-nccl-watchdog-validation-desync
check "FunASR#2317: one seq, two sizes: diverged" has "$(verdict)" \
  "ranks ran different collectives at seq 3437: ALLREDUCE of 1 element(s) on rank 1; ALLREDUCE of 4311252 element(s) on rank 0"
doctor logs "$PUB"/nccl-1235-rank3-oom-socket-closed
check "nccl#1235: rank 3's OOM, not rank 0's closed socket (no times to order them)" has "$(verdict)" \
  "verdict: the first failure is on rank 3 (host ng30903): NCCL could not allocate GPU memory"
doctor logs "$PUB"/speculators-1115-torchrun-sigkill-collateral
check "speculators#1115: torchrun's root cause, rank 1, not the SIGKILLed rank 0" has "$(verdict)" \
  "verdict: the first failure is on rank 1 at 2026-09-07 13:02:58.000 (the launcher's report names it the first observed failure)"
check "  ... rank 0 and 2 exited by signals" has "$OUT" "rank 0 exited (signal 9)"
doctor logs "$PUB"/nccl-928-ib-error4-multihost
check "nccl#928: three hosts, one IB error each, different peers: a shared cause" has "$(tr -s ' \n' ' ' <<<"$OUT")" \
  "hosts H100-1, H100-2, H100-5 report the same failure each on its own (NCCL InfiniBand/RoCE: work completion with error), each naming a different peer"
[[ $FAILED -eq 0 ]] || show

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
