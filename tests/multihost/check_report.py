#!/usr/bin/env python3
"""Checks of the simulated-host tests (tests/multihost/test_multihost.sh).

Each prints one `[       OK ] suite.case` / `[  FAILED  ] suite.case (reason)`
line per check and exits 1 if any failed.  What a rank allocated comes from
the command line (the amounts the script gave tests/multihost/mh_job), where
each rank ran from the program's own output (`host R NAME` lines: uname() in
the rank), the simulated host names from the harness.

  check_report.py job FILE --suite S --out OUT --banner ERR --mib A,B,.. \
                  --overhead-mib O --hosts H0,H1,..
      the job report written at MPI_Finalize
  check_report.py trace FILE --suite S --out OUT --mib A,B,.. --overhead-mib O \
                  --hosts H0,H1,.. --jobid ID
      hpcmem-report --json over the job's trace directory
  check_report.py demo FILE --suite S --banner ERR --hosts H0,H1,.. --ranks-per-host K
      the report of miniapps/demo (rank r needs r+1 units of memory)
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_checks import MIB, hwm_outside, load, node_sums_wrong, result, run  # noqa: E402


def amounts(spec, n):
    """rank r's MiB: the r-th of the list, the last one repeating (as mh_job)"""
    v = [int(x) for x in spec.split(",")]
    return [v[min(r, len(v) - 1)] * MIB for r in range(n)]


def rank_hosts(out):
    """{rank: host} from the program's `host R NAME` lines"""
    hosts = {}
    for line in open(out):
        w = line.split()
        if len(w) == 3 and w[0] == "host":
            hosts[int(w[1])] = w[2]
    return hosts


def check_job(a):
    s = a.suite
    d = load(a.file)
    sim = a.hosts.split(",")
    where = rank_hosts(a.out)
    ranks = {r["rank"]: r for r in d["ranks"]}
    n = d["job"]["ranks"]
    want = amounts(a.mib, n)
    o = a.overhead_mib * MIB

    # the program ran on the simulated hosts, its ranks spread over all of them
    result(s, "ranks_on_simulated_hosts",
           sorted(where) == list(range(n)) and set(where.values()) == set(sim),
           f"ranks ran on {where}, simulated hosts {sim}")

    # one node per simulated host, named after it, holding the ranks that ran there
    nodes = d["nodes"]
    got = {nd["host"]: sorted(nd["ranks"]) for nd in nodes}
    expect = {h: sorted(r for r, x in where.items() if x == h) for h in sim}
    result(s, "nodes_are_hosts", d["job"]["nodes"] == len(sim) and got == expect and
           all(ranks[r]["node"] == nd["node"] for nd in nodes for r in nd["ranks"]),
           f"job.nodes {d['job']['nodes']}, nodes {got}, expected {expect}")

    # every rank's high-water mark: what it allocated plus MPI's and libc's share
    bad = hwm_outside(ranks, want, o)
    result(s, "rank_hwm", not bad, "; ".join(bad))

    # per-node sums: each field summed (and maximised) over exactly the node's ranks
    bad = node_sums_wrong(d, ranks)
    result(s, "node_sums", not bad, "; ".join(bad[:4]))

    # ... and they are the memory the node's ranks allocated (held together,
    # so the node's peak over time is their sum too)
    bad = []
    for nd in nodes:
        alloc = sum(want[r] for r in nd["ranks"])
        k = len(nd["ranks"])
        if not alloc <= nd["hwm_sum_bytes"] <= alloc + k * o:
            bad.append(f"node {nd['host']}: hwm sum {nd['hwm_sum_bytes']} for {alloc} allocated")
        if not alloc <= nd["peak_bytes"] <= nd["hwm_sum_bytes"]:
            bad.append(f"node {nd['host']}: peak {nd['peak_bytes']} for {alloc} allocated, hwm sum {nd['hwm_sum_bytes']}")
    result(s, "node_memory", not bad, "; ".join(bad))

    # the heavier node: the host whose ranks allocated the most
    per_host = {h: sum(want[r] for r, x in where.items() if x == h) for h in sim}
    heavy = max(per_host, key=per_host.get)
    hn = [nd for nd in nodes if nd["node"] == d["job"]["heaviest_node"]]
    named = hn[0]["host"] if hn else None
    banner = open(a.banner).read()
    result(s, "heaviest_node", named == heavy and f"libhpcmem: heaviest node {heavy}: " in banner and
           f"{n} ranks on {len(sim)} nodes" in banner,
           f"heaviest_node is {named}, expected {heavy} ({per_host}); banner: "
           + " | ".join(l for l in banner.splitlines() if l.startswith("libhpcmem:"))[:300])


