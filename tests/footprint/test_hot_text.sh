#!/bin/sh
# The functions a process that does not trace runs lie together right after
# the PLT (src/hot-text.ld, docs/footprint.md): fails when the linker script
# stops applying (-ffunction-sections lost, the section renamed), when the
# allocator's entry points and start-up fall out of it, when it (with .init
# and the PLT) no longer fits the first 64 KiB window of the code, and (with
# gdb) when the list is stale:
# the programs src/hot-text.sh runs to make the list are run again with a
# breakpoint on every function outside the section, and every function that
# ran there is named.  Also that the C library lands right below libhpcmem
# (the 1 MiB load alignment, "The loader's alignment" in src/hot-text.ld).
lib=$LIBHPCMEM
fails=0
ok() { echo "[       OK ] hot_text.$1"; }
fail() { echo "[  FAILED  ] hot_text.$1 ($2)"; fails=$((fails + 1)); }

sec=$(readelf -SW "$lib" | awk '$2 == ".text.hpcmem_hot" {print $4, $6}')
if [ -z "$sec" ]; then
  fail section "no .text.hpcmem_hot in $lib"
  exit 1
fi
set -- $sec
start=$((0x$1)); size=$((0x$2))
if [ $size -le 98304 ]; then ok size; else fail size "$size bytes: more than 96 KiB, more windows than it saves"; fi
# the text segment starts a 64 KiB window (-z max-page-size=0x10000, ld.so
# honours p_align): .init, the PLT and the section must end inside it, or
# every process maps a second window of code
tseg=$(readelf -lW "$lib" | awk '$1 == "LOAD" && $8 == "E" {print $3, $9; exit}')
set -- $tseg
if [ "$2" != 0x10000 ]; then
  fail window "text segment aligned to $2, not 64 KiB"
elif [ $((start + size)) -le $(($1 + 65536)) ]; then
  ok window
else
  fail window "PLT and hot code end $((start + size - $1 - 65536)) bytes past the first 64 KiB window of the code: move functions that only some programs run out, or make room"
fi
for f in malloc free calloc realloc _hpcmem_init _hpcmem_heaps_init pthread_atfork; do
  a=$(nm "$lib" | awk -v f="$f" '$3 == f && $2 ~ /[tT]/ {print $1; exit}')
  if [ -z "$a" ]; then fail "$f" "not in the symbol table"; continue; fi
  a=$((0x$a))
  if [ $a -ge $start ] && [ $a -lt $((start + size)) ]; then ok "$f"; else fail "$f" "at $a, outside $start + $size"; fi
done

# a plain process maps no page of .rodata (src/util/startdata.h): what the
# start reads of libhpcmem's constant data lies in the hot code's window, the
# rest (the report's, the trace's and the options' help texts) only a process
# that prints or traces reads.  A page the start reads there again, from the
# code or through a system call (a path given to open), maps the segment's
# 24 KiB; asked with and without an option in the environment (its name is
# read then).
ro=$(readelf -lW "$lib" | awk '$1 == "LOAD" && NF == 8 && $7 == "R" && $2 != "0x000000" {print $2; exit}')
if [ -z "$ro" ]; then
  fail rodata_unread "no read-only data segment after the headers' in $lib"
else
  ro=$(printf %08x $((ro)))
  for env in "" "HPCMEM_HEAPS=1"; do
    rss=$(env $env LD_PRELOAD=$lib cat /proc/self/smaps |
          awk -v o="$ro" '$2 == "r--p" && $3 == o && $6 ~ /libhpcmem/ {on = 1; next}
                          on && $1 == "Rss:" {print $2; exit}')
    case "$rss" in
    0) ok "rodata_unread${env:+ ($env)}" ;;
    "") fail rodata_unread "no r--p mapping at offset $ro of libhpcmem in cat's smaps" ;;
    *) fail rodata_unread "${env:+with $env: }a plain process maps $rss KiB of .rodata: the start reads a constant outside src/util/startdata.h's section (docs/footprint.md, The start's constant data)" ;;
    esac
  done
fi

