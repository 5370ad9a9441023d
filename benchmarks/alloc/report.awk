# Turns the raw results of run.sh into the markdown tables of alloc.md and the
# aggregated alloc.csv.  Plain POSIX awk (Debian's default is mawk).
#
#   awk -F, -v allocs="system jemalloc ..." -v peers="jemalloc tcmalloc mimalloc" \
#       -v me=libhpcmem -v csv=OUT/alloc.csv -f report.awk OUT/allocators.csv OUT/raw.csv
#
# allocators.csv: name,state,path   (state "ok", "not installed", "not built ...")
# raw.csv:        bench,case,param,alloc,rep,metric,value,unit
#                 bench,case,param,alloc,rep,status,<reason>,   (param "*" = whole run)
# Times are the best repeat (noise on a shared machine only ever adds time),
# peak RSS the median repeat.

function add_spec(s) { nspec++; spec[nspec] = s }

BEGIN {
    OFS = ","
    nalloc = split(allocs, alist, " ")
    npeer = split(peers, plist, " ")
    # bench|case|metric|kind|target|title
    add_spec("sizes|notouch|ns_per_round|lower|1.00|malloc + free, nothing touched (the paper's measurement): time per round")
    add_spec("sizes|touch|ns_per_round|lower|1.00|malloc + one write per 4 KiB page (read back) + free: time per round")
    add_spec("sizes|*|peak_rss|rss|1.10|peak RSS of the whole sweep")
    add_spec("sizes|notouch|start_rss|info|-|RSS at start (after the first malloc): the fixed cost of the allocator and the libraries it loads")
    add_spec("residents|none|ns_per_pair|lower|1.00|free + malloc pair, nothing touched (the paper's measurement): time per pair")
    add_spec("residents|ends|ns_per_pair|lower|1.00|free + malloc pair, head and tail of each block tagged and checked: time per pair")
    add_spec("residents|*|peak_rss|rss|1.10|peak RSS")
    add_spec("churn|*|mops|higher|0.90|malloc + free operations per second, 1 thread")
    add_spec("churn|*|cpu_mops|higher|0.90|malloc + free operations per CPU second, 1 thread (not counting time the core ran other programs)")
    add_spec("churn|*|peak_rss|rss|1.10|peak RSS")
    add_spec("threads|xfree|mops|higher|0.90|producer/consumer ring, every free on another thread (T >= 2): operations per second, all threads")
    add_spec("threads|local|mops|higher|0.90|thread-local churn: operations per second, all threads")
    add_spec("threads|xfree|cpu_mops|higher|0.90|producer/consumer ring: operations per CPU second of all threads")
    add_spec("threads|local|cpu_mops|higher|0.90|thread-local churn: operations per CPU second of all threads")
    add_spec("threads|*|peak_rss|rss|1.10|peak RSS")
    heading["sizes"] = "Size sweep (SWAlloc Fig. 7)"
    heading["residents"] = "Residents (SWAlloc Fig. 9): random free/malloc pairs, sizes 1 B - 8 MiB"
    heading["churn"] = "Small-object churn, single thread"
    heading["threads"] = "Threads: cross-thread frees and thread-local churn"
}

FILENAME == ARGV[1] {
    state[$1] = $2
    path[$1] = $3
    next
}

$6 == "status" {
    failed[$1 SUBSEP $2 SUBSEP $3 SUBSEP $4] = $7
    next
}

{
    k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $6
    if (!(k in seen)) {
        seen[k] = 1
        nrow[$1 SUBSEP $6]++
        row[$1 SUBSEP $6 SUBSEP nrow[$1 SUBSEP $6]] = $2 SUBSEP $3
        unit[$6] = $8
    }
    kk = k SUBSEP $4
    nval[kk]++
    val[kk SUBSEP nval[kk]] = $7 + 0
}

function fail_reason(b, c, p, a) {
    if ((b SUBSEP c SUBSEP p SUBSEP a) in failed) return failed[b SUBSEP c SUBSEP p SUBSEP a]
    if ((b SUBSEP c SUBSEP "*" SUBSEP a) in failed) return failed[b SUBSEP c SUBSEP "*" SUBSEP a]
    return ""
}

# best (lower/higher) or median (rss) of the repeats; "" when none
function aggregate(kk, kind,    n, i, j, t, v) {
    n = nval[kk]
    if (n == 0) return ""
    for (i = 1; i <= n; i++) v[i] = val[kk SUBSEP i]
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    # how far the repeats lie apart: tells a real difference from noise
    last_spread = (v[1] > 0) ? sprintf("spread %.0f%%", 100 * (v[n] / v[1] - 1)) : ""
    if (kind == "lower") return v[1]
    if (kind == "info") return v[int((n + 1) / 2)]
    if (kind == "higher") return v[n]
    return v[int((n + 1) / 2)]
}

function human_bytes(b) {
    if (b >= 1073741824 && b % 1073741824 == 0) return (b / 1073741824) " GiB"
    if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) " MiB"
    if (b >= 1024 && b % 1024 == 0) return (b / 1024) " KiB"
    return b " B"
}

function fmt(v, kind, metric) {
    if (unit[metric] == "KiB") return sprintf("%.1f MiB", v / 1024)
    if (metric == "mops" || metric == "cpu_mops") return sprintf("%.1f M/s", v)
    if (v < 1e3) return sprintf("%.3g ns", v)
    if (v < 1e6) return sprintf("%.3g us", v / 1e3)
    if (v < 1e9) return sprintf("%.3g ms", v / 1e6)
    return sprintf("%.3g s", v / 1e9)
}

