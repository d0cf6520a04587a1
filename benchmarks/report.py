#!/usr/bin/python3
"""report.py -- Markdown tables (and the plot data) of `benchmarks/run
subgraph`, `benchmarks/run tpch` and `benchmarks/run kernels` from their
CSVs.

  report.py subgraph CSV   per-query and per-set tables; writes CSV%.csv.dat
  report.py tpch CSV       per-workload table; writes CSV%.csv.dat
  report.py kernels CSV    per-workload tables, rounds, STREAM; writes
                           CSV%.csv.dat; exits 3 when results differ

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
    # galleyc-B~SPEC: B on operands with non-finite values (kernels.py -x)
    xtools = [t for t in tools if t.startswith("galleyc") and "~" in t]
    gtools = [t for t in tools if t.startswith("galleyc") and "~" not in t]
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


# ---------------------------------------------------------------- kernels

# Issue 11's targets for the default backend after the first call: the
# ratio reference / galleyc must reach the value.
KERNEL_TARGETS = {
    "spmv": (("graphblas", "scipy"), 1.3),
    "spgemm": (("graphblas", "scipy"), 1.2),
    "sddmm": (("graphblas",), 2.0),
    "tri_full": (("graphblas",), 1.0),
    "tri_lower": (("graphblas",), 1.0),
}
# Published or staged triangle counts (DATA/matrices/README.md).
KNOWN_TRIANGLES = {"karate": 45, "ca-GrQc": 48260, "as-22july06": 46873,
                   "power": 651, "luxembourg_osm": 68, "copter2": 584982,
                   "mdual": 21635, "crack": 20141}
BASELINES = ("graphblas", "scipy")


def kernel_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fnum(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def spread(v):
    return "%s [%s-%s]" % (rfmt(st.median(v)), rfmt(min(v)), rfmt(max(v)))


def rfmt(r):
    return "%.2f" % r if r >= 0.1 else "%.2g" % r


def close(x, y, scale):
    return abs(x - y) <= 1e-8 * scale + 1e-12


def kernel_checks(runs, name, kernel):
    """Checksum comparison of every round: a list of problems (empty when
    every tool agrees with the reference tool, the first baseline)."""
    problems = []
    by_round = {}
    for r in runs:
        by_round.setdefault(r["round"], []).append(r)
    for rnd, rs in sorted(by_round.items(), key=lambda x: int(x[0])):
        ref = next((r for b in BASELINES for r in rs if r["tool"] == b), None)
        ref = ref or rs[0]
        scale = max(fnum(r["asum"]) or 0 for r in rs)
        for r in rs:
            if r is ref:
                continue
            if not (close(fnum(r["sum"]), fnum(ref["sum"]), scale) and
                    close(fnum(r["wsum"]), fnum(ref["wsum"]), 11 * scale)):
                problems.append("%s != %s in round %s (sum %s vs %s; wsum %s "
                                "vs %s)" % (r["tool"], ref["tool"], rnd, r["sum"],
                                            ref["sum"], r["wsum"], ref["wsum"]))
        if kernel.startswith("tri_") and name in KNOWN_TRIANGLES:
            for r in rs:
                if fnum(r["sum"]) != KNOWN_TRIANGLES[name]:
                    problems.append("%s counted %s triangles, not %d" % (
                        r["tool"], r["sum"], KNOWN_TRIANGLES[name]))
    return problems


def kernels(path):
    R = kernel_rows(path)
    meta = next((r["note"] for r in R if r["kind"] == "meta"), "")
    rounds = [r for r in R if r["kind"] == "round"]
    runs = [r for r in R if r["kind"] == "run"]
    firsts = {(r["tool"], r["file"], r["kernel"]): r for r in R
              if r["kind"] == "first"}
    skips = [r for r in R if r["kind"] in ("skip", "error")]
    files = {r["file"]: r for r in R if r["kind"] == "file"}
    triad = next((r for r in R if r["kind"] == "stream"), None)
    tools = []
    for r in R:
        if r["kind"] in ("run", "first") and r["tool"] not in tools:
            tools.append(r["tool"])
    # galleyc-B~SPEC: B on operands with non-finite values (kernels.py -x)
    xtools = [t for t in tools if t.startswith("galleyc") and "~" in t]
    gtools = [t for t in tools if t.startswith("galleyc") and "~" not in t]
    # a baseline run at a thread count is named TOOL@N (-j)
    btools = [t for t in tools if t.split("@")[0] in BASELINES]

    def refs_for(g, names):
        """The baselines g is compared with: those named in names, at g's
        thread count when they were run at several (TOOL@N)."""
        n = g.split("@")[1] if "@" in g else None
        return [t for t in btools if t.split("@")[0] in names and
                ("@" not in t or n is None or t.split("@")[1] == n)]
    work = []  # (file, kernel) in run order
    for r in R:
        if r["kind"] in ("first", "run", "skip") and r["kernel"] and r["tool"] and \
                (r["file"], r["kernel"]) not in work:
            work.append((r["file"], r["kernel"]))
    cell = {}  # (tool, file, kernel) -> {round: row}
    for r in runs:
        cell.setdefault((r["tool"], r["file"], r["kernel"]), {})[r["round"]] = r

    def med(tool, f, k, col="call_ms"):
        v = [fnum(r[col]) for r in cell.get((tool, f, k), {}).values()]
        v = [x for x in v if x is not None]
        return st.median(v) if v else None

    def ratios(g, f, k, refs):
        """best-of-refs / galleyc per round."""
        out = []
        for rnd, gr in cell.get((g, f, k), {}).items():
            b = [fnum(cell[(t, f, k)][rnd]["call_ms"]) for t in refs
                 if rnd in cell.get((t, f, k), {})]
            gv = fnum(gr["call_ms"])
            if b and gv:
                out.append(min(b) / gv)
        return out

    print("## galleyc kernels per call against GraphBLAS and SciPy")
    print()
    print("Run: %s" % meta)
    print()
    print("Times are per call in ms: the median over rounds of each round's "
          "batch median. galleyc: a whole `galley_program_run` (\"call\") and "
          "its queries alone (\"kernels\": galley_program_query_info, transposes included; "
          "the CSV has them apart as transpose_ms); \"first\" = parse + bind + first "
          "run (compile ms, backend). Ratio = best baseline / galleyc per "
          "round (> 1: galleyc faster): median [min-max] over rounds. "
          "Target: issue 11's goal (reference / galleyc, median). Check: "
          "checksums agree in every round.")
    print()
    mismatches, dat = [], []
    for g in gtools:
        print("### %s" % g)
        print()
        print("| file | nnz | kernel | call ms | kernels ms | first ms (compile, backend) | %s | ratio [spread] | target | check |"
              % " | ".join("%s ms" % t for t in btools))
        print("|---|---:|---|---:|---:|---:|%s---:|---|---|" % ("---:|" * len(btools)))
        for f, k in work:
            fr = firsts.get((g, f, k))
            nnz = next((r["nnz"] for r in R if r["file"] == f and r["kernel"] == k and r["nnz"]), "")
            gm = med(g, f, k)
            skipped = next((s for s in skips if s["file"] == f and s["kernel"] == k
                            and s["tool"] in (g, "")), None)
            rr = ratios(g, f, k, refs_for(g, BASELINES))
            tgt = "-"
            if k in KERNEL_TARGETS:
                refs, want = KERNEL_TARGETS[k]
                tr = ratios(g, f, k, refs_for(g, refs))
                if tr:
                    m = st.median(tr)
                    tgt = "%s %s %.1f %s" % (rfmt(m), ">=" if m >= want else "<", want,
                                             "ok" if m >= want else "**no**")
                elif skipped or gm is None:
                    tgt = "**no** (no result)"
            probs = kernel_checks([r for t in [g] + btools
                                   for r in cell.get((t, f, k), {}).values()], f, k)
            if probs:
                mismatches += ["%s %s: %s" % (f, k, p) for p in probs]
                check = "**MISMATCH**"
            elif gm is None:
                check = "-"
            elif any((t, f, k) in cell for t in btools) or (k.startswith("tri_") and f in KNOWN_TRIANGLES):
                check = "ok"
            else:
                check = "unchecked"
            first = "-"
            if fr:
                first = "%s (%s, %s)" % (ms(fnum(fr["first_ms"])), ms(fnum(fr["compile_ms"])),
                                         fr["backend"])
            gcell = ms(gm) if gm is not None else ("skipped" if skipped else "-")
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                f, nnz, k, gcell, ms(med(g, f, k, "kernel_ms")), first,
                " | ".join(ms(med(t, f, k)) for t in btools),
                spread(rr) if rr else "-", tgt, check))
            if g == gtools[0]:
                dat.append(("%s:%s" % (f, k), [st.median(ratios(t, f, k, refs_for(t, BASELINES)))
                                               if ratios(t, f, k, refs_for(t, BASELINES)) else None
                                               for t in gtools]))
        print()
    if rounds:
        print("Rounds (load average = /proc/loadavg, 1 minute):")
        print()
        print("| round | load at start | load at end | seconds | median ratio over workloads (%s) |"
              % ", ".join(gtools))
        print("|---:|---:|---:|---:|---|")
        for rd in rounds:
            per = []
            for g in gtools:
                v = []
                for f, k in work:
                    gr = cell.get((g, f, k), {}).get(rd["round"])
                    b = [fnum(cell[(t, f, k)][rd["round"]]["call_ms"])
                         for t in refs_for(g, BASELINES)
                         if rd["round"] in cell.get((t, f, k), {})]
                    if gr and b and fnum(gr["call_ms"]):
                        v.append(min(b) / fnum(gr["call_ms"]))
                per.append(rfmt(st.median(v)) if v else "-")
            print("| %s | %s | %s | %.1f | %s |" % (rd["round"], rd["load_start"], rd["load_end"],
                                                   fnum(rd["call_ms"]) / 1e3, ", ".join(per)))
        print()
    spmv = [f for f, k in work if k == "spmv"]
    if triad and spmv:
        tbest = fnum(triad["count"]) / (fnum(triad["call_min_ms"]) * 1e6)
        print("SpMV bandwidth against the STREAM triad (bench_stream, one thread, best "
              "pass %.2f GB/s). Bytes of a CSR SpMV: values, column indices, row "
              "pointers, x and y, with each tool's index width (galleyc, GraphBLAS "
              "int64; SciPy int32). \"large\": at least 1M entries. Matrices that fit "
              "in the last-level cache can beat the triad." % tbest)
        print()
        print("| file | nnz | MB (int64) | %s | GraphBLAS %% | SciPy %% |" % " | ".join(
            "%s call %% | %s kernels %%" % (g, g) for g in gtools))
        print("|---|---:|---:|%s---:|---:|" % ("---:|---:|" * len(gtools)))
        for f in spmv:
            info = files.get(f)
            if not info:
                continue
            dims = info["note"].split()[0].split("=")[1].split("x")
            n, m, z = int(dims[0]), int(dims[1]), int(info["nnz"])
            b8 = 16 * z + 8 * (n + 1) + 8 * m + 8 * n
            b4 = 12 * z + 4 * (n + 1) + 8 * m + 8 * n

            def pct(b, t):
                return "%.0f%%" % (100 * b / (t * 1e6) / tbest) if t else "-"
            cells = []
            for g in gtools:
                cells += [pct(b8, med(g, f, "spmv")), pct(b8, med(g, f, "spmv", "kernel_ms"))]
            print("| %s%s | %d | %.1f | %s | %s | %s |" % (
                f, " (large)" if z >= 1000000 else "", z, b8 / 1e6, " | ".join(cells),
                pct(b8, med(next((t for t in btools if t.startswith("graphblas")),
                                 "graphblas"), f, "spmv")),
                pct(b4, med("scipy", f, "spmv"))))
        print()
    if xtools:
        print("### Exception splitting (issue 12): split / finite time per call")
        print()
        print("galleyc-B~SPEC runs backend B on the same operands with a few "
              "stored values made non-finite (infN: N values +inf; infNnanM: "
              "and M NaN), in the same rounds as galleyc-B on the finite "
              "ones. Ratio = split call / finite call per round: median "
              "[min-max]. Target <= 1.5. Split results are the dense meaning "
              "(NaN where 0*inf occurs) and are not compared between tools.")
        print()
        print("| file | kernel | tool | finite ms | split ms | split kernels ms | first ms | ratio [spread] | target |")
        print("|---|---|---|---:|---:|---:|---:|---:|---|")
        for f, k in work:
            for x in xtools:
                g = x.split("~")[0]
                xs = cell.get((x, f, k), {})
                gs = cell.get((g, f, k), {})
                rr = [fnum(xs[rd]["call_ms"]) / fnum(gs[rd]["call_ms"])
                      for rd in xs if rd in gs and fnum(xs[rd]["call_ms"])
                      and fnum(gs[rd]["call_ms"])]
                fr = firsts.get((x, f, k))
                if not rr and not fr:
                    continue
                m = st.median(rr) if rr else None
                tgt = "-" if m is None else "%s %s 1.5 %s" % (
                    rfmt(m), "<=" if m <= 1.5 else ">", "ok" if m <= 1.5 else "**no**")
                print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    f, k, x, ms(med(g, f, k)) if med(g, f, k) is not None else "-",
                    ms(med(x, f, k)) if med(x, f, k) is not None else "skipped",
                    ms(med(x, f, k, "kernel_ms")),
                    ms(fnum(fr["first_ms"])) if fr else "-",
                    spread(rr) if rr else "-", tgt))
        print()
    notes = [r for r in skips]
    notes += [r for r in runs if r["note"]]
    if notes:
        print("Notes:")
        seen = set()
        for r in notes:
            line = "- %s %s %s%s: %s %s" % (r["kind"], r["tool"] or "-", r["file"],
                                           " " + r["kernel"] if r["kernel"] else "",
                                           "round " + r["round"] if r["round"] else "", r["note"])
            if line not in seen:
                seen.add(line)
                print(line)
        print()
    counts = []
    for f, k in work:
        c = {t: next((r["count"] for r in cell.get((t, f, k), {}).values()), None)
             for t in gtools + btools}
        if len({v for v in c.values() if v}) > 1 and k in ("spgemm", "sddmm"):
            counts.append("%s %s: stored result entries %s" % (
                f, k, ", ".join("%s %s" % (t, v) for t, v in c.items() if v)))
    if counts:
        print("Stored result entries that differ (explicit zeros kept or dropped; the "
              "checksums decide):")
        for c in counts:
            print("- " + c)
        print()
    if mismatches:
        sys.stderr.write("report.py: %d RESULT MISMATCHES between the tools (see the "
                         "check column)\n" % len(mismatches))
        print("**%d RESULT MISMATCHES** (tolerance 1e-8 of the sum of magnitudes):" % len(mismatches))
        for m in mismatches:
            print("- **%s**" % m)
        print()
    with open(path[:-4] + ".dat", "w") as f:
        f.write("workload " + " ".join(g.replace("galleyc-", "") for g in gtools) + "\n")
        for name, rr in dat:
            if any(rr):
                f.write("%s %s\n" % (name, " ".join("%.4g" % x if x else "-" for x in rr)))
    return 3 if mismatches else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("subgraph", "tpch", "kernels"):
        sys.exit("usage: report.py subgraph|tpch|kernels CSV")
    sys.exit({"subgraph": subgraph, "tpch": tpch,
              "kernels": kernels}[sys.argv[1]](sys.argv[2]))
