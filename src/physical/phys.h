/*
 * phys.h -- physical plans (the Galley paper's Fig. 4C dialect), the
 * default planner, C code generation, the JIT and the executor: the
 * internal contract of issue 4.
 *
 * A physical plan is a list of physical queries run in order.  Each query
 * computes one tensor: an aggregate (or none) over a pointwise expression
 * (Map / Input / Alias / Const nodes, no ND_AGG), with a loop order, one
 * access protocol per (access, storage level), and an output format.
 * Nested aggregates of the input plan become queries of their own whose
 * results are read through ND_ALIAS; inputs stored in a mode order that
 * does not follow the loop order are first copied by a transpose query.
 *
 * Planning happens at bind time (like Galley): it needs the index sizes,
 * the fills and the storage formats of the bound tensors.
 *
 * Everything a PhysPlan points to lives in its arena.
 */
#ifndef GALLEY_PHYS_H
#define GALLEY_PHYS_H

#include "galley.h"
#include "galley_rt.h"
#include "ir.h"

/* ------------------------------------------------------------------ */
/* Physical plans (src/physical/plan.c)                                */
/* ------------------------------------------------------------------ */

typedef enum Protocol {
  PROTO_ITERATE = 0, /* walk this level's fiber in order ("::it") */
  PROTO_LOOKUP = 1,  /* locate the loop's coordinate in it ("::lu") */
  PROTO_MARK = 2     /* read from the dense table its fiber was scattered
                        into (MERGE_MARK's marked access, "::mk") */
} Protocol;

/* How a loop visits its coordinates. */
typedef enum Merge {
  MERGE_DENSE = 0, /* every coordinate 0..dim-1; the accesses look up */
  MERGE_LEAD = 1,  /* one access (the leader) iterates, the others look up;
                      valid when the leader's absence makes the expression
                      a constant (it is a conjunct: e.g. 0 annihilates *) */
  MERGE_UNION = 2, /* the union of the iterating accesses' coordinates (a
                      k-way merge of ordered walks); valid when the absence
                      of all of them makes the expression a constant */
  MERGE_INTERSECT = 3, /* the intersection of the iterating accesses' sorted
                         lists (a two-finger merge of two, a leapfrog of
                         more); valid when each of them is a conjunct: its
                         absence makes the expression the same constant */
  MERGE_MARK = 4 /* an intersection of two sorted-list conjuncts where one,
                    PhysQuery.mark[d] (PROTO_MARK), is fixed by a loop at
                    least two outside this one: its fiber is scattered
                    into a dense table of values (the kernel's a->mark, 0
                    where absent) once per point of that loop, and the
                    other (the leader) walks and reads the table --
                    O(its walk), no search, no merge (triangles: the row
                    of the outer vertex, read for every neighbour).
                    Legality and choice: phys_choose_marks */
} Merge;

/* One tensor access of a physical query; the expression's ND_INPUT and
 * ND_ALIAS nodes name it by Node.access. */
typedef struct PAccess {
  int is_input;  /* 1: program input `tensor`; 0: physical query `tensor` */
  int tensor;    /* input number, or physical query number */
  int order;     /* number of modes (and storage levels) */
  /* The loop index read at each storage level, outermost level first:
   * the access's indices permuted by the tensor's storage mode order.
   * The planner guarantees they appear in loop order (a repeated index,
   * A[i,i], occupies consecutive levels). */
  int level_idx[GALLEY_MAX_ORDER];
  Protocol proto[GALLEY_MAX_ORDER]; /* per storage level */
  /* The level kind of each storage level of the tensor the kernel will
   * be handed (the bound input, the transpose's out_format, or the
   * intermediate's out_format): the code generator specializes every
   * walk and lookup on it. */
  galley_level_kind kind[GALLEY_MAX_ORDER];
  double fill;   /* the fill of the tensor read (as declared/computed) */
  int finite;    /* every STORED value is finite (the fill is `fill`):
                    an annihilator may skip entries only when the other
                    operands are finite (0 * inf is nan); see
                    phys_expr_finite and phys_absent_value */
  /* Bit l: level l of the tensor the kernel will be handed stores 32-bit
   * indices (galley_rt.h, idx32); the code generator declares its arrays
   * that width.  Set by phys_assign_widths; the executor refuses a tensor
   * whose widths differ. */
  unsigned w32;
  /* Issue 12: the values the access may read, fill included (a bound
   * input's facts, coarsened; a result's PhysQuery.range).  A split
   * access reads the finite part. */
  Range range;
  int has_range; /* range is set; else only `finite` and `fill` are known
                    (the range is then every finite double, or any) */
  /* Exception splitting: the access reads bound input split_input
   * without its non-finite entries (replaced by 0; rt_tensor_exceptions)
   * -- the input itself, or a transpose of that finite part.  The
   * kernel query's correction pass (src/exec/exceptions.c) adds the
   * terms of those entries. */
  int split;
  int split_input;
} PAccess;

