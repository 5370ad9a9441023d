#!/bin/sh
# Misuse is caught, reported with the address and what was wrong, then handled
# as HPCMEM_ON_ERROR says (abort by default, warn, ignore).
prog="$top_builddir/tests/integration/misuse"
export HPCMEM_REPORT=off   # this test reads stderr: no exit report in it
fails=0
check() {  # name mode kind expected-exit expected-text
  name=$1 mode=$2 kind=$3 want=$4 text=$5
  out=$(HPCMEM_ON_ERROR=$mode "$prog" "$kind" 2>&1); rc=$?
  ok=1
  [ "$rc" = "$want" ] || ok=0
  if [ -n "$text" ]; then echo "$out" | grep -q -- "$text" || ok=0; fi
  if [ "$mode" = ignore ]; then echo "$out" | grep -q 'libhpcmem' && ok=0; fi
  if [ $ok = 1 ]; then echo "[       OK ] misuse.$name"
  else echo "[  FAILED  ] misuse.$name (exit $rc, want $want; output: $out)"; fails=$((fails + 1)); fi
}
ABRT=134
check interior_abort abort interior $ABRT "free(0x[0-9a-f]*): pointer into the middle of a block"
check interior_warn warn interior 0 "libhpcmem: warning: free(0x[0-9a-f]*): pointer into the middle"
check interior_ignore ignore interior 0 "survived errors=1"
check double_abort abort double $ABRT "double free"
check double_warn warn double 0 "double free"
check double_slot_abort abort double-slot $ABRT "free(0x[0-9a-f]*): double free"
check double_list_abort abort double-list $ABRT "free(0x[0-9a-f]*): double free"
check double_slot_warn warn double-slot 0 "double free"
check double_list_warn warn double-list 0 "double free"
# free puts its object aside and pushes the one before onto its bin
# (docs/allocator.md, The pending free): a second free of the object put
# aside, and of one pushed since, are double frees at once
check double_pending_abort abort double-pending $ABRT "free(0x[0-9a-f]*): double free"
check double_pending_warn warn double-pending 0 "free(0x[0-9a-f]*): double free"
check double_after_pending_abort abort double-after-pending $ABRT "free(0x[0-9a-f]*): double free"
check double_after_pending_warn warn double-after-pending 0 "free(0x[0-9a-f]*): double free"
check foreign_abort abort foreign $ABRT "foreign pointer"
check foreign_warn warn foreign 0 "foreign pointer"
check stack_warn warn stack 0 "foreign pointer"
check interior_large_warn warn interior-large 0 "not the start of a block"
check misaligned_large_warn warn misaligned-large 0 "not the start of a block"
check double_large_abort abort double-large $ABRT "double free"
check double_large_warn warn double-large 0 "double free"
check double_large_cached_abort abort double-large-cached $ABRT "free(0x[0-9a-f]*): double free"
check double_large_cached_warn warn double-large-cached 0 "free(0x[0-9a-f]*): double free"
check realloc_foreign_warn warn realloc-foreign 0 "realloc(0x[0-9a-f]*): pointer was not allocated by libhpcmem"
check unallocated_warn warn unallocated 0 "free(0x[0-9a-f]*)"
check interior_run_warn warn interior-run 0 "free(0x[0-9a-f]*): pointer into the middle of a block"
check unallocated_run_warn warn unallocated-run 0 "free(0x[0-9a-f]*): not allocated: no live block"
check default_is_abort "" double $ABRT "aborting"
# HPCMEM_CHECK=1: writes into freed objects on their spans' free lists are
# found by a later periodic check, which names the span and stops the process
export HPCMEM_CHECK=1
check write_after_free_check abort write-after-free $ABRT "free list of span 0x[0-9a-f]* holds foreign 0x4141414141414141"
check write_after_free_check_stops abort write-after-free $ABRT "internal consistency check failed (HPCMEM_CHECK)"
unset HPCMEM_CHECK
# a block freed by a thread of another group waits on its heap's remote list;
# freeing it again is a double free too (two thread groups, two cpus)
if [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ]; then
  export HPCMEM_HEAPS=2
  check double_remote_abort abort double-remote $ABRT "free(0x[0-9a-f]*): double free"
  check double_remote_warn warn double-remote 0 "free(0x[0-9a-f]*): double free"
  unset HPCMEM_HEAPS
else
  echo "[  SKIPPED ] misuse.double_remote_abort (one cpu: no second thread group)"
  echo "[  SKIPPED ] misuse.double_remote_warn (one cpu: no second thread group)"
fi
[ $fails = 0 ]
