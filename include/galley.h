/*
 * galley.h -- the one public C API of galleyc (libgalley).
 *
 * galleyc is a sparse tensor compiler.  This header is its only public
 * surface; every symbol carries the galley_ prefix.  This first part covers
 * the tensor runtime: fibertree tensors with four level formats, building
 * them from coordinate (COO) data, converting between formats and mode
 * orders, iteration, lookup, export, degree statistics and tensor files.
 *
 * Conventions
 *   - Errors are values.  A fallible call returns GALLEY_OK (0) or a negative
 *     galley_status, and fills the caller's galley_error (which may be NULL
 *     when the caller does not want the message).  The library never exits
 *     and never prints, except to a stream the caller hands it: the FILE *
 *     of a print, describe or explain call, and the log stream of
 *     galley_context_set_log / galley_program_set_log.
 *   - Ownership.  Whoever receives a galley_tensor *, galley_program * or
 *     galley_context * owns it and frees it with the matching _free
 *     function, which accepts NULL and returns NULL.  Input arrays passed
 *     to the library are only read during the call (never kept) unless a
 *     function says otherwise: galley_tensor_wrap_csr/_csc borrow their
 *     arrays, galley_program_bind borrows its tensor.  Arrays returned
 *     through out-parameters are malloc()ed and owned by the caller
 *     (free()).  Strings and tensors returned by const pointer belong to
 *     the object that returned them (see each function for how long).
 *   - Threads.  There is no global mutable state (the one exception is a
 *     lock inside the library that serialises libtcc compilations; the
 *     clang kernel cache is a directory that threads and processes share
 *     safely).  Objects that do not share anything may be used from
 *     distinct threads at once: one context (and the programs made from
 *     it) per thread is safe.  One object may not be used by two threads
 *     at once when either call changes it (set, bind, run, plan, explain,
 *     free); calls that only read it (getters, creating programs from a
 *     context, reading a tensor) may run concurrently.  One tensor may be
 *     read concurrently by any number of threads (lookups and iteration do
 *     not mutate it), also while programs on several threads are bound to
 *     it and run.  What a tensor keeps about its values (its facts, its
 *     symmetry, copies made for runs: see galley_tensor_facts) is made
 *     on first need and installed atomically, so such readers never
 *     race; binding makes the facts, so runs only read them.  The one
 *     call that changes a tensor, galley_tensor_touch, must not run
 *     concurrently with any other use of it.
 *   - All sizes, coordinates and positions are int64_t; there is no 2^31
 *     limit anywhere.  Coordinates are 0-based in the API (files are 1-based).
 */
#ifndef GALLEY_H
#define GALLEY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GALLEY_VERSION_STRING "0.1.0"

/* Largest tensor order (number of modes) the runtime supports. */
#define GALLEY_MAX_ORDER 8

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

typedef enum galley_status {
  GALLEY_OK = 0,
  GALLEY_ENOMEM = -1,    /* out of memory */
  GALLEY_EINVAL = -2,    /* invalid argument (bad format, order, coordinate) */
  GALLEY_EIO = -3,       /* a file could not be opened, read or written */
  GALLEY_EDATA = -4,     /* malformed data file */
  GALLEY_EOVERFLOW = -5, /* a size or position would overflow int64 / memory */
  GALLEY_EINTERNAL = -6, /* a bug in galleyc: please report it */
  GALLEY_EPROGRAM = -7,  /* malformed or meaningless .tin program */
  GALLEY_EBIND = -8,     /* bound data does not fit the program (missing
                            input, wrong order, index sizes that differ) */
  GALLEY_EJIT = -9       /* a generated kernel failed to compile or load */
} galley_status;

/* The message says what went wrong; for data files it has the form
 * "FILE:LINE: error: MESSAGE" (LINE is 1-based; omitted when the error
 * is not tied to one line). */
typedef struct galley_error {
  galley_status status; /* GALLEY_OK when no error was recorded */
  int64_t line;         /* 1-based source or file line, 0 when none */
  int64_t col;          /* 1-based source column, 0 when none */
  char msg[1024];       /* NUL-terminated message, "" when none */
} galley_error;

/* A short static name of a status ("out of memory", ...). */
const char *galley_status_name(galley_status status);

/* ------------------------------------------------------------------ */
/* Level formats                                                       */
/* ------------------------------------------------------------------ */

/* How one mode of a tensor is stored (a level of the fibertree). */
typedef enum galley_level_kind {
  GALLEY_DENSE = 0,  /* every coordinate 0..dim-1 of every parent is stored */
  GALLEY_LIST = 1,   /* sorted compressed list: pos/crd (CSR/CSF) */
  GALLEY_HASH = 2,   /* open-addressing table keyed by (parent, coordinate) */
  GALLEY_BYTEMAP = 3 /* per parent a dense byte map plus its set indices */
} galley_level_kind;

#define GALLEY_NUM_LEVEL_KINDS 4

/* Capabilities a level publishes (bit flags), so that the optimizer and
 * the code generator choose by capability, not by name. */
enum {
  GALLEY_CAP_ORDERED_ITER = 1 << 0,   /* walk a fiber in increasing order */
  GALLEY_CAP_RANDOM_LOOKUP = 1 << 1,  /* locate (parent, i) in O(1) expected */
  GALLEY_CAP_SEQ_APPEND = 1 << 2,     /* append (parent, i) in increasing order */
  GALLEY_CAP_RANDOM_INSERT = 1 << 3   /* insert (parent, i) in any order */
};

/* The capability flags of a level kind. */
unsigned galley_level_caps(galley_level_kind kind);

/* "dense", "list", "hash", "bytemap". */
const char *galley_level_kind_name(galley_level_kind kind);

/* A storage format: which logical mode each level stores, and how.
 * Level l (0 = outermost) stores logical mode mode_order[l] with kind
 * kinds[l].  mode_order must be a permutation of 0..order-1. */
typedef struct galley_format {
  int order;
  int mode_order[GALLEY_MAX_ORDER];
  galley_level_kind kinds[GALLEY_MAX_ORDER];
} galley_format;

/* The default format for an order: identity mode order, a dense first
 * level and sorted lists below it (CSR for matrices, CSF with a dense root
 * for higher orders); order 1 is a sorted list. */
galley_format galley_format_default(int order);

