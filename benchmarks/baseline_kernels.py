#!/usr/bin/python3
"""baseline_kernels.py -- the SciPy side of `benchmarks/run kernels`.

A module: benchmarks/kernels.py imports it and times its calls in the same
interleaved rounds as galleyc (bench_kernels) and GraphBLAS
(baseline_graphblas).  The operands are the very arrays galleyc reads
(benchutil.h's operand files, written by `bench_kernels prep`), loaded
with numpy.fromfile; SciPy keeps CSR indices as int32 when they fit, as it
does for matrices it reads itself.  The dense operands have the values of
benchutil.h.  SciPy's fastest forms:

  spmv       y = A x: y = zeros(n), then the raw C++ kernel
             scipy.sparse._sparsetools.csr_matvec (no checks, no dispatch)
  spgemm     C = A @ A, then C.sort_indices() (sorted rows, as the others)
  sddmm      C = S .* (U V'), K = 32, only at S's entries: a row-gather
             (U[rows] * V[cols] summed over k, by blocks of 2^18 entries,
             np.einsum), times S's values, in S's pattern
  tri_lower  on L (strict lower triangle): (L @ L).multiply(L).sum(): the
             products L[i,k] L[k,j] with i > k > j, kept where L[i,j] is
             (measured faster than (L @ L.T).multiply(L))
  tri_full   on the whole graph G: L = scipy.sparse.tril(G, -1) inside the
             call, then as tri_lower
  mttkrp     A = sum(j,k: B[i,j,k] C[j,r] D[k,r]), rank 16, B in COO: the
             nnz x 16 products C[j] * D[k] * b, then one np.bincount per
             column r

Run as a script it times one kernel on one operand file:

  baseline_kernels.py KERNEL FILE [CALLS]

Run it with Debian's interpreter (/usr/bin/python3, python3-scipy).
"""
import sys
import time

import numpy as np
import scipy
import scipy.sparse
from scipy.sparse import _sparsetools

K = 32  # columns of the SDDMM factors
RANK = 16  # columns of the MTTKRP factors
KERNELS = ("spmv", "spgemm", "sddmm", "tri_lower", "tri_full", "mttkrp")


def version():
    return "scipy=%s numpy=%s python=%s" % (
        scipy.__version__, np.__version__, sys.version.split()[0])


def load(path):
    """An operand file: ('csr', scipy CSR matrix) or ('coo', (coords
    order x nnz int64, vals, dims))."""
    magic = open(path, "rb").read(8)
    head = np.fromfile(path, dtype=np.int64, count=4)
    if magic == b"GLYCSR01":
        n, m, nnz = (int(v) for v in head[1:4])
        ints = np.fromfile(path, dtype=np.int64, count=n + 1 + nnz, offset=32)
        vals = np.fromfile(path, dtype=np.float64, count=nnz,
                           offset=32 + 8 * (n + 1 + nnz))
        ptr, idx = ints[:n + 1], ints[n + 1:]
        if nnz < 2**31 and max(n, m) < 2**31:
            ptr, idx = ptr.astype(np.int32), idx.astype(np.int32)
        a = scipy.sparse.csr_matrix((vals, idx, ptr), shape=(n, m))
        a.has_sorted_indices = True  # written sorted and unique
        return "csr", a
    if magic == b"GLYCOO01":
        order, nnz = int(head[1]), int(head[2])
        dims = [int(v) for v in np.fromfile(path, dtype=np.int64, count=order,
                                            offset=24)]
        off = 24 + 8 * order
        coords = np.fromfile(path, dtype=np.int64, count=nnz * order,
                             offset=off).reshape(nnz, order).T.copy()
        vals = np.fromfile(path, dtype=np.float64, count=nnz,
                           offset=off + 8 * nnz * order)
        return "coo", (coords, vals, dims)
    raise ValueError("%s: not an operand file" % path)


def factor(n, a, b, cols=K):
    """benchutil.h's factor F[i, k] = ((a i + b k) mod 13) / 13 - 0.5."""
    i = np.arange(n, dtype=np.int64)[:, None]
    k = np.arange(cols, dtype=np.int64)[None, :]
    return ((i * a + k * b) % 13) / 13.0 - 0.5