function label(b, c, p, star) {
    if (b == "sizes") return star ? c : (p ~ /^[0-9]+$/ ? human_bytes(p) : p)
    if (b == "residents") return star ? (c == "none" ? "untouched" : "tagged") ", N = " p : "N = " p
    if (b == "churn") return c " B"
    if (b == "threads") return star ? c ", T = " p : "T = " p
    return c " " p
}

function csv_row(b, c, p, m, a, v, agg, runs, note) {
    print b, c, p, m, unit[m], a, v, agg, runs, note > csv
}

function table(s,    out, f, b, c, m, kind, target, i, j, rc, rp, star, line, a, kk, v, best,
               bestname, mine, reason, ratio, status, cell, agg, any, sep, n, done) {
    split(s, f, "|")
    b = f[1]; c = f[2]; m = f[3]; kind = f[4]; target = f[5]
    star = (c == "*")
    any = 0
    for (i = 1; i <= nrow[b SUBSEP m]; i++) {
        split(row[b SUBSEP m SUBSEP i], rcp, SUBSEP)
        if (star || rcp[1] == c) { any = 1; break }
    }
    if (!any) return ""

    agg = (kind == "rss" || kind == "info") ? "median" : "best"
    if (kind == "info")
        out = sprintf("\n### %s\n\n%s of the repeats; for information, no target.\n\n", f[6], agg)
    else
        out = sprintf("\n### %s\n\n%s of the repeats; target: libhpcmem / best peer %s %s.\n\n",
                      f[6], agg, (kind == "higher") ? ">=" : "<=", target)
    line = "| " (b == "sizes" && !star ? "size" : "case")
    sep = "|---"
    for (i = 1; i <= nalloc; i++) { line = line " | " alist[i]; sep = sep "|---:" }
    out = out line " | best peer | libhpcmem / best peer | target | status |\n" sep "|---|---:|---|---|\n"

    for (i = 1; i <= nrow[b SUBSEP m]; i++) {
        split(row[b SUBSEP m SUBSEP i], rcp, SUBSEP)
        rc = rcp[1]; rp = rcp[2]
        if (!star && rc != c) continue
        line = "| " label(b, rc, rp, star)
        delete have
        for (j = 1; j <= nalloc; j++) {
            a = alist[j]
            kk = b SUBSEP rc SUBSEP rp SUBSEP m SUBSEP a
            reason = fail_reason(b, rc, rp, a)
            if (state[a] != "ok") cell = state[a]
            else if (reason != "") cell = "**FAILED** (" reason ")"
            else if (nval[kk] == 0) cell = "-"
            else {
                v = aggregate(kk, kind)
                have[a] = v
                cell = fmt(v, kind, m)
                csv_row(b, rc, rp, m, a, v, agg, nval[kk], last_spread)
            }
            if (state[a] != "ok" || reason != "")
                csv_row(b, rc, rp, m, a, "", agg, 0, (reason != "") ? "FAILED " reason : state[a])
            line = line " | " cell
        }
        bestname = ""
        for (j = 1; j <= npeer; j++) {
            a = plist[j]
            if (!(a in have)) continue
            if (bestname == "" || (kind == "higher" ? have[a] > best : have[a] < best)) {
                best = have[a]; bestname = a
            }
        }
        if (kind == "info") status = "-"
        else if (state[me] != "ok") status = state[me]
        else if (fail_reason(b, rc, rp, me) != "") status = "**MISS** (failed)"
        else if (!(me in have)) status = "**MISS** (no result)"
        else if (bestname == "") status = "n/a (no peer)"
        else status = ""
        ratio = "-"
        if (status == "") {
            ratio = (best > 0) ? have[me] / best : 0
            if (kind == "higher") status = (ratio >= target - 1e-9) ? "PASS" : "**MISS**"
            else status = (ratio <= target + 1e-9) ? "PASS" : "**MISS**"
            csv_row(b, rc, rp, m, me "/" bestname, sprintf("%.4f", ratio), "ratio", "",
                    status == "PASS" ? "PASS" : "MISS")
            ratio = sprintf("%.2f", ratio)
        }
        if (status == "PASS") npass[b]++
        else if (status ~ /MISS/) nmiss[b]++
        else if (kind != "info") nother[b]++
        if (kind == "info" && (me in have) && bestname != "")
            ratio = sprintf("%.2f", have[me] / best)
        out = out line " | " (bestname == "" ? "-" : bestname) " | " ratio " | " \
              (kind == "info" ? "-" : ((kind == "higher") ? ">= " : "<= ") target) " | " status " |\n"
    }
    return out
}

END {
    print "bench,case,param,metric,unit,allocator,value,aggregate,runs,note" > csv
    body = ""
    for (i = 1; i <= nspec; i++) {
        split(spec[i], g, "|")
        t = table(spec[i])
        if (t == "") continue
        if (!(g[1] in headed)) {
            headed[g[1]] = 1
            order[++nbench] = g[1]
            body = body "\n## " heading[g[1]] "\n"
        }
        body = body t
    }
    print "## Targets at a glance\n"
    print "| benchmark | PASS | MISS | other (not built, n/a) |"
    print "|---|---:|---:|---:|"
    for (i = 1; i <= nbench; i++)
        printf "| %s | %d | %d | %d |\n", order[i], npass[order[i]], nmiss[order[i]], nother[order[i]]
    printf "%s", body
}