/* An all-dense format with identity mode order. */
galley_format galley_format_dense(int order);

/* Parse a format from text: level kinds separated by commas, each
 * "dense"|"d", "list"|"sparse"|"s", "hash"|"h", "bytemap"|"b", optionally
 * followed by ":MODE" with a 0-based logical mode, e.g. "dense:1,list:0"
 * (CSC).  Without modes the identity order is used.  Returns GALLEY_EINVAL
 * with a message for malformed text or a wrong number of levels. */
galley_status galley_format_parse(const char *text, int order,
                                  galley_format *out, galley_error *err);

/* Write a format as text in the syntax above ("dense:0,list:1") into buf. */
void galley_format_print(const galley_format *fmt, char *buf, size_t size);

/* ------------------------------------------------------------------ */
/* Tensors                                                             */
/* ------------------------------------------------------------------ */

typedef struct galley_tensor galley_tensor;

/* Build a tensor of the given order and dims (logical sizes) from nnz
 * coordinate entries.  coords holds nnz * order coordinates, entry after
 * entry (coords[e*order + k] is mode k of entry e), 0-based; they may be
 * unsorted and repeated (duplicates are summed).  vals holds nnz values, or
 * is NULL for a pattern (every value 1).  Unstored entries equal fill.
 * fmt NULL means galley_format_default(order), except that a hypersparse
 * tensor (first mode over 16 times its entries) gets a sorted-list root
 * instead of a dense one (galley_tensor_read too).  An order-0 tensor (scalar)
 * takes nnz 0 or more entries with no coordinates; their sum is the value
 * (nnz 0: the value is the fill).  Fails with GALLEY_EINVAL on a
 * coordinate out of range, GALLEY_EOVERFLOW when a dense or bytemap level
 * would need more than 2^62 positions, GALLEY_ENOMEM when memory runs out. */
galley_status galley_tensor_from_coo(int order, const int64_t *dims,
                                     int64_t nnz, const int64_t *coords,
                                     const double *vals, double fill,
                                     const galley_format *fmt,
                                     galley_tensor **out, galley_error *err);

/* Build a tensor from a dense row-major array of prod(dims) values (logical
 * mode order).  Entries equal to fill (bitwise-equal NaNs included) are not
 * stored in sparse levels. */
galley_status galley_tensor_from_dense(int order, const int64_t *dims,
                                       const double *values, double fill,
                                       const galley_format *fmt,
                                       galley_tensor **out, galley_error *err);

/* Compressed sparse row (CSR) and column (CSC) matrices.
 *
 * A CSR matrix of nrows x ncols is the default matrix format
 * ("dense:0,list:1"): row r holds the entries colidx[k], vals[k] for k in
 * rowptr[r] .. rowptr[r+1]-1.  CSC ("dense:1,list:0") is the same by
 * column: column c holds rowidx[k], vals[k] for k in colptr[c] ..
 * colptr[c+1]-1.  The arrays must be valid, which is checked in
 * O(nrows + ncols + nnz) time, with nnz = ptr[last]: ptr[0] = 0, ptr
 * nondecreasing; every index in range (0..ncols-1 for CSR) and strictly
 * increasing within its row (column), so sorted and without duplicates.
 * A violation fails with GALLEY_EINVAL and a message naming the first bad
 * element, e.g. "galley_tensor_wrap_csr: colidx[7] = 3 is not greater than
 * colidx[6] = 3 (row 2): indices must increase strictly within a row".
 * NULL arrays are GALLEY_EINVAL, except idx and vals when nnz is 0.
 * Stored values may equal fill (they are then stored entries, counted by
 * galley_tensor_stored but not by galley_tensor_nnz).
 *
 * wrap: no copy.  The tensor's level arrays and values point into the
 * caller's arrays, which are borrowed: they must stay alive and unchanged
 * until galley_tensor_free(*out), which does not free them, except that
 * the values may be changed in place when galley_tensor_touch(*out) is
 * called before the tensor is used again.  The library
 * never writes to them.  The tensor is otherwise an ordinary one (convert
 * it, bind it to programs, read it from several threads);
 * galley_tensor_bytes counts the borrowed arrays too. */
galley_status galley_tensor_wrap_csr(int64_t nrows, int64_t ncols,
                                     const int64_t *rowptr,
                                     const int64_t *colidx,
                                     const double *vals, double fill,
                                     galley_tensor **out, galley_error *err);

galley_status galley_tensor_wrap_csc(int64_t nrows, int64_t ncols,
                                     const int64_t *colptr,
                                     const int64_t *rowidx,
                                     const double *vals, double fill,
                                     galley_tensor **out, galley_error *err);

/* wrap_csr32/_csc32: the same wrap, without copying, over 32-bit index
 * arrays (as scipy and many C codes keep them): the tensor's list level
 * stores 32-bit indices, read in place, and borrows rowptr/colidx (or
 * colptr/rowidx) and vals exactly as galley_tensor_wrap_csr does.  The
 * inner size (ncols for CSR, nrows for CSC) must be at most 2^31. */
galley_status galley_tensor_wrap_csr32(int64_t nrows, int64_t ncols,
                                       const int32_t *rowptr,
                                       const int32_t *colidx,
                                       const double *vals, double fill,
                                       galley_tensor **out,
                                       galley_error *err);

galley_status galley_tensor_wrap_csc32(int64_t nrows, int64_t ncols,
                                       const int32_t *colptr,
                                       const int32_t *rowidx,
                                       const double *vals, double fill,
                                       galley_tensor **out,
                                       galley_error *err);

/* The same from 32-bit index arrays, copied: the arrays are only read
 * during the call, and the tensor owns its copies (kept 32-bit).  vals
 * NULL means every value is 1 (a pattern). */
galley_status galley_tensor_from_csr32(int64_t nrows, int64_t ncols,
                                       const int32_t *rowptr,
                                       const int32_t *colidx,
                                       const double *vals, double fill,
                                       galley_tensor **out,
                                       galley_error *err);

galley_status galley_tensor_from_csc32(int64_t nrows, int64_t ncols,
                                       const int32_t *colptr,
                                       const int32_t *rowidx,
                                       const double *vals, double fill,
                                       galley_tensor **out,
                                       galley_error *err);

/* A new tensor with the same entries in another format and/or mode order
 * (transposition).  src is not modified. */
