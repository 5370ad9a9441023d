#!/usr/bin/env python3
"""Check an hpcmem-report JSON against what the test program allocated.

Prints one `[       OK ] suite.case` / `[  FAILED  ] suite.case (reason)` line
per check and exits 1 if any failed.  The expected amounts come from the
command line (the same numbers the test gave the program); the tolerance is
the test's stated overhead: the heap that MPI_Init, the C library and the
test's own bookkeeping hold besides the known allocations.

  report_check.py job  FILE --suite S --np N --mib M --overhead-mib O
                       --layout overlap|phased [--threshold PCT] [--full] [--single-block]
                       [--nodes K]
      rank r allocated (r+1)*M MiB (tests/mpi/report_ranks.c; --single-block: in one
      allocation, as the Fortran tests do)
  report_check.py rank FILE --suite S --rank R --np N --mib M --overhead-mib O
                       --source SRC[,SRC...] [--signal SIG]
      a per-rank summary written without MPI_Finalize (by one of the sources;
      SIG: the signal when the source is "signal")
  report_check.py lone FILE --suite S --peak-mib P --live-mib L --overhead-mib O
      a process without MPI
"""
import argparse
import math
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_checks import MIB, hwm_outside, load, node_sums_wrong, result, run  # noqa: E402


def close(a, b, rel=1e-9, absolute=1e-6):
    return abs(a - b) <= max(absolute, rel * max(abs(a), abs(b)))


def check_schema(s, d, complete):
    need = ["format", "format_version", "library", "jobid", "source", "complete", "mpi",
            "rank", "report", "clock", "job", "fields", "nodes", "ranks"]
    missing = [k for k in need if k not in d]
    result(s, "schema", not missing and d["format"] == "hpcmem-report" and d["complete"] == complete,
           f"missing {missing}" if missing else f"format {d.get('format')} complete {d.get('complete')}")


def check_fields_consistent(s, d):
    """every field's min/max/sum/mean over ranks agrees with the per-rank records"""
    bad = []
    ranks = d["ranks"]
    for name, f in d["fields"].items():
        vals = [r[name] for r in ranks]
        a = f["ranks"]
        if a["n"] != len(vals) or a["sum"] != sum(vals) or a["min"] != min(vals) or a["max"] != max(vals):
            bad.append(name)
            continue
        if ranks[[r["rank"] for r in ranks].index(a["min_rank"])][name] != a["min"] or \
           ranks[[r["rank"] for r in ranks].index(a["max_rank"])][name] != a["max"]:
            bad.append(name + " (rank)")
            continue
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
        if not close(a["mean"], mean) or not close(a["stddev"], std, rel=1e-6, absolute=1e-3):
            bad.append(name + " (mean/stddev)")
    result(s, "fields_match_ranks", not bad, f"fields {bad}")


