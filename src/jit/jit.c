/*
 * jit.c -- compile generated C in-process: libtcc in memory, or Clang
 * through a content-addressed on-disk cache of shared objects.
 *
 * tcc: the source is compiled and relocated into memory owned by a
 * TCCState, which the JitModule keeps until jit_free.  No file, no process.
 * libtcc's compiler state is global, so every libtcc call is serialized by
 * one process-wide mutex (see jit_tcc_lock).
 *
 * clang: the shared object of a source lives in the cache directory under
 * <key>.so, key = SHA-256 of (a format tag, the flags, the compiler's
 * `--version` text, the host CPU, the source).  A miss writes the source to
 * a private temporary file, runs clang with posix_spawn (an argv array, no
 * shell: nothing from the program text reaches a command line), seals the
 * object and renames it onto <key>.so.  rename() is atomic, so processes
 * sharing the cache never see a partial file; when two compile the same
 * kernel at once the loser's rename just replaces an identical file.  A
 * hit runs no process at all: the compiler's version text is itself
 * cached, keyed by the identity (path, device, inode, size, mtime) of the
 * clang binary.
 *
 * The seal: every entry ends with a trailer (key, object size, SHA-256 of
 * the object) that the dynamic loader ignores.  An entry is read and
 * checked before dlopen: a truncated entry (which the loader would map
 * and die on with SIGBUS), a corrupted one, or one holding another key's
 * object (swapped files: silently wrong answers) is rebuilt instead.
 *
 * Fallbacks: a cache directory that cannot be created, or that takes no
 * new file (read-only, full), is no error: the compile goes to a private
 * mkdtemp directory under $TMPDIR, whose files are removed once loaded.
 * Temporaries that a killed process left (tmp-*, older than ten minutes)
 * are swept whenever a kernel is compiled into the cache.
 *
 * Background jobs (JitJob, the default backend's second tier): a pthread
 * runs the clang path above for a copy of the source.  Everything that
 * reads the environment happens in the caller's thread first; the job
 * runs clang in its own process group, so jit_job_free can kill clang
 * with its cc1 and linker, then join: nothing is left running or on disk.
 *
 * Flags: -O3 -march=native, but no -ffast-math (results must equal the
 * reference evaluator) and -ffp-contract=off: -march=native enables FMA,
 * and clang's default (-ffp-contract=on) would fuse a*b+c inside one
 * expression, rounding once where the reference evaluator (and tcc) round
 * twice.  -march=native makes the object CPU-specific, so the key includes
 * the CPU model and flags (a cache in a home directory shared between
 * machines must not hand one machine another's instructions).
 *
 * Trust: the cache directory must be owned by us and not writable by group
 * or others; a cache entry is loaded only when it is a regular file owned
 * by us and not writable by group or others (otherwise it is rebuilt and
 * replaced).
 *
 * Environment: GALLEY_CLANG overrides the clang binary (a path, or a name
 * searched in PATH); else configure's GALLEY_CLANG_PATH; else `clang` in
 * PATH.  The cache directory is JitOptions.cache_dir, else
 * $GALLEY_CACHE_DIR, else $XDG_CACHE_HOME/galleyc, else
 * $HOME/.cache/galleyc.
 */
#define _GNU_SOURCE /* pipe2, mkostemp: O_CLOEXEC, so that a process
                       spawned by another thread never inherits our fds */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBTCC
#include <libtcc.h>
#endif

#include "phys.h"
#include "rt_internal.h"

struct JitModule {
  JitBackend backend; /* which of the handles below owns the code */
  void *tcc;          /* TCCState * (tcc): code lives in its memory */
  void *dl;           /* dlopen() handle (clang) */
};

enum {
  JIT_PATH_MAX = 4096, /* longest path we build */
  JIT_MSG_LINES = 10,  /* compiler message lines kept in a galley_error */
  JIT_OUT_MAX = 16384  /* compiler output kept (the rest is drained) */
};

/* ------------------------------------------------------------------ */
/* Compiler messages                                                   */
/* ------------------------------------------------------------------ */

/* Copy the first JIT_MSG_LINES lines of text into dst (size bytes),
 * writing every occurrence of `hide` (a temporary path, or NULL) as
 * "kernel.c" so messages read the same whatever the temp file was. */
static void first_lines(const char *text, const char *hide, char *dst,
                        size_t size) {
  size_t n = 0, hlen = hide ? strlen(hide) : 0;
  int lines = 0;
  while (*text && n + 1 < size && lines < JIT_MSG_LINES) {
    if (hlen && strncmp(text, hide, hlen) == 0) {
      int w = snprintf(dst + n, size - n, "kernel.c");
      n = (w < 0 || (size_t)w >= size - n) ? size - 1 : n + (size_t)w;
      text += hlen;
      continue;
    }
    if (*text == '\n')
      lines++;
    dst[n++] = *text++;
  }
  while (n > 0 && dst[n - 1] == '\n')
    n--;
  dst[n] = '\0';
}

/* GALLEY_EJIT with a header line and the compiler's first lines. */
static galley_status jit_fail(galley_error *err, const char *what,
                              const char *output, const char *hide) {
  char lines[900];
  first_lines(output ? output : "", hide, lines, sizeof lines);
  if (lines[0])
    return rt_error(err, GALLEY_EJIT, "%s:\n%s", what, lines);
  return rt_error(err, GALLEY_EJIT, "%s", what);
}

/* ------------------------------------------------------------------ */
/* SHA-256 (FIPS 180-4), for cache keys                               */
/* ------------------------------------------------------------------ */

