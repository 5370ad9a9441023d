"""What the report checkers share (tests/mpi/report_check.py for one host,
tests/multihost/check_report.py for simulated hosts): the result lines, the
per-rank high-water marks, the per-node sums of the job report, and the
command-line driver.

Each check prints one `[       OK ] suite.case` / `[  FAILED  ] suite.case
(reason)` line (the markers tests/summary.sh counts); run() exits 1 if any
failed.
"""
import json
import sys

MIB = 1 << 20
failures = 0


def result(suite, case, ok, reason=""):
    global failures
    if ok:
        print(f"[       OK ] {suite}.{case}")
    else:
        failures += 1
        print(f"[  FAILED  ] {suite}.{case} ({reason})")


def load(path):
    with open(path) as f:
        return json.load(f)


def hwm_outside(ranks, want, overhead, key="peak_bytes"):
    """ranks ({rank: record}) whose high-water mark `key` is not what they
    allocated (want[r]) plus at most `overhead` bytes: MPI_Init's heap, the C
    library's buffers, the program's bookkeeping"""
    return [f"rank {r}: {ranks[r][key] if r in ranks else 'no record'} for {w}"
            for r, w in enumerate(want)
            if r not in ranks or not w <= ranks[r][key] <= w + overhead]


def node_sums_wrong(d, ranks):
    """nodes of the job report d whose sums, maxima and high-water-mark
    summary are not those of exactly their ranks ({rank: record})"""
    bad = []
    for nd in d["nodes"]:
        name = f"node {nd['host']}"
        if any(r not in ranks for r in nd["ranks"]):
            bad.append(f"{name}: ranks {nd['ranks']} without a record")
            continue
        mine = [ranks[r] for r in nd["ranks"]]
        if nd["nranks"] != len(mine):
            bad.append(f"{name}: nranks {nd['nranks']}")
        for f in d["fields"]:
            if nd["sum"][f] != sum(r[f] for r in mine):
                bad.append(f"{name}: sum {f} {nd['sum'][f]}")
            if nd["max"][f] != max(r[f] for r in mine):
                bad.append(f"{name}: max {f} {nd['max'][f]}")
        hw = [r["peak_bytes"] for r in mine]
        if nd["hwm_sum_bytes"] != sum(hw) or nd["hwm"]["sum"] != sum(hw) or \
           nd["hwm"]["n"] != len(hw) or nd["hwm"]["max"] != max(hw):
            bad.append(f"{name}: hwm_sum_bytes {nd['hwm_sum_bytes']}, hwm max {nd['hwm']['max']}, "
                       f"ranks' sum {sum(hw)}, max {max(hw)}")
    return bad


def run(parser, checks):
    """parse the command line (its first argument `what` names the check, the
    second `file` the JSON), run checks[what]; a report that cannot be read is
    a failed case `readable`"""
    a = parser.parse_args()
    try:
        checks[a.what](a)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        result(a.suite, "readable", False, f"{a.file}: {type(e).__name__}: {e}")
    sys.exit(1 if failures else 0)
