#!/usr/bin/env python3
"""Small SVG charts for the benchmark results (standard library only).

  svgplot.py lines OUT.svg CSV --title T --xlabel X --ylabel Y
      CSV rows: series,x,y   one line per series; x values are spaced evenly
  svgplot.py bars OUT.svg CSV --title T --ylabel Y
      CSV rows: group,series,value   one bar per series inside each group

Lines starting with '#' and empty lines in CSV are skipped; '-' reads stdin.
"""
import argparse
import csv
import math
import sys
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
W, H = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 80, 170, 50, 60


def read_rows(path, ncols):
    f = sys.stdin if path == "-" else open(path, newline="")
    rows = []
    for row in csv.reader(f):
        if not row or row[0].startswith("#"):
            continue
        if len(row) != ncols:
            sys.exit("svgplot: expected %d columns, got %r" % (ncols, row))
        rows.append(row)
    if not rows:
        sys.exit("svgplot: no data in %s" % path)
    return rows


def nice_step(span, ticks=5):
    raw = span / ticks if span > 0 else 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return "%gM" % (v / 1e6)
    if abs(v) >= 1e4:
        return "%gk" % (v / 1e3)
    return "%g" % v


def frame(out, title, xlabel, ylabel, ymax):
    step = nice_step(ymax)
    top = step * math.ceil(ymax / step) if ymax > 0 else 1.0
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    out.append('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
               'font-family="sans-serif" font-size="12">' % (W, H))
    out.append('<rect width="100%" height="100%" fill="white"/>')
    out.append('<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>' % (LEFT, escape(title)))
    y = 0.0
    while y <= top + 1e-9 * top:
        py = TOP + ph - ph * y / top
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (LEFT, py, LEFT + pw, py))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (LEFT - 6, py + 4, fmt(y)))
        y += step
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (LEFT, TOP, LEFT, TOP + ph))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (LEFT, TOP + ph, LEFT + pw, TOP + ph))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (LEFT + pw / 2, H - 15, escape(xlabel)))
    out.append('<text transform="translate(20,%d) rotate(-90)" text-anchor="middle">%s</text>'
               % (TOP + ph / 2, escape(ylabel)))
    return top, pw, ph


def legend(out, names):
    x = W - RIGHT + 15
    for i, name in enumerate(names):
        y = TOP + 10 + 20 * i
        out.append('<rect x="%d" y="%d" width="14" height="10" fill="%s"/>' % (x, y - 9, COLOURS[i % len(COLOURS)]))
        out.append('<text x="%d" y="%d">%s</text>' % (x + 20, y, escape(name)))


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def as_number(s):
    try:
        return float(s)
    except ValueError:
        return None


def lines(args):
    rows = read_rows(args.csv, 3)
    series = ordered(r[0] for r in rows)
    xs = ordered(r[1] for r in rows)
    if all(as_number(x) is not None for x in xs):
        xs.sort(key=float)
    data = {(r[0], r[1]): float(r[2]) for r in rows}
    out = []
    top, pw, ph = frame(out, args.title, args.xlabel, args.ylabel, max(data.values()))
    gap = pw / max(len(xs), 1)
    px = {x: LEFT + gap * (i + 0.5) for i, x in enumerate(xs)}
    for x in xs:
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (px[x], TOP + ph + 18, escape(x)))
    for i, s in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        pts = [(px[x], TOP + ph - ph * data[(s, x)] / top) for x in xs if (s, x) in data]
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                   % (colour, " ".join("%.1f,%.1f" % p for p in pts)))
        for p in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (p[0], p[1], colour))
    legend(out, series)
    out.append("</svg>")
    return out


def bars(args):
    rows = read_rows(args.csv, 3)
    groups = ordered(r[0] for r in rows)
    series = ordered(r[1] for r in rows)
    data = {(r[0], r[1]): float(r[2]) for r in rows}
    out = []
    top, pw, ph = frame(out, args.title, args.xlabel, args.ylabel, max(data.values()))
    gw = pw / len(groups)
    bw = gw * 0.8 / len(series)
    for g, group in enumerate(groups):
        x0 = LEFT + g * gw + gw * 0.1
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (LEFT + g * gw + gw / 2, TOP + ph + 18, escape(group)))
        for i, s in enumerate(series):
            if (group, s) not in data:
                continue
            v = data[(group, s)]
            h = ph * v / top
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>'
                       % (x0 + i * bw, TOP + ph - h, bw * 0.92, h, COLOURS[i % len(COLOURS)],
                          escape(group), escape(s), fmt(v)))
    legend(out, series)
    out.append("</svg>")
    return out


def main():
    p = argparse.ArgumentParser(description="SVG line and bar charts from CSV")
    p.add_argument("kind", choices=["lines", "bars"])
    p.add_argument("out")
    p.add_argument("csv")
    p.add_argument("--title", default="")
    p.add_argument("--xlabel", default="")
    p.add_argument("--ylabel", default="")
    args = p.parse_args()
    svg = lines(args) if args.kind == "lines" else bars(args)
    with open(args.out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
