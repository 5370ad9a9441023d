#!/bin/sh
# Ranks of one job share the trace directory: before MPI_Init a rank that
# does not know its number yet takes the first free name, so siblings of
# the same job collide on names as a matter of course and must not warn.
# A file left by another job (or anything else) under the name is a real
# collision: never overwritten, and worth one warning.
b=$(cd "${top_builddir:-.}" && pwd)
lib=${LIBHPCMEM:-$b/.libs/libhpcmem.so}
app=$b/tests/trace/stack_cache_app
dir=$(mktemp -d /tmp/hpcmem-trace-dir.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
ok() { echo "[       OK ] trace_dir.$1"; }
ko() { echo "[  FAILED  ] trace_dir.$1 ($2)"; fails=$((fails + 1)); }

# four processes of job "dirtest-1", no rank known (no launcher variables)
run() {  # JOBID OUTFILE
  env -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u PMIX_RANK -u SLURM_PROCID -u OMPI_MCA_ess_base_jobid \
      -u PMIX_NAMESPACE -u PMI_JOBID SLURM_JOB_ID=$1 LD_PRELOAD="$lib" HPCMEM_REPORT=off HPCMEM_TRACE=1 \
      HPCMEM_TRACE_DIR="$dir/trace" "$app" > "$2" 2>&1
}
pids=""
for i in 1 2 3 4; do run dirtest-1 "$dir/out$i" & pids="$pids $!"; done
rc=0
for p in $pids; do wait $p || rc=1; done
n=$(ls "$dir/trace" | grep -c '\.hmt$')
if [ $rc != 0 ]; then ko siblings_share_the_directory "a process failed: $(cat "$dir"/out*)"
elif [ "$n" != 4 ]; then ko siblings_share_the_directory "$n files: $(ls "$dir/trace" | tr '\n' ' ')"
elif grep -q 'not overwriting' "$dir"/out*; then ko siblings_share_the_directory "warned: $(grep -h 'not overwriting' "$dir"/out* | head -2)"
else ok siblings_share_the_directory; fi

# the report reads them as four processes of one job
if "$b/tools/hpcmem-report" "$dir/trace" > "$dir/report.txt" 2> "$dir/err.txt" &&
   grep -q 'job dirtest-1, 4 processes' "$dir/report.txt"; then ok report_reads_all_four
else ko report_reads_all_four "$(head -3 "$dir/report.txt") $(cat "$dir/err.txt")"; fi
# ... and the legend of their plot, where each is "rank 0 (pid N)", stays in the picture
if "$b/tools/hpcmem-report" --svg="$dir/svg" "$dir/trace" > /dev/null 2>&1 &&
   clip=$(python3 "$(dirname "$0")/check_svg_labels.py" "$dir/svg"); then ok plot_labels_fit
else ko plot_labels_fit "$clip"; fi

# another job into the same directory: its guessed name is taken by a
# file that is not its own
run dirtest-2 "$dir/out5"
n=$(ls "$dir/trace" | grep -c '\.hmt$')
c=$(grep -c 'exists; not overwriting it' "$dir/out5")
if [ "$n" = 5 ] && [ "$c" = 1 ]; then ok another_job_warns_once
else ko another_job_warns_once "$n files, $c warnings: $(head -c 300 "$dir/out5")"; fi

# processes without any launcher (each names its job after its pid) that
# share a directory -- a script and the programs it runs -- are one job too
for i in 1 2 3; do
  env -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u PMIX_RANK -u SLURM_PROCID -u OMPI_MCA_ess_base_jobid \
      -u PMIX_NAMESPACE -u PMI_JOBID -u SLURM_JOB_ID LD_PRELOAD="$lib" HPCMEM_REPORT=off HPCMEM_TRACE=1 \
      HPCMEM_TRACE_DIR="$dir/t3" "$app" > "$dir/out-lone$i" 2>&1
done
n=$(ls "$dir/t3" | grep -c '\.hmt$')
if [ "$n" = 3 ] && ! grep -q 'not overwriting' "$dir"/out-lone*; then ok processes_without_a_launcher_share_quietly
else ko processes_without_a_launcher_share_quietly "$n files: $(grep -h 'not overwriting' "$dir"/out-lone* | head -2)"; fi

# a symbolic link under the name is never followed, and named
mkdir "$dir/t2" && ln -s "$dir/victim" "$dir/t2/rank-0.hmt"
env SLURM_JOB_ID=dirtest-3 LD_PRELOAD="$lib" HPCMEM_REPORT=off HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/t2" \
    "$app" > "$dir/out6" 2>&1
if [ ! -e "$dir/victim" ] && [ -f "$dir/t2/rank-0-1.hmt" ] && grep -q 'rank-0.hmt exists; not overwriting' "$dir/out6"; then
  ok symlink_is_a_collision
else ko symlink_is_a_collision "$(ls "$dir/t2") $(head -c 300 "$dir/out6")"; fi
# the default directory hpcmem-trace-<jobid> has a name anyone can guess: a
# symbolic link planted under it is not entered (one warning, tracing off,
# the program runs on); the same link named by HPCMEM_TRACE_DIR is the user's
mkdir "$dir/t4" "$dir/t4/elsewhere" && ln -s elsewhere "$dir/t4/hpcmem-trace-dirtest-4"
( cd "$dir/t4" && env SLURM_JOB_ID=dirtest-4 LD_PRELOAD="$lib" HPCMEM_REPORT=off HPCMEM_TRACE=1 "$app" ) > "$dir/out7" 2>&1
rc=$?
if [ $rc = 0 ] && [ -z "$(ls "$dir/t4/elsewhere")" ] && grep -q 'hpcmem-trace-dirtest-4 is a symbolic link' "$dir/out7"; then
  ok planted_link_as_default_directory
else ko planted_link_as_default_directory "exit $rc, $(ls "$dir/t4/elsewhere" | tr '\n' ' ') $(head -c 300 "$dir/out7")"; fi
( cd "$dir/t4" && env SLURM_JOB_ID=dirtest-4 LD_PRELOAD="$lib" HPCMEM_REPORT=off HPCMEM_TRACE=1 \
    HPCMEM_TRACE_DIR=hpcmem-trace-dirtest-4 "$app" ) > "$dir/out8" 2>&1
[ -f "$dir/t4/elsewhere/rank-0.hmt" ] && ok named_link_is_followed || ko named_link_is_followed "$(head -c 300 "$dir/out8")"
[ $fails = 0 ]
