#!/bin/sh
# docs/environment.md holds the table that the options table prints:
# regenerate it with `make docs/environment.md` (tools/hpcmem-config --markdown).
set -e
tool="$top_builddir/tools/hpcmem-config"
doc="$top_srcdir/docs/environment.md"
"$tool" --markdown > env-table.tmp
if awk '/<!-- options table: begin -->/{f=1;next} /<!-- options table: end -->/{f=0} f' "$doc" | cmp -s - env-table.tmp; then
  echo "[       OK ] environment_doc.matches_options_table"; rm -f env-table.tmp; exit 0
fi
echo "[  FAILED  ] environment_doc.matches_options_table: docs/environment.md differs from 'hpcmem-config --markdown'"
diff env-table.tmp "$doc" || true
rm -f env-table.tmp; exit 1