galley_status galley_tensor_convert(const galley_tensor *src,
                                    const galley_format *fmt,
                                    galley_tensor **out, galley_error *err);

/* Free a tensor; returns NULL so that `t = galley_tensor_free(t)` reads well. */
galley_tensor *galley_tensor_free(galley_tensor *t);

int galley_tensor_order(const galley_tensor *t);
int64_t galley_tensor_dim(const galley_tensor *t, int mode);
double galley_tensor_fill(const galley_tensor *t);
void galley_tensor_format(const galley_tensor *t, galley_format *out);

/* Number of stored entries (values held by the last level; a dense level
 * stores every coordinate, so this may count entries equal to fill). */
int64_t galley_tensor_stored(const galley_tensor *t);

/* Number of stored entries whose value differs from fill. */
int64_t galley_tensor_nnz(const galley_tensor *t);

/* The value at a logical coordinate (coord[k] for mode k, 0-based): the
 * stored value, or the fill when not stored.  *present (may be NULL) says
 * whether it was stored.  Coordinates out of range give the fill and
 * *present = 0. */
double galley_tensor_get(const galley_tensor *t, const int64_t *coord,
                         int *present);

/* Calls fn for every stored entry, in storage order (lexicographic in the
 * tensor's mode order), with logical coordinates.  Stops early, returning
 * fn's value, when fn returns non-zero; returns 0 otherwise. */
typedef int (*galley_entry_fn)(void *ud, const int64_t *coord, double value);
int galley_tensor_foreach(const galley_tensor *t, galley_entry_fn fn,
                          void *ud);

/* Export flags. */
enum {
  GALLEY_EXPORT_SKIP_FILL = 1 /* leave out stored entries equal to fill */
};

/* Export to COO sorted lexicographically by logical coordinates (mode 0
 * first), one entry per coordinate.  *coords (nnz*order int64) and *vals
 * (nnz doubles) are malloc()ed for the caller; for nnz 0 they may be NULL. */
galley_status galley_tensor_to_coo(const galley_tensor *t, unsigned flags,
                                   int64_t *nnz, int64_t **coords,
                                   double **vals, galley_error *err);

/* Write every entry into a dense row-major array of prod(dims) doubles
 * (logical mode order), unstored entries as fill.  `count` is the size of
 * `out` in elements; GALLEY_EINVAL when it is not prod(dims). */
galley_status galley_tensor_to_dense(const galley_tensor *t, double *out,
                                     int64_t count, galley_error *err);

/* Print a one-paragraph human summary (order, dims, stored, nnz, fill,
 * format per level, memory) to f. */
void galley_tensor_describe(const galley_tensor *t, FILE *f);

/* Bytes of memory held by the tensor's arrays. */
int64_t galley_tensor_bytes(const galley_tensor *t);

/* ------------------------------------------------------------------ */
/* Facts about the stored values                                       */
/* ------------------------------------------------------------------ */

/* What one pass over a tensor's stored values finds.  A tensor computes
 * its facts once, the first time they are needed (galley_tensor_facts,
 * galley_tensor_nnz, galley_program_bind), and keeps them: later calls
 * cost O(1).  Every stored value counts, also one equal to the fill; the
 * fill itself counts only where it is stored (the values of the whole
 * tensor are these plus the fill when stored < the product of dims). */
typedef struct galley_facts {
  int64_t stored;   /* stored entries (galley_tensor_stored) */
  int64_t nnz;      /* stored entries whose value differs from the fill,
                       bitwise-equal NaNs being equal (galley_tensor_nnz) */
  int64_t nan;      /* stored values that are NaN */
  int64_t pos_inf;  /* stored values that are +inf */
  int64_t neg_inf;  /* stored values that are -inf */
  double min, max;  /* least and greatest finite stored value; +inf and
                       -inf (min > max) when no stored value is finite */
  int integer;      /* 1 when every stored value is a finite whole number
                       (-0 and 0 included; also when nothing is stored) */
} galley_facts;

/* The facts of t (computed on the first call, then kept).  GALLEY_EINVAL
 * when t or out is NULL. */
galley_status galley_tensor_facts(const galley_tensor *t, galley_facts *out,
                                  galley_error *err);

/* 1 when t is an order-2 square matrix with t[i,j] equal to t[j,i] for
 * every i and j (unstored entries being the fill; equal means == or the
 * same bits, so that a NaN matches itself), else 0.  The first call
 * costs O(nnz) (CSR and CSC; other formats a lookup per stored entry),
 * later ones O(1): the answer is kept with the facts. */
int galley_tensor_is_symmetric(const galley_tensor *t);

/* Forget what t keeps about its values: its facts, its symmetry and the
 * converted copies (transposes) that runs made of it and keep for the
 * next run.  Call it after changing the values of a tensor wrapped from
 * your arrays (galley_tensor_wrap_csr/_csc: vals may change in place,
 * the index arrays may not), before the tensor is used again; programs
 * bound to it then see the new values (and plan again when their nnz
 * moved by more than a factor of 2, see galley_program_run).  It also
 * releases the memory of the kept copies.  Not thread-safe: no other
 * call may use t meanwhile.  NULL is ignored. */
void galley_tensor_touch(galley_tensor *t);

/* ------------------------------------------------------------------ */
/* Degree statistics (for the chain-bound sparsity estimator)          */
/* ------------------------------------------------------------------ */

/* Statistics of the non-fill entries of a tensor, keyed by subsets of its
 * logical modes given as bit masks (bit k = mode k).
 *   distinct[S]   number of distinct projections of the non-fill entries
 *                 onto the modes in S (distinct[0] = 1 when nnz > 0, else 0;
 *                 distinct[all] = nnz).
 *   max_degree[Y] max over fixed values of the modes in Y of the number of
 *                 non-fill entries with those values, i.e. the degree
 *                 constraint D(complement of Y | Y) of the Galley paper
 *                 (max_degree[0] = nnz, max_degree[all] = 1 when nnz > 0).
 * Together: for a split of the modes into conditioned Y and counted X
 * (X = complement of Y), D(X|Y) = max_degree[Y]; and D(S|empty) =
 * distinct[S]. */
