#!/usr/bin/python3
"""report.py -- Markdown tables (and the plot data) of `benchmarks/run
subgraph` and `benchmarks/run tpch` from their CSVs.

  report.py subgraph CSV   per-query and per-set tables; writes CSV%.csv.dat
  report.py tpch CSV       per-workload table; writes CSV%.csv.dat

The CSV rows are the bench_tin / duckdb_query.mjs / baseline_tpch.py line
format (tool,workload,status,reps,median_ms,p90_ms,max_ms,opt_ms,plan_ms,
compile_ms,first_ms,result,note), prefixed with set,query,expected for
subgraph.  Ratios are baseline_time / galleyc_time (> 1: galleyc faster).
"""
import csv
import math
import statistics as st
import sys

COLS = ["tool", "workload", "status", "reps", "median_ms", "p90_ms", "max_ms",
        "opt_ms", "plan_ms", "compile_ms", "first_ms", "result", "note"]


def rows(path, prefix=()):
    out = []
    with open(path) as f:
        for r in csv.reader(f):
            if not r or r[0].startswith("#") or r[0] in ("set", "tool"):
                continue
            d = dict(zip(list(prefix) + COLS, r))
            # a note may have had commas: keep the rest
            if len(r) > len(prefix) + len(COLS):
                d["note"] = ",".join(r[len(prefix) + len(COLS) - 1:])
            out.append(d)
    return out


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def ms(x):
    if x is None:
        return "-"
    if math.isinf(x):
        return "timeout"
    return "%.3f" % x if x < 10 else "%.1f" % x


def cap_ms(x):
    return "> cap" if x is not None and math.isinf(x) else ms(x)


def ratio(b, g):
    if b is None or g is None or g <= 0:
        return "-"
    if math.isinf(b) and math.isinf(g):
        return "-"
    if math.isinf(b):
        return "> cap"
    if math.isinf(g):
        return "0 (timeout)"
    r = b / g
    return "%.2f" % r if r >= 0.1 else "%.2g" % r


def pctl(v, q):
    v = sorted(v)
    k = max(0, min(len(v) - 1, math.ceil(q * len(v)) - 1))
    return v[k]


def exec_ms(d):
    """median exec ms; inf for a timeout; None for an error/absent."""
    if d is None:
        return None
    if d["status"] == "timeout":
        return math.inf
    return num(d["median_ms"]) if d["status"] == "ok" else None


def same_count(a, b):
    a, b = num(a), num(b)
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))


