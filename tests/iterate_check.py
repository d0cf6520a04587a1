"""iterate_check.py -- the SciPy side of tests/test_iterate.sh: compute
the answer of an iterative example independently and compare it with the
result file galleyc wrote.

    iterate_check.py pagerank GRAPH RESULT.tns
    iterate_check.py bellman-ford GRAPH SOURCE RESULT.tns
    iterate_check.py bfs GRAPH SOURCE RESULT.tns
    iterate_check.py -  < CHECKS     (one check a line, as above)

pagerank: numpy power iteration of the same model (damping 0.85, a node
without out-edges spreads its rank over all, out-edges weighted by their
values) to its fixed point (300 steps: the error shrinks
by 0.85 a step); the result must be
within 1e-8 of it in L1 and sum to 1.  bellman-ford: shortest path
lengths by scipy.sparse.csgraph.shortest_path (Dijkstra, directed,
the matrix values as weights); bfs: the levels, by shortest_path with
unweighted=True.  Both exactly (inf where unreached), relative 1e-12.
Prints one line a check, "ok ..." or "FAIL ..."; exits 1 when a check
fails, 2 on bad usage.  (The tests give every check on standard input:
one Python start instead of one per check.)
"""
import sys

import numpy as np
import scipy.io
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path


def read_tns(path):
    """A .tns vector as a dense array (the fill where nothing is written)."""
    dims, fill, entries = None, 0.0, []
    with open(path) as f:
        for line in f:
            if line.startswith("# dims:"):
                dims = [int(x) for x in line.split()[2:]]
            elif line.startswith("# fill:"):
                fill = float(line.split()[2])
            elif line.strip() and not line.startswith("#"):
                k, v = line.split()
                entries.append((int(k) - 1, float(v)))
    x = np.full(dims[0], fill)
    for k, v in entries:
        x[k] = v
    return x


def pagerank(A):
    n = A.shape[0]
    d = np.asarray(A.sum(axis=1)).ravel()
    dangling = d == 0
    AT = A.T.tocsr()
    r = np.full(n, 1.0 / n)
    # the error shrinks by 0.85 a step: 300 steps reach rounding level
    for _ in range(300):
        x = np.where(dangling, 0.0, r / np.where(dangling, 1.0, d))
        r = 0.15 / n + 0.85 * (AT @ x + r[dangling].sum() / n)
    return r


def same(got, want):
    """Equal, inf where inf, to 1e-12 relative elsewhere."""
    fin = np.isfinite(want)
    if not np.array_equal(fin, np.isfinite(got)):
        return "reached differently at %d vertices" % (fin != np.isfinite(got)).sum()
    if not np.allclose(got[fin], want[fin], rtol=1e-12, atol=0):
        k = np.flatnonzero(fin)[np.argmax(np.abs(got[fin] - want[fin]))]
        return "vertex %d: %r, scipy %r" % (k + 1, got[k], want[k])
    return None


def check(args):
    """One check; (passed, message)."""
    algo, graph = args[0], args[1]
    A = sp.csr_matrix(scipy.io.mmread(graph), dtype=float)
    got = read_tns(args[-1])
    if algo == "pagerank":
        want = pagerank(A)
        err = np.abs(got - want).sum()
        good = err < 1e-8 and abs(got.sum() - 1) < 1e-9
        return good, ("%s: pagerank L1 distance from scipy's fixed point "
                      "%.2g, sum %.15g" % (args[-1], err, got.sum()))
    source = int(args[2]) - 1
    # Dijkstra (the same lengths as Bellman-Ford, far faster in scipy)
    # unless a weight is negative
    method = "D" if A.nnz == 0 or A.data.min() >= 0 else "BF"
    want = shortest_path(A, method=method, directed=True, indices=source,
                         unweighted=algo == "bfs")
    why = same(got, want)
    return not why, ("%s: %s of %s from %d: %s (%d reached, farthest %g)"
                     % (args[-1], algo, graph, source + 1, why or "same as scipy",
                        np.isfinite(want).sum(), want[np.isfinite(want)].max()))


def usable(args):
    return (len(args) == 3 and args[0] == "pagerank") or \
        (len(args) == 4 and args[0] in ("bellman-ford", "bfs"))


def main(argv):
    checks = [line.split() for line in sys.stdin] if argv[1:] == ["-"] else [argv[1:]]
    checks = [c for c in checks if c]
    if not checks or not all(usable(c) for c in checks):
        print(__doc__.split("\n\n")[1])
        return 2
    failed = 0
    for c in checks:
        good, msg = check(c)
        print(("ok " if good else "FAIL ") + msg)
        failed += not good
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