typedef struct galley_degree_stats {
  int order;
  int64_t nnz;
  int64_t dims[GALLEY_MAX_ORDER];
  int64_t distinct[1 << GALLEY_MAX_ORDER];
  int64_t max_degree[1 << GALLEY_MAX_ORDER];
} galley_degree_stats;

galley_status galley_tensor_degree_stats(const galley_tensor *t,
                                         galley_degree_stats *out,
                                         galley_error *err);

/* ------------------------------------------------------------------ */
/* Tensor files                                                        */
/* ------------------------------------------------------------------ */

typedef enum galley_file_kind {
  GALLEY_FILE_AUTO = 0, /* by extension: .mtx / .tns, each optionally .gz */
  GALLEY_FILE_MTX = 1,  /* Matrix Market */
  GALLEY_FILE_TNS = 2   /* FROSTT with '# dims:' / '# fill:' headers */
} galley_file_kind;

/* Read a tensor file (a name ending in .gz is decompressed through zlib).
 * fmt NULL means the default format for the file's order (an .mtx `array`
 * file is read all-dense).  Malformed files fail with GALLEY_EDATA and
 * "FILE:LINE: error: MESSAGE"; unreadable ones with GALLEY_EIO. */
galley_status galley_tensor_read(const char *path, galley_file_kind kind,
                                 const galley_format *fmt,
                                 galley_tensor **out, galley_error *err);

/* Write a tensor file: .tns (with '# dims:' and '# fill:' header lines;
 * entries equal to fill are left out) or .mtx (coordinate real general;
 * order 2 only, fill 0 only).  A name ending in .gz is compressed.  The
 * file is written to a temporary name and renamed, so a failed write
 * never leaves a partial file. */
galley_status galley_tensor_write(const galley_tensor *t, const char *path,
                                  galley_file_kind kind, galley_error *err);

/* Write the .tns text of a tensor to an open stream (for `--print`). */
galley_status galley_tensor_write_tns_stream(const galley_tensor *t, FILE *f,
                                             galley_error *err);

/* ------------------------------------------------------------------ */
/* Programs (.tin)                                                     */
/* ------------------------------------------------------------------ */

typedef struct galley_program galley_program;

/* Parse and check a .tin program from text (filename is used in
 * messages).  On failure returns GALLEY_EPROGRAM; err holds the first
 * error as "FILE:LINE:COL: error: MESSAGE" with err->line and err->col
 * set, and *diagnostics (when diagnostics is non-NULL) receives a
 * malloc()ed text of every error found, each followed by its source line
 * and a caret under the column.  The caller frees *diagnostics. */
galley_status galley_program_parse(const char *filename, const char *source,
                                   size_t length, galley_program **out,
                                   char **diagnostics, galley_error *err);

/* The same, reading the program from a file (GALLEY_EIO when unreadable). */
galley_status galley_program_read(const char *path, galley_program **out,
                                  char **diagnostics, galley_error *err);

/* Free a program, its results and its kernels; returns NULL.  A
 * background clang compile under way is stopped (its compiler killed). */
galley_program *galley_program_free(galley_program *p);

/* The declared inputs, in order of declaration. */
int galley_program_num_inputs(const galley_program *p);
const char *galley_program_input_name(const galley_program *p, int k);
int galley_program_input_order(const galley_program *p, int k);
/* Where input k is declared in the program text: 1-based line and column
 * (0 and 0 for a k out of range), for messages such as "input 'A'
 * (declared at PROG.tin:3:7) is not bound". */
void galley_program_input_loc(const galley_program *p, int k, int64_t *line,
                              int64_t *col);

/* Bind the input called name to t.  The tensor is borrowed: it must stay
 * alive and unchanged (or be changed and then touched, see
 * galley_tensor_touch) until the program is freed or the input is bound
 * again.  GALLEY_EBIND when no input has that name or t's order differs
 * from the declaration; GALLEY_ENOMEM.  An input declared without
 * `fill` takes t's fill (tin(5), "Fills from data"), so a result may be
 * fed back as the next run's input: bind a copy (galley_tensor_convert),
 * since results belong to the program until its next run.  Binding
 * makes t's facts (one pass over its values, kept with t:
 * galley_tensor_facts) so that runs need not, and never plans: the next
 * run decides whether the last plan still fits (see galley_program_run). */
galley_status galley_program_bind(galley_program *p, const char *name,
                                  const galley_tensor *t, galley_error *err);

/* Bind the input called name to t and hand t over: the program owns it
 * from now on (it frees t when the input is bound again to another
 * tensor, or when the program is freed) and a run may update it in
 * place.  For iterative algorithms that feed a result back (take it
 * with galley_program_take_output, bind it with this): a query that
 * updates the input pointwise, out[i] = op(t[i], y[i]) with op leaving
 * t's values as they are where y holds its fill (y's fill is op's
 * identity, or op is max or min and t's values lie on the kept side of
 * y's fill), with t all dense in the result's format and read by no
 * later query, then writes its result into t's arrays, touching only
 * the entries y stores: O(stored(y)) instead of O(size(t)) (when y
 * stores at most a quarter of t's points; a denser y runs the compiled
 * kernel, which writes a new result as without the hand-over).  The run
 * then unbinds the input (t is that result now: bind it again, taken,
 * for the next run; galley_query_info's in_place says which queries
 * did so).  GALLEY_EINVAL when t is a result the program still holds
 * (take it first) or is owned by another input.  On failure t stays the
 * caller's. */
galley_status galley_program_bind_owned(galley_program *p, const char *name,
                                        galley_tensor *t, galley_error *err);

/* Run the program with the reference evaluator: slow on purpose (dense
 * loops over the whole index space) and obviously correct, the oracle of
 * the differential tests.  Index sizes come from the bound inputs;
 * mismatches fail with GALLEY_EBIND and "FILE:LINE:COL: error: ..." at the
 * offending access.  Replaces the results of any earlier run. */
galley_status galley_program_run_reference(galley_program *p,
                                           galley_error *err);