typedef struct Sha256 {
  uint32_t h[8];          /* chaining state */
  uint64_t len;           /* bytes hashed so far */
  unsigned char buf[64];  /* pending partial block */
  size_t nbuf;            /* bytes in buf */
} Sha256;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(Sha256 *s, const unsigned char *p) {
  uint32_t w[64], v[8];
  for (int t = 0; t < 16; t++)
    w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
           (uint32_t)p[4 * t + 2] << 8 | (uint32_t)p[4 * t + 3];
  for (int t = 16; t < 64; t++) {
    uint32_t s0 = ror32(w[t - 15], 7) ^ ror32(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 = ror32(w[t - 2], 17) ^ ror32(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  memcpy(v, s->h, sizeof v);
  for (int t = 0; t < 64; t++) {
    uint32_t e = v[4], a = v[0];
    uint32_t t1 = v[7] + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) +
                  ((e & v[5]) ^ (~e & v[6])) + sha256_k[t] + w[t];
    uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) +
                  ((a & v[1]) ^ (a & v[2]) ^ (v[1] & v[2]));
    memmove(v + 1, v, 7 * sizeof v[0]);
    v[4] += t1;
    v[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++)
    s->h[i] += v[i];
}

static void sha256_init(Sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->len = 0;
  s->nbuf = 0;
}

static void sha256_update(Sha256 *s, const void *data, size_t n) {
  const unsigned char *p = data;
  s->len += n;
  while (n > 0) {
    size_t take = 64 - s->nbuf < n ? 64 - s->nbuf : n;
    memcpy(s->buf + s->nbuf, p, take);
    s->nbuf += take;
    p += take;
    n -= take;
    if (s->nbuf == 64) {
      sha256_block(s, s->buf);
      s->nbuf = 0;
    }
  }
}

static void sha256_final(Sha256 *s, unsigned char out[32]) {
  uint64_t bits = s->len * 8;
  unsigned char pad[72] = {0x80};
  size_t npad = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
  for (int i = 0; i < 8; i++)
    pad[npad + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_update(s, pad, npad + 8);
  for (int i = 0; i < 8; i++)
    for (int b = 0; b < 4; b++)
      out[4 * i + b] = (unsigned char)(s->h[i] >> (24 - 8 * b));
}

/* One-shot SHA-256; not static so that tests/test_jit.c can check it
 * against the standard test vectors. */
void jit_sha256(const void *data, size_t n, unsigned char out[32]);
void jit_sha256(const void *data, size_t n, unsigned char out[32]) {
  Sha256 s;
  sha256_init(&s);
  sha256_update(&s, data, n);
  sha256_final(&s, out);
}

/* Hash one length-prefixed part, so that parts cannot run into each
 * other ("ab"+"c" and "a"+"bc" give different keys). */
static void sha256_part(Sha256 *s, const char *text) {
  uint64_t n = strlen(text);
  unsigned char len[8];
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)(n >> (8 * i));
  sha256_update(s, len, sizeof len);
  sha256_update(s, text, (size_t)n);
}

/* The first nbytes of a digest as lowercase hex into hex (2*nbytes+1). */
static void hex_digest(const unsigned char *d, int nbytes, char *hex) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < nbytes; i++) {
    hex[2 * i] = digits[d[i] >> 4];
    hex[2 * i + 1] = digits[d[i] & 15];
  }
  hex[2 * nbytes] = '\0';
}

/* ------------------------------------------------------------------ */
/* The tcc backend                                                     */
/* ------------------------------------------------------------------ */

#ifdef HAVE_LIBTCC

/* libtcc (0.9.27) compiles through global state -- tcc_state, the token,
 * symbol and section tables -- so two TCCStates used at once from two
 * threads corrupt each other.  Every libtcc call, tcc_new to tcc_delete,
 * holds this lock.  It is galleyc's one mutable global: the lock must be
 * shared by every caller in the process because libtcc's state is, and a
 * static initializer means there is no first-use race. */
static pthread_mutex_t jit_tcc_lock = PTHREAD_MUTEX_INITIALIZER;

/* The libm functions generated code may call, handed to tcc by address
 * so that resolving them depends on no libm.so being found at run time. */
typedef struct MathSym {
  const char *name;
  const void *addr;
} MathSym;

#define MATH_SYM(f) {#f, (const void *)&f}
static const MathSym math_syms[] = {
    MATH_SYM(exp),   MATH_SYM(log),   MATH_SYM(sqrt),     MATH_SYM(fabs),
    MATH_SYM(sin),   MATH_SYM(cos),   MATH_SYM(tan),      MATH_SYM(tanh),
    MATH_SYM(sinh),  MATH_SYM(cosh),  MATH_SYM(asin),     MATH_SYM(acos),
    MATH_SYM(atan),  MATH_SYM(atan2), MATH_SYM(pow),      MATH_SYM(floor),
    MATH_SYM(ceil),  MATH_SYM(round), MATH_SYM(trunc),    MATH_SYM(fmod),
    MATH_SYM(fmin),  MATH_SYM(fmax),  MATH_SYM(expm1),    MATH_SYM(log1p),
    MATH_SYM(log2),  MATH_SYM(log10), MATH_SYM(exp2),     MATH_SYM(cbrt),
    MATH_SYM(hypot), MATH_SYM(erf),   MATH_SYM(erfc),     MATH_SYM(copysign),
    MATH_SYM(rint),  MATH_SYM(nearbyint), MATH_SYM(ldexp),
};
#undef MATH_SYM

/* tcc's messages, one a call; warnings are dropped (they never fail a
 * compile and would push the errors out of the message). */
typedef struct TccMsgs {
  char text[4096]; /* messages, one a line */
  size_t len;      /* bytes in text */
} TccMsgs;

static void tcc_on_message(void *opaque, const char *msg) {
  TccMsgs *m = opaque;
  if (strstr(msg, "warning:"))
    return;
  int w = snprintf(m->text + m->len, sizeof m->text - m->len, "%s\n", msg);
  if (w > 0)
    m->len += (size_t)w < sizeof m->text - m->len ? (size_t)w
                                                  : sizeof m->text - m->len - 1;
}

static int tcc_relocate_memory(TCCState *s) {
#ifdef TCC_RELOCATE_AUTO
  return tcc_relocate(s, TCC_RELOCATE_AUTO); /* tcc <= 0.9.27 */
#else
  return tcc_relocate(s); /* newer tcc: one argument, memory managed */
#endif
}

/* Add the libm functions the source mentions (a substring test: an extra
 * symbol is harmless, a missing one would be looked up by tcc itself). */
static void tcc_add_math(TCCState *s, const char *src) {
  for (size_t k = 0; k < sizeof math_syms / sizeof math_syms[0]; k++)
    if (strstr(src, math_syms[k].name))
      tcc_add_symbol(s, math_syms[k].name, math_syms[k].addr);
}

