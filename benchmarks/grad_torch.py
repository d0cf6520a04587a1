#!/usr/bin/python3
"""grad_torch.py -- PyTorch's side of `benchmarks/run grad`: forward plus
backward per training step on the workloads of benchmarks/bench_grad.c,
on the same data and from the same starting parameters (bench_param),
in float64 on one CPU thread.

    grad_torch.py [-n RUNS] [-R ROUND] [-v VARIANTS] WORKLOAD DATA_DIR
    grad_torch.py --table CSV     the Markdown table of a run's CSV

For each workload, every PyTorch program below is timed (RUNS times,
default 20, after two warm-up steps; each step sets the gradients to
None, evaluates the loss and calls backward()):

  obvious  the program a user writes first, in a training loop as a
           user writes it first: the gradients zeroed in place before
           each step (optimizer.zero_grad(), whose default in PyTorch
           1.13 is set_to_none=False) and backward() adding into them.
           The programs:
             lsq, logreg: the data as a sparse COO tensor times the
               parameter, torch.sparse.mm (coo_spmm);
             gcn: pygcn, Kipf's reference PyTorch GCN (layers.py): the
               features a dense tensor, torch.mm(X, W), then
               torch.spmm(A, .) with the adjacency sparse COO (pygcn);
             mf: two embedding tables with nn.Embedding's default
               (sparse=False, dense gradients), the rows' dot products
               (embedding_dense);
             transe: the same, nn.Embedding's default as in OpenKE's
               TransE, E(h) + R(r) - E(t) (embedding_dense);
  others   hand-chosen forms, gradients set to None before each step:
           COO or CSR torch.sparse.mm on every sparse operand,
           gather/scatter (index_select + index_add), plain indexing
           E[h], F.embedding(sparse=True), and for mf the torch.sparse
           program, sampled_addmm on CSR (it fails: no backward on CSR).
A program PyTorch refuses is reported with status "fails" and its error.
The table also gives galleyc's gradient time at doubled dimensions with
the same entries over its time at the stored ones (bench_grad's grad_2x:
mf and transe), for the 10% rule.
CSV lines on stdout (as bench_grad):
  tool,workload,variant,round,runs,median_ms,min_ms,loss,grad_abs_sum,note
with tool "torch-obvious" or "torch", variant the program's name.
"""
import argparse
import gzip
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp
import torch
import torch.nn.functional as F
import warnings

warnings.filterwarnings("ignore", message="Sparse CSR tensor support")

torch.set_num_threads(1)
DT = torch.float64