/* How galley_program_run compiles the kernels. */
typedef enum galley_backend {
  GALLEY_BACKEND_DEFAULT = 0, /* tiered when tcc is built in: clang code
                                 from the kernel cache when there, else
                                 tcc code at once while clang compiles in
                                 the background, its code replacing tcc's
                                 between runs when ready (see
                                 galley_program_wait_compiled;
                                 galley_run_info.backend says which code
                                 ran); clang without libtcc */
  GALLEY_BACKEND_TCC = 1,     /* libtcc, in memory: no files, no process */
  GALLEY_BACKEND_CLANG = 2,   /* clang -O3 -march=native into an on-disk
                                 cache of shared objects (see
                                 galley_program_set_cache_dir) */
  GALLEY_BACKEND_REFERENCE = 3 /* no kernels: the reference evaluator */
} galley_backend;

/* "default", "tcc", "clang", "reference"; NULL for another value. */
const char *galley_backend_name(galley_backend backend);

/* Parse a backend name as above; GALLEY_EINVAL with a message otherwise. */
galley_status galley_backend_parse(const char *name, galley_backend *out,
                                   galley_error *err);

/* How a program is planned.  GALLEY_PLANNER_COST (the default) is the
 * cost-based optimizer: variable elimination, loop orders, formats and
 * merges chosen from sparsity estimates of the bound data.
 * GALLEY_PLANNER_SIMPLE is the plain default planner (every nested
 * aggregate its own query, loops outputs first, dense results): slower
 * plans, no estimation; useful as a baseline and for debugging. */
typedef enum galley_planner {
  GALLEY_PLANNER_COST = 0,
  GALLEY_PLANNER_SIMPLE = 1
} galley_planner;

/* The sparsity estimator of the cost-based planner. */
typedef enum galley_estimator {
  GALLEY_ESTIMATOR_CHAIN = 0,  /* chain bound over degree statistics */
  GALLEY_ESTIMATOR_UNIFORM = 1 /* nnz only, entries assumed uniform */
} galley_estimator;

/* The elimination-order search of the cost-based planner. */
typedef enum galley_search {
  GALLEY_SEARCH_GREEDY = 0, /* cheapest step first */
  GALLEY_SEARCH_EXACT = 1   /* branch and bound, bounded by greedy */
} galley_search;

/* Set how the next run plans; a change re-plans (and recompiles) on the
 * next run.  Results never depend on these choices (up to rounding).
 * Unknown values plan as the defaults (COST, CHAIN, GREEDY). */
void galley_program_set_planner(galley_program *p, galley_planner planner);
void galley_program_set_estimator(galley_program *p,
                                  galley_estimator estimator);
void galley_program_set_search(galley_program *p, galley_search search);

/* Choose the backend of later runs (default GALLEY_BACKEND_DEFAULT).
 * GALLEY_EINVAL for an unknown value or tcc when libgalley was built
 * without libtcc.  Changing the backend makes the next run compile the
 * kernels again. */
galley_status galley_program_set_backend(galley_program *p,
                                         galley_backend backend,
                                         galley_error *err);

/* The directory of the clang backend's kernel cache (copied), or NULL for
 * the default: $GALLEY_CACHE_DIR, else $XDG_CACHE_HOME/galleyc, else
 * $HOME/.cache/galleyc.  It is created when missing; several processes may
 * share it.  Kernels already compiled are kept. */
galley_status galley_program_set_cache_dir(galley_program *p, const char *dir,
                                           galley_error *err);

/* The memory budget in bytes.  The cost-based planner plans no dense
 * intermediate or result larger than this (a sparse format is chosen
 * instead), and a run refuses, before allocating it, any result or
 * workspace that would pass it: GALLEY_ENOMEM with a message naming the
 * query and the bytes, rather than the process being killed for memory.
 * 0 restores the default: half the machine's physical memory.
 * GALLEY_EINVAL for a negative value.  A change re-plans on the next
 * run. */
galley_status galley_program_set_memory_budget(galley_program *p,
                                               int64_t bytes,
                                               galley_error *err);

/* Whether a run keeps the results of queries that depend on one bound
 * input alone (on, the default: the out-degrees of PageRank's graph are
 * computed once, not at every step; such a result lives with the input
 * until it is freed or touched).  Off, every run computes every query:
 * for timing the kernels of repeated runs on unchanged data.  No
 * re-planning. */
void galley_program_set_keep_invariants(galley_program *p, int on);

/* The number of threads runs use (default 0: $GALLEY_THREADS when set to
 * a number >= 1, else the number of online processors).  A run splits
 * the outermost loop of every kernel into blocks of about equal work
 * (stored entries, or multiplies for products) and runs the blocks on
 * a thread pool the library owns; the blocks' results are written in
 * place (disjoint rows), concatenated in block order (sparse results) or
 * combined by the aggregate in block order (reductions).  The blocks do
 * not depend on the thread count, so results are bitwise identical for
 * every thread count, floating point included.  The pool's threads
 * start with the first run that has more than one block and end when the
 * program (and the context it was made from) is freed.  GALLEY_EINVAL
 * for n < 0 or n > 256.  No re-planning. */
galley_status galley_program_set_threads(galley_program *p, int n,
                                         galley_error *err);

/* The number of threads runs use (the default resolved). */
int galley_program_threads(const galley_program *p);

/* Log what runs do to f (NULL or level <= 0: no log, the default):
 *   level 1  one line per galley_program_run: the backend and the time
 *            spent planning, compiling (or "kernels reused") and running,
 *            as `galleyc run -v` prints it;
 *   level 2  also one line per query: its name, time, nnz and stored
 *            entries;
 *   level 3  also why the run planned again ("re-planned: ...").
 * f is borrowed: it must stay open while the program may log to it. */
void galley_program_set_log(galley_program *p, int level, FILE *f);