/* Compile, relocate and look up, with jit_tcc_lock held. */
static galley_status tcc_build_locked(TCCState *s, const char *src,
                                      const char *const *symbols, int nsym,
                                      void **fns, TccMsgs *msgs,
                                      galley_error *err) {
  tcc_set_error_func(s, msgs, tcc_on_message);
  if (tcc_set_output_type(s, TCC_OUTPUT_MEMORY) != 0)
    return jit_fail(err, "tcc: cannot compile to memory", msgs->text, NULL);
  if (tcc_compile_string(s, src) != 0)
    return jit_fail(err, "tcc failed to compile the kernel", msgs->text,
                    "<string>");
  tcc_add_math(s, src);
  if (tcc_relocate_memory(s) < 0)
    return jit_fail(err, "tcc failed to link the kernel", msgs->text, NULL);
  for (int k = 0; k < nsym; k++) {
    fns[k] = tcc_get_symbol(s, symbols[k]);
    if (!fns[k])
      return rt_error(err, GALLEY_EJIT,
                      "tcc: symbol '%s' not found in the compiled code",
                      symbols[k]);
  }
  return GALLEY_OK;
}

static galley_status jit_tcc(const char *src, const char *const *symbols,
                             int nsym, void **fns, JitModule *m,
                             galley_error *err) {
  TccMsgs msgs = {.len = 0};
  msgs.text[0] = '\0';
  pthread_mutex_lock(&jit_tcc_lock);
  TCCState *s = tcc_new();
  galley_status st =
      s ? tcc_build_locked(s, src, symbols, nsym, fns, &msgs, err)
        : rt_error(err, GALLEY_ENOMEM, "tcc: out of memory");
  if (st != GALLEY_OK && s)
    tcc_delete(s);
  pthread_mutex_unlock(&jit_tcc_lock);
  if (st == GALLEY_OK)
    m->tcc = s;
  return st;
}

static void jit_tcc_free(JitModule *m) {
  pthread_mutex_lock(&jit_tcc_lock);
  tcc_delete(m->tcc);
  pthread_mutex_unlock(&jit_tcc_lock);
}

#else /* !HAVE_LIBTCC */

static galley_status jit_tcc(const char *src, const char *const *symbols,
                             int nsym, void **fns, JitModule *m,
                             galley_error *err) {
  return rt_error(err, GALLEY_EJIT,
                  "the tcc backend is not available: galleyc was built "
                  "without libtcc (install libtcc-dev and reconfigure), "
                  "use --backend=clang");
}

static void jit_tcc_free(JitModule *m) { (void)m; }

#endif /* HAVE_LIBTCC */

/* ------------------------------------------------------------------ */
/* Files and processes (clang backend)                                 */
/* ------------------------------------------------------------------ */

/* How a compile run by a background job is stopped: the job's compiler
 * runs in its own process group, recorded here while it runs, so that
 * jit_job_free can kill clang and the cc1 and linker it started. */
typedef struct JitCancel {
  pthread_mutex_t lock;
  int cancelled; /* set once by jit_job_free */
  pid_t pgid;    /* the running compiler's process group, 0 when none */
} JitCancel;

/* dst = a "/" b; GALLEY_EJIT when it does not fit. */
static galley_status path_join(char *dst, const char *a, const char *b,
                               galley_error *err) {
  int w = snprintf(dst, JIT_PATH_MAX, "%s/%s", a, b);
  if (w < 0 || w >= JIT_PATH_MAX)
    return rt_error(err, GALLEY_EJIT, "path too long: %s/%s", a, b);
  return GALLEY_OK;
}

/* Write all n bytes to fd; 0, or -1 with errno set. */
static int write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Read fd to its end into out (the first cap-1 bytes, NUL-terminated;
 * the rest is read and dropped so the writer never blocks). */
static void read_all(int fd, char *out, size_t cap) {
  size_t n = 0;
  char sink[4096];
  for (;;) {
    char *dst = n + 1 < cap ? out + n : sink;
    size_t room = n + 1 < cap ? cap - 1 - n : sizeof sink;
    ssize_t r = read(fd, dst, room);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    if (dst != sink)
      n += (size_t)r;
  }
  out[n] = '\0';
}

/* Read exactly n bytes of fd from its current offset; 0 or -1. */
static int read_exact(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Wait for pid; its exit status, or 128 + signal number. */
static int wait_child(pid_t pid) {
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return 127;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Spawn argv with the file actions; with a cancel record, in a process
 * group of its own that is recorded there (nothing is spawned once the
 * job is cancelled: ECANCELED). */
static int spawn(pid_t *pid, char *const argv[],
                 const posix_spawn_file_actions_t *fa, JitCancel *cancel) {
  if (!cancel)
    return posix_spawn(pid, argv[0], fa, NULL, argv, environ);
  posix_spawnattr_t attr;
  int rc = posix_spawnattr_init(&attr);
  if (rc != 0)
    return rc;
  rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  if (rc == 0)
    rc = posix_spawnattr_setpgroup(&attr, 0);
  pthread_mutex_lock(&cancel->lock);
  if (rc == 0)
    rc = cancel->cancelled ? ECANCELED
                           : posix_spawn(pid, argv[0], fa, &attr, argv,
                                         environ);
  if (rc == 0)
    cancel->pgid = *pid;
  pthread_mutex_unlock(&cancel->lock);
  posix_spawnattr_destroy(&attr);
  return rc;
}

/* Wait for a child spawned with a cancel record.  The record forgets the
 * group before the child is reaped (waitid with WNOWAIT leaves it a
 * zombie), so a cancel never signals a process group id that the system
 * may have handed out again. */
static int wait_cancellable(pid_t pid, JitCancel *cancel) {
  siginfo_t info;
  while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0 &&
         errno == EINTR)
    ;
  pthread_mutex_lock(&cancel->lock);
  cancel->pgid = 0;
  pthread_mutex_unlock(&cancel->lock);
  return wait_child(pid);
}

/* Run argv (argv[0] an absolute path; no shell) with stdin from
 * /dev/null and stdout and stderr captured into out; *code its exit
 * status.  cancel (may be NULL): see spawn. */
static galley_status run_captured(char *const argv[], char *out, size_t cap,
                                  int *code, JitCancel *cancel,
                                  galley_error *err) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return rt_error(err, GALLEY_EJIT, "cannot create a pipe: %s",
                    strerror(errno));
  posix_spawn_file_actions_t fa;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc == 0) {
    if ((rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY,
                                               0)) == 0 &&
        (rc = posix_spawn_file_actions_adddup2(&fa, fds[1], 1)) == 0 &&
        (rc = posix_spawn_file_actions_adddup2(&fa, fds[1], 2)) == 0) {
      pid_t pid;
      rc = spawn(&pid, argv, &fa, cancel);
      close(fds[1]);
      fds[1] = -1;
      if (rc == 0) {
        read_all(fds[0], out, cap);
        *code = cancel ? wait_cancellable(pid, cancel) : wait_child(pid);
      }
    }
    posix_spawn_file_actions_destroy(&fa);
  }
  if (fds[1] >= 0)
    close(fds[1]);
  close(fds[0]);
  if (rc == ECANCELED)
    return rt_error(err, GALLEY_EJIT, "clang: the compile was cancelled");
  if (rc != 0)
    return rt_error(err, GALLEY_EJIT, "cannot run %s: %s", argv[0],
                    strerror(rc));
  return GALLEY_OK;
}

