#!/bin/sh
# A traced program (libhpcmem preloaded, HPCMEM_TRACE=1) that ends without
# its exit handlers or replaces itself (tests/trace/leave_app): _exit and
# _Exit write every buffered event and the end marker (exit) and keep the
# status; each exec form writes them (exec) before the new program starts,
# passing its arguments and environment on; a failed exec returns -1 with
# errno as the C library set it and the program records on to its normal
# exit; a child of vfork that calls _exit or exec touches nothing of the
# parent's trace, which ends at the parent's own exit with every event.
# Also: libhpcmem exports each of these names; and, untraced, a child of
# vfork execs while another thread holds the loader's lock (no lookup of
# the C library's function may take it).
b=$(cd "${top_builddir:-.}" && pwd)
APP=$b/tests/trace/leave_app
COUNT=$b/tests/trace/hmt_count
REPORT=$b/tools/hpcmem-report
LIB=${LIBHPCMEM:-$b/.libs/libhpcmem.so}
fails=0
ok() { echo "[       OK ] exit_exec.$1"; }
ko() { echo "[  FAILED  ] exit_exec.$1 ($2)"; fails=$((fails + 1)); }
dir=$(mktemp -d /tmp/hpcmem-exit-exec.XXXXXX)
trap 'rm -rf "$dir"' EXIT

FORMS="execve execv execvp execvpe execl execlp execle fexecve execveat"

missing=""
for f in _exit _Exit $FORMS; do
  nm -D --defined-only "$LIB" | awk -v f="$f" '$3 == f && $2 == "T" {found = 1} END {exit !found}' || missing="$missing $f"
done
[ -z "$missing" ] && ok exported || ko exported "not exported by $(basename "$LIB"):$missing"

# Untraced, libhpcmem preloaded and linked: a child of vfork runs /bin/true
# through an exec form, its process's first exec, while another thread of
# the parent is in dlopen, holding the loader's lock
# (tests/trace/vfork_lock_app).  A lookup of the C library's function that
# takes the lock (dlsym) waits for ever: timeout ends it.
LOCKAPP=$b/tests/trace/vfork_lock_app
BLOCK=$b/tests/trace/.libs/libblockctor.so
for form in execve execvp execlp; do
  for link in preloaded linked; do
    name=untraced_vfork.$form.runs_while_another_thread_holds_the_loader_lock.$link
    if [ $link = preloaded ]; then
      out=$(env -u HPCMEM_TRACE HPCMEM_REPORT=off LD_PRELOAD="$LIB" timeout 20 "$LOCKAPP" "$BLOCK" $form 2>&1)
    else
      out=$(env -u HPCMEM_TRACE HPCMEM_REPORT=off timeout 20 "${LOCKAPP}_linked" "$BLOCK" $form 2>&1)
    fi
    case $? in
      0) ok "$name" ;;
      124) ko "$name" "the child of vfork hung in the exec" ;;
      *) ko "$name" "$out" ;;
    esac
  done
done

# run HOW: the trace goes to $dir/HOW; sets rc and file
run() {
  rm -rf "$dir/$1"
  HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/$1" HPCMEM_TRACE_BUFFER=1M HPCMEM_REPORT=off LD_PRELOAD="$LIB" \
    "$APP" "$1" > "$dir/$1.out" 2>&1
  rc=$?
  file=$(ls "$dir/$1"/*.hmt 2> /dev/null)
}

# a normal exit first: does this libhpcmem record at all?
run fail-execv
if [ -z "$file" ]; then
  echo "[  SKIPPED ] exit_exec.all (libhpcmem wrote no trace: the allocator does not call the recorder's hooks)"
  exit 77
fi

# check NAME HOW STATUS FLUSHES SIZE...: each SIZE allocated 1000 times,
# 500 of them freed, all before the last end marker
check() {
  name=$1 how=$2 want_rc=$3 want_flushes=$4
  shift 4
  run "$how"
  if [ "$rc" != "$want_rc" ]; then ko "$name" "status $rc, expected $want_rc: $(cat "$dir/$how.out")"; return; fi
  n=$(echo "$file" | grep -c .)
  if [ "$n" != 1 ]; then ko "$name" "$n trace files: $(ls "$dir/$how" 2> /dev/null | tr '\n' ' ')"; return; fi
  if ! out=$("$COUNT" "$file" "$@" 2>&1); then ko "$name" "unreadable: $out"; return; fi
  want="flushes $want_flushes
truncated 0"
  for s in "$@"; do want="$want
$s allocs 1000 frees 500 ends_after 1"; done
  if [ "$out" != "$want" ]; then ko "$name" "$(echo $out), expected $(echo $want)"; return; fi
  if "$REPORT" "$file" 2>&1 | grep -q '^  ! '; then ko "$name" "hpcmem-report: $("$REPORT" "$file" 2>&1 | grep '^  ! ')"; return; fi
  ok "$name"
}

check _exit.every_event_written_and_the_status_kept _exit 7 exit 3001
check _Exit.every_event_written_and_the_status_kept _Exit 7 exit 3001
for f in $FORMS; do
  # the forms that pass an environment give the script HMT_X=4
  case $f in execve|execvpe|execle|fexecve|execveat) st=7 ;; *) st=3 ;; esac
  check "$f.events_before_it_written_arguments_passed" "$f" $st exec 3001
  check "$f.failed_returns_its_errno_and_recording_goes_on" "fail-$f" 0 exec,exit 3001 3002
done
check vfork._exit_in_the_child_leaves_the_parents_trace_whole vfork-_exit 0 exit 3001 3002
check vfork.exec_in_the_child_leaves_the_parents_trace_whole vfork-exec 0 exit 3001 3002
[ $fails = 0 ]
