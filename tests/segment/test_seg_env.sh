#!/bin/sh
# The segment settings, in fresh processes (tests/segment/seg_probe.c):
# HPCMEM_DEFAULT_SEGMENT routes plain malloc (outside MPI the shared
# segment is process-local memory that forked children share, so plain
# malloc stays private there); HPCMEM_INTERLEAVE_NODES is
# checked against the topology (the saved 4-node machine here) with a
# warning and a documented fallback for nodes that do not exist.
probe=$top_builddir/tests/segment/seg_probe
xml=$top_srcdir/tests/data/2socket-4numa.xml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "[       OK ] seg_env.$1"; }
fail() { echo "[  FAILED  ] seg_env.$1 ($2)"; fails=$((fails + 1)); }
run() { env "$@" "$probe" > "$tmp/out" 2> "$tmp/err"; echo $? > "$tmp/rc"; }
expect() {  # case pattern-in-stdout [pattern-in-stderr]
  if [ "$(cat "$tmp/rc")" = 0 ] && grep -q -- "$2" "$tmp/out" && { [ -z "$3" ] || grep -q -- "$3" "$tmp/err"; }; then ok "$1"
  else fail "$1" "exit $(cat "$tmp/rc"): $(cat "$tmp/out") / $(head -c 400 "$tmp/err")"; fi
}

run HPCMEM_REPORT=off
expect default_private 'default private small private large private calloc private realloc kept zero 1 fork copy realloc_seg kept .* check 0'
run HPCMEM_DEFAULT_SEGMENT=interleaved
expect default_interleaved 'default interleaved small interleaved large interleaved calloc interleaved realloc kept zero 1 fork copy .* check 0'
# realloc past what the default segment holds moves the block to private memory, as malloc does;
# hpcmem_realloc_seg keeps it in its segment or fails
run HPCMEM_DEFAULT_SEGMENT=interleaved HPCMEM_INTERLEAVED_SIZE=64M
expect default_interleaved_full_realloc_falls_back 'default interleaved small interleaved .* fork copy realloc_seg enomem .* check 0'
# hpcmem_seg_default() says where plain malloc goes (private), not what the setting names
run HPCMEM_DEFAULT_SEGMENT=shared
expect default_shared_without_mpi_stays_private 'default private small private large private calloc private realloc kept zero 1 fork copy .* check 0'
# a program that forks and reads its child's output through a pipe (bash's $(...))
if env HPCMEM_DEFAULT_SEGMENT=shared LD_PRELOAD="$top_builddir/.libs/libhpcmem.so" \
     bash -c 'for i in 1 2 3 4 5; do x=$(echo hi); done; echo "$x"' > "$tmp/out" 2> "$tmp/err" &&
   [ "$(cat "$tmp/out")" = hi ]; then ok default_shared_without_mpi_bash_forks
else fail default_shared_without_mpi_bash_forks "$(cat "$tmp/out") / $(head -c 400 "$tmp/err")"; fi
run HPCMEM_DEFAULT_SEGMENT=numa
expect default_bad_value 'default private' 'HPCMEM_DEFAULT_SEGMENT.*numa'
run HPCMEM_INTERLEAVE_NODES=0
expect nodes_listed 'nodes 0 check 0'
run HPCMEM_INTERLEAVE_NODES=banana
expect nodes_bad_syntax 'nodes 0 check 0' 'HPCMEM_INTERLEAVE_NODES.*banana'
# the saved 2-socket machine has nodes 0-3: node 6 does not exist there
run HPCMEM_TOPOLOGY="$xml" HPCMEM_INTERLEAVE_NODES=0-3,6
expect nodes_missing_on_topology 'check 0' 'HPCMEM_INTERLEAVE_NODES.*6'
grep -q 'using all NUMA nodes instead' "$tmp/err" && ok nodes_missing_falls_back_to_all ||
  fail nodes_missing_falls_back_to_all "$(head -c 400 "$tmp/err")"
# nodes 0-3 exist in the file but not on this one-node machine: the kernel's nodes are used, and said so
nreal=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
run HPCMEM_TOPOLOGY="$xml" HPCMEM_INTERLEAVE_NODES=1-3
if [ "$nreal" -ge 4 ]; then expect nodes_of_the_file 'nodes 1-3 check 0'
else expect nodes_of_the_file_not_on_this_machine 'check 0' 'not all on this machine; interleaving over its nodes'; fi
[ $fails -eq 0 ]