def subgraph(path):
    R = rows(path, ("set", "query", "expected"))
    tools = []
    for r in R:
        if r["tool"] not in tools:
            tools.append(r["tool"])
    gtools = [t for t in tools if t.startswith("galleyc")]
    have_duck = "duckdb" in tools
    queries, by = [], {}
    for r in R:
        k = (r["set"], r["query"])
        if k not in by:
            by[k] = {"expected": r["expected"]}
            queries.append(k)
        by[k][r["tool"]] = r
    cap = None
    with open(path) as f:
        for line in f:
            if line.startswith("# cap_s="):
                cap = line.split()[1].split("=")[1]
    print("## Per query (exec = median of the timed runs, ms; galleyc's opt / plan / compile ms of its cold run)")
    print()
    gcols = " | ".join("%s exec" % t for t in gtools)
    print("| set | query | expected | galleyc count | DuckDB count | check | opt ms | plan+codegen ms | compile ms | %s | DuckDB exec | %s |" % (
        gcols, " | ".join("DuckDB/%s" % t.replace("galleyc-", "") for t in gtools)))
    print("|---|---|---:|---:|---:|---|---:|---:|---:|%s---:|%s" % ("---:|" * len(gtools), "---:|" * len(gtools)))
    wrong = 0
    dat = []
    for k in queries:
        q = by[k]
        exp = q["expected"]
        g0 = next((q[t] for t in gtools if t in q and q[t]["status"] == "ok"), None)
        d = q.get("duckdb")
        counts = [(t, q[t]["result"]) for t in tools if t in q and q[t]["status"] == "ok"]
        ref = exp if exp not in ("-", "") else (counts[0][1] if counts else None)
        bad = [t for t, c in counts if ref is not None and not same_count(c, ref)]
        if bad:
            check = "**WRONG: %s**" % ",".join(bad)
            wrong += 1
        elif not counts:
            check = "none finished"
        elif exp in ("-", ""):
            check = "agree (no reference)" if len(counts) > 1 else "unchecked"
        else:
            check = "ok"
        def cnt(r):
            if r is None:
                return "-"
            if r["status"] != "ok":
                return r["status"]
            return "%.0f" % float(r["result"])
        g_first = q.get(gtools[0]) if gtools else None
        dm = exec_ms(d)
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            k[0], k[1], exp, cnt(g_first), cnt(d) if have_duck else "skipped", check,
            ms(num(g0["opt_ms"])) if g0 else "-", ms(num(g0["plan_ms"])) if g0 else "-",
            ms(num(g0["compile_ms"])) if g0 else "-",
            " | ".join(ms(exec_ms(q.get(t))) for t in gtools), ms(dm) if have_duck else "skipped",
            " | ".join(ratio(dm, exec_ms(q.get(t))) for t in gtools)))
        rr = []
        for t in gtools:
            g = exec_ms(q.get(t))
            rr.append("%.4g" % (dm / g) if dm and g and not math.isinf(dm) and not math.isinf(g) else "-")
        dat.append((k[1].replace("query_", ""), rr))
    print()
    print("## Per query set (over the queries of the set; a timeout counts as slower than any finished run)")
    print()
    print("| set | queries | tool | finished | timeouts | errors | median exec ms | p90 exec ms | max exec ms | median opt ms | median compile ms | DuckDB median / tool median |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    sets = []
    for k in queries:
        if k[0] not in sets:
            sets.append(k[0])
    for s in sets:
        ks = [k for k in queries if k[0] == s]
        dmed = None
        if have_duck:
            dv = [exec_ms(by[k].get("duckdb")) for k in ks]
            dv = [x for x in dv if x is not None]
            dmed = st.median(dv) if dv else None
        for t in gtools + (["duckdb"] if have_duck else []):
            rs = [by[k].get(t) for k in ks]
            v = [exec_ms(r) for r in rs]
            v = [x for x in v if x is not None]
            fin = [r for r in rs if r and r["status"] == "ok"]
            opt = [num(r["opt_ms"]) for r in fin if num(r["opt_ms"]) is not None]
            comp = [num(r["compile_ms"]) for r in fin if num(r["compile_ms"]) is not None]
            med = st.median(v) if v else None
            print("| %s | %d | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |" % (
                s, len(ks), t, len(fin), sum(1 for r in rs if r and r["status"] == "timeout"),
                sum(1 for r in rs if r is None or r["status"] not in ("ok", "timeout")),
                cap_ms(med), cap_ms(pctl(v, 0.9)) if v else "-", cap_ms(max(v)) if v else "-",
                ms(st.median(opt)) if opt else "-", ms(st.median(comp)) if comp else "-",
                ratio(dmed, med) if t != "duckdb" else "-"))
    print()
    if cap:
        print("Cap: %s s per run (galleyc's process gets %s s + 5 s for loading, optimizing and compiling)." % (cap, cap))
    if not have_duck:
        print("DuckDB was skipped (not installed: run benchmarks/setup).")
    if wrong:
        print()
        print("**%d QUERIES GAVE WRONG COUNTS** (see the check column)." % wrong)
    with open(path[:-4] + ".dat", "w") as f:
        f.write("query " + " ".join("DuckDB/" + t.replace("galleyc-", "") for t in gtools) + "\n")
        for name, rr in dat:
            f.write("%s %s\n" % (name, " ".join(rr)))


def tpch(path):
    R = rows(path)
    work, by = [], {}
    for r in R:
        if r["workload"] not in by:
            by[r["workload"]] = {}
            work.append(r["workload"])
        by[r["workload"]][r["tool"]] = r
    tools = []
    for r in R:
        if r["tool"] not in tools:
            tools.append(r["tool"])
    g = [t for t in tools if t.startswith("galleyc")]
    b = [t for t in tools if not t.startswith("galleyc")]
    print("## TPC-H star join, ML over the joined features (median ms; baselines: join + math)")
    print()
    print("| workload | %s | %s | %s | check | galleyc opt ms | galleyc plan+codegen ms | %s |" % (
        " | ".join("%s exec" % t for t in g), " | ".join(b),
        " | ".join("%s/%s" % (x, y.replace("galleyc-", "")) for x in b for y in g),
        " | ".join("%s compile ms" % t for t in g)))
    print("|---|%s%s%s---|---:|---:|%s" % ("---:|" * len(g), "---:|" * len(b), "---:|" * (len(b) * len(g)), "---:|" * len(g)))
    dat, wrong = [], 0
    for w in work:
        q = by[w]
        gm = [exec_ms(q.get(t)) for t in g]
        bm = [exec_ms(q.get(t)) for t in b]
        checks = [q[t]["note"] for t in b if t in q and "check" in q[t]["note"]]
        bad = [t for t in b if t in q and ("DIFFER" in q[t]["note"] or "WRONG" in q[t]["note"])]
        failed = [t for t in g if t in q and q[t]["status"] != "ok"]
        if bad:
            check = "**DIFFER (%s)**" % ",".join(bad)
            wrong += 1
        elif failed:
            check = "**galleyc %s**" % ",".join("%s %s" % (t, q[t]["status"]) for t in failed)
            wrong += 1
        elif any("check ok" in c for c in checks):
            check = "ok"
        else:
            check = "unchecked"
        g0 = next((q[t] for t in g if t in q and q[t]["status"] == "ok"), None)
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            w, " | ".join(ms(x) for x in gm), " | ".join(ms(x) for x in bm),
            " | ".join(ratio(x, y) for x in bm for y in gm), check,
            ms(num(g0["opt_ms"])) if g0 else "-", ms(num(g0["plan_ms"])) if g0 else "-",
            " | ".join(ms(num(q[t]["compile_ms"])) if t in q and q[t]["status"] == "ok" else "-" for t in g)))
        dat.append((w, ["%.4g" % (x / y) if x and y and not math.isinf(x) and not math.isinf(y) else "-"
                        for x in bm for y in gm]))
    print()
    for t in b:
        for w in work:
            if t in by[w]:
                print("- %s, %s: %s" % (t, w, by[w][t]["note"]))
    for w in work:
        for t in g:
            r = by[w].get(t)
            if r and r["status"] != "ok":
                print("- %s %s: %s: %s" % (w, t, r["status"], r["note"]))
    if wrong:
        print()
        print("**%d WORKLOADS WRONG OR FAILED** (see the check column)." % wrong)
    with open(path[:-4] + ".dat", "w") as f:
        f.write("workload " + " ".join("%s/%s" % (x, y.replace("galleyc-", "")) for x in b for y in g) + "\n")
        for name, rr in dat:
            f.write("%s %s\n" % (name, " ".join(rr)))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("subgraph", "tpch"):
        sys.exit("usage: report.py subgraph|tpch CSV")
    {"subgraph": subgraph, "tpch": tpch}[sys.argv[1]](sys.argv[2])
