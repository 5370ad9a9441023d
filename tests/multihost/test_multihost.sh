#!/bin/sh
# libhpcmem's MPI layer on several hosts, simulated on this machine: N hosts
# (MULTIHOST_HOSTS, default 2) of 2 ranks each, every host a network and UTS
# namespace of its own (tests/multihost/cluster.sh), mpirun in a launcher
# namespace starting its daemons through tests/multihost/agent.sh instead of
# ssh.  Needs root; where namespaces cannot be made every case is reported
# skipped with the reason (exit 77).
#   multihost.isolated                the hosts reach only the simulated subnet
#   multihost.split_type_shared       MPI_COMM_TYPE_SHARED groups exactly the ranks of a host
#   multihost.node_groups             ... one group per host
#   multihost.shared_segment.*        the node-shared segment is shared within a host only
#   multihost.report.*                per-node sums, hosts and the heavier node in the job report
#   multihost.trace.*                 HPCMEM_TRACE: one file per rank in one directory, read as one job
#   multihost.demo.*                  hpcmem-demo (miniapps/demo, ranks of uneven memory) on the simulated hosts
#   multihost.skip_*                  without privileges the harness skips, never passes
#   multihost.cleanup                 no namespace, link or file of the run is left
# MULTIHOST_KEEP=1 keeps the work directory (reports, traces, outputs).
suite=multihost
b=$(cd "${top_builddir:-.}" && pwd)
src=$(cd "${top_srcdir:-$b}" && pwd)
mh_srcdir=$src/tests/multihost
. "$mh_srcdir/cluster.sh"
JOB=$b/tests/multihost/mh_job
DEMO=$b/miniapps/demo/hpcmem-demo
REPORT=$b/tools/hpcmem-report
CHECK=$mh_srcdir/check_report.py
hosts=${MULTIHOST_HOSTS:-2}
per=2                                # ranks per host
np=$((hosts * per))
# MiB per rank (2 hosts: 40,40,8,56): host 0 holds the most, the last rank
# is the heaviest and rank 2 the lightest, all amounts of other ranks distinct
mib=
r=0
while [ $r -lt $np ]; do
  if [ $r -lt $per ]; then v=40; elif [ $r = $((np - 1)) ]; then v=56; else v=$((8 + r - per)); fi
  mib="$mib${mib:+,}$v"; r=$((r + 1))
done
overhead=8                           # MiB a rank holds besides its own (MPI_Init, libc); see tests/mpi/test_report.sh

fails=0
ok() { echo "[       OK ] $suite.$1"; }
ko() { echo "[  FAILED  ] $suite.$1 ($2)"; fails=$((fails + 1)); }
skip() { echo "[  SKIPPED ] $suite.$1 ($2)"; }
CASES="isolated split_type_shared node_groups shared_segment report trace demo cleanup"
skip_all() {
  for c in $CASES; do skip "$c" "$1"; done
  exit 77
}

dir=
finish() {
  mh_down
  if [ -n "$dir" ] && [ "${MULTIHOST_KEEP:-0}" != 1 ]; then rm -rf "$dir"; fi
}
trap 'finish' EXIT
trap 'finish; exit 130' INT
trap 'finish; exit 143' TERM

# --- without privileges: the harness must skip, with the reason.  The same
#     script, run unprivileged, stops after trying to make the hosts.
skip_case() {  # NAME COMMAND...: run this script under COMMAND, expect a skip
  name=$1; shift
  # a copy that any user can read (the source tree may be private to root)
  t=$(mktemp -d /tmp/hpcmem-multihost-skip.XXXXXX)
  mkdir -p "$t/tests/multihost"
  cp "$mh_srcdir/test_multihost.sh" "$mh_srcdir/cluster.sh" "$t/tests/multihost/"
  chmod -R a+rX "$t"
  out=$(cd "$t" && "$@" env MULTIHOST_SETUP_ONLY=1 top_srcdir="$t" top_builddir="$t" \
        sh "$t/tests/multihost/test_multihost.sh" 2>&1)
  rc=$?
  rm -rf "$t"
  if [ $rc = 0 ] && echo "$out" | grep -q '^multihost: setup only'; then
    skip "$name" "namespaces can be made even there"
  elif [ $rc = 77 ] && echo "$out" | grep -qE '^\[  SKIPPED \] multihost\.[a-z_]+ \(.+\)$' &&
       ! echo "$out" | grep -qE '^\[ +(OK|FAILED +)\]'; then
    ok "$name"
  else
    ko "$name" "exit $rc: $(echo "$out" | head -3 | tr '\n' '|')"
  fi
}
if [ "${MULTIHOST_SETUP_ONLY:-0}" != 1 ] && [ "$(id -u)" = 0 ]; then
  # as a user without privileges
  if command -v setpriv >/dev/null 2>&1; then
    skip_case skip_unprivileged setpriv --reuid=65534 --regid=65534 --clear-groups env TMPDIR=/tmp
  else skip skip_unprivileged "no setpriv (util-linux)"; fi
  # as root of a user namespace: uid 0, but no right to make network namespaces
  if unshare --user --map-root-user true 2>/dev/null; then
    skip_case skip_without_namespaces unshare --user --map-root-user
  else skip skip_without_namespaces "cannot make a user namespace here"; fi