typedef enum PQueryKind {
  PQ_KERNEL = 0,   /* computed by a generated kernel */
  PQ_TRANSPOSE = 1 /* a copy of access 0's tensor into out_format (same
                      logical entries; galley_tensor_convert) */
} PQueryKind;

/* How a kernel writes its result (src/physical/output.c says each
 * strategy's legality; the code generator and executor follow it). */
typedef enum OutKind {
  OUT_DENSE = 0,      /* all-dense result preallocated with the fill; each
                         point stored once, in place */
  OUT_ACCUMULATE = 1, /* all-dense result folded in place, agg(old, v) */
  OUT_PATTERN = 2,    /* levels copied from access `pattern`, then dense
                         levels for the output loops after them; values
                         written at its walk's positions, no sink */
  OUT_APPEND = 3,     /* entries appended to a sink in loop order */
  OUT_SCATTER = 4     /* random writes into a workspace (ws_kind) flushed
                         to the sink in key order */
} OutKind;

/* How the parts of a split outermost loop recombine. */
typedef enum PartCombine {
  PART_DISJOINT = 0, /* each part owns its output points in place */
  PART_CONCAT = 1,   /* each part's entries follow the previous part's */
  PART_REDUCE = 2    /* partial results combined by the aggregate, in
                        part order */
} PartCombine;

typedef struct PhysPartition {
  int loop;            /* the loop split into coordinate ranges [lo, hi):
                          0, or -1 when the query has no loop */
  PartCombine combine;
} PhysPartition;

typedef struct PhysQuery {
  PQueryKind kind;
  const char *name;  /* the program query's name, or "_tN" for a lifted
                        aggregate / transpose (not an identifier a program
                        can write) */
  int user_query;    /* the program query this realizes, or -1 */
  int nindices;      /* the query's indices (ids used by loops, nodes) */
  Index *indices;    /* with their bound sizes (dim >= 0) */
  int nloops;        /* loop order, outermost first: index ids */
  int *loops;
  Merge *merge;      /* per loop */
  int *upper;        /* per loop: the depth of an outer loop whose
                        coordinate bounds this loop's from above (strictly:
                        i_d < i_upper[d]), or -1; NULL when no loop is
                        bounded (phys_symmetric_sum) */
  int *mark;         /* per loop: the access MERGE_MARK scatters, else -1;
                        NULL when no loop marks (at most one does) */
  int mark_sum;      /* the MERGE_MARK loop adds the terms of the table's
                        zeros too (they are +-0 and leave the sum as it
                        is): no test per walked entry */
  int sliced;        /* the row loop strategy `sliced` (issue 11): 0, or
                        1 + the access whose sliced copy (galley_rt.h's
                        galley_rt_sliced, kept with the bound input) the
                        kernel walks four rows at a time; legality
                        phys_sliced_problem, choice phys_choose_sliced */
  int nout;          /* output indices in the result's logical mode order */
  int *out;
  galley_format out_format; /* the result's storage format (mode_order is
                               over the result's logical modes 0..nout-1) */
  const Op *agg;     /* the aggregate, or NULL when nothing is reduced */
  int nred;          /* reduced index ids (each also in loops) */
  int *red;
  Node *expr;        /* pointwise expression over accesses */
  int nacc;
  PAccess *acc;
  double out_fill;   /* fill of the result */
  /* The output strategy (phys_choose_output; kernels only). */
  OutKind out_kind;
  galley_level_kind ws_kind; /* OUT_SCATTER: GALLEY_BYTEMAP or GALLEY_HASH */
  int out_rows;      /* a sink result written as its list's arrays
                        directly (dense levels over one sorted list) */
  int pattern;       /* OUT_PATTERN: the access whose levels the result
                        copies (its first levels: the rest are dense),
                        else -1 */
  PhysPartition part;
  int assumed_finite; /* `finite` was assumed, not proven (the planner's
                         optimistic mode): the executor checks the result
                         and fails with EXEC_ASSUMPTION when it is not */
  int finite;        /* every value of the result is finite, as far as the
                        planner can tell (phys_expr_finite) */
  Range range;       /* the values of the result, fill included (issue 12:
                        value ranges; with the full inputs, not the finite
                        parts of split ones) */
  int split;         /* a kernel some of whose accesses are split: the
                        executor runs exc_correct after it */
  int split_factored; /* the logical planner distributed the one split
                        input (binding only output indices) into a sum
                        (x * sum(k: y) as sum(k: x * y), the SDDMM): the
                        correction multiplies its exception by the sum
                        of the rest, the meaning as written */
  int factored_unsplit; /* the logical planner distributed a split input
                        into the sum, but this plan did not split it out:
                        the fused form would give NaN where the meaning is
                        inf * the sum, so the executor refuses to run it
                        (an internal error, never a wrong result) */
  unsigned out_w32;  /* bit l: level l of the result stores 32-bit indices
                        when a later query reads it (phys_assign_widths;
                        the executor lays it out so) */
  /* Addition (issue 5, explain): the planner's estimate of the result's
   * non-fill entries and the cost of computing it, set by the physical
   * optimizer (has_est 1; cost < 0 when it has none, e.g. a transpose);
   * the default planner estimates nothing (has_est 0). */
  int has_est;
  double est_nnz;
  double est_cost;
  /* Entries the result stores for sure, 0 when not known (default.c's
   * sure_entries: dense loops over values that cannot be the fill); the
   * peak memory floor counts them (phys_peak_memory). */
  double sure_nnz;
} PhysQuery;

