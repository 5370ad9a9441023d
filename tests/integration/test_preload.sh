#!/bin/sh
# Real programs from Debian under LD_PRELOAD=libhpcmem.so give the same output
# as without it.
lib="$LIBHPCMEM"
export HPCMEM_REPORT=off   # compare program output only
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
compare() {  # name command...
  name=$1; shift
  "$@" > "$tmp/plain" 2>&1; rc1=$?
  LD_PRELOAD="$lib" "$@" > "$tmp/hpcmem" 2>&1; rc2=$?
  if [ $rc1 = $rc2 ] && cmp -s "$tmp/plain" "$tmp/hpcmem"; then echo "[       OK ] preload.$name"
  else echo "[  FAILED  ] preload.$name (exit $rc1 vs $rc2)"; diff "$tmp/plain" "$tmp/hpcmem" | head -5; fails=$((fails + 1)); fi
}
# an allocation-heavy script: dicts, lists, strings, big integers
cat > "$tmp/alloc.py" <<'PY'
import hashlib, random
random.seed(7)
d = {}
for i in range(200000):
    d[str(i) * (i % 7 + 1)] = [i] * (i % 13)
s = sorted(d.items(), key=lambda kv: (len(kv[1]), kv[0]))[:5]
big = 1
for i in range(1, 3000): big *= i
blobs = [bytes(random.getrandbits(8) for _ in range(random.randint(1, 5000))) for _ in range(300)]
print(len(d), s[0][0], len(str(big)), hashlib.sha256(b"".join(blobs)).hexdigest())
PY
compare python3 python3 "$tmp/alloc.py"
seq 1 400000 | awk '{print ($1 * 7919) % 100003, $1}' > "$tmp/data"
compare sort sort -n "$tmp/data"
compare sort_parallel sort --parallel=2 -S 50M -k2,2 "$tmp/data"
compare gzip sh -c "gzip -c '$tmp/data' | gzip -dc | md5sum"
compare perl perl -e 'my %h; $h{$_ % 5000} .= "x" x ($_ % 50) for 1..300000; print scalar(keys %h), " ", length(join("", values %h)), "\n"'
# under an address-space limit (ulimit -v) of 24 GiB: one heap and a smaller
# large region instead of an abort at start (docs/footprint.md)
compare sort_under_ulimit_v sh -c "ulimit -v 25165824 && sort -n '$tmp/data' | md5sum"
(ulimit -v 25165824 && LD_PRELOAD="$lib" HPCMEM_VERBOSE=1 /bin/echo hi) > "$tmp/out" 2> "$tmp/err"
if [ "$(cat "$tmp/out")" = hi ] && grep -q 'address-space limit (ulimit -v, 24576 MiB) leaves 1 of' "$tmp/err"; then
  echo "[       OK ] preload.ulimit_v_says_what_it_got"
else echo "[  FAILED  ] preload.ulimit_v_says_what_it_got ($(cat "$tmp/out") / $(head -c 300 "$tmp/err"))"; fails=$((fails + 1)); fi
# below what one heap needs: the program runs on the C library's malloc, and
# says so only where libhpcmem's output is expected (docs/footprint.md)
compare sort_under_ulimit_v_4g sh -c "ulimit -v 4194304 && sort -n '$tmp/data' | md5sum"
compare python3_under_ulimit_v_4g sh -c "ulimit -v 4194304 && python3 '$tmp/alloc.py'"
mkdir "$tmp/rep"
(cd "$tmp/rep" && ulimit -v 4194304 && LD_PRELOAD="$lib" HPCMEM_REPORT=summary /bin/echo hi) > "$tmp/out" 2> "$tmp/err"
if [ "$(cat "$tmp/out")" = hi ] && [ -z "$(ls "$tmp/rep")" ] &&
   grep -q "the address-space limit (ulimit -v) is 4096 MiB, libhpcmem needs at least 19 GiB; this process allocates with the C library's malloc" "$tmp/err"; then
  echo "[       OK ] preload.ulimit_v_too_small_is_named"
else echo "[  FAILED  ] preload.ulimit_v_too_small_is_named ($(cat "$tmp/out") / $(ls "$tmp/rep") / $(head -c 300 "$tmp/err"))"; fails=$((fails + 1)); fi
# strict overcommit accounting is named: the setting is faked in a mount
# namespace of our own (root only), and a limit makes the reservation fail
echo 2 > "$tmp/overcommit"
# (/proc made private in the namespace first: in a chroot, whose / is no
# mount point, unshare cannot make everything private itself)
fake_overcommit="mount --make-rprivate /proc && mount --bind '$tmp/overcommit' /proc/sys/vm/overcommit_memory"
if unshare -m --propagation unchanged sh -c "$fake_overcommit" 2> /dev/null; then
  unshare -m --propagation unchanged sh -c "$fake_overcommit && ulimit -v 4194304 &&
    LD_PRELOAD='$lib' HPCMEM_VERBOSE=1 /bin/echo hi" > "$tmp/out" 2> "$tmp/err"
  if [ "$(cat "$tmp/out")" = hi ] && grep -q "(vm.overcommit_memory = 2); this process allocates with the C library's malloc" "$tmp/err"; then
    echo "[       OK ] preload.strict_overcommit_is_named"
  else echo "[  FAILED  ] preload.strict_overcommit_is_named ($(cat "$tmp/out") / $(grep warning "$tmp/err" | head -c 300))"; fails=$((fails + 1)); fi
else
  echo "[  SKIPPED ] preload.strict_overcommit_is_named (no mount namespace: not root, or no unshare)"
fi
[ $fails = 0 ]