/* Run the program with generated kernels: plan (with the formats, sizes,
 * fills and statistics of the bound tensors), generate C, compile with the
 * chosen backend, and execute query by query.  Index sizes and bound data
 * are checked as by galley_program_run_reference, with the same located
 * messages.  Results: as for galley_program_run_reference (they belong to
 * the program until the next run or free; same logical entries, fills and
 * dims), each stored in the format the plan produced (all-dense with the
 * default planner).  GALLEY_EJIT when a kernel fails to compile.  With
 * GALLEY_BACKEND_REFERENCE this is galley_program_run_reference.
 *
 * Re-running.  A program keeps its last plan and compiled kernels.  A run
 * (and galley_program_plan, _explain, _compile_aot, _print_*_plan) reuses
 * the plan when every bound tensor has, compared with the tensor bound
 * when the plan was made,
 *   - the same order, dims, storage format (level kinds and mode order),
 *     index width of every level (32 or 64 bits: kernels are compiled
 *     for it) and fill, and
 *   - a number of non-fill entries (galley_tensor_nnz) between half and
 *     twice as many (an all-dense tensor whose count moved past that once
 *     without changing the plan: any count), and
 *   - stored values that are all finite, or not, as they were, and
 *   - when the plan relied on it (a symmetric matrix read as its own
 *     transpose, a sum over its unordered pairs), the same symmetry
 *     (galley_tensor_is_symmetric) and a zero diagonal or not;
 * and the planning options (planner, estimator, search, memory budget)
 * are unchanged.  Then nothing is planned or compiled (the kernels are
 * reused too when the backend is unchanged): re-running on new data of
 * the same shapes costs only the run.  Anything else plans again, for the
 * statistics of the new data (or takes back one of the four plans made
 * before, without planning, when the data fits the facts it was made
 * for), and compiles the new plan's kernels, unless
 * their source is the last plan's or one of the four before it (the
 * program keeps those kernels and installs them again; the clang backend
 * also finds them in its cache when the same source was compiled
 * before).  galley_run_info says which happened (replanned, reused).
 *
 * Adaptive planning (cost planner): a run measures the result of every
 * program query a later query reads (nnz, value range, non-finite
 * values); when its real nnz is off the plan's estimate by more than a
 * factor of 2, or its values are finite where the plan could not prove
 * them so, the program is planned again with the real facts (kept for
 * every plan of the same data), and when the queries after it plan
 * differently the run starts again with the new plan (replanned is then
 * 1; explain --analyze shows it).  A plan relying on a measured range
 * is planned again, before any query reads the result, when a later
 * run's values leave it.  A query whose result depends on one bound
 * tensor alone (not an output) is computed once and kept with that
 * tensor for later runs, until it is freed or touched.
 * The check reads the facts the bound tensors keep, so it costs O(1) per
 * input; a transpose of an input that the plan needs is made by the
 * first run and kept with the input for the next runs (both until
 * galley_tensor_touch).  A repeated run thus costs its kernels and the
 * layout of its results. */
galley_status galley_program_run(galley_program *p, galley_error *err);

/* With the default backend: wait until clang's code for the last plan's
 * kernels is ready, starting its background compile if none is under way
 * (a program run once cheaply starts none: it starts when the plan is
 * costly or its kernels are run again), and install it, so that the next
 * run uses it.  GALLEY_OK when the kernels are now clang code, or when
 * there is nothing to wait for (before the first run, another backend);
 * GALLEY_EJIT with the reason when they stay on tcc code (no clang, or it
 * failed).  Useful for tests and benchmarks: runs never wait. */
galley_status galley_program_wait_compiled(galley_program *p,
                                           galley_error *err);

/* The C source of the last plan's kernels (what galley_program_run
 * compiled, or galley_program_print_physical_plan planned), owned by the
 * program and valid until the next run, plan or free; NULL before. */
const char *galley_program_source(const galley_program *p);

/* Plan the program for the bound inputs (or reuse the last plan) and print
 * the physical plan in the Galley paper's notation, one query a line
 * (e.g. "Query(y[i], Mat(dense, i, Agg(+, j, Map(*, A[i::it, j::it],
 * x[j::lu]))), ...)"), each line followed by "  est N" (its result's
 * estimated non-fill entries) when the cost-based planner made it.  Every
 * input must be bound (GALLEY_EBIND). */
galley_status galley_program_print_physical_plan(galley_program *p, FILE *f,
                                                 galley_error *err);

/* Ahead of time: the options of galley_program_compile_aot_with. */
typedef struct galley_aot_options {
  /* The prefix of every external symbol and macro of the output and of
   * the header's include guard (a C identifier); NULL: "galley_aot". */
  const char *prefix;
  /* Per input (ninputs entries, or NULL): the format an UNBOUND input is
   * planned for (NULL entry: galley_format_default).  Unbound inputs are
   * planned data-free: each index of the size its `dim` declaration
   * gives, else 1000; vectors half full, higher orders with about 8
   * entries per outermost coordinate; the declared fill, else 0; finite
   * values.  Bound inputs are planned for their data (sample data). */
  const galley_format *const *formats;
  /* Plan unbound inputs as holding infinities or NaNs (slower plans that
   * skip no entry for an annihilator); 0: as finite, which the entry
   * points then check. */
  int nonfinite;
} galley_aot_options;

/* Ahead of time: plan for the bound inputs (and the data-free stand-ins
 * of unbound ones) and write one self-contained C file (*c_source: the
 * kernels, their run-time support and the entry points, needing only the
 * C library; link with -lm when the program uses math functions) and its
 * header (*header: the tensor layout of galley_rt.h, the entry points
 *   int PREFIX_run(const struct galley_tensor *const *inputs,
 *                  struct galley_tensor **outputs);
 *   int PREFIX_run_msg(..., char *msg, size_t size);
 *   void PREFIX_free(struct galley_tensor *t);
 *   const char *PREFIX_strerror(int code);
 * and their documentation).  Any plan compiles: sparse results and
 * intermediates in any level format, transposes, several outputs.
 * Sizes are read from the data at run time; the entry points check each
 * input's format (the one the plan reads it in), fill, and what the plan
 * relied on (finite values; the symmetry of sample data), returning
 * PREFIX_EINPUT otherwise.  The plan is made without assuming results
 * finite (no re-planning is possible at run time).  Both strings are
 * malloc()ed for the caller.  GALLEY_EINVAL for a bad prefix. */
galley_status galley_program_compile_aot_with(galley_program *p,
                                              const galley_aot_options *opt,
                                              char **c_source, char **header,
                                              galley_error *err);

/* galley_program_compile_aot_with with the default options (prefix
 * "galley_aot", unbound inputs in the default formats). */
galley_status galley_program_compile_aot(galley_program *p, char **c_source,
                                         char **header, galley_error *err);