typedef struct PhysPlan {
  Arena *arena;
  const Program *prog; /* the program planned (borrowed) */
  int nq;
  PhysQuery *q;
  int noutputs;        /* the program's outputs, as physical queries */
  int *outputs;
  const char **output_names; /* their program names */
  double memory_budget; /* bytes a run may allocate for one result or
                           workspace (0: no limit); set by the caller */
  uint64_t memo_hash[2]; /* the program API's key of this plan with its
                            kernel source (src/api/program.c, memo_key),
                            made on first use: memo_hashed */
  int memo_hashed;
} PhysPlan;

/* Print a plan in the paper's notation, one query a line, e.g.
 *   Query(C[i,k], Mat(dense, dense, i, k, Agg(+, j, Map(*, A[i::it, j::it],
 *         B[j::lu, k::it]))), loops i:lead, j:lead, k:lead)
 * (the exact form is pinned by tests/golden/). */
void phys_print(const PhysPlan *pp, FILE *f);

/* Addition (issue 5, explain): query n alone, as phys_print prints it but
 * without the estimate and the newline.  phys_print appends
 * "  est N" (%.6g) to the line of every query with has_est set. */
void phys_print_query(const PhysPlan *pp, int n, FILE *f);

/* Why the plan is as it is, a `note: ...` line each: loops that look up
 * an access's absent entries instead of skipping them because another
 * operand may be inf or NaN (naming it, with its value range), queries
 * that split out an input's non-finite entries, results that only value
 * ranges prove finite, results planned as finite on assumption, results
 * whose fill is NaN.  The number of notes.  (The plan is left as it
 * was.) */
int phys_print_notes(const PhysPlan *pp, FILE *f);

/* What a plan's live results need for sure at the worst point of a run
 * (src/physical/memory.c): dense values and dense prefixes, exact, the
 * estimated entries of outer unions (x[i] + y[j]), and
 * the query at which the peak occurs (-1 when the plan has no query). */
typedef struct PhysPeak {
  double floor_bytes;
  int floor_query;
  int estimated; /* the peak counts an outer union's estimated entries */
  int largest_query;    /* the largest result alive at the peak */
  double largest_bytes; /* its floor */
} PhysPeak;

/* GALLEY_ENOMEM when out of memory. */
galley_status phys_peak_memory(const PhysPlan *pp, PhysPeak *peak);

/* "dense", "lead", "union", "intersect" or "mark". */
const char *phys_merge_name(Merge m);

/* The value the expression takes when the accesses marked in absent[]
 * (indexed by access number) read their fill and every other access may
 * hold any value: 1 and *value when that is a constant (constant folding
 * with annihilators: 0 * x = 0 for finite x — see the caveat in ir.h),
 * 0 when it depends on the other accesses.  The planner uses it to choose
 * merges, the code generator to account for skipped coordinates. */
int phys_absent_value(const PhysQuery *q, const Node *expr,
                      const unsigned char *absent, double *value);

/* Whether every value expr can take is finite, by its value range
 * (phys_expr_range): min(A, 100) is finite when A holds +inf, exp of
 * values known to be small is -- overflow of + and * to inf is the one
 * thing this does not see (ir.h, Range). */
int phys_expr_finite(const PhysQuery *q, const Node *expr);

/* The range of expr's values (ops_range_expr over the accesses'
 * ranges). */
Range phys_expr_range(const PhysQuery *q, const Node *expr);

/* The range of q's result: its expression's, aggregated over the reduced
 * sizes, with the fill. */
Range phys_query_range(const PhysQuery *q);

/* Whether some decision of the plan rests on the bounds of values (a
 * query's range has Range.dep): the re-run rule then keeps the plan only
 * for data within the bounds planned for. */