# The pages of libhpcmem's data and .bss a plain process touches
# (src/hot-text.ld: the variables the start touches share pages): the
# relocated data and .data (-z now puts the GOT with the read-only part:
# 3 pages), and .bss: the pages the start's parts of its tables lie on,
# computed from the symbols -- .bss's tail of small variables with the node
# cpu sets' first rows (1 page, 2 when the tail crosses a page boundary),
# the class geometry's page with the topology's head, the heaps' header and
# the heaps there can be, the large tier's page, the cpu table's rows of the
# cpus there can be: 5 or 6 pages on a small machine.  On a kernel with a
# shared zero page a page only read counts nothing and the test is easier;
# on one without (the test machine's) a read costs a page as a write does.
# cat, which also reallocs, and a program with a second thread that frees
# NULL before its first malloc.  Without HPCMEM_* settings: an option set
# writes its string (a page more).
# nm's hexadecimal to a number (mawk has no strtonum)
awk_hex='function hex(h,   i, n) { n = 0; h = tolower(h); for (i = 1; i <= length(h); i++) n = n * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1; return n }'
bss_expect=$(nm -n -S "$lib" | awk -v cpus="$(sed 's/.*[-,]//' /sys/devices/system/cpu/possible 2>/dev/null)" \
                                    -v nodes="$(sed 's/.*[-,]//' /sys/devices/system/node/possible 2>/dev/null)" "$awk_hex"'
  function pages(from, len,   p) { for (p = int(from / 4096); p <= int((from + len - 1) / 4096); p++) pg[p] = 1 }
  NF == 4 && $3 ~ /^[bB]$/ {
    a = hex($1); z = hex($2)
    if ($4 == "node_cpus") { pages(tail, a + (nodes + 1) * z / 1024 - tail); seen = 1 }
    else if (!seen && z >= 4096) tail = a + z
    if ($4 == "_hpcmem_class_geom" || $4 == "_hpcmem_large") pages(a, z)
    if ($4 == "T") pages(a, 1024)
    if ($4 == "_hpcmem_heaps") pages(a, 64 + (cpus + 1) * int(z / 64))
    if ($4 == "C") pages(a, (cpus + 1) * z / 4096)
  }
  END { if (seen) for (p in pg) printf "%x\n", p * 4096 }' 2>/dev/null)
bss_bound=$(printf '%s\n' "$bss_expect" | grep -c .)
clean_env=$(env | sed -n 's/^\(HPCMEM_[A-Za-z0-9_]*\)=.*/-u \1/p')
for prog in cat thread; do
  if [ $prog = cat ]; then
    smaps=$(env $clean_env LD_PRELOAD=$lib cat /proc/self/smaps)
  else
    smaps=$(env $clean_env LD_PRELOAD=$lib "$top_builddir/tests/footprint/smaps_thread" 2>&1) || {
      fail "data_pages ($prog)" "smaps_thread failed: $smaps"; continue; }
  fi
  # libhpcmem's own mappings: its file name, not a directory of that name
  set -- $(printf '%s\n' "$smaps" | awk '
    /^[0-9a-f]+-[0-9a-f]+ / { split($1, a, "-"); name = $6; perm = $2; st = a[1]; en = a[2]; next }
    /^Rss:/ {
      ours = name ~ /\/libhpcmem\.so[^\/]*$/
      if (ours && (perm == "rw-p" || (perm == "r--p" && seen_x))) data += $2
      if (ours && perm == "r-xp") seen_x = 1
      if (ours && perm == "rw-p") last = en
      if (name == "" && st == last && last != "") { bss += $2; last = "" }
    }
    END { print data + 0, bss + 0 }')
  # the r--p after the code is .rodata (0 KiB, rodata_unread) and RELRO
  if [ "$1" -le 12 ]; then ok "data_pages ($prog)"; else fail "data_pages ($prog)" "$1 KiB of relocated data and .data resident, more than 3 pages"; fi
  if [ -z "$bss_bound" ] || [ "$bss_bound" -lt 4 ]; then
    fail "bss_pages ($prog)" "could not compute the pages from $lib's symbols (nm): '$bss_bound'"
  elif [ "$2" -gt 0 ] && [ "$2" -le $((bss_bound * 4)) ]; then ok "bss_pages ($prog)"
  else fail "bss_pages ($prog)" "$2 KiB of .bss resident, more than the $bss_bound pages the start's variables lie on: a variable the start touches is outside src/hot-text.ld's .bss.hpcmem_start, or beside one (docs/footprint.md, session 19)"; fi
done
# the same program's pages one by one (present in its pagemap, read or
# written, whatever the kernel): each must be one of those pages; a page
# outside them is named with the variables on it
if [ "$bss_bound" -ge 4 ]; then
  if ! got=$(env $clean_env LD_PRELOAD=$lib "$top_builddir/tests/footprint/smaps_thread" --pages 2>&1); then
    fail bss_pages_touched "smaps_thread --pages failed: $got"
  else
    extra=""
    for pg in $(printf '%s\n' "$got" | sed -n 's/^page //p'); do
      printf '%s\n' "$bss_expect" | grep -qx "$pg" && continue
      on=$(nm -n -S "$lib" | awk -v p="$pg" "$awk_hex"'
        NF == 4 && $3 ~ /^[bBdD]$/ { a = hex($1); z = hex($2); if (a < hex(p) + 4096 && a + z > hex(p)) printf " %s", $4 }')
      extra="$extra 0x$pg (${on# })"
    done
    if [ -z "$extra" ]; then ok bss_pages_touched
    else fail bss_pages_touched "pages of .bss touched outside the start's: $extra"; fi
  fi
fi

# libc right below libhpcmem (src/hot-text.ld, "The loader's alignment"):
# the largest segment alignment is 1 MiB, and in most starts the C library's
# last mapping ends where libhpcmem's first begins (the loader's cache file
# sits above instead of between).  A start where libhpcmem's place leaves the
# gap above too small for the cache is normal (about 1 in 20), so a majority
# of 20 starts is asked; without address randomisation every start is the
# same one and the count says nothing.
align=0
for a in $(readelf -lW "$lib" | awk '$1 == "LOAD" {print $NF}'); do
  [ $((a)) -gt $align ] && align=$((a))
done
if [ $align -ge 1048576 ]; then ok load_align; else fail load_align "largest PT_LOAD alignment $align, not 1 MiB"; fi
below=0; starts=0; places=""
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  m=$(LD_PRELOAD=$lib cat /proc/self/maps) || continue
  starts=$((starts + 1))
  libc_end=$(echo "$m" | awk '$6 ~ /\/libc\.so/ {split($1, a, "-"); e = a[2]} END {print e}')
  # libc's .bss follows its last file mapping as an anonymous one
  libc_end=$(echo "$m" | awk -v e="$libc_end" '{split($1, a, "-")} a[1] == e && $6 == "" {e = a[2]} END {print e}')
  ours=$(echo "$m" | awk '$6 ~ /libhpcmem/ {split($1, a, "-"); print a[1]; exit}')
  places="$places $ours"
  [ -n "$ours" ] && [ "$libc_end" = "$ours" ] && below=$((below + 1))
done
distinct=$(echo $places | tr ' ' '\n' | sort -u | wc -l)
if [ $starts -lt 20 ]; then
  fail libc_below "only $starts of 20 starts of cat ran"
elif [ $((below * 2)) -gt $starts ]; then
  ok libc_below
elif [ "$distinct" -le 1 ]; then
  echo "[  SKIPPED ] hot_text.libc_below (no address randomisation: every start the same)"
else
  fail libc_below "libc ended where libhpcmem starts in $below of $starts starts"
fi

# the list names sections by function name: two static functions of one name
# (in two files) both land in the section, and the one no process runs at
# start takes the window's room (session 26: the trace's block writer, 1.9
# KiB, beside the timeline's function of its name)
dups=$(sed -n 's/^ *\*(\.text\.\([^ ]*\) .*/\1/p' "$top_srcdir/src/hot-text.ld" | sort -u > hot_names.$$
       readelf -sW "$lib" | awk '/\.symtab/ {s = 1} s && $4 == "FUNC" && $7 != "UND" {print $8}' | sort | uniq -d |
       comm -12 - hot_names.$$; rm -f hot_names.$$)
if [ -z "$dups" ]; then ok unique_names; else fail unique_names "functions in src/hot-text.ld defined more than once (rename one): $(echo $dups)"; fi

# stale list: what ran outside the section (about 10 s; gdb is in
# quickstart.sh's package list)
if ! command -v gdb > /dev/null; then
  echo "[  SKIPPED ] hot_text.ran_outside (no gdb)"
elif ! out=$(sh "$top_srcdir/src/hot-text.sh" --outside "$top_builddir" 2>&1); then
  fail ran_outside "src/hot-text.sh --outside failed: $out"
elif [ -n "$out" ]; then
  fail ran_outside "ran outside .text.hpcmem_hot: $(echo $out) -- regenerate: sh src/hot-text.sh BUILDDIR > src/hot-text.ld"
else
  ok ran_outside
fi
[ $fails = 0 ]
