#!/usr/bin/python3
"""calibrate.py -- fit the logical cost model's constants on this machine.

Galley's logical cost model (paper Sec. 4.2) is

    cost = a * nnz(MapExpr) + b * nnz(Agg)

(in galleyc: src/logical/optimize.c step_cost, where nnz(MapExpr) is
counted once per index of the expression, and b differs for dense and
sparse results: OptOptions cost_compute, cost_dense_write,
cost_sparse_write).  This script runs single-kernel programs (SpMV, row
sums, element-wise products and sums, SpGEMM, SDDMM) on real matrices with
`galleyc run -v --backend=clang`, takes each kernel's time, computes the
true sizes of its expression and result with SciPy, and fits

    time = a * work + b_dense * out_dense + b_sparse * out_sparse + c

by least squares (c: the per-kernel call overhead).  It prints the fit and
the constants relative to a (the model's unit).

    benchmarks/calibrate.py [-r REPS] [BUILD_DIR]

Installs nothing; needs python3-scipy (Debian's /usr/bin/python3).
"""
import os, re, subprocess, sys, tempfile
import numpy as np
import scipy.io as sio
import scipy.sparse as sp

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
data = os.environ.get("GALLEY_DATA_DIR", os.path.join(repo, "..", "shared", "data"))
MATS = ["cage8", "bcsstk13", "crack", "ca-GrQc", "power", "cryg2500", "jagmesh7",
        "polblogs", "as-22july06"]
K = 8

PROGS = {
    "spmv": "input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n",
    "rowsum": "input A[i, j]\nr[i] = sum(j: A[i, j])\n",
    "mul": "input A[i, j], B[i, j]\nC[i, j] = A[i, j] * B[i, j]\n",
    "add": "input A[i, j], B[i, j]\nC[i, j] = A[i, j] + B[i, j]\n",
    "spgemm": "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n",
    "sddmm": "input A[i, j], U[i, k], V[j, k]\n"
             "C[i, j] = A[i, j] * sum(k: U[i, k] * V[j, k])\n",
}

def write_vec(path, n):
    with open(path, "w") as f:
        f.write("# dims: %d\n" % n)
        for i in range(n):
            f.write("%d %.6f\n" % (i + 1, 1.0 + (i % 7) / 7))

def write_dense(path, n, k):
    with open(path, "w") as f:
        f.write("# dims: %d %d\n" % (n, k))
        for i in range(n):
            for r in range(k):
                f.write("%d %d %.6f\n" % (i + 1, r + 1, 0.5 + ((i + r) % 5) / 5))

def kernel_times(galleyc, prog, binds, reps):
    """Per kernel query: the median time (s) and nnz over reps runs."""
    runs = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([galleyc, "run", prog, *binds, "-o", out, "-v",
                                "--backend=clang"], capture_output=True, text=True)
            if p.returncode != 0:
                return None
            q = {}
            for line in p.stderr.splitlines():
                m = re.match(r"query (\S+)\s+([\d.]+) ms\s+nnz (\d+)\s+stored (\d+)(.*)", line)
                if m and "transpose" not in m.group(5):
                    q[m.group(1)] = (float(m.group(2)) / 1e3, int(m.group(4)))
            runs.append(q)
    names = set(runs[0])
    return {n: (float(np.median([r[n][0] for r in runs])), runs[0][n][1]) for n in names}

def main():
    reps, args = 5, sys.argv[1:]
    if args[:1] == ["-r"]:
        reps, args = int(args[1]), args[2:]
    build = args[0] if args else os.path.join(repo, "build")
    galleyc = os.path.join(build, "galleyc")
    tmp = tempfile.mkdtemp(prefix="galley-cal.")
    for name, text in PROGS.items():
        with open(os.path.join(tmp, name + ".tin"), "w") as f:
            f.write(text)
    rows = []  # (workload, matrix, work, out_dense, out_sparse, seconds)
    for m in MATS:
        path = os.path.join(data, "matrices", m + ".mtx")
        if not os.path.exists(path):
            continue
        A = sp.csr_matrix(sio.mmread(path))
        A.sum_duplicates()
        A.eliminate_zeros()
        n, mcols = A.shape
        if n != mcols:
            continue
        nnz = A.nnz
        x = os.path.join(tmp, m + "_x.tns"); write_vec(x, n)
        U = os.path.join(tmp, m + "_U.tns"); write_dense(U, n, K)
        pat = (abs(A) @ abs(A)).tocsr()
        flops = int(np.diff(A.indptr)[A.indices].sum())  # sum over entries of row lengths
        cases = [
            ("spmv", ["A=" + path, "x=" + x], "y", 2 * nnz),
            ("rowsum", ["A=" + path], "r", 2 * nnz),
            ("mul", ["A=" + path, "B=" + path], "C", 2 * nnz),
            ("add", ["A=" + path, "B=" + path], "C", 2 * nnz),
            ("spgemm", ["A=" + path, "B=" + path], "C", 3 * flops),
            ("sddmm", ["A=" + path, "U=" + U, "V=" + U], "C", 3 * nnz * K),
        ]
        for wl, binds, qname, work in cases:
            t = kernel_times(galleyc, os.path.join(tmp, wl + ".tin"), binds, reps)
            if not t or qname not in t:
                print("skip %s on %s" % (wl, m), file=sys.stderr)
                continue
            sec, out = t[qname]
            dense = wl in ("spmv", "rowsum") or (wl == "spgemm" and out > 0.5 * n * n)
            rows.append((wl, m, work, out if dense else 0, 0 if dense else out, sec))
            print("%-7s %-13s work %12d out %10d %-6s %10.3f ms" %
                  (wl, m, work, out, "dense" if dense else "sparse", sec * 1e3))
    X = np.array([[r[2], r[3], r[4], 1.0] for r in rows])
    y = np.array([r[5] for r in rows])
    # weight by 1/y so that small and large kernels count alike (relative error)
    w = 1 / np.maximum(y, 1e-6)
    coef, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
    a, bd, bs, c = coef
    pred = X @ coef
    err = np.abs(pred - y) / y
    print()
    print("fit: time = %.3g ns * work + %.3g ns * dense out + %.3g ns * sparse out + %.3g us"
          % (a * 1e9, bd * 1e9, bs * 1e9, c * 1e6))
    print("relative to a: cost_compute 1, cost_dense_write %.2f, cost_sparse_write %.2f"
          % (bd / a, bs / a))
    print("median relative error of the fit %.2f, max %.2f over %d kernels"
          % (np.median(err), err.max(), len(rows)))

if __name__ == "__main__":
    main()