int phys_plan_uses_bounds(const PhysPlan *pp);


/* The format kernels read the bound input t in: its own, except that a
 * sorted-list level whose every fiber is full (pos[p] = p*dim, crd 0 ..
 * dim-1, e.g. a full vector read from a .tns file) is laid out exactly
 * like a dense level, so it is read as one: O(1) lookups instead of a
 * binary search. */
void phys_input_format(const galley_tensor *t, galley_format *f);

/* ------------------------------------------------------------------ */
/* The default planner (src/physical/default.c)                        */
/* ------------------------------------------------------------------ */

/* A simple, correct, replaceable planner of the lifted logical plan
 * (logical_lift, src/logical/lift.c: nested aggregates lifted into
 * queries), loop order = output indices then reduced ones, transposes
 * inputs stored out of loop order, per loop picks MERGE_LEAD with the
 * sparsest conjunct leading (fewest stored entries), else MERGE_UNION,
 * else MERGE_DENSE; dense outputs.  inputs[k] are the bound tensors
 * (formats, fills, dims).  GALLEY_EBIND for data that does not fit (the
 * same located messages as the reference evaluator). */
galley_status phys_default_plan(const Program *p,
                                const galley_tensor *const *inputs,
                                PhysPlan **out, galley_error *err);

/* phys_default_plan for `galleyc --planner=simple`: with assume_finite,
 * results it cannot prove finite are planned as finite and checked when
 * run (PhysQuery.assumed_finite, as the cost planner does), so that
 * A^T x with x = r / d still iterates A's entries (n^2 lookups before). */
galley_status phys_simple_plan(const Program *p,
                               const galley_tensor *const *inputs,
                               int assume_finite, PhysPlan **out,
                               galley_error *err);

void phys_plan_free(PhysPlan *pp);

/* Record the index width of every access and intermediate (PAccess.w32,
 * PhysQuery.out_w32): a bound input's levels as they are; a result's
 * list, bytemap and hash levels 32-bit when they surely fit (dim <=
 * 2^31, and at most 2^31 - 1 entries: bounded by the product of the sizes
 * of the levels above, or by a transposed input's stored entries; a hash
 * level's keys too: the product of the sizes down to it <= 2^31).  Both
 * planners call it last. */
void phys_assign_widths(PhysPlan *pp, const galley_tensor *const *inputs);

/* The sliced row loop (PhysQuery.sliced, src/physical/plan.c).  Legal
 * for `out[i] = agg(j: f(A[i,j], x[j], ...))`: a dense result over the
 * outer loop i, an associative, commutative sum-like aggregate over the
 * inner loop j, led by access x = A, a bound input (not split) of a
 * dense level over a list level read in that order, whose fill makes the
 * expression the aggregate's identity (so a padding slot, A's fill,
 * folds nothing: the reference evaluates the same at A's absent
 * points), every other access all-dense over j alone or a scalar, no
 * bound or marked loop.  NULL when legal for access x, else why not.
 * The code generator checks it again. */
const char *phys_sliced_problem(const PhysQuery *q, int x);

/* Choose `sliced` for every query where it is legal and pays, by the
 * bound matrix's rows (sampled): at most PHYS_SLICED_MAX_PAD slots per
 * stored entry after padding chunks of GALLEY_RT_SLICE rows to their
 * longest, and a mean row under PHYS_SLICED_MAX_ROW entries (longer rows
 * already run the unrolled loop at its best).  Called by
 * phys_assign_widths, so both planners choose it. */
#define PHYS_SLICED_MAX_PAD 2.0
#define PHYS_SLICED_MAX_ROW 32.0
void phys_choose_sliced(PhysPlan *pp, const galley_tensor *const *inputs);

/* ---- Addition (issue 5): the default planner's query builder, shared
 * with the physical optimizer (src/physical/optimize.c) ---- */

typedef struct PhysBuilder {
  Arena *a;                    /* the plan's arena (its oom catch set) */
  const Program *p;
  const galley_tensor *const *inputs;
  PhysPlan *pp;                /* the plan being built (pp->q grows) */
  int cap;                     /* room in pp->q */
  unsigned char *input_finite; /* per input: every stored value finite */
  Range *input_range;          /* per input: its values (coarse facts) */
  Range *input_stored;         /* per input: its values at every
                                  coordinate (default.c, sure_entries) */
  unsigned char *input_split_ok; /* per input: a few non-finite values
                                  that exception splitting may take out */
  int no_split;                /* never split (AOT drivers) */
  /* The leader rule: among the conjuncts of loop `loop`, sparse levels
   * first, then the lowest lead_cost leads (ties: first access).  NULL:
   * fewest stored entries (the default planner's rule). */
  double (*lead_cost)(void *ctx, const PhysQuery *q, int access, int loop);
  void *lead_ctx;
  int assume_finite;           /* plan results the planner cannot prove
                                  finite as finite (PhysQuery.
                                  assumed_finite), to be checked when run */
  /* Adaptive planning: per program query, the values an earlier run
   * measured in its result (OptOptions.actual_range); the query that
   * realizes it gets its range narrowed to them.  NULL: none. */
  const Range *actual_range;
  const unsigned char *actual_range_known;
} PhysBuilder;