/* What the last run did. */
typedef struct galley_run_info {
  galley_backend backend;  /* the backend that ran (never DEFAULT) */
  int reused;              /* 1 when the previous run's kernels were reused
                              (no planning, no compiling) */
  int replanned;           /* 1 when this run made a new plan (the first
                              run, data outside the re-run rule, changed
                              options); 0 when it reused the last plan,
                              and with the reference backend */
  double plan_seconds;     /* planning and code generation */
  double compile_seconds;  /* compiling (or loading cached) kernels */
  double exec_seconds;     /* running the queries */
  int nqueries;            /* entries of galley_program_query_info */
  /* The default backend's tiers (backend above says whose code ran: tcc
   * at once, clang's once its background compile is done): */
  int compiling;           /* 1 when clang was compiling these kernels in
                              the background during this run: a later run
                              uses its code (galley_program_wait_compiled) */
  int upgraded;            /* 1 when this run was the first on the clang
                              code of a background compile, which replaced
                              the tcc code between runs */
  double background_seconds; /* with upgraded: that compile's wall time */
} galley_run_info;

/* One query of the last run: a physical query of the plan (kernel or
 * transpose), or with the reference backend a query of the program. */
typedef struct galley_query_info {
  const char *name;  /* query name ("_tN" for a lifted aggregate or a
                        transpose); owned by the program */
  int transpose;     /* 1 for a transpose of an input or result */
  double seconds;    /* its run time, -1 when not measured (reference) */
  int64_t stored;    /* entries its result stores */
  int64_t nnz;       /* entries of its result different from the fill */
  int in_place;      /* 1 when written in place into an input handed
                        over (galley_program_bind_owned) */
} galley_query_info;

/* All zero before the first run. */
void galley_program_run_info(const galley_program *p, galley_run_info *out);

/* GALLEY_EINVAL for k out of range. */
galley_status galley_program_query_info(const galley_program *p, int k,
                                        galley_query_info *out,
                                        galley_error *err);

/* The results of the last run: the program's outputs in order.  The
 * tensors belong to the program and live until the next run or free. */
int galley_program_num_outputs(const galley_program *p);
const char *galley_program_output_name(const galley_program *p, int k);
const galley_tensor *galley_program_output(const galley_program *p, int k);
/* Take output k of the last run: the caller owns it from now on (free it
 * with galley_tensor_free) and galley_program_output returns NULL for it
 * until the next run.  For iterative algorithms that bind a result as the
 * next run's input without copying it.  NULL when there is none. */
galley_tensor *galley_program_take_output(galley_program *p, int k);
/* Write output k of the last run as .tns text to an open stream, as
 * galley_tensor_write_tns_stream does -- the same text -- but with the
 * entries of a large output (2^18 or more stored) formatted on the
 * program's threads (galley_program_set_threads).  GALLEY_EINVAL for k
 * out of range or an output not computed (or taken). */
galley_status galley_program_write_output(const galley_program *p, int k,
                                          FILE *f, galley_error *err);

/* Print the input plan (the Galley paper's notation, one query a line). */
void galley_program_print_plan(const galley_program *p, FILE *f);

/* ---- explain: the plans and their estimates (issue 5) ---- */

/* Plan the program for the bound inputs, or keep the last plan when the
 * data still fits it (as galley_program_run does, without compiling or
 * running).  Every input must be bound (GALLEY_EBIND). */
galley_status galley_program_plan(galley_program *p, galley_error *err);

/* The two plans that planning makes from the input plan. */
typedef enum galley_plan_level {
  GALLEY_PLAN_LOGICAL = 0,  /* the cost-based planner's logical plan:
                               what each step aggregates and materializes */
  GALLEY_PLAN_PHYSICAL = 1  /* the physical plan that runs: kernels and
                               transposes, in run order (the queries of
                               galley_program_query_info after a run) */
} galley_plan_level;

/* One query of the last plan. */
typedef struct galley_plan_query {
  const char *name;  /* owned by the program; valid until the next plan */
  int transpose;     /* 1 for a transpose (physical plans only) */
  double est_nnz;    /* the planner's estimate of the result's non-fill
                        entries, -1 when it made none (simple planner) */
  double cost;       /* the estimated cost of computing it (the cost
                        model's units), -1 when none (simple planner,
                        transposes) */
} galley_plan_query;

/* The number of queries of the last plan at that level: 0 before
 * planning, and for GALLEY_PLAN_LOGICAL with the simple planner (which
 * makes no logical plan). */
int galley_program_plan_num_queries(const galley_program *p,
                                    galley_plan_level level);

/* Query k of the last plan at that level (GALLEY_EINVAL out of range). */
galley_status galley_program_plan_query(const galley_program *p,
                                        galley_plan_level level, int k,
                                        galley_plan_query *out,
                                        galley_error *err);

/* Print query k of the last plan at that level as one line of the printed
 * plan, without the estimates and without the newline (GALLEY_EINVAL out
 * of range; GALLEY_ENOMEM). */
galley_status galley_program_print_plan_query(const galley_program *p,
                                              galley_plan_level level, int k,
                                              FILE *f, galley_error *err);

/* Plan as galley_program_plan and print the logical plan, one query a
 * line with its estimates ("Query(...)  est N  cost C"), then a line
 * Outputs(...).  With the simple planner nothing is printed. */
galley_status galley_program_print_logical_plan(galley_program *p, FILE *f,
                                                galley_error *err);

/* Flags of galley_program_explain. */
enum {
  GALLEY_EXPLAIN_JSON = 1 << 0,    /* one JSON object instead of text */
  GALLEY_EXPLAIN_ANALYZE = 1 << 1, /* run first; add real sizes and times */
  GALLEY_EXPLAIN_DOT = 1 << 2,     /* Graphviz text of the physical plan */
  GALLEY_EXPLAIN_C = 1 << 3        /* the C source of the plan's kernels */
};

/* Explain the program to f, as `galleyc explain` does (galleyc(1)
 * describes each form in full):
 *   text (flags 0)  "input plan:" and the input plan; when every input is
 *                   bound, also "logical plan:" and "physical plan:" with
 *                   each query's estimated nnz (and cost), and how each
 *                   query's outermost loop is split into blocks for the
 *                   threads ("partition:");
 *   GALLEY_EXPLAIN_ANALYZE  first runs the program (galley_program_run,
 *                   with its backend; every input must be bound) and adds
 *                   per physical query the real nnz, its time and the
 *                   q-error of the estimate;
 *   GALLEY_EXPLAIN_JSON  the same as one JSON object;
 *   GALLEY_EXPLAIN_DOT   a Graphviz digraph of the physical plan (every
 *                   input must be bound): a node per bound input and per
 *                   physical query (kernel or transpose, with its loop
 *                   order, result format and estimated nnz, and with
 *                   ANALYZE its real nnz and time), an edge from each
 *                   tensor to every query that reads it, outputs drawn
 *                   with a double border;
 *   GALLEY_EXPLAIN_C     the C source of the plan's kernels, as compiled
 *                   (every input must be bound).
 * Two of JSON, DOT and C together are GALLEY_EINVAL, as are unknown
 * flags.  The
 * plan (and with ANALYZE the run) is made before anything is written, so
 * a planning or run failure (GALLEY_EBIND for an unbound input, ...)
 * leaves f untouched. */
