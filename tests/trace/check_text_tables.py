"""Prints the rows of hpcmem-report's text tables that are out of line with
their heading, one line each; nothing when every table lines up.

    python3 check_text_tables.py REPORT.txt

A table is a heading line of known column names (the high-water marks, the
breakdowns by function and library, the allocation sizes) and the lines
under it that start with two spaces.  A column aligned right ends where its
name ends, one aligned left starts where its name starts; the last column of
a table may run on.  Notes inside a table ("  ... 12 more ranks") are
skipped.
"""
import sys

# column names, in order, and how each is aligned
TABLES = [
    (["rank", "host", "peak", "at (s)", "live at end", "allocs", "frees", "S at peak"], "llrrrrrr"),
    (["bytes", "%", "allocs", "function"], "rrrl"),
    (["bytes", "%", "allocs", "object"], "rrrl"),
    (["size", "allocs", "%", "bytes", "%"], "lrrrr"),
]


def spans(line, names):
    """(start, end) of each name in the heading line, left to right; None
    when the line is not this heading"""
    out, pos = [], 0
    for n in names:
        i = line.find(n, pos)
        if i < 0 or (i > 0 and line[i - 1] != " ") or (i + len(n) < len(line) and line[i + len(n)] != " "):
            return None
        out.append((i, i + len(n)))
        pos = i + len(n)
    return out if line[:out[0][0]].strip() == "" and line[pos:].strip() == "" else None


def blank(line, i):
    return i < 0 or i >= len(line) or line[i] == " "


def check(lines):
    bad = []
    k = 0
    while k < len(lines):
        table = None
        for names, align in TABLES:
            s = spans(lines[k], names)
            if s:
                table = (names, align, s)
                break
        k += 1
        if not table:
            continue
        names, align, s = table
        while k < len(lines) and lines[k].startswith("  ") and not lines[k].startswith("  #"):
            row = lines[k]
            k += 1
            if row.lstrip().startswith("..."):
                continue
            for c, ((a, e), how) in enumerate(zip(s, align)):
                last = c == len(names) - 1
                if how == "r":
                    ok = not blank(row, e - 1) and blank(row, e)
                else:
                    ok = not blank(row, a) and blank(row, a - 1)
                    # a left column ends before the next column starts
                    if ok and not last:
                        nxt = s[c + 1][0] if align[c + 1] == "l" else None
                        ok = nxt is None or blank(row, nxt - 1)
                if not ok:
                    bad.append(f"column '{names[c]}' out of line: {row!r} (heading: {' | '.join(names)})")
                    break
    return bad


def main():
    with open(sys.argv[1]) as f:
        lines = f.read().split("\n")
    tables = sum(1 for line in lines for names, _ in TABLES if spans(line, names))
    if not tables:
        print("no table found")
    for b in check(lines):
        print(b)


if __name__ == "__main__":
    main()
