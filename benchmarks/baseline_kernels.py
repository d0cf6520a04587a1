#!/usr/bin/python3
"""baseline_kernels.py -- the SciPy side of `benchmarks/run kernels`.

Times, for each Matrix Market file (optionally .gz), the kernels of
benchmarks/bench_kernels.c with SciPy's sparse matrices and prints the same
CSV lines:

    tool,file,op,nnz,reps,median_ms,min_ms,bytes,note

  spmv    y = A @ x            (x dense, x[j] = 1 + (j % 7) / 8)
  spgemm  C = A @ A            (sparse CSR result)
  sddmm   C = S .* (U @ V^T)   (S = A, U and V dense n x 32, only the
                                entries of S's pattern are computed:
                                a row-wise dot product per stored entry)
  mttkrp  A[i,r] = sum(j,k: B[i,j,k] C[j,r] D[k,r])   (order-3 .tns
                                files only; B in COO, C and D dense
                                rank 16; NumPy: the nnz x 16 products
                                C[j] * D[k] * b, then one bincount per
                                column r)

The dense operands are the same deterministic values as in bench_kernels.c
and baseline_graphblas.c, so the checksum in `note` (the sum of the
result's entries) can be compared across tools.  Loading and conversion to
CSR are not timed.  bytes is the memory of the result's arrays.

Run it with Debian's interpreter (/usr/bin/python3, package python3-scipy).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import scipy
import scipy.io
import scipy.sparse

K = 32  # columns of the SDDMM factors
RANK = 16  # columns of the MTTKRP factors


def timed(fn, reps, cap_ms):
    """Run fn up to reps times; stop early once cap_ms is spent."""
    times, result, spent = [], None, 0.0
    for _ in range(reps):
        result = None
        t0 = time.perf_counter()
        result = fn()
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        spent += ms
        if spent > cap_ms:
            break
    return result, times


def emit(path, op, nnz, times, size, note=""):
    print("scipy,%s,%s,%d,%d,%.3f,%.3f,%d,%s" % (
        os.path.basename(path), op, nnz, len(times),
        statistics.median(times), min(times), size, note.replace(",", " ")),
        flush=True)


def dense_x(n):
    return 1.0 + (np.arange(n) % 7) / 8.0


def factor(n, a, b, cols=K):
    """The SDDMM factor F[i, k] = ((i * a + k * b) % 13) / 13 - 0.5."""
    i = np.arange(n, dtype=np.int64)[:, None]
    k = np.arange(cols, dtype=np.int64)[None, :]
    return ((i * a + k * b) % 13) / 13.0 - 0.5


def read_tns(path):
    """A FROSTT .tns file (optionally .gz): 0-based int64 coordinates
    (order x nnz), values, dims (from a '# dims:' line, else the largest
    coordinates)."""
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    dims, rows = None, []
    with opener(path, "rt") as f:
        for line in f:
            t = line.split()
            if not t:
                continue
            if t[0].startswith("#"):
                if len(t) > 2 and t[1] == "dims:":
                    dims = [int(x) for x in t[2:]]
                continue
            rows.append(t)
    order = len(rows[0]) - 1
    coords = np.array([[int(r[m]) - 1 for r in rows] for m in range(order)],
                      dtype=np.int64)
    vals = np.array([float(r[order]) for r in rows])
    if dims is None:
        dims = [int(coords[m].max()) + 1 for m in range(order)]
    return coords, vals, dims


def mttkrp(coords, vals, c, d, n):
    i, j, k = coords
    w = c[j] * d[k] * vals[:, None]
    return np.stack([np.bincount(i, weights=w[:, r], minlength=n)
                     for r in range(w.shape[1])], axis=1)


def bench_tensor(path, reps, ops, cap_ms):
    if "mttkrp" not in ops:
        return
    coords, vals, dims = read_tns(path)
    if len(dims) != 3:
        return
    nnz = len(vals)
    c, d = factor(dims[1], 7, 5, RANK), factor(dims[2], 3, 11, RANK)
    a, times = timed(lambda: mttkrp(coords, vals, c, d, dims[0]), reps, cap_ms)
    w = 1 + (np.arange(a.size).reshape(a.shape) % 11)
    emit(path, "mttkrp", nnz, times, a.nbytes,
         "sum %.10g wsum %.10g rank %d numpy COO" % (a.sum(), (a * w).sum(), RANK))


def sddmm(s, u, v, rows):
    # One dot product per stored entry, in row blocks to bound the
    # temporary (nnz_block x K doubles).
    out = np.empty_like(s.data)
    block = 1 << 18
    for lo in range(0, s.nnz, block):
        hi = min(lo + block, s.nnz)
        out[lo:hi] = np.einsum("ij,ij->i", u[rows[lo:hi]],
                               v[s.indices[lo:hi]]) * s.data[lo:hi]
    return scipy.sparse.csr_matrix((out, s.indices, s.indptr), shape=s.shape)


def bench(path, reps, ops, cap_ms):
    if ".tns" in os.path.basename(path):
        return bench_tensor(path, reps, ops, cap_ms)
    a = scipy.io.mmread(path).tocsr()
    a.sort_indices()
    nnz, n = int(a.nnz), a.shape[0]
    if "spmv" in ops:
        x = dense_x(a.shape[1])
        y, times = timed(lambda: a @ x, reps, cap_ms)
        emit(path, "spmv", nnz, times, y.nbytes, "sum %.10g" % y.sum())
    if "spgemm" in ops:
        c, times = timed(lambda: a @ a, reps, cap_ms)
        size = c.data.nbytes + c.indices.nbytes + c.indptr.nbytes
        emit(path, "spgemm", nnz, times, size,
             "sum %.10g nnz %d sparse CSR out" % (c.sum(), c.nnz))
        del c
    if "sddmm" in ops:
        u, v = factor(n, 31, 17), factor(a.shape[1], 7, 5)
        rows = np.repeat(np.arange(n), np.diff(a.indptr))
        c, times = timed(lambda: sddmm(a, u, v, rows), reps, cap_ms)
        emit(path, "sddmm", nnz, times, c.data.nbytes,
             "sum %.10g K %d" % (c.sum(), K))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", type=int, default=5, help="repetitions (median)")
    ap.add_argument("-n", action="store_true", help="no CSV header")
    ap.add_argument("-k", default="spmv,spgemm,sddmm,mttkrp",
                    help="kernels, comma-separated")
    ap.add_argument("-c", type=float, default=60000,
                    help="stop repeating an op after this many ms")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    if not args.n:
        print("tool,file,op,nnz,reps,median_ms,min_ms,bytes,note")
    print("# scipy %s numpy %s python %s" % (
        scipy.__version__, np.__version__, sys.version.split()[0]),
        file=sys.stderr)
    ops = set(args.k.split(","))
    for path in args.files:
        bench(path, args.r, ops, args.c)


if __name__ == "__main__":
    main()