/* Create path and its missing parents (mode 0700); 0, or -1 with errno. */
static int make_dirs(const char *path) {
  char buf[JIT_PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, path, n + 1);
  for (size_t k = 1; k <= n; k++) {
    if (buf[k] != '/' && buf[k] != '\0')
      continue;
    char c = buf[k];
    buf[k] = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
      return -1;
    buf[k] = c;
  }
  return 0;
}

/* Open path for reading if it is a regular file owned by us and not
 * writable by group or others; -1 otherwise (missing or untrusted). */
static int open_trusted(const char *path) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Write text to a new private (0600) temporary file of dir, named into
 * path (JIT_PATH_MAX); nothing is left behind on failure. */
static galley_status write_temp(const char *dir, const char *text, char *path,
                                galley_error *err) {
  galley_status st = path_join(path, dir, "tmp-XXXXXX", err);
  if (st != GALLEY_OK)
    return st;
  int fd = mkostemp(path, O_CLOEXEC);
  if (fd < 0)
    return rt_error(err, GALLEY_EJIT, "cannot create a file in %s: %s", dir,
                    strerror(errno));
  int bad = write_all(fd, text, strlen(text)) != 0;
  bad |= close(fd) != 0;
  if (bad) {
    st = rt_error(err, GALLEY_EJIT, "cannot write %s: %s", path,
                  strerror(errno));
    unlink(path);
  }
  return st;
}

/* Write text to dir/name atomically (a temporary file renamed onto it). */
static galley_status write_atomic(const char *dir, const char *name,
                                  const char *text, galley_error *err) {
  char tmp[JIT_PATH_MAX], path[JIT_PATH_MAX];
  galley_status st = path_join(path, dir, name, err);
  if (st == GALLEY_OK)
    st = write_temp(dir, text, tmp, err);
  if (st == GALLEY_OK && rename(tmp, path) != 0) {
    st = rt_error(err, GALLEY_EJIT, "cannot write %s: %s", path,
                  strerror(errno));
    unlink(tmp);
  }
  return st;
}

/* Remove the temporary files that a process killed mid-compile left in
 * the cache: those older than JIT_STALE_SECONDS (no compile takes that
 * long, so a concurrent compile's files are never touched). */
enum { JIT_STALE_SECONDS = 10 * 60 };

static void sweep_stale_temps(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  time_t limit = time(NULL) - JIT_STALE_SECONDS;
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[JIT_PATH_MAX];
    struct stat st;
    if (strncmp(e->d_name, "tmp-", 4) != 0 ||
        path_join(path, dir, e->d_name, NULL) != GALLEY_OK)
      continue;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_mtime < limit)
      unlink(path);
  }
  closedir(d);
}

/* ------------------------------------------------------------------ */
/* The compiler: which clang, which version, which CPU                 */
/* ------------------------------------------------------------------ */

/* The flags of every clang compile (they are part of the cache key); see
 * the top of the file for -ffp-contract=off.  -w: warnings never fail a
 * compile and would crowd the errors out of the message. */
static const char *const clang_flags[] = {
    "-O3", "-march=native", "-fPIC", "-shared", "-std=c11",
    "-ffp-contract=off", "-w"};
#define N_CLANG_FLAGS ((int)(sizeof clang_flags / sizeof clang_flags[0]))

/* Find name (no '/') in $PATH as an executable; 1 and path, or 0. */
static int search_path(const char *name, char *path) {
  const char *p = getenv("PATH");
  if (!p)
    p = "/usr/bin:/bin";
  while (*p) {
    size_t n = strcspn(p, ":");
    int w = snprintf(path, JIT_PATH_MAX, "%.*s/%s", (int)n, n ? p : ".",
                     name);
    if (w > 0 && w < JIT_PATH_MAX && access(path, X_OK) == 0)
      return 1;
    p += n + (p[n] == ':');
  }
  return 0;
}

/* A command (path with '/', or name searched in PATH) as an executable
 * path; 1 when found. */
static int resolve_command(const char *cmd, char *path) {
  if (strchr(cmd, '/')) {
    int w = snprintf(path, JIT_PATH_MAX, "%s", cmd);
    return w > 0 && w < JIT_PATH_MAX && access(path, X_OK) == 0;
  }
  return search_path(cmd, path);
}

/* The clang binary: $GALLEY_CLANG, configure's, or clang in PATH. */
static galley_status find_clang(char *path, galley_error *err) {
  const char *env = getenv("GALLEY_CLANG");
  if (env && *env) {
    if (resolve_command(env, path))
      return GALLEY_OK;
    return rt_error(err, GALLEY_EJIT,
                    "the clang backend is not available: GALLEY_CLANG=%s is "
                    "not an executable",
                    env);
  }
#ifdef GALLEY_CLANG_PATH
  if (resolve_command(GALLEY_CLANG_PATH, path))
    return GALLEY_OK;
#endif
  if (search_path("clang", path))
    return GALLEY_OK;
  return rt_error(err, GALLEY_EJIT,
                  "the clang backend is not available: no clang found "
                  "(install clang or set GALLEY_CLANG), use --backend=tcc");
}

/* The host CPU's identity (vendor, model, feature flags of the first
 * processor in /proc/cpuinfo), "" when unknown. */
