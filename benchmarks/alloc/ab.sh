#!/bin/sh
# ab.sh: the thread benchmark for a few allocators or settings, taking turns.
#
#   sh ab.sh [--builddir DIR] [--reps N] [--ops N] [--trials K] [--raw FILE] CASES NAME=LIB[@VAR=VALUE...]...
#
# CASES is a list of MODE:THREADS separated by spaces ("local:4 xfree:8").
# Each NAME=LIB is one variant: LIB is preloaded (LD_PRELOAD), "none" runs the
# C library's malloc; each @VAR=VALUE after it goes into the variant's
# environment (libhpcmem@HPCMEM_HEAPS=2).  Every repeat runs every case with
# every variant in turn, so a machine that changes speed meanwhile changes
# all of them alike.  Each run is `alloc_threads --mode MODE --threads T
# --ops N --trials K`, as run.sh runs it (--ops 40M, --trials 3 by default).
# Prints, for each case and variant, the best and the median of the runs'
# M operations a second and the median peak RSS; --raw keeps one line a run.
# Exit status 1 when a run printed no result (said on stderr, the rest shown).
# BENCHMARKS.md's comparisons of changes (session 22 on) come from it.
usage() {
  sed -n '4,9p' "$0" | sed 's/^#//; s/^ //' >&2
  exit 2
}
die() { echo "ab.sh: $*" >&2; exit 2; }

builddir=.
reps=5
ops=40M
trials=3
raw=
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) [ $# -ge 2 ] || die "--builddir needs a directory"; builddir=$2; shift 2 ;;
    --reps) [ $# -ge 2 ] || die "--reps needs a number"; reps=$2; shift 2 ;;
    --ops) [ $# -ge 2 ] || die "--ops needs a count"; ops=$2; shift 2 ;;
    --trials) [ $# -ge 2 ] || die "--trials needs a number"; trials=$2; shift 2 ;;
    --raw) [ $# -ge 2 ] || die "--raw needs a file"; raw=$2; shift 2 ;;
    -h|--help) usage ;;
    --*) die "unknown option '$1'" ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || usage
case $reps in ''|*[!0-9]*|0) die "--reps '$reps': expected a count of 1 or more" ;; esac
case $trials in ''|*[!0-9]*|0) die "--trials '$trials': expected a count of 1 or more" ;; esac
bin=$builddir/benchmarks/alloc/alloc_threads
[ -x "$bin" ] || die "no $bin: build the benchmarks first (make), or name the build with --builddir"
cases=$1
shift
for c in $cases; do
  case $c in
    local:[1-9]*|xfree:[1-9]*) case ${c#*:} in *[!0-9]*) die "case '$c': the threads must be a number" ;; esac ;;
    *) die "case '$c': expected local:THREADS or xfree:THREADS" ;;
  esac
done
[ -n "$cases" ] || die "no case given"
for v in "$@"; do
  case $v in
    *=*) ;;
    *) die "variant '$v': expected NAME=LIB (LIB a library to preload, or none)" ;;
  esac
  name=${v%%=*}
  lib=${v#*=}
  lib=${lib%%@*}
  case $name in ''|*[!A-Za-z0-9_.-]*) die "variant '$v': the name must be letters, digits, '_', '.' or '-'" ;; esac
  [ "$lib" = none ] || [ -f "$lib" ] || die "variant '$name': no library '$lib'"
done

out=$(mktemp "${TMPDIR:-/tmp}/ab.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT INT TERM
failed=0
r=0
while [ "$r" -lt "$reps" ]; do
  r=$((r + 1))
  for c in $cases; do
    mode=${c%:*}
    threads=${c#*:}
    for v in "$@"; do
      name=${v%%=*}
      lib=${v#*=}
      envs=
      case $lib in *@*) envs=$(echo "${lib#*@}" | tr @ ' '); lib=${lib%%@*} ;; esac
      [ "$lib" = none ] && pre= || pre=LD_PRELOAD=$lib
      # shellcheck disable=SC2086  # envs: VAR=VALUE words
      res=$(env $envs $pre "$bin" --mode "$mode" --threads "$threads" --ops "$ops" --trials "$trials" 2>&1)
      mops=$(echo "$res" | sed -n 's/^result,threads,[a-z]*,[0-9]*,mops,\([0-9.]*\),.*/\1/p')
      peak=$(echo "$res" | sed -n 's/^result,threads,[a-z]*,[0-9]*,peak_rss,\([0-9]*\),.*/\1/p')
      if [ -z "$mops" ] || [ -z "$peak" ]; then
        echo "ab.sh: $name, $c: the run printed no result: $(echo "$res" | tail -n 2 | tr '\n' ' ')" >&2
        failed=1
        continue
      fi
      echo "$mode $threads $name $mops $peak" >> "$out"
    done
  done
done
[ -z "$raw" ] || cp "$out" "$raw" || die "cannot write '$raw'"
names=
for v in "$@"; do names="$names ${v%%=*}"; done
# best / median M/s and median peak (MiB) of each case and variant, by mode and threads
sort -k1,1 -k2,2n "$out" | awk -v names="$names" '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { k = $1 SUBSEP $2 SUBSEP $3
    if (!(($1 SUBSEP $2) in seen)) { seen[$1 SUBSEP $2] = 1; order[++nc] = $1 SUBSEP $2 }
    m[k] = m[k] " " $4; p[k] = p[k] " " $5
    if (!(k in best) || $4 + 0 > best[k]) best[k] = $4 + 0 }
  END {
    nv = split(names, nm, " ")
    for (i = 1; i <= nc; i++) {
      split(order[i], cm, SUBSEP)
      line = sprintf("%-5s T=%-3s", cm[1], cm[2])
      for (j = 1; j <= nv; j++) {
        k = order[i] SUBSEP nm[j]
        if (k in best) line = line sprintf("  %s: %.1f (%.1f) M/s %.2f MiB", nm[j], best[k], median(m[k]), median(p[k]) / 1024)
        else line = line sprintf("  %s: no run", nm[j])
      }
      print line
    }
  }'
exit $failed