/* Start building into the empty plan pp: check the bound inputs against
 * their declarations (the reference evaluator's messages) and note which
 * store only finite values. */
galley_status phys_builder_init(PhysBuilder *b, Arena *a, const Program *p,
                                const galley_tensor *const *inputs,
                                PhysPlan *pp, galley_error *err);

/* Complete q and append it to the plan as *number (name NULL: "_t<N>").
 * On entry q has kind PQ_KERNEL, user_query, indices whose ids ARE loop
 * positions (nloops = nindices, loops[k] = k), out, agg/nred/red,
 * out_format, and expr whose ND_INPUT / ND_ALIAS nodes name inputs /
 * physical queries (modified in place).  Sets the accesses (appending
 * the transposes of tensors stored out of loop order first), merges and
 * protocols, out_fill, finite; *q receives the query as appended. */
void phys_builder_add_kernel(PhysBuilder *b, PhysQuery *q, const char *name,
                             int *number);

/* ------------------------------------------------------------------ */
/* Code generation (src/codegen/)                                      */
/* ------------------------------------------------------------------ */

/* Append the C source of the whole plan (the kernel header text, user
 * functions, one kernel per PQ_KERNEL query named galley_q<N>) to *src (a
 * malloc()ed NUL-terminated string that grows; *len its length).  The
 * source includes nothing but <stdint.h> and declares the libm functions
 * it uses.  Program names never reach C unescaped. */
galley_status cg_plan(const PhysPlan *pp, char **src, size_t *len,
                      galley_error *err);

/* Addition (issue 4, in-place reductions): a kernel query whose loop
 * order puts a reduced loop before an output loop (Gustavson's SpGEMM: i,
 * j, k for C[i,k] = sum(j: ...)) accumulates in place, O[p] = agg(O[p],
 * v): an all-dense result (preallocated with out_fill) directly, any
 * other result in a scatter workspace (galley_rt_ws) flushed to the sink
 * after each iteration of the output loops before the first reduced one.
 * That needs an aggregate with an identity, agg_init == out_fill, and
 * every point a loop at or inside the first reduced loop skips holding
 * the identity.  NULL when it can, else why not (cg_plan fails with
 * GALLEY_EINTERNAL and this message). */
const char *phys_inplace_problem(const PhysQuery *q);

/* The output indices whose loops come after the first reduced loop, in
 * loop order, into ids[] (room for GALLEY_MAX_ORDER); their number (0
 * when no reduced loop precedes an output loop).  A kernel with any and a
 * result that is not all dense gets a scatter workspace (a->ws) keyed by
 * their row-major linearization. */
int phys_scatter_indices(const PhysQuery *q, int *ids);

/* Workspaces over at most this many keys are dense arrays (a value, a
 * flag and a touched-list entry per key: 17 bytes); larger ones are hash
 * tables that grow with the points of one iteration. */
#define PHYS_WS_DENSE_MAX ((int64_t)1 << 21)

/* The random-write structure a kernel scatters its result through:
 * GALLEY_BYTEMAP (the dense workspace with its touched list, levels.md
 * rule 5) or GALLEY_HASH, by the size of the key space; -1 when the
 * kernel has no workspace (its result is all dense, or written in loop
 * order). */
int phys_workspace_kind(const PhysQuery *q);

/* ---- Marked intersections (MERGE_MARK, src/physical/default.c) ---- */

/* Turn the intersections of q that profit from it into MERGE_MARK loops
 * (setting q->mark, q->mark_sum); q's merges and protocols are set.  A
 * loop d qualifies when exactly two accesses resolve it, each one sorted
 * list level, both conjuncts skipping to the same constant, and one of
 * them (the marked) reads d at its last level, stores fill 0, and has its
 * fiber fixed by loops at depth <= d - 2 (so that the table is reused
 * across the iterations of loop d - 1 at least).  A stored 0 in the table
 * reads as absent: the same term, as the access is a conjunct.  It is
 * taken when it costs less (phys_mark_cost) than the loop's merge
 * (phys_intersect_cost, or a lead with lookups), with fiber(ctx, q, x, l)
 * the size-biased mean length of access x's fibers at level l (0:
 * unknown; fiber NULL: every length unknown, so nothing is marked) --
 * the length met per stored entry, hubs counted as often as they are. */