static void cpu_identity(char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f)
    return;
  char line[8192];
  while (fgets(line, sizeof line, f) && line[0] != '\n') {
    if (strncmp(line, "vendor_id", 9) && strncmp(line, "model name", 10) &&
        strncmp(line, "flags", 5) && strncmp(line, "Features", 8) &&
        strncmp(line, "CPU part", 8))
      continue;
    int w = snprintf(out + n, cap - n, "%s", line);
    if (w < 0 || (size_t)w >= cap - n)
      break;
    n += (size_t)w;
  }
  fclose(f);
}

/* The cache key of src as 64 hex digits. */
static void cache_key(const char *src, const char *version, char *hex) {
  char cpu[8192];
  cpu_identity(cpu, sizeof cpu);
  Sha256 s;
  sha256_init(&s);
  sha256_part(&s, "galleyc clang kernel cache 1");
  for (int k = 0; k < N_CLANG_FLAGS; k++)
    sha256_part(&s, clang_flags[k]);
  sha256_part(&s, version);
  sha256_part(&s, cpu);
  sha256_part(&s, src);
  unsigned char d[32];
  sha256_final(&s, d);
  hex_digest(d, 32, hex);
}

/* ------------------------------------------------------------------ */
/* The kernel cache: where it is, and its entries                      */
/* ------------------------------------------------------------------ */

/* What a clang compile needs, resolved in the caller's thread (the
 * environment is read there only, never by a background job). */
typedef struct ClangSetup {
  char clang[JIT_PATH_MAX];  /* the compiler */
  char dir[JIT_PATH_MAX];    /* the cache directory; "" when there is none
                                usable (then every compile goes to a
                                private directory) */
  char tmpdir[JIT_PATH_MAX]; /* where private directories go */
  char version[2048];        /* `clang --version`, "" until known */
  char version_name[48];     /* its file in dir (cc-<hash>.txt) */
} ClangSetup;

/* The configured cache directory (options, then environment) into dir;
 * 0 when nothing names one. */
static int cache_dir_path(const JitOptions *opt, char *dir) {
  const char *base = opt->cache_dir, *leaf = "";
  const char *env = getenv("GALLEY_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (!base && env && *env)
    base = env;
  else if (!base && xdg && xdg[0] == '/') /* XDG: relative paths are
                                              invalid and ignored */
    base = xdg, leaf = "/galleyc";
  else if (!base && home && *home)
    base = home, leaf = "/.cache/galleyc";
  if (!base || !*base)
    return 0;
  int w = snprintf(dir, JIT_PATH_MAX, "%s%s", base, leaf);
  return w > 0 && w < JIT_PATH_MAX;
}

/* The cache directory, created (0700) when missing.  A directory we
 * cannot create or that is not a directory leaves cs->dir empty: compiles
 * then go to a private directory.  A directory that others could write is
 * refused (whoever can write it can make us load their code). */
static galley_status open_cache_dir(const JitOptions *opt, ClangSetup *cs,
                                    galley_error *err) {
  struct stat st;
  if (!cache_dir_path(opt, cs->dir) || make_dirs(cs->dir) != 0 ||
      stat(cs->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    cs->dir[0] = '\0';
    return GALLEY_OK;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 022) != 0)
    return rt_error(err, GALLEY_EJIT,
                    "refusing cache directory %s: it must be owned by the "
                    "current user and not writable by group or others",
                    cs->dir);
  return GALLEY_OK;
}

/* The name of the file that caches clang's version text, derived from
 * the binary's identity: a changed binary (upgrade, new symlink target)
 * has a new identity and is asked again. */
static galley_status version_file_name(ClangSetup *cs, galley_error *err) {
  struct stat st;
  if (stat(cs->clang, &st) != 0)
    return rt_error(err, GALLEY_EJIT, "cannot stat %s: %s", cs->clang,
                    strerror(errno));
  char id[JIT_PATH_MAX + 160], hex[33];
  snprintf(id, sizeof id, "%s\n%llu %llu %lld %lld.%09ld", cs->clang,
           (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
           (long long)st.st_size, (long long)st.st_mtim.tv_sec,
           st.st_mtim.tv_nsec);
  unsigned char d[32];
  jit_sha256(id, strlen(id), d);
  hex_digest(d, 16, hex);
  snprintf(cs->version_name, sizeof cs->version_name, "cc-%s.txt", hex);
  return GALLEY_OK;
}

/* clang's version text from the cache, when there (no process run). */
static void read_cached_version(ClangSetup *cs) {
  char path[JIT_PATH_MAX];
  cs->version[0] = '\0';
  if (!cs->dir[0] ||
      path_join(path, cs->dir, cs->version_name, NULL) != GALLEY_OK)
    return;
  int fd = open_trusted(path);
  if (fd >= 0) {
    read_all(fd, cs->version, sizeof cs->version);
    close(fd);
  }
}

/* Ask clang for its version and cache the answer (best effort). */
static galley_status ask_version(ClangSetup *cs, JitCancel *cancel,
                                 galley_error *err) {
  char *argv[] = {cs->clang, "--version", NULL};
  int code = 0;
  galley_status st = run_captured(argv, cs->version, sizeof cs->version,
                                  &code, cancel, err);
  if (st != GALLEY_OK)
    return st;
  if (code != 0 || !cs->version[0])
    return jit_fail(err, "the clang backend is not available: "
                         "`clang --version` failed", cs->version, NULL);
  if (cs->dir[0]) /* only a speed-up: a read-only cache just asks again */
    write_atomic(cs->dir, cs->version_name, cs->version, NULL);
  return GALLEY_OK;
}

/* Everything but the version's process: the compiler, the cache
 * directory, the version when cached. */
static galley_status clang_setup(const JitOptions *opt, ClangSetup *cs,
                                 galley_error *err) {
  galley_status st = find_clang(cs->clang, err);
  if (st == GALLEY_OK)
    st = open_cache_dir(opt, cs, err);
  if (st == GALLEY_OK)
    st = version_file_name(cs, err);
  if (st != GALLEY_OK)
    return st;
  const char *t = getenv("TMPDIR");
  snprintf(cs->tmpdir, sizeof cs->tmpdir, "%s", t && t[0] == '/' ? t : "/tmp");
  read_cached_version(cs);
  return GALLEY_OK;
}

/* Every entry ends with a trailer that seals it: a magic line, the key it
 * was compiled for, the size of the object before the trailer and the
 * object's SHA-256 (the dynamic loader ignores bytes after the object).
 * One file, so one rename publishes the object and its seal together. */
#define TRAILER_MAGIC "galleyc kernel 1\n"
enum {
  MAGIC_LEN = sizeof TRAILER_MAGIC - 1,
  TRAILER_LEN = MAGIC_LEN + 64 + 16 + 64 + 1
};

static void make_trailer(const char *key, uint64_t size,
                         const unsigned char digest[32], char *out) {
  char hex[65];
  hex_digest(digest, 32, hex);
  memcpy(out, TRAILER_MAGIC, MAGIC_LEN);
  memcpy(out + MAGIC_LEN, key, 64);
  snprintf(out + MAGIC_LEN + 64, 17, "%016llx", (unsigned long long)size);
  memcpy(out + MAGIC_LEN + 80, hex, 64);
  out[TRAILER_LEN - 1] = '\n';
}

/* The whole of fd (size bytes) into a new buffer; NULL when it cannot be
 * read. */
static unsigned char *read_file(int fd, off_t size) {
  unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
  if (buf && (lseek(fd, 0, SEEK_SET) != 0 ||
              read_exact(fd, buf, (size_t)size) != 0)) {
    free(buf);
    buf = NULL;
  }
  return buf;
}

/* Whether the file open on fd is a sealed entry for key: its size, key
 * and the hash of its object all as the trailer says.  A truncated,
 * corrupted or swapped entry fails here, before the loader maps it. */
static int entry_intact(int fd, const char *key) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= TRAILER_LEN)
    return 0;
  unsigned char *buf = read_file(fd, st.st_size);
  if (!buf)
    return 0;
  uint64_t size = (uint64_t)st.st_size - TRAILER_LEN;
  unsigned char digest[32];
  jit_sha256(buf, (size_t)size, digest);
  char want[TRAILER_LEN];
  make_trailer(key, size, digest, want);
  int ok = memcmp(buf + size, want, TRAILER_LEN) == 0;
  free(buf);
  return ok;
}