def bench_param(rows, cols, which):
    """bench_grad.c's bench_param for every (row, col), 64-bit exact."""
    row = np.arange(rows, dtype=np.uint64)[:, None]
    k = np.arange(cols, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        h = (row * np.uint64(2654435761) + k * np.uint64(40503)
             + np.uint64(which * 97) + np.uint64(12345))
        h = (h * np.uint64(6364136223846793005)
             + np.uint64(1442695040888963407)) >> np.uint64(33)
    return 0.3 * ((h % np.uint64(1000000)).astype(np.float64) / 1e6 - 0.5)


def param(rows, cols, which, vector=False):
    v = bench_param(rows, cols, which)
    t = torch.tensor(v[:, 0] if vector else v, dtype=DT)
    return t.requires_grad_()


def read_mtx(path):
    m = sp.coo_matrix(scipy.io.mmread(path))
    m = sp.csr_matrix(m)
    m.sum_duplicates()
    m.eliminate_zeros()
    return m.tocoo()


def read_tns(path):
    opener = gzip.open if path.endswith(".gz") else open
    dims = None
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith("# dims:"):
                dims = [int(x) for x in line.split(":")[1].split()]
                break
    a = np.loadtxt(path, comments="#", ndmin=2)
    idx = a[:, :-1].astype(np.int64) - 1
    return dims, idx, a[:, -1]


def coo_torch(m):
    i = torch.tensor(np.vstack([m.row, m.col]), dtype=torch.int64)
    return torch.sparse_coo_tensor(i, torch.tensor(m.data, dtype=DT),
                                   m.shape).coalesce()


def spmv_forms(m):
    """y = M x for a sparse matrix M and a dense x (n) or X (n x c):
    {name: function}."""
    A = coo_torch(m)
    Acsr = A.to_sparse_csr()
    rows = torch.tensor(m.row, dtype=torch.int64)
    cols = torch.tensor(m.col, dtype=torch.int64)
    vals = torch.tensor(m.data, dtype=DT)
    nrows = m.shape[0]

    def coo(x):
        return torch.sparse.mm(A, x[:, None])[:, 0] if x.dim() == 1 \
            else torch.sparse.mm(A, x)

    def csr(x):
        return torch.sparse.mm(Acsr, x[:, None])[:, 0] if x.dim() == 1 \
            else torch.sparse.mm(Acsr, x)

    def gather(x):
        g = x.index_select(0, cols)
        g = g * (vals if x.dim() == 1 else vals[:, None])
        out = torch.zeros((nrows,) + tuple(x.shape[1:]), dtype=DT)
        return out.index_add(0, rows, g)

    return {"coo_spmm": coo, "csr_spmm": csr, "gather_scatter": gather}


def workload(name, data):
    """(params, {variant: loss function}, obvious variant)."""
    if name == "lsq":
        m = read_mtx(data + "/matrices/xenon1.mtx.gz")
        x = param(m.shape[1], 1, 0, vector=True)
        b = torch.tensor(bench_param(m.shape[0], 1, 1)[:, 0], dtype=DT)
        forms = spmv_forms(m)
        return [x], {k: (lambda f=f: ((f(x) - b) ** 2).sum())
                     for k, f in forms.items()}, "coo_spmm"
    if name == "logreg":
        m = read_mtx(data + "/matrices/gcn/cora_features.mtx")
        lab = read_mtx(data + "/matrices/gcn/cora_labels.mtx")
        y = np.zeros(m.shape[0])
        y[lab.row[lab.col < 3]] = 1
        y = torch.tensor(y, dtype=DT)
        th = param(m.shape[1], 1, 0, vector=True)
        forms = spmv_forms(m)

        def loss(f):
            z = f(th)
            return (torch.log(1 + torch.exp(z)) - y * z).sum()
        return [th], {k: (lambda f=f: loss(f)) for k, f in forms.items()}, \
            "coo_spmm"
    if name == "gcn":
        a = read_mtx(data + "/matrices/gcn/cora_adj.mtx")
        x = read_mtx(data + "/matrices/gcn/cora_features.mtx")
        lab = read_mtx(data + "/matrices/gcn/cora_labels.mtx")
        Y = torch.tensor(lab.toarray(), dtype=DT)
        W = param(x.shape[1], lab.shape[1], 0)
        fa, fx = spmv_forms(a), spmv_forms(x)

        def loss(H):
            return (torch.log(torch.exp(H).sum(1)) - (Y * H).sum(1)).sum()

        forms = {k: (lambda k=k: loss(torch.relu(fa[k](fx[k](W)))))
                 for k in fa}
        # pygcn (Kipf's reference PyTorch GCN, layers.py): the features
        # as a dense tensor (torch.FloatTensor(np.array(features.todense()))),
        # support = torch.mm(input, weight), torch.spmm(adj, support)
        # with the adjacency as a sparse COO tensor
        Xd = torch.tensor(x.toarray(), dtype=DT)
        Acoo = coo_torch(a)
        forms["pygcn"] = lambda: loss(torch.relu(
            torch.spmm(Acoo, torch.mm(Xd, W))))
        return [W], forms, "pygcn"
    if name == "mf":
        m = read_mtx(data + "/matrices/pgp-strong-2009.mtx.gz")
        U = param(m.shape[0], 16, 0)
        V = param(m.shape[1], 16, 1)
        rows = torch.tensor(m.row, dtype=torch.int64)
        cols = torch.tensor(m.col, dtype=torch.int64)
        r = torch.tensor(m.data, dtype=DT)
        R = coo_torch(m).to_sparse_csr()

        def sampled_loss(R, U, V):
            P = torch.sparse.sampled_addmm(R, U, V.t(), beta=0.0)
            return ((R.values() - P.values()) ** 2).sum()

        # on CPU, sampled_addmm forms dense m x n products (1.4 GB of
        # memory for 6000 x 6000): on pgp-strong-2009 that is tens of GB,
        # so it runs on a 5 x 5 case only, to show whether backward works
        dense_gb = m.shape[0] * m.shape[1] * 8 / 1e9
        small = [torch.eye(5, dtype=DT).to_sparse_csr(),
                 torch.ones(5, 2, dtype=DT, requires_grad=True),
                 torch.ones(5, 2, dtype=DT, requires_grad=True)]
        try:
            sampled_loss(*small).backward()
            why = "not run: would densify (U V^T alone %.1f GB)" % dense_gb
        except (RuntimeError, NotImplementedError) as e:
            why = ("no backward on CSR (%s); forward densifies (U V^T "
                   "alone %.1f GB)" % (str(e).splitlines()[0][:70], dense_gb))

        def sampled():
            if dense_gb > 1:
                raise RuntimeError(why)
            return sampled_loss(R, U, V)

        def index():
            p = (U[rows] * V[cols]).sum(1)
            return ((r - p) ** 2).sum()

        def embedding():
            p = (F.embedding(rows, U, sparse=True)
                 * F.embedding(cols, V, sparse=True)).sum(1)
            return ((r - p) ** 2).sum()

        def embedding_dense():
            # nn.Embedding's default (sparse=False): dense gradients
            p = (F.embedding(rows, U) * F.embedding(cols, V)).sum(1)
            return ((r - p) ** 2).sum()
        return [U, V], {"embedding_dense": embedding_dense,
                        "sampled_addmm": sampled, "index": index,
                        "embedding_sparse": embedding}, "embedding_dense"
    if name == "transe":
        dims, idx, _ = read_tns(data + "/tensors/kg/wn18rr/train.tns.gz")
        E = param(dims[0], 32, 0)
        R = param(dims[1], 32, 1)
        h, r, t = (torch.tensor(idx[:, k], dtype=torch.int64) for k in range(3))

        def dist(d):
            return torch.sqrt((d * d).sum(1) + 1e-6).sum()

        def index():
            return dist(E[h] + R[r] - E[t])

        def index_select():
            return dist(E.index_select(0, h) + R.index_select(0, r)
                        - E.index_select(0, t))

        def embedding():
            return dist(F.embedding(h, E, sparse=True)
                        + F.embedding(r, R, sparse=True)
                        - F.embedding(t, E, sparse=True))

        def embedding_dense():
            # nn.Embedding's default (sparse=False), as OpenKE's TransE
            return dist(F.embedding(h, E) + F.embedding(r, R)
                        - F.embedding(t, E))
        return [E, R], {"embedding_dense": embedding_dense, "index": index,
                        "index_select": index_select,
                        "embedding_sparse": embedding}, "embedding_dense"
    sys.exit("grad_torch.py: unknown workload %r" % name)


def grad_abs_sum(params):
    s = 0.0
    for p in params:
        g = p.grad
        if g is None:
            continue
        if g.is_sparse:
            g = g.coalesce().values()
        s += float(g.abs().sum())
    return s


def step(params, f, zero_in_place=False):
    """One timed step.  zero_in_place: the gradients are zeroed in place
    and backward() adds into them, as the training loop a user writes
    first does with PyTorch 1.13 (optimizer.zero_grad()'s default
    set_to_none=False); else set to None (the faster, hand-chosen
    practice)."""
    for p in params:
        if zero_in_place and p.grad is not None:
            p.grad.zero_()
        else:
            p.grad = None
    t0 = time.perf_counter()
    loss = f()
    loss.backward()
    return (time.perf_counter() - t0) * 1e3, float(loss)


def table(path):
    """The Markdown table of a CSV of bench_grad and grad_torch.py lines:
    medians over rounds, the ratios, and the checks between the tools."""
    import csv
    import statistics as st
    rows = [r for r in csv.reader(open(path)) if r and r[0] != "tool"]
    works = []
    for r in rows:
        if r[1] not in works:
            works.append(r[1])

    def med(tool, w, v):
        x = [float(r[5]) for r in rows if r[0] == tool and r[1] == w
             and r[2] == v and r[5]]
        return st.median(x) if x else None

    def f(x):
        return "-" if x is None else ("%.3f" % x if x < 10 else "%.1f" % x)

    print("Forward + backward per step, ms (median over rounds of each "
          "round's median); ratio = PyTorch / galleyc (> 1: galleyc "
          "faster).\n")
    print("| workload | galleyc grad | galleyc forward | grad / forward "
          "| grad 2x dims / grad | host I/O | PyTorch obvious "
          "| PyTorch best (form) | best / galleyc | obvious / galleyc "
          "| loss, grads agree |")
    print("|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|")
    for w in works:
        g, fw, io, g2 = (med("galleyc", w, v) for v in (
            "grad", "forward", "host_io", "grad_2x"))
        tv = []
        for r in rows:
            if r[0].startswith("torch") and r[1] == w and \
                    (r[0], r[2]) not in tv:
                tv.append((r[0], r[2]))
        best, bname, obv, oname = None, "-", None, "-"
        for tool, v in tv:
            t = med(tool, w, v)
            if tool == "torch-obvious":
                obv = t
                fails = [r[9] for r in rows if r[0] == tool and r[1] == w
                         and r[9].startswith("fails")]
                oname = "%s %s" % (v, f(t)) if t is not None else \
                    "%s: %s" % (v, fails[0] if fails else "no data")
            if t is not None and (best is None or t < best):
                best, bname = t, v
        ref = [r for r in rows if r[0] == "galleyc" and r[1] == w
               and r[2] == "grad"]
        agree = "-"
        if ref:
            L, gs = float(ref[0][7]), float(ref[0][8])
            bad = [r[2] for r in rows if (r[0].startswith("torch") or
                                          r[2] == "grad_2x")
                   and r[1] == w and r[7] and
                   (abs(float(r[7]) - L) > 1e-8 * abs(L) or
                    abs(float(r[8]) - gs) > 1e-6 * abs(gs))]
            agree = "yes" if not bad else "NO: " + " ".join(sorted(set(bad)))
        ratio = (lambda t: "-" if t is None or not g else "%.2f" % (t / g))
        print("| %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s "
              "| %s |" % (
                  w, f(g), f(fw),
                  "-" if not (g and fw) else "%.2f" % (g / fw),
                  "-" if not (g and g2) else "%.2f" % (g2 / g),
                  f(io), oname, f(best), bname, ratio(best), ratio(obv),
                  agree))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        table(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20, dest="runs")
    ap.add_argument("-R", type=int, default=0, dest="round")
    ap.add_argument("-v", default="", dest="variants",
                    help="comma-separated subset of the programs")
    ap.add_argument("workload")
    ap.add_argument("data")
    a = ap.parse_args()
    params, forms, obvious = workload(a.workload, a.data)
    only = set(filter(None, a.variants.split(",")))
    for name, f in forms.items():
        if only and name not in only:
            continue
        tool = "torch-obvious" if name == obvious else "torch"
        zero = name == obvious
        try:
            for p in params:
                p.grad = None
            step(params, f, zero)
            step(params, f, zero)
            times = []
            for _ in range(a.runs):
                ms, loss = step(params, f, zero)
                times.append(ms)
            print("%s,%s,%s,%d,%d,%.4f,%.4f,%.17g,%.17g,ok" % (
                tool, a.workload, name, a.round, a.runs,
                float(np.median(times)), min(times), loss,
                grad_abs_sum(params)))
        except (RuntimeError, NotImplementedError) as e:
            msg = str(e).splitlines()[0].replace(",", ";")[:160]
            print("%s,%s,%s,%d,0,,,,,fails: %s" % (tool, a.workload, name,
                                                   a.round, msg))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