typedef double (*MarkFiber)(void *ctx, const PhysQuery *q, int x, int l);
void phys_choose_marks(Arena *a, PhysQuery *q, const Op *plus,
                       MarkFiber fiber, void *ctx);

/* ---- Merge costs: one model for the builder's choice of a loop's
 * merge (default.c) and the optimizer's step cost (optimize.c), in
 * units of one walked sorted-list entry, per point of the loops outside
 * the merged one ---- */

/* Looking one coordinate up in a sorted list of `fiber` entries: a
 * galloping search, PHYS_LIST_STEP per halving. */
#define PHYS_LIST_STEP 4.0
double phys_list_lookup_cost(double fiber);

/* Intersecting sorted lists of mean lengths a and b: a two-finger merge
 * walks both; far apart in length, the shorter walks and gallops into
 * the longer (the cheaper of the two). */
double phys_intersect_cost(double a, double b);

/* A marked intersection (MERGE_MARK): the walked list's entries, each
 * with a read of the dense table (PHYS_MARK_PROBE), plus scattering and
 * clearing the marked fiber (PHYS_MARK_FILL an entry) once per `reuse`
 * points of the loops between its scatter and the merged loop.  With
 * both lists of size-biased length F and reuse F (triangles), marking
 * pays from F = PHYS_MARK_FILL / (1 - PHYS_MARK_PROBE) = 2.5, measured:
 * road networks (luxembourg_osm's lower triangle, F = 1.2; power's, 2.4)
 * merge faster, mdual's lower triangle (F = 2.9) marks 15-25% faster. */
#define PHYS_MARK_PROBE 0.2
#define PHYS_MARK_FILL 2.0
double phys_mark_cost(double marked, double walked, double reuse);

/* The depth of q's MERGE_MARK loop, or -1. */
int phys_mark_loop(const PhysQuery *q);

/* The depth of the loop whose iterations the marked access's fiber is
 * scattered in (before the next loop opens, cleared after it closes): -1
 * for once per kernel call. */
int phys_mark_scatter_depth(const PhysQuery *q);

/* ---- Symmetry (src/physical/symmetry.c) ---- */

/* The symmetry of bound matrix t (dense or list levels): PHYS_SYMMETRIC
 * when it is square and A[i,j] == A[j,i] everywhere (it is its own
 * transpose), with PHYS_HOLLOW also when its fill is 0, no stored
 * diagonal entry is non-zero and every stored value is finite; 0 else. */
#define PHYS_SYMMETRIC 1
#define PHYS_HOLLOW 2
int phys_matrix_symmetry(const galley_tensor *t);

/* Rewrite q (index ids = loop positions, accesses not yet set) when it
 * sums a product of accesses of one symmetric, hollow, finite input over
 * indices S whose pairs form the complete graph on S (triangles, cliques):
 * every term with two equal indices is 0 and the others come in |S|!
 * equal permutations, so the sum is |S|! times the sum over decreasing
 * coordinates.  Each access then reads the matrix as [outer, inner] (no
 * transpose) and each loop of S after the first is bounded by the one
 * before (q->upper); the sum is multiplied by |S|! (mul is the built-in
 * `*`).  symmetric(k) is phys_matrix_symmetry of input k (computed on
 * demand by the caller).  1 when rewritten. */
int phys_symmetric_sum(Arena *a, PhysQuery *q, const Op *mul,
                       int (*symmetric)(void *ctx, int input), void *ctx);

/* ---- Output strategies (src/physical/output.c) ---- */

/* Decide q's output strategy, rows mode and partition from its loops,
 * merges, protocols and format (OUT_PATTERN also sets out_format to the
 * pattern's); called for every kernel query a planner adds. */
void phys_choose_output(PhysQuery *q);

/* Whether q's kernel stores a value at every point of its result when it
 * runs over the whole range of its outermost loop (in any blocks): an
 * OUT_DENSE or OUT_PATTERN result whose output loops visit every
 * coordinate (dense levels, or the pattern's own walk) and skip none.
 * The executor then need not preset the values to the fill. */
int phys_stores_every_point(const PhysQuery *q);

const char *phys_out_kind_name(OutKind k);
const char *phys_part_combine_name(PartCombine c);

/* Whether index id is reduced by q. */
int phys_is_reduced(const PhysQuery *q, int id);

/* Whether some reduced loop comes before some output loop. */
int phys_interleaved(const PhysQuery *q);

/* The levels [*l0, *l1) of access x that loop d resolves (empty when x
 * does not read the loop's index at its next level). */
void phys_loop_levels(const PhysQuery *q, int x, int d, int *l0, int *l1);