/* Append the trailer of key to the freshly linked object at path and
 * make it private (the linker used the umask's mode). */
static galley_status seal_entry(const char *path, const char *key,
                                galley_error *err) {
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  unsigned char *buf = NULL;
  int ok = fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 &&
           (buf = read_file(fd, st.st_size)) != NULL;
  if (ok) {
    unsigned char digest[32];
    char trailer[TRAILER_LEN];
    jit_sha256(buf, (size_t)st.st_size, digest);
    make_trailer(key, (uint64_t)st.st_size, digest, trailer);
    ok = lseek(fd, 0, SEEK_END) == st.st_size &&
         write_all(fd, trailer, TRAILER_LEN) == 0 && fchmod(fd, 0700) == 0;
  }
  int saved = errno;
  free(buf);
  if (fd >= 0 && close(fd) != 0)
    ok = 0;
  if (!ok)
    return rt_error(err, GALLEY_EJIT, "cannot seal %s: %s", path,
                    strerror(saved));
  return GALLEY_OK;
}

/* dlopen path if it is a trusted, intact entry for key; NULL otherwise. */
static void *load_entry(const char *path, const char *key) {
  int fd = open_trusted(path);
  if (fd < 0)
    return NULL;
  int ok = entry_intact(fd, key);
  close(fd);
  return ok ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
}

/* ------------------------------------------------------------------ */
/* The clang backend                                                   */
/* ------------------------------------------------------------------ */

/* Run clang on the source file csrc into the shared object so. */
static galley_status run_clang(const char *clang, const char *csrc,
                               const char *so, JitCancel *cancel,
                               galley_error *err) {
  char *argv[N_CLANG_FLAGS + 9];
  int n = 0;
  argv[n++] = (char *)clang;
  for (int k = 0; k < N_CLANG_FLAGS; k++)
    argv[n++] = (char *)clang_flags[k];
  argv[n++] = "-x";
  argv[n++] = "c";
  argv[n++] = (char *)csrc;
  argv[n++] = "-o";
  argv[n++] = (char *)so;
  argv[n++] = "-lm";
  argv[n] = NULL;
  char *out = malloc(JIT_OUT_MAX);
  if (!out)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  int code = 0;
  galley_status st = run_captured(argv, out, JIT_OUT_MAX, &code, cancel, err);
  if (st == GALLEY_OK && code != 0)
    st = jit_fail(err, "clang failed to compile the kernel", out, csrc);
  free(out);
  return st;
}

/* Compile src into dir/<key>.so: through private temporary files
 * (removed on every path), sealed, published by an atomic rename.
 * *unwritable is set when dir takes no new file (read-only, full): the
 * caller then compiles elsewhere. */
static galley_status compile_entry(const ClangSetup *cs, const char *dir,
                                   const char *src, const char *key,
                                   const char *so_path, JitCancel *cancel,
                                   int *unwritable, galley_error *err) {
  char csrc[JIT_PATH_MAX], tmp_so[JIT_PATH_MAX];
  galley_status st = write_temp(dir, src, csrc, err);
  if (st == GALLEY_OK) {
    /* An empty file reserves a unique output name. */
    st = write_temp(dir, "", tmp_so, err);
    if (st != GALLEY_OK)
      unlink(csrc);
  }
  if (st != GALLEY_OK) {
    *unwritable = 1;
    return st;
  }
  st = run_clang(cs->clang, csrc, tmp_so, cancel, err);
  unlink(csrc);
  if (st == GALLEY_OK)
    st = seal_entry(tmp_so, key, err);
  if (st == GALLEY_OK && rename(tmp_so, so_path) != 0)
    st = rt_error(err, GALLEY_EJIT, "cannot store %s: %s", so_path,
                  strerror(errno));
  if (st != GALLEY_OK)
    unlink(tmp_so);
  return st;
}

/* dlopen the entry just compiled at so_path; on failure the entry is
 * removed (it would only be rebuilt and fail again). */
static galley_status load_compiled(const char *so_path, const char *key,
                                   void **handle, galley_error *err) {
  *handle = load_entry(so_path, key);
  if (*handle)
    return GALLEY_OK;
  const char *why = dlerror();
  unlink(so_path);
  return rt_error(err, GALLEY_EJIT,
                  "clang: cannot load the compiled kernel: %s",
                  why ? why : so_path);
}

/* Compile src in a new private directory under cs->tmpdir (the cache
 * directory is missing or read-only), load it and remove the files: the
 * loaded code lives on in memory. */