def sddmm(s, u, v, rows):
    out = np.empty_like(s.data)
    block = 1 << 18
    for lo in range(0, s.nnz, block):
        hi = min(lo + block, s.nnz)
        out[lo:hi] = np.einsum("ij,ij->i", u[rows[lo:hi]],
                               v[s.indices[lo:hi]]) * s.data[lo:hi]
    return scipy.sparse.csr_matrix((out, s.indices, s.indptr), shape=s.shape)


def lower_triangles(low):
    return int(round((low @ low).multiply(low).sum()))


def mttkrp(coords, vals, c, d, n):
    i, j, k = coords
    w = c[j] * d[k] * vals[:, None]
    return np.stack([np.bincount(i, weights=w[:, r], minlength=n)
                     for r in range(w.shape[1])], axis=1)


def make_call(kernel, kind, data):
    """A function of no arguments doing one whole call of the kernel on
    the loaded operand (its dense operands made here, outside the call);
    None when the kernel does not apply."""
    if kind == "coo":
        if kernel != "mttkrp" or len(data[2]) != 3:
            return None
        coords, vals, dims = data
        c, d = factor(dims[1], 7, 5, RANK), factor(dims[2], 3, 11, RANK)
        return lambda: mttkrp(coords, vals, c, d, dims[0])
    a = data
    n, m = a.shape
    if kernel == "spmv":
        x = 1.0 + (np.arange(m) % 7) / 8.0
        ptr, idx, val = a.indptr, a.indices, a.data

        def spmv():
            y = np.zeros(n)
            _sparsetools.csr_matvec(n, m, ptr, idx, val, x, y)
            return y
        return spmv
    if kernel == "spgemm":
        if n != m:
            return None

        def spgemm():
            c = a @ a
            c.sort_indices()
            return c
        return spgemm
    if kernel == "sddmm":
        u, v = factor(n, 31, 17), factor(m, 7, 5)
        rows = np.repeat(np.arange(n), np.diff(a.indptr))
        return lambda: sddmm(a, u, v, rows)
    if kernel == "tri_lower":
        return lambda: lower_triangles(a)
    if kernel == "tri_full":
        return lambda: lower_triangles(
            scipy.sparse.tril(a, k=-1, format="csr"))
    return None


def sums(result):
    """benchutil.h's checksums of a result: sum, wsum, asum, count."""
    if isinstance(result, (int, float, np.integer, np.floating)):
        v = float(result)
        return v, v, abs(v), 1
    if scipy.sparse.issparse(result):
        c = result.tocoo()
        w = 1 + (c.row.astype(np.int64) * c.shape[1] + c.col) % 11
        return (float(c.data.sum()), float((c.data * w).sum()),
                float(np.abs(c.data).sum()), int(c.nnz))
    r = np.asarray(result)
    if r.ndim == 1:
        w = 1 + np.arange(r.size) % 11
    else:  # a dense matrix, row-major positions
        w = (1 + np.arange(r.size) % 11).reshape(r.shape)
    return (float(r.sum()), float((r * w).sum()), float(np.abs(r).sum()),
            int(r.size))


def time_calls(fn, n):
    """n whole calls, each timed; (times in ms, the last result)."""
    times, result = [], None
    for _ in range(n):
        result = None
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times, result


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in KERNELS:
        sys.exit("usage: baseline_kernels.py {%s} OPERAND_FILE [CALLS]"
                 % ",".join(KERNELS))
    kind, data = load(sys.argv[2])
    fn = make_call(sys.argv[1], kind, data)
    if fn is None:
        sys.exit("baseline_kernels.py: %s does not apply to %s"
                 % (sys.argv[1], sys.argv[2]))
    times, result = time_calls(fn, int(sys.argv[3]) if len(sys.argv) > 3 else 5)
    print("%s: median %.3f ms over %d calls; sum %.17g wsum %.17g" % (
        version(), float(np.median(times)), len(times), *sums(result)[:2]))


if __name__ == "__main__":
    main()