fi

# --- the simulated hosts
if [ "${MULTIHOST_SETUP_ONLY:-0}" != 1 ]; then
  if [ ! -x "$JOB" ] || [ -z "$MPIEXEC" ]; then skip_all "MPI not available (libhpcmem built without MPI)"; fi
  command -v python3 >/dev/null 2>&1 || skip_all "python3 is not installed"
fi
links_before=$(ip -o link show 2>/dev/null | wc -l)
mh_up "$hosts" "$per" || skip_all "$mh_skip_reason"
if [ "${MULTIHOST_SETUP_ONLY:-0}" = 1 ]; then echo "multihost: setup only"; exit 0; fi
names=
i=0
while [ $i -lt "$hosts" ]; do names="$names${names:+,}$(mh_hostname $i)"; i=$((i + 1)); done
dir=$(mktemp -d /tmp/hpcmem-multihost.XXXXXX)
cd "$dir" || exit 1

# --- isolated: every host has its one address and no route but the subnet's
bad=
i=0
while [ $i -lt "$hosts" ]; do
  ns=$mh_prefix-h$i
  addrs=$(ip -n "$ns" -o addr show scope global | awk '{print $4}' | tr '\n' ' ')
  routes=$(ip -n "$ns" -4 route show | tr '\n' '|')
  routes6=$(ip -n "$ns" -6 route show 2>/dev/null | grep -v '^::1 ' | tr '\n' '|')
  [ "$addrs" = "$(mh_addr $i)/24 " ] || bad="$bad host$i addresses: $addrs;"
  case $routes in "$mh_net.0/24 dev eth0 "*"|") [ "$(echo "$routes" | tr '|' '\n' | grep -c .)" = 1 ] || bad="$bad host$i routes: $routes;" ;;
    *) bad="$bad host$i routes: $routes;" ;; esac
  [ -z "$routes6" ] || bad="$bad host$i IPv6 routes: $routes6;"
  i=$((i + 1))
done
[ -z "$bad" ] && ok isolated || ko isolated "$bad"

# run NAME PROGRAM ARGS...: mpirun over the hosts, $dir/NAME.out / .err / .rc
run() {
  name=$1; shift
  mh_mpirun -np $np --map-by slot "$@" > "$dir/$name.out" 2> "$dir/$name.err"
  echo $? > "$dir/$name.rc"
}
ran() {  # NAME: the run exited 0 (else a failed case NAME.run with its stderr)
  rc=$(cat "$dir/$1.rc")
  if [ "$rc" = 0 ]; then ok "$1.run"; return 0; fi
  ko "$1.run" "mpirun exit $rc: $(grep -v '^libhpcmem:' "$dir/$1.err" | head -4 | tr '\n' '|' | cut -c1-300)"
  return 1
}
result() {  # CASE FILE: the program's "result CASE ok|fail REASON" line
  line=$(grep "^result $1 " "$2" | head -1)
  case $line in
    "result $1 ok") ok "$1" ;;
    "result $1 fail "*) ko "$1" "${line#result $1 fail }" ;;
    *) ko "$1" "no result from the program" ;;
  esac
}