static galley_status compile_private(const ClangSetup *cs, const char *src,
                                     const char *key, JitCancel *cancel,
                                     void **handle, galley_error *err) {
  char dir[JIT_PATH_MAX], so_path[JIT_PATH_MAX], name[80];
  galley_status st = path_join(dir, cs->tmpdir, "galleyc-XXXXXX", err);
  if (st != GALLEY_OK)
    return st;
  if (!mkdtemp(dir))
    return rt_error(err, GALLEY_EJIT,
                    "the kernel cache is not writable and no private "
                    "directory can be made in %s: %s",
                    cs->tmpdir, strerror(errno));
  snprintf(name, sizeof name, "%s.so", key);
  int unwritable = 0;
  st = path_join(so_path, dir, name, err);
  if (st == GALLEY_OK)
    st = compile_entry(cs, dir, src, key, so_path, cancel, &unwritable, err);
  if (st == GALLEY_OK)
    st = load_compiled(so_path, key, handle, err);
  unlink(so_path);
  rmdir(dir);
  return st;
}

/* src's cache entry path into so_path, and its key. */
static galley_status entry_path(const ClangSetup *cs, const char *src,
                                char *key, char *so_path, galley_error *err) {
  char name[80];
  cache_key(src, cs->version, key);
  snprintf(name, sizeof name, "%s.so", key);
  return path_join(so_path, cs->dir, name, err);
}

/* A verified cache entry of src, loaded; NULL on a miss, or when the
 * version is not cached yet (a lookup never runs a process). */
static void *clang_lookup(const ClangSetup *cs, const char *src) {
  char key[65], so_path[JIT_PATH_MAX];
  if (!cs->dir[0] || !cs->version[0] ||
      entry_path(cs, src, key, so_path, NULL) != GALLEY_OK)
    return NULL;
  return load_entry(so_path, key);
}

/* The loaded shared object of src: from the cache, or compiled into it
 * (an entry that is untrusted or fails its check is rebuilt and
 * replaced), or compiled privately when the cache takes no new file. */
static galley_status clang_build(ClangSetup *cs, const char *src,
                                 JitCancel *cancel, void **handle,
                                 galley_error *err) {
  char key[65], so_path[JIT_PATH_MAX];
  galley_status st = GALLEY_OK;
  if (!cs->version[0])
    st = ask_version(cs, cancel, err);
  if (st != GALLEY_OK)
    return st;
  if (!cs->dir[0]) {
    cache_key(src, cs->version, key);
    return compile_private(cs, src, key, cancel, handle, err);
  }
  if ((st = entry_path(cs, src, key, so_path, err)) != GALLEY_OK)
    return st;
  if ((*handle = load_entry(so_path, key)))
    return GALLEY_OK;
  sweep_stale_temps(cs->dir);
  int unwritable = 0;
  st = compile_entry(cs, cs->dir, src, key, so_path, cancel, &unwritable,
                     err);
  if (unwritable)
    return compile_private(cs, src, key, cancel, handle, err);
  return st == GALLEY_OK ? load_compiled(so_path, key, handle, err) : st;
}

/* Look up the symbols of a loaded object. */
static galley_status find_symbols(void *dl, const char *const *symbols,
                                  int nsym, void **fns, galley_error *err) {
  for (int k = 0; k < nsym; k++) {
    fns[k] = dlsym(dl, symbols[k]);
    if (!fns[k])
      return rt_error(err, GALLEY_EJIT,
                      "clang: symbol '%s' not found in the compiled code",
                      symbols[k]);
  }
  return GALLEY_OK;
}

/* ------------------------------------------------------------------ */
/* The interface                                                       */
/* ------------------------------------------------------------------ */

static galley_status check_args(const JitOptions *opt, const char *src,
                                const char *const *symbols, int nsym,
                                void **fns, galley_error *err) {
  if (!opt || !src || nsym < 0 || (nsym > 0 && (!symbols || !fns)))
    return rt_error(err, GALLEY_EINVAL, "jit_compile: bad arguments");
  if (opt->backend != JIT_TCC && opt->backend != JIT_CLANG)
    return rt_error(err, GALLEY_EINVAL, "jit_compile: unknown backend %d",
                    (int)opt->backend);
  return GALLEY_OK;
}

/* A module owning the loaded object dl, its symbols in fns; dl is closed
 * on failure. */
static galley_status clang_module(void *dl, const char *const *symbols,
                                  int nsym, void **fns, JitModule **out,
                                  galley_error *err) {
  JitModule *m = calloc(1, sizeof *m);
  galley_status st = m ? find_symbols(dl, symbols, nsym, fns, err)
                       : rt_error(err, GALLEY_ENOMEM, "out of memory");
  if (st != GALLEY_OK) {
    free(m);
    dlclose(dl);
    for (int k = 0; k < nsym; k++)
      fns[k] = NULL;
    return st;
  }
  m->backend = JIT_CLANG;
  m->dl = dl;
  *out = m;
  return GALLEY_OK;
}

galley_status jit_compile(const JitOptions *opt, const char *src,
                          const char *const *symbols, int nsym, void **fns,
                          JitModule **out, galley_error *err) {
  *out = NULL;
  galley_status st = check_args(opt, src, symbols, nsym, fns, err);
  if (st != GALLEY_OK)
    return st;
  if (opt->backend == JIT_CLANG) {
    ClangSetup *cs = malloc(sizeof *cs);
    void *dl = NULL;
    st = cs ? clang_setup(opt, cs, err)
            : rt_error(err, GALLEY_ENOMEM, "out of memory");
    if (st == GALLEY_OK)
      st = clang_build(cs, src, NULL, &dl, err);
    free(cs);
    if (st == GALLEY_OK)
      return clang_module(dl, symbols, nsym, fns, out, err);
    for (int k = 0; k < nsym; k++)
      fns[k] = NULL;
    return st;
  }
  JitModule *m = calloc(1, sizeof *m);
  if (!m)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  m->backend = JIT_TCC;
  st = jit_tcc(src, symbols, nsym, fns, m, err);
  if (st != GALLEY_OK) {
    jit_free(m);
    for (int k = 0; k < nsym; k++)
      fns[k] = NULL;
    return st;
  }
  *out = m;
  return GALLEY_OK;
}

