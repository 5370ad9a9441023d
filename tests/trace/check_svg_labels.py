#!/usr/bin/env python3
"""Every left-aligned label of the SVG plots in DIR ends inside the picture.

The width of a character is taken as 7 px (sans-serif at 12 px: digits and
lower case 6-7.6 px).  Prints one line per label that runs past the right
edge and exits 1 if there is any.  Usage: check_svg_labels.py DIR"""
import glob
import re
import sys

bad = []
for f in sorted(glob.glob(sys.argv[1] + "/*.svg")):
    s = open(f).read()
    w = float(re.search(r'<svg[^>]* width="([0-9.]+)"', s).group(1))
    for m in re.finditer(r'<text x="([0-9.]+)"[^>]*>([^<]*)</text>', s):
        if "text-anchor" not in m.group(0) and float(m.group(1)) + 7 * len(m.group(2)) > w:
            bad.append("%s: '%s' at x=%s" % (f.rsplit("/", 1)[1], m.group(2), m.group(1)))
print("\n".join(bad))
sys.exit(1 if bad else 0)