/* The symbol of query n's kernel ("galley_q<n>"). */
void cg_kernel_name(int n, char *buf, size_t size);

/* ------------------------------------------------------------------ */
/* JIT (src/jit/)                                                      */
/* ------------------------------------------------------------------ */

typedef enum JitBackend { JIT_TCC = 0, JIT_CLANG = 1 } JitBackend;

typedef struct JitModule JitModule; /* owns the compiled code */

typedef struct JitOptions {
  JitBackend backend;
  const char *cache_dir; /* clang: the kernel cache, NULL = default
                            ($GALLEY_CACHE_DIR, else $XDG_CACHE_HOME/galleyc,
                            else $HOME/.cache/galleyc) */
} JitOptions;

/* Compile C source in memory (tcc) or through the on-disk cache of shared
 * objects (clang), and look up nsym symbols into fns[].  GALLEY_EJIT with
 * the compiler's first error lines on failure.  clang: a cache entry is
 * loaded only after its seal (key, size, SHA-256 of the object) checks;
 * a bad entry is rebuilt; a cache directory that cannot be made or
 * written makes the compile go to a private directory under $TMPDIR. */
galley_status jit_compile(const JitOptions *opt, const char *src,
                          const char *const *symbols, int nsym, void **fns,
                          JitModule **out, galley_error *err);

/* opt->backend must be JIT_CLANG: 1 with *out and fns[] when src's
 * kernels are in the cache (a checked entry), else 0.  Never compiles and
 * never runs a process, so a miss costs about as little as a hit. */
int jit_lookup(const JitOptions *opt, const char *src,
               const char *const *symbols, int nsym, void **fns,
               JitModule **out);

/* Which compiler made the module's code. */
JitBackend jit_module_backend(const JitModule *m);

void jit_free(JitModule *m);

/* A background clang compile (the default backend's second tier).  The
 * job owns copies of the source and symbols; the compiler, the cache
 * directory and the environment are resolved by jit_job_start in the
 * caller's thread, and the job's thread touches nothing else. */
typedef struct JitJob JitJob;

/* Start compiling src with clang (opt->backend == JIT_CLANG) into the
 * cache on a new thread.  GALLEY_OK with *out unless out of memory or
 * bad arguments; a job that cannot start (no clang, a refused cache
 * directory) is returned already done, with its error. */
galley_status jit_job_start(const JitOptions *opt, const char *src,
                            const char *const *symbols, int nsym,
                            JitJob **out, galley_error *err);

/* 1 when the job has finished (wait: block until it has), else 0. */
int jit_job_done(JitJob *job, int wait);

/* A finished job's result: GALLEY_OK with the module (moved to *out, once)
 * and its symbols in fns[], or the job's error. */
galley_status jit_job_take(JitJob *job, void **fns, JitModule **out,
                           galley_error *err);

/* A finished job's error (GALLEY_OK while it runs or when it succeeded). */
galley_status jit_job_error(JitJob *job, galley_error *err);

/* Whether the job compiles exactly src (a replanned program's job may be
 * for an older source: its code must not be installed). */
int jit_job_is_for(const JitJob *job, const char *src);

/* The finished job's wall time in seconds (0 while it runs). */
double jit_job_seconds(JitJob *job);

/* Stop the job (kill its compiler, removing its temporary files) and
 * join its thread; frees everything not taken.  NULL. */
JitJob *jit_job_free(JitJob *job);

/* ------------------------------------------------------------------ */
/* Executor (src/exec/exec.c)                                          */
/* ------------------------------------------------------------------ */

/* Run the plan's queries in order with the compiled kernels (fns[n] for
 * PQ_KERNEL query n), keeping intermediates only while a later query
 * reads them.  On success results[k] (k < pp->noutputs) are new tensors
 * owned by the caller. */
galley_status exec_plan(const PhysPlan *pp, const galley_tensor *const *inputs,
                        void *const *fns, galley_tensor **results,
                        galley_error *err);

/* What running one query took (for `galleyc run -v`). */
typedef struct ExecStats {
  double seconds;  /* wall time of the kernel or transpose, with the
                      allocation and layout of its result */
  int64_t stored;  /* entries the result stores */
  int64_t nnz;     /* entries of the result different from its fill;
                      -1 for a program output, left to be counted from
                      the output tensor when asked for */
  int reused;      /* the result was borrowed (ExecParts.reuse), not run */
  int in_place;    /* computed in place in an owned input (ExecParts.owned) */
} ExecStats;

/* ---- Exception splitting (src/exec/exceptions.c) ---- */

/* Make the finite parts of every bound input a split access reads (kept
 * with the input); before the plan's queries run. */