int jit_lookup(const JitOptions *opt, const char *src,
               const char *const *symbols, int nsym, void **fns,
               JitModule **out) {
  *out = NULL;
  if (check_args(opt, src, symbols, nsym, fns, NULL) != GALLEY_OK ||
      opt->backend != JIT_CLANG)
    return 0;
  ClangSetup *cs = malloc(sizeof *cs);
  void *dl = NULL;
  if (cs && clang_setup(opt, cs, NULL) == GALLEY_OK)
    dl = clang_lookup(cs, src);
  free(cs);
  return dl && clang_module(dl, symbols, nsym, fns, out, NULL) == GALLEY_OK;
}

JitBackend jit_module_backend(const JitModule *m) { return m->backend; }

void jit_free(JitModule *m) {
  if (!m)
    return;
  if (m->tcc)
    jit_tcc_free(m);
  if (m->dl)
    dlclose(m->dl);
  free(m);
}

/* ------------------------------------------------------------------ */
/* Background jobs                                                     */
/* ------------------------------------------------------------------ */

struct JitJob {
  pthread_t thread;
  int started;           /* the thread exists (join it) */
  JitCancel cancel;
  pthread_mutex_t lock;  /* guards done; the results below are written
                            before done is set and read after */
  pthread_cond_t cond;   /* signalled when done is set */
  int done;
  ClangSetup setup;      /* resolved by jit_job_start's caller */
  char *src;
  char **symbols;
  int nsym;
  galley_status status;  /* the results */
  galley_error err;
  JitModule *module;     /* until jit_job_take */
  void **fns;
  double seconds;
};

static double monotonic_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void job_finish(JitJob *job, galley_status st) {
  pthread_mutex_lock(&job->lock);
  job->status = st;
  job->done = 1;
  pthread_cond_broadcast(&job->cond);
  pthread_mutex_unlock(&job->lock);
}

static void *job_main(void *arg) {
  JitJob *job = arg;
  double t0 = monotonic_seconds();
  void *dl = NULL;
  galley_status st = clang_build(&job->setup, job->src, &job->cancel, &dl,
                                 &job->err);
  if (st == GALLEY_OK)
    st = clang_module(dl, (const char *const *)job->symbols, job->nsym,
                      job->fns, &job->module, &job->err);
  job->seconds = monotonic_seconds() - t0;
  job_finish(job, st);
  return NULL;
}

/* A new job holding copies of src and the symbols; NULL when out of
 * memory. */
static JitJob *job_new(const char *src, const char *const *symbols,
                       int nsym) {
  JitJob *job = calloc(1, sizeof *job);
  if (!job)
    return NULL;
  pthread_mutex_init(&job->lock, NULL);
  pthread_cond_init(&job->cond, NULL);
  pthread_mutex_init(&job->cancel.lock, NULL);
  job->src = strdup(src);
  job->symbols = calloc((size_t)nsym + 1, sizeof *job->symbols);
  job->fns = calloc((size_t)nsym + 1, sizeof *job->fns);
  int ok = job->src && job->symbols && job->fns;
  for (int k = 0; ok && k < nsym; k++, job->nsym++)
    ok = (job->symbols[k] = strdup(symbols[k])) != NULL;
  if (!ok)
    job = jit_job_free(job);
  return job;
}

galley_status jit_job_start(const JitOptions *opt, const char *src,
                            const char *const *symbols, int nsym,
                            JitJob **out, galley_error *err) {
  *out = NULL;
  if (!opt || opt->backend != JIT_CLANG || !src || nsym < 0 ||
      (nsym > 0 && !symbols))
    return rt_error(err, GALLEY_EINVAL, "jit_job_start: bad arguments");
  galley_status st;
  JitJob *job = job_new(src, symbols, nsym);
  if (!job)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  /* Setup failures (no clang, an unsafe cache) finish the job at once. */
  st = clang_setup(opt, &job->setup, &job->err);
  if (st == GALLEY_OK) {
    int rc = pthread_create(&job->thread, NULL, job_main, job);
    job->started = rc == 0;
    if (rc != 0)
      st = rt_error(&job->err, GALLEY_EJIT,
                    "cannot start a background compile: %s", strerror(rc));
  }
  if (st != GALLEY_OK)
    job_finish(job, st);
  *out = job;
  return GALLEY_OK;
}

int jit_job_done(JitJob *job, int wait) {
  pthread_mutex_lock(&job->lock);
  while (wait && !job->done)
    pthread_cond_wait(&job->cond, &job->lock);
  int done = job->done;
  pthread_mutex_unlock(&job->lock);
  return done;
}

galley_status jit_job_take(JitJob *job, void **fns, JitModule **out,
                           galley_error *err) {
  *out = NULL;
  if (!jit_job_done(job, 0))
    return rt_error(err, GALLEY_EINVAL, "jit_job_take: the job is running");
  if (job->status != GALLEY_OK) {
    if (err)
      *err = job->err;
    return job->status;
  }
  if (!job->module)
    return rt_error(err, GALLEY_EINVAL, "jit_job_take: already taken");
  memcpy(fns, job->fns, (size_t)job->nsym * sizeof *fns);
  *out = job->module;
  job->module = NULL;
  return GALLEY_OK;
}

galley_status jit_job_error(JitJob *job, galley_error *err) {
  if (!jit_job_done(job, 0))
    return GALLEY_OK;
  if (job->status != GALLEY_OK && err)
    *err = job->err;
  return job->status;
}

int jit_job_is_for(const JitJob *job, const char *src) {
  return strcmp(job->src, src) == 0;
}

double jit_job_seconds(JitJob *job) {
  return jit_job_done(job, 0) ? job->seconds : 0;
}

JitJob *jit_job_free(JitJob *job) {
  if (!job)
    return NULL;
  if (job->started) {
    pthread_mutex_lock(&job->cancel.lock);
    job->cancel.cancelled = 1;
    if (job->cancel.pgid > 0)
      kill(-job->cancel.pgid, SIGKILL);
    pthread_mutex_unlock(&job->cancel.lock);
    pthread_join(job->thread, NULL);
  }
  jit_free(job->module);
  for (int k = 0; k < job->nsym; k++)
    free(job->symbols[k]);
  free(job->symbols);
  free(job->fns);
  free(job->src);
  pthread_mutex_destroy(&job->cancel.lock);
  pthread_cond_destroy(&job->cond);
  pthread_mutex_destroy(&job->lock);
  free(job);
  return NULL;
}