def check_trace(a):
    s = a.suite
    d = load(a.file)
    sim = a.hosts.split(",")
    where = rank_hosts(a.out)
    n = len(where)
    want = amounts(a.mib, n)
    o = a.overhead_mib * MIB
    ranks = {r["rank"]: r for r in d["ranks"]}
    result(s, "one_job", d["jobid"] == a.jobid and d["size"] == n and d["processes"] == n and
           d["complete"] and sorted(ranks) == list(range(n)),
           f"jobid {d['jobid']} (report's {a.jobid}), size {d['size']}, processes {d['processes']}, "
           f"complete {d['complete']}, ranks {sorted(ranks)}")
    bad = [f"rank {r}: {ranks[r]['host']} ran on {where[r]}" for r in ranks if ranks[r]["host"] != where.get(r)]
    result(s, "rank_hosts", not bad and set(r["host"] for r in ranks.values()) == set(sim), "; ".join(bad))
    bad = hwm_outside(ranks, want, o, key="hwm_bytes")
    result(s, "rank_hwm", not bad, "; ".join(bad))
    heavy = max(range(n), key=lambda r: want[r])
    light = min(range(n), key=lambda r: want[r])
    im = d["imbalance"]
    result(s, "imbalance", im["max_rank"] == heavy and im["min_rank"] == light,
           f"max rank {im['max_rank']} (want {heavy}), min rank {im['min_rank']} (want {light})")
    total = sum(want)
    peak = d["job"]["peak_bytes"]
    result(s, "job_peak", total <= peak <= d["job"]["sum_of_rank_peaks"] <= total + n * o,
           f"peak {peak}, sum of rank peaks {d['job']['sum_of_rank_peaks']}, allocated together {total}")


def check_demo(a):
    s = a.suite
    d = load(a.file)
    sim = a.hosts.split(",")
    k = a.ranks_per_host
    nodes = {nd["host"]: sorted(nd["ranks"]) for nd in d["nodes"]}
    expect = {h: list(range(i * k, (i + 1) * k)) for i, h in enumerate(sim)}
    result(s, "nodes_are_hosts", nodes == expect, f"nodes {nodes}, expected {expect}")
    # rank r needs r+1 units: the last host's ranks need the most
    hn = [nd["host"] for nd in d["nodes"] if nd["node"] == d["job"]["heaviest_node"]]
    banner = open(a.banner).read()
    result(s, "heaviest_node", hn == [sim[-1]] and f"libhpcmem: heaviest node {sim[-1]}: " in banner,
           f"heaviest node {hn}, expected {sim[-1]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["job", "trace", "demo"])
    p.add_argument("file")
    p.add_argument("--suite", required=True)
    p.add_argument("--out")
    p.add_argument("--banner")
    p.add_argument("--mib")
    p.add_argument("--overhead-mib", type=int, default=8)
    p.add_argument("--hosts", required=True)
    p.add_argument("--jobid")
    p.add_argument("--ranks-per-host", type=int, default=2)
    run(p, {"job": check_job, "trace": check_trace, "demo": check_demo})


if __name__ == "__main__":
    main()
