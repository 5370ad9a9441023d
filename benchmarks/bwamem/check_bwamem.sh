#!/bin/sh
# make check: the bwamem kernel on a tiny generated data set.  Positions are
# checked against the generator's truth, every CIGAR against the reference,
# and the alignments must not depend on the thread count.
bin=$top_builddir/benchmarks/bwamem
dir=${TMPDIR:-/tmp}/check_bwamem.$$
fail=0
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
mkdir -p "$dir" || exit 1

ok()  { echo "[       OK ] bwamem.$1"; }
bad() { echo "[  FAILED  ] bwamem.$1 ($2)"; fail=1; }

if ! "$bin/bwagen" --preset=tiny --reads=1500 "$dir/t" >"$dir/gen.log" 2>&1; then
  bad generator_writes_fasta_and_fastq "$(cat "$dir/gen.log")"
  exit 1
fi
if [ "$(grep -c '^>' "$dir/t.fa")" -eq 4 ] && [ "$(wc -l < "$dir/t.fq")" -eq 6000 ] \
   && head -1 "$dir/t.fq" | grep -q '^@r1_chr[0-9]*_[0-9]*_[+-]$'; then
  ok generator_writes_fasta_and_fastq
else
  bad generator_writes_fasta_and_fastq "unexpected files"
fi

"$bin/bwamem" -t 1,2,3 -o "$dir/t.sam" "$dir/t.fa" "$dir/t.fq" >"$dir/run.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^validation: passed' "$dir/run.log"; then
  ok positions_match_the_generator
else
  bad positions_match_the_generator "rc=$rc: $(grep -E 'validation|error' "$dir/run.log" | head -2 | tr '\n' ' ')"
fi

if grep -q 'same alignments for every thread count: yes' "$dir/run.log" \
   && [ "$(grep -c '^#result bwamem t.fq [^ ]* [123] [0-9.]* [0-9.]* [0-9.]*$' "$dir/run.log")" -eq 3 ]; then
  ok threads_give_the_same_alignments
else
  bad threads_give_the_same_alignments "$(grep -E 'error|#result' "$dir/run.log" | head -3 | tr '\n' ' ')"
fi

# Every mapped record: its CIGAR spans the read, and re-scoring it against
# the reference (match 1, mismatch 4, gap 6+1/base) gives at least the
# extension's score AS (global alignment over the same span is optimal),
# and exactly AS for nearly all reads.  Reads over N runs are left out.
awk -F'\t' '
  FNR == NR {
    if ($0 ~ /^>/) { split(substr($0, 2), w, " "); name = w[1]; next }
    seq[name] = seq[name] $0; next
  }
  /^@/ { next }
  $2 == 4 { next }
  {
    cig = $6; q = 1; r = $4; score = 0; qlen = 0; hasn = 0
    ref = seq[$3]
    while (match(cig, /^[0-9]+[MIDS]/)) {
      n = substr(cig, 1, RLENGTH - 1) + 0; op = substr(cig, RLENGTH, 1)
      cig = substr(cig, RLENGTH + 1)
      if (op == "S") { q += n; qlen += n }
      else if (op == "I") { score -= 6 + n; q += n; qlen += n }
      else if (op == "D") { score -= 6 + n; r += n }
      else for (k = 0; k < n; k++) {
        a = toupper(substr($10, q + k, 1)); b = toupper(substr(ref, r + k, 1))
        if (a == "N" || b == "N") hasn = 1
        score += (a == b) ? 1 : -4
      }
      if (op == "M") { q += n; r += n; qlen += n }
    }
    if (cig != "" || qlen != length($10)) { print "bad CIGAR " $1 " " $6; badc++; next }
    if (hasn) next
    split($12, as, ":"); checked++
    if (score < as[3]) { print "worse than AS " $1 " " $6 " " score " < " as[3]; worse++ }
    else if (score == as[3]) equal++
  }
  END {
    printf "checked %d cigars: %d bad, %d scoring below AS, %d equal to AS\n", checked, badc, worse, equal
    exit !(checked > 1000 && badc == 0 && worse == 0 && equal >= 0.98 * checked)
  }' "$dir/t.fa" "$dir/t.sam" >"$dir/cigar.log"
if [ $? -eq 0 ]; then
  ok cigars_agree_with_the_reference
else
  bad cigars_agree_with_the_reference "$(tail -1 "$dir/cigar.log")"
fi

# FASTA reads work as well as FASTQ ones
awk 'NR % 4 == 1 { print ">" substr($0, 2) } NR % 4 == 2 { print substr($0, 1, 50); print substr($0, 51) }' \
  "$dir/t.fq" > "$dir/t_reads.fa"
if "$bin/bwamem" -t 2 "$dir/t.fa" "$dir/t_reads.fa" >"$dir/fa.log" 2>&1 \
   && grep -q '^validation: passed' "$dir/fa.log" && grep -q '^mapped 1[0-9]* of 1500 reads' "$dir/fa.log"; then
  ok reads_from_fasta
else
  bad reads_from_fasta "$(grep -E 'validation|bwamem:' "$dir/fa.log" | head -2 | tr '\n' ' ')"
fi

# bad input is refused with status 2 (options) or 1 (files)
bad_ok=1
for args in "-t 0 $dir/t.fa $dir/t.fq" "-t 1,,2 $dir/t.fa $dir/t.fq" "--batch=x $dir/t.fa $dir/t.fq" "$dir/t.fa"; do
  "$bin/bwamem" $args >"$dir/bad.log" 2>&1
  rc=$?
  [ $rc -eq 2 ] || { bad_ok=0; bad bad_input_refused "'$args' gave rc=$rc"; }
done
printf 'ACGT\n' > "$dir/nofasta.fa"
printf '@r1\nACGT\n+\nII\n' > "$dir/short_qual.fq"
for args in "$dir/missing.fa $dir/t.fq" "$dir/nofasta.fa $dir/t.fq" "$dir/t.fa $dir/short_qual.fq" "$dir/t.fa $dir/nofasta.fa"; do
  "$bin/bwamem" -t 1 $args >"$dir/bad.log" 2>&1
  rc=$?
  if [ $rc -ne 1 ] || ! grep -q '^bwamem: ' "$dir/bad.log"; then
    bad_ok=0
    bad bad_input_refused "'$args' gave rc=$rc"
  fi
done
[ $bad_ok -eq 1 ] && ok bad_input_refused

exit $fail