galley_status galley_program_explain(galley_program *p, FILE *f,
                                     unsigned flags, galley_error *err);

/* ------------------------------------------------------------------ */
/* Contexts                                                            */
/* ------------------------------------------------------------------ */

/* A context holds the options programs are made with: backend, planner,
 * estimator, search, clang cache directory, log and memory budget.  A
 * program created from a context copies its options when it is created
 * (strings too), so later changes to the context do not reach programs
 * already made, and the context may be freed before its programs.  A
 * program's own setters (galley_program_set_backend, ...) change that
 * program only.
 *
 * Threads: a context is not locked.  Setting options must not race with
 * any other use of the same context; creating programs from one context
 * on several threads at once (which only reads it) is safe.  The usual
 * pattern is one context per thread, with its programs used by that
 * thread; contexts never share state, so that is always safe.
 *
 * Every setter returns GALLEY_EINVAL (and leaves the context as it was)
 * for a NULL context or a value out of range. */
typedef struct galley_context galley_context;

/* A new context with the defaults: GALLEY_BACKEND_DEFAULT,
 * GALLEY_PLANNER_COST, GALLEY_ESTIMATOR_CHAIN, GALLEY_SEARCH_GREEDY, the
 * default cache directory (NULL), no log, memory budget 0 (the planner's
 * default).  GALLEY_ENOMEM. */
galley_status galley_context_create(galley_context **out, galley_error *err);

/* Free a context (not the programs made from it); returns NULL. */
galley_context *galley_context_free(galley_context *ctx);

/* Options (see the galley_program_set_* function of the same name for
 * what each means).  Getters of a NULL context return the defaults. */
galley_status galley_context_set_backend(galley_context *ctx,
                                         galley_backend backend,
                                         galley_error *err);
galley_backend galley_context_backend(const galley_context *ctx);

galley_status galley_context_set_planner(galley_context *ctx,
                                         galley_planner planner,
                                         galley_error *err);
galley_planner galley_context_planner(const galley_context *ctx);

galley_status galley_context_set_estimator(galley_context *ctx,
                                           galley_estimator estimator,
                                           galley_error *err);
galley_estimator galley_context_estimator(const galley_context *ctx);

galley_status galley_context_set_search(galley_context *ctx,
                                        galley_search search,
                                        galley_error *err);
galley_search galley_context_search(const galley_context *ctx);

/* dir is copied; NULL selects the default.  The getter's string belongs
 * to the context and is valid until the next set or free (NULL for the
 * default). */
galley_status galley_context_set_cache_dir(galley_context *ctx,
                                           const char *dir,
                                           galley_error *err);
const char *galley_context_cache_dir(const galley_context *ctx);

/* Verbosity: level 0..3 (see galley_program_set_log) and the stream the
 * programs log to (borrowed: it must stay open while they may log).
 * Level 0 or f NULL: no log (the default).  GALLEY_EINVAL for a level
 * outside 0..3. */
galley_status galley_context_set_log(galley_context *ctx, int level, FILE *f,
                                     galley_error *err);
int galley_context_log_level(const galley_context *ctx);
FILE *galley_context_log_file(const galley_context *ctx);

/* Bytes; 0 is the planner's default.  GALLEY_EINVAL when negative. */
galley_status galley_context_set_memory_budget(galley_context *ctx,
                                               int64_t bytes,
                                               galley_error *err);
int64_t galley_context_memory_budget(const galley_context *ctx);

/* Threads (galley_program_set_threads; 0: the default).  The programs
 * made from one context share one thread pool (made with the context;
 * its threads start on first use): a run that finds the pool busy with
 * another program's run computes its blocks on its own thread, with the
 * same results. */
galley_status galley_context_set_threads(galley_context *ctx, int n,
                                         galley_error *err);
int galley_context_threads(const galley_context *ctx);

/* Distributed runs (issue 15): programs made from the context run over
 * the processes of an MPI communicator, passed as its Fortran handle so
 * that this header needs no mpi.h: fcomm = MPI_Comm_c2f(comm) (an
 * MPI_Fint, an int in Open MPI and MPICH).  The caller initializes MPI
 * (MPI_Init) and keeps it until its programs are freed; each program
 * duplicates comm and frees its duplicate.  Every process of comm makes
 * the same program, binds equal inputs and calls galley_program_run
 * together (a collective): each runs its block of every kernel's
 * outermost loop, cut by work, and every process gets the whole results
 * (bitwise as one process for exact programs, else within 1e-12
 * relative).  A run that fails on one process fails on all of them with
 * the first failing process's message.  GALLEY_NO_COMM clears it (one
 * process, as without the call).  GALLEY_EINVAL when libgalley was built
 * without MPI, MPI is not initialized, or fcomm is MPI_COMM_NULL's.  The
 * getter returns the handle set, or GALLEY_NO_COMM. */
#define GALLEY_NO_COMM (-1)
galley_status galley_context_set_mpi_comm(galley_context *ctx, int fcomm,
                                          galley_error *err);
int galley_context_mpi_comm(const galley_context *ctx);

/* galley_program_parse and galley_program_read, then the context's
 * options applied to the new program.  On failure *out is NULL. */
galley_status galley_context_program_parse(const galley_context *ctx,
                                           const char *filename,
                                           const char *source, size_t length,
                                           galley_program **out,
                                           char **diagnostics,
                                           galley_error *err);
galley_status galley_context_program_read(const galley_context *ctx,
                                          const char *path,
                                          galley_program **out,
                                          char **diagnostics,
                                          galley_error *err);

#ifdef __cplusplus
}
#endif

#endif /* GALLEY_H */