# --- node groups and the node-shared segment (tests/multihost/mh_job.c),
#     then the job report at MPI_Finalize: per-node sums, hosts
run report -x HPCMEM_REPORT=summary -x HPCMEM_REPORT_DIR="$dir/report" "$JOB" $mib
ran report
result split_type_shared "$dir/report.out"
for c in info one_mapping_per_host same_host_visible other_host_not_shared; do
  result shared_segment.$c "$dir/report.out"
done
groups=$(sed -n 's/^nodes //p' "$dir/report.out")
[ "$groups" = "$hosts" ] && ok node_groups || ko node_groups "${groups:-no} node groups for $hosts hosts"
f=$(ls "$dir"/report/hpcmem-report-*.json 2>/dev/null | head -1)
if [ -n "$f" ]; then
  python3 "$CHECK" job "$f" --suite $suite.report --out "$dir/report.out" --banner "$dir/report.err" \
    --mib $mib --overhead-mib $overhead --hosts "$names" || fails=$((fails + 1))
else ko report.json "no hpcmem-report-*.json in the report directory"; fi

# --- tracing: one file per rank, all in one directory, read as one job
run trace -x HPCMEM_TRACE=1 -x HPCMEM_TRACE_DIR="$dir/trace" -x HPCMEM_REPORT=summary \
  -x HPCMEM_REPORT_DIR="$dir/trace-report" "$JOB" $mib
if ran trace; then
  files=$(cd "$dir/trace" 2>/dev/null && ls | sort | tr '\n' ' ')
  want=
  r=0
  while [ $r -lt $np ]; do want="${want}rank-$r.hmt "; r=$((r + 1)); done
  [ "$files" = "$want" ] && ok trace.one_file_per_rank || ko trace.one_file_per_rank "trace directory holds: $files"
  if "$REPORT" --json="$dir/trace.json" "$dir/trace" > "$dir/trace.txt" 2> "$dir/trace-report.err"; then
    if grep -q "($np ranks) on $hosts hosts" "$dir/trace.txt"; then ok trace.report_reads
    else ko trace.report_reads "$(grep -m1 ' job ' "$dir/trace.txt")"; fi
    jobid=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["jobid"])' "$(ls "$dir"/trace-report/hpcmem-report-*.json | head -1)" 2>/dev/null)
    python3 "$CHECK" trace "$dir/trace.json" --suite $suite.trace --out "$dir/trace.out" --mib $mib \
      --overhead-mib $overhead --hosts "$names" --jobid "${jobid:-unknown}" || fails=$((fails + 1))
  else ko trace.report_reads "hpcmem-report: exit $?: $(head -3 "$dir/trace-report.err" | tr '\n' '|')"; fi
fi

# --- hpcmem-demo (miniapps/demo: rank r needs r+1 units of memory), over
#     the hosts: the same answer as on one host, and the report sees both hosts
run demo -x HPCMEM_REPORT_DIR="$dir/demo" "$DEMO"
if ran demo; then
  "$b/tests/run-mpi.sh" $np env HPCMEM_REPORT=off "$DEMO" > "$dir/demo-local.out" 2>&1
  here=$(grep '^demo: ' "$dir/demo-local.out"); there=$(grep '^demo: ' "$dir/demo.out")
  [ -n "$there" ] && [ "$there" = "$here" ] && ok demo.same_result || ko demo.same_result "hosts: '$there', one host: '$here'"
  f=$(ls "$dir"/demo/hpcmem-report-*.json 2>/dev/null | head -1)
  if [ -n "$f" ]; then
    python3 "$CHECK" demo "$f" --suite $suite.demo --banner "$dir/demo.err" --hosts "$names" \
      --ranks-per-host $per || fails=$((fails + 1))
  else ko demo.json "no hpcmem-report-*.json"; fi
fi

# --- cleanup: no namespace, link or daemon of this run left behind
mh_down
left=$(ip netns list | grep -c "^$mh_prefix-")
links_after=$(ip -o link show 2>/dev/null | wc -l)
daemons=$(mh_session_dirs $$ | tr '\n' ' ')
if [ "$left" = 0 ] && [ "$links_after" = "$links_before" ] && [ -z "$daemons" ]; then ok cleanup
else ko cleanup "namespaces left: $left, links $links_before -> $links_after, session dirs: $daemons"; fi

[ $fails = 0 ]