galley_status exc_prepare(const PhysPlan *pp,
                          const galley_tensor *const *inputs,
                          galley_error *err);

/* The tensor access a reads of bound input t: t, or its finite part when
 * a is split (exc_prepare made it). */
const galley_tensor *exc_input(const galley_tensor *t, const PAccess *a);

/* After split kernel query n ran into *result: add the terms the finite
 * parts left out (each term with a non-finite factor, counted once), so
 * that *result is the dense meaning.  res/kept: the executor's tensors
 * per query (what alias accesses read).  *result may be replaced. */
galley_status exc_correct(const PhysPlan *pp, int n,
                          const galley_tensor *const *inputs,
                          galley_tensor *const *res,
                          const galley_tensor *const *kept,
                          galley_tensor **result, galley_error *err);

/* What exec_plan returns when a result planned as finite
 * (PhysQuery.assumed_finite) holds an infinity or a NaN: the plan's later
 * queries may be wrong for it, so the caller plans again without the
 * assumption and runs again.  err->msg names the query. */
#define EXEC_ASSUMPTION ((galley_status)100)

/* exec_plan, also filling stats[n] for every query n (stats may be NULL). */
galley_status exec_plan_stats(const PhysPlan *pp,
                              const galley_tensor *const *inputs,
                              void *const *fns, galley_tensor **results,
                              ExecStats *stats, galley_error *err);

/* Addition (issue 15, many processes): a caller that runs parts of the
 * plan on several processes.  range: the part [*lo, *hi) of query n's
 * outermost loop this process runs ([0, dim) on entry; in[] the tensors
 * of its accesses, dims the sizes of its indices by id).  finish: after
 * query n (kernel or transpose) with its status st, on every process:
 * agree on the status and make *res (owned; NULL for a kept transpose)
 * the whole result; its status is the query's.  done: once at the end of
 * the run with its status (the same for every process afterwards). */
typedef struct ExecParts {
  void *ctx;
  void (*range)(void *ctx, const PhysPlan *pp, int n,
                const galley_tensor *const *in, const int64_t *dims,
                int64_t *lo, int64_t *hi);
  galley_status (*finish)(void *ctx, const PhysPlan *pp, int n,
                          galley_status st, galley_tensor **res,
                          galley_error *err);
  galley_status (*done)(void *ctx, galley_status st, galley_error *err);
  /* Results kept from earlier runs (src/api/program.c: queries computed
   * from one unchanged input).  reuse: before query n, a result to
   * borrow instead of running it (read as a kept transpose is), or
   * NULL to run it.  computed: after query n ran, its result as the
   * plan's readers will see it (widths conformed).  Either may be NULL. */
  const galley_tensor *(*reuse)(void *ctx, const PhysPlan *pp, int n);
  void (*computed)(void *ctx, const PhysPlan *pp, int n,
                   const galley_tensor *res);
  /* Per input, the bound tensor when the caller handed it over
   * (galley_program_bind_owned), else NULL; NULL: none.  A query that
   * updates such an input pointwise may take its arrays as its result
   * and write only where its other operand is stored (src/exec/exec.c,
   * in_place); the run then sets owned[k] to NULL: the tensor is the
   * result's now, and input k is no longer bound to it. */
  galley_tensor **owned;
} ExecParts;

/* exec_plan_stats over the parts of a caller (NULL: one process). */
galley_status exec_plan_parts(const PhysPlan *pp,
                              const galley_tensor *const *inputs,
                              void *const *fns, galley_tensor **results,
                              ExecStats *stats, const ExecParts *parts,
                              galley_error *err);

/* exec_plan_parts with each kernel's (part of its) outermost loop split
 * into blocks of about block_work units of work (0: the default,
 * src/exec/blocks.h) run on pool's threads (NULL: on the caller's).  The
 * split does not depend on the pool, so neither do the results:
 * bitwise. */
typedef struct GalleyPool GalleyPool;
galley_status exec_plan_threads(const PhysPlan *pp,
                                const galley_tensor *const *inputs,
                                void *const *fns, galley_tensor **results,
                                ExecStats *stats, const ExecParts *parts,
                                GalleyPool *pool, int64_t block_work,
                                galley_error *err);

/* exec_plan_threads taking the value arrays of its results from, and
 * giving those of the results it frees to, recycle (src/exec/recycle.h;
 * NULL: none). */
typedef struct Recycle Recycle;
galley_status exec_plan_recycled(const PhysPlan *pp,
                                 const galley_tensor *const *inputs,
                                 void *const *fns, galley_tensor **results,
                                 ExecStats *stats, const ExecParts *parts,
                                 GalleyPool *pool, int64_t block_work,
                                 Recycle *recycle, galley_error *err);

#endif /* GALLEY_PHYS_H */