def check_job(a):
    d = load(a.file)
    s, np_, o = a.suite, a.np, a.overhead_mib * MIB
    want = [(r + 1) * a.mib * MIB for r in range(np_)]
    check_schema(s, d, True)
    job = d["job"]
    result(s, "rank_count", job["ranks"] == np_ and len(d["ranks"]) == np_ and
           sorted(r["rank"] for r in d["ranks"]) == list(range(np_)),
           f"job ranks {job['ranks']}, records {len(d['ranks'])}")
    ranks = sorted(d["ranks"], key=lambda r: r["rank"])
    hwm = [r["peak_bytes"] for r in ranks]
    bad = hwm_outside({r["rank"]: r for r in ranks}, want, o)
    result(s, "hwm_per_rank", not bad, f"outside [allocated, +{a.overhead_mib} MiB]: {'; '.join(bad)}")
    h = job["hwm"]
    result(s, "min_max_ranks", h["min_rank"] == 0 and h["max_rank"] == np_ - 1 and
           h["min"] == hwm[0] and h["max"] == hwm[-1],
           f"min {h['min']} at {h['min_rank']}, max {h['max']} at {h['max_rank']}, per rank {hwm}")
    mean = sum(hwm) / np_
    std = math.sqrt(sum((x - mean) ** 2 for x in hwm) / np_)
    wmean = sum(want) / np_
    wstd = math.sqrt(sum((x - wmean) ** 2 for x in want) / np_)
    result(s, "mean_stddev", close(h["mean"], mean) and close(h["stddev"], std, rel=1e-6) and
           abs(h["mean"] - wmean) <= o and abs(h["stddev"] - wstd) <= o,
           f"mean {h['mean']} (ranks {mean}, allocated {wmean}), stddev {h['stddev']} (ranks {std}, allocated {wstd})")
    imb = (max(hwm) - mean) / max(hwm)
    result(s, "cv_imbalance", close(h["cv"], std / mean, rel=1e-6) and close(job["imbalance"], imb, rel=1e-6)
           and job["imbalanced"] == (imb * 100 > a.threshold),
           f"cv {h['cv']} vs {std / mean}, imbalance {job['imbalance']} vs {imb}, flagged {job['imbalanced']}")
    result(s, "hwm_sum", job["hwm_sum_bytes"] == sum(hwm), f"{job['hwm_sum_bytes']} != {sum(hwm)}")
    nodes = sorted(d["nodes"], key=lambda n: n["node"])
    per = np_ // a.nodes   # the test splits the machine into nodes of consecutive ranks
    groups = [list(range(k * per, (k + 1) * per)) for k in range(a.nodes)]
    shape = len(nodes) == job["nodes"] == a.nodes and [sorted(n["ranks"]) for n in nodes] == groups and \
        all(n["nranks"] == per for n in nodes) and all(r["node"] == r["rank"] // per for r in ranks) and \
        len(set(n["host"] for n in nodes)) == a.nodes
    result(s, "node_ranks", shape,
           f"nodes {[(n['node'], n['host'], n['ranks']) for n in nodes]}, want {groups}")
    bad = node_sums_wrong(d, {r["rank"]: r for r in ranks})
    result(s, "node_sums", shape and not bad, "; ".join(bad[:4]))
    if shape:
        peaks = [n["peak_bytes"] for n in nodes]
        held = [sum(want[r] for r in g) for g in groups]
        # each node's peak over time: at least what its ranks held together (overlap),
        # at most the sum of their HWMs; the job's is at most the sum of the nodes'
        ok = all(p <= n["hwm_sum_bytes"] for p, n in zip(peaks, nodes)) and job["peak_bytes"] <= sum(peaks) and \
            (a.layout != "overlap" or all(p >= h for p, h in zip(peaks, held))) and \
            job["heaviest_node"] == nodes[peaks.index(max(peaks))]["node"]
        result(s, "node_peaks", ok, f"node peaks {peaks}, held together {held}, job peak {job['peak_bytes']}, "
               f"heaviest {job['heaviest_node']}")
    check_fields_consistent(s, d)
    # report_ranks.c: one block of half the amount and 256 small ones; Fortran: one array
    blocks, largest = (1, lambda w: w) if a.single_block else (257, lambda w: w // 2)
    bad = [r["rank"] for r, w in zip(ranks, want)
           if r["bytes_allocated"] < w or r["alloc_count"] < blocks or r["largest_alloc"] < largest(w)
           or r["bytes_freed"] < w or r["free_count"] < blocks or r["large_alloc_count"] < 1]
    result(s, "counts", not bad, f"ranks {bad}: bytes/counts/largest below what they allocated")
    bad = [r["rank"] for r, w in zip(ranks, want) if r["vm_hwm_bytes"] < w]
    result(s, "vm_hwm", not bad, f"ranks {bad}: VmHWM below the memory they touched")
    peak = job["peak_bytes"]
    if a.layout == "overlap":
        # every rank held its memory at the same time: the job's peak is the sum
        result(s, "job_peak_overlap", sum(want) <= peak <= sum(hwm),
               f"peak of the sum {peak}, allocated together {sum(want)}, sum of HWMs {sum(hwm)}")
    else:
        # one rank at a time: the peak over time is about the largest rank's, far below the sum
        baseline = sum(r["current_bytes"] for r in ranks)
        result(s, "job_peak_phased", max(want) <= peak <= max(want) + np_ * o,
               f"peak of the sum {peak}, largest rank {max(want)}, sum of HWMs {sum(hwm)}, baseline {baseline}")
        times = [r["peak_time_ns"] for r in ranks]
        gaps = [times[i + 1] - times[i] for i in range(np_ - 1)]
        result(s, "peak_times_aligned", all(g >= 40e6 for g in gaps) and all(g <= 10e9 for g in gaps),
               f"peak times on the job clock {times}: ranks allocated 80 ms apart in rank order")
    if a.full:
        tl = d.get("timeline", {})
        jb = tl.get("job", [])
        result(s, "full_timeline", len(jb) == 1024 and max(jb) == peak and len(tl.get("nodes", [])) == 1
               and tl["bin_ns"] == job["timeline_bin_ns"] and d["report"] == "full",
               f"{len(jb)} bins, max {max(jb) if jb else None} vs peak {peak}")


def check_rank(a):
    d = load(a.file)
    s, o = a.suite, a.overhead_mib * MIB
    want = (a.rank + 1) * a.mib * MIB
    check_schema(s, d, False)
    r = d["ranks"][0] if len(d["ranks"]) == 1 else {}
    result(s, "identity", d["rank"] == a.rank and r.get("rank") == a.rank and d["mpi"] is True and
           d["job"]["ranks"] == a.np and d["source"] in a.source.split(",") and
           (a.signal is None or d["source"] != "signal" or d.get("signal") == a.signal),
           f"rank {d['rank']}, source {d['source']}, signal {d.get('signal')}, job ranks {d['job']['ranks']}")
    result(s, "hwm", want <= r.get("peak_bytes", -1) <= want + o,
           f"HWM {r.get('peak_bytes')} outside [{want}, +{a.overhead_mib} MiB]")
    result(s, "live_at_exit", want <= r.get("current_bytes", -1) <= want + o,
           f"live {r.get('current_bytes')}: the rank still held {want}")


def check_lone(a):
    d = load(a.file)
    s, o = a.suite, a.overhead_mib * MIB
    check_schema(s, d, True)
    r = d["ranks"][0] if len(d["ranks"]) == 1 else {}
    result(s, "identity", d["rank"] is None and d["mpi"] is False and d["source"] == "exit" and
           d["job"]["ranks"] == 1, f"rank {d['rank']}, mpi {d['mpi']}, source {d['source']}")
    peak, live = a.peak_mib * MIB, a.live_mib * MIB
    result(s, "hwm", peak <= r.get("peak_bytes", -1) <= peak + o,
           f"HWM {r.get('peak_bytes')} outside [{peak}, +{a.overhead_mib} MiB]")
    result(s, "live_at_exit", live <= r.get("current_bytes", -1) <= live + o,
           f"live {r.get('current_bytes')} outside [{live}, +{a.overhead_mib} MiB]")
    result(s, "job_is_the_process", d["job"]["hwm"]["max"] == r.get("peak_bytes") and
           d["job"]["peak_bytes"] == r.get("peak_bytes"), "job summary differs from the one record")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["job", "rank", "lone"])
    p.add_argument("file")
    p.add_argument("--suite", required=True)
    p.add_argument("--np", type=int, default=1)
    p.add_argument("--mib", type=int, default=0)
    p.add_argument("--overhead-mib", type=int, required=True)
    p.add_argument("--layout", default="overlap")
    p.add_argument("--threshold", type=float, default=20)
    p.add_argument("--full", action="store_true")
    p.add_argument("--single-block", action="store_true", help="each rank allocated one block")
    p.add_argument("--nodes", type=int, default=1, help="nodes of np/nodes consecutive ranks each")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--source", default="exit")
    p.add_argument("--signal", type=int)
    p.add_argument("--peak-mib", type=int, default=0)
    p.add_argument("--live-mib", type=int, default=0)
    run(p, {"job": check_job, "rank": check_rank, "lone": check_lone})


if __name__ == "__main__":
    main()
