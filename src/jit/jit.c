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
 * shell: nothing from the program text reaches a command line), and renames
 * the result onto <key>.so.  rename() is atomic, so processes sharing the
 * cache never see a partial file; when two compile the same kernel at once
 * the loser's rename just replaces an identical file.  A hit runs no
 * process at all: the compiler's version text is itself cached, keyed by
 * the identity (path, device, inode, size, mtime) of the clang binary.
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
#include <pthread.h>
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

/* dst = a "/" b; GALLEY_EJIT when it does not fit. */
static galley_status path_join(char *dst, const char *a, const char *b,
                               galley_error *err) {
  int w = snprintf(dst, JIT_PATH_MAX, "%s/%s", a, b);
  if (w < 0 || w >= JIT_PATH_MAX)
    return rt_error(err, GALLEY_EJIT, "path too long: %s/%s", a, b);
  return GALLEY_OK;
}

/* Write all n bytes to fd; 0, or -1 with errno set. */
static int write_all(int fd, const char *p, size_t n) {
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

/* Run argv (argv[0] an absolute path; no shell) with stdin from
 * /dev/null and stdout and stderr captured into out; *code its exit
 * status. */
static galley_status run_captured(char *const argv[], char *out, size_t cap,
                                  int *code, galley_error *err) {
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
      rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
      close(fds[1]);
      fds[1] = -1;
      if (rc == 0) {
        read_all(fds[0], out, cap);
        *code = wait_child(pid);
      }
    }
    posix_spawn_file_actions_destroy(&fa);
  }
  if (fds[1] >= 0)
    close(fds[1]);
  close(fds[0]);
  if (rc != 0)
    return rt_error(err, GALLEY_EJIT, "cannot run %s: %s", argv[0],
                    strerror(rc));
  return GALLEY_OK;
}

/* Create path and its missing parents; the ones created get mode 0700. */
static galley_status make_dirs(const char *path, galley_error *err) {
  char buf[JIT_PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf)
    return rt_error(err, GALLEY_EJIT, "bad cache directory '%s'", path);
  memcpy(buf, path, n + 1);
  for (size_t k = 1; k <= n; k++) {
    if (buf[k] != '/' && buf[k] != '\0')
      continue;
    char c = buf[k];
    buf[k] = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
      return rt_error(err, GALLEY_EJIT, "cannot create cache directory %s: %s",
                      buf, strerror(errno));
    buf[k] = c;
  }
  return GALLEY_OK;
}

/* The cache directory must be a directory we own that nobody else can
 * write: whoever can write it can make us load their code. */
static galley_status check_private_dir(const char *path, galley_error *err) {
  struct stat st;
  if (stat(path, &st) != 0)
    return rt_error(err, GALLEY_EJIT, "cannot use cache directory %s: %s",
                    path, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return rt_error(err, GALLEY_EJIT, "cache path %s is not a directory",
                    path);
  if (st.st_uid != geteuid() || (st.st_mode & 022) != 0)
    return rt_error(err, GALLEY_EJIT,
                    "refusing cache directory %s: it must be owned by the "
                    "current user and not writable by group or others",
                    path);
  return GALLEY_OK;
}

/* The cache directory per the options and environment, created (0700)
 * and checked. */
static galley_status cache_dir(const JitOptions *opt, char *dir,
                               galley_error *err) {
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
    return rt_error(err, GALLEY_EJIT,
                    "no kernel cache directory: set GALLEY_CACHE_DIR or HOME");
  int w = snprintf(dir, JIT_PATH_MAX, "%s%s", base, leaf);
  if (w < 0 || w >= JIT_PATH_MAX)
    return rt_error(err, GALLEY_EJIT, "cache directory path too long");
  galley_status st = make_dirs(dir, err);
  return st != GALLEY_OK ? st : check_private_dir(dir, err);
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

/* The version text of clang: cached in dir under a name derived from the
 * binary's identity, so a cache hit runs no process; a changed binary
 * (upgrade, new symlink target) has a new identity and is asked again. */
static galley_status clang_version(const char *clang, const char *dir,
                                   char *out, size_t cap, galley_error *err) {
  struct stat st;
  if (stat(clang, &st) != 0)
    return rt_error(err, GALLEY_EJIT, "cannot stat %s: %s", clang,
                    strerror(errno));
  char id[JIT_PATH_MAX + 160], hex[33], name[48], path[JIT_PATH_MAX];
  snprintf(id, sizeof id, "%s\n%llu %llu %lld %lld.%09ld", clang,
           (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
           (long long)st.st_size, (long long)st.st_mtim.tv_sec,
           st.st_mtim.tv_nsec);
  unsigned char d[32];
  jit_sha256(id, strlen(id), d);
  hex_digest(d, 16, hex);
  snprintf(name, sizeof name, "cc-%s.txt", hex);
  galley_status s = path_join(path, dir, name, err);
  if (s != GALLEY_OK)
    return s;
  int fd = open_trusted(path);
  if (fd >= 0) {
    read_all(fd, out, cap);
    close(fd);
    if (out[0])
      return GALLEY_OK;
  }
  char *argv[] = {(char *)clang, "--version", NULL};
  int code = 0;
  s = run_captured(argv, out, cap, &code, err);
  if (s != GALLEY_OK)
    return s;
  if (code != 0 || !out[0])
    return jit_fail(err, "the clang backend is not available: "
                         "`clang --version` failed", out, NULL);
  write_atomic(dir, name, out, NULL); /* only a speed-up: ignore failure */
  return GALLEY_OK;
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
/* The clang backend                                                   */
/* ------------------------------------------------------------------ */

/* Run clang on the source file csrc into the shared object so. */
static galley_status run_clang(const char *clang, const char *csrc,
                               const char *so, galley_error *err) {
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
  galley_status st = run_captured(argv, out, JIT_OUT_MAX, &code, err);
  if (st == GALLEY_OK && code != 0)
    st = jit_fail(err, "clang failed to compile the kernel", out, csrc);
  free(out);
  return st;
}

/* Remove temporary files that a process killed mid-compile left in the
 * cache (older than a day: no compile takes that long, so a concurrent
 * compile's files are never touched). */
static void sweep_stale_temps(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  time_t limit = time(NULL) - 24 * 3600;
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

/* Compile src into dir/<key>.so: through private temporary files
 * (removed on every path), published by an atomic rename. */
static galley_status compile_entry(const char *clang, const char *dir,
                                   const char *src, const char *so_path,
                                   galley_error *err) {
  char csrc[JIT_PATH_MAX], tmp_so[JIT_PATH_MAX];
  sweep_stale_temps(dir);
  galley_status st = write_temp(dir, src, csrc, err);
  if (st != GALLEY_OK)
    return st;
  /* An empty file reserves a unique output name. */
  st = write_temp(dir, "", tmp_so, err);
  if (st != GALLEY_OK) {
    unlink(csrc);
    return st;
  }
  st = run_clang(clang, csrc, tmp_so, err);
  unlink(csrc);
  /* The linker creates the output with the umask's mode; entries must
   * not be writable by group or others (open_trusted). */
  if (st == GALLEY_OK &&
      (chmod(tmp_so, 0700) != 0 || rename(tmp_so, so_path) != 0))
    st = rt_error(err, GALLEY_EJIT, "cannot store %s: %s", so_path,
                  strerror(errno));
  if (st != GALLEY_OK)
    unlink(tmp_so);
  return st;
}

/* dlopen so_path if it is a trusted cache entry; NULL otherwise. */
static void *load_entry(const char *so_path) {
  int fd = open_trusted(so_path);
  if (fd < 0)
    return NULL;
  close(fd);
  return dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
}

/* The loaded shared object of src: from the cache, or compiled into it.
 * An entry that is untrusted or fails to load is rebuilt and replaced. */
static galley_status clang_load(const JitOptions *opt, const char *src,
                                void **handle, galley_error *err) {
  char clang[JIT_PATH_MAX], dir[JIT_PATH_MAX], so_path[JIT_PATH_MAX];
  char version[2048], key[65], name[80];
  galley_status st = find_clang(clang, err);
  if (st == GALLEY_OK)
    st = cache_dir(opt, dir, err);
  if (st == GALLEY_OK)
    st = clang_version(clang, dir, version, sizeof version, err);
  if (st != GALLEY_OK)
    return st;
  cache_key(src, version, key);
  snprintf(name, sizeof name, "%s.so", key);
  if ((st = path_join(so_path, dir, name, err)) != GALLEY_OK)
    return st;
  *handle = load_entry(so_path);
  if (*handle)
    return GALLEY_OK;
  if ((st = compile_entry(clang, dir, src, so_path, err)) != GALLEY_OK)
    return st;
  *handle = load_entry(so_path);
  if (!*handle) {
    const char *why = dlerror();
    st = rt_error(err, GALLEY_EJIT, "clang: cannot load the compiled kernel: %s",
                  why ? why : so_path);
    unlink(so_path); /* it would only be rebuilt and fail again */
  }
  return st;
}

static galley_status jit_clang(const JitOptions *opt, const char *src,
                               const char *const *symbols, int nsym,
                               void **fns, JitModule *m, galley_error *err) {
  galley_status st = clang_load(opt, src, &m->dl, err);
  if (st != GALLEY_OK)
    return st;
  for (int k = 0; k < nsym; k++) {
    fns[k] = dlsym(m->dl, symbols[k]);
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

galley_status jit_compile(const JitOptions *opt, const char *src,
                          const char *const *symbols, int nsym, void **fns,
                          JitModule **out, galley_error *err) {
  *out = NULL;
  if (!opt || !src || nsym < 0 || (nsym > 0 && (!symbols || !fns)))
    return rt_error(err, GALLEY_EINVAL, "jit_compile: bad arguments");
  if (opt->backend != JIT_TCC && opt->backend != JIT_CLANG)
    return rt_error(err, GALLEY_EINVAL, "jit_compile: unknown backend %d",
                    (int)opt->backend);
  JitModule *m = calloc(1, sizeof *m);
  if (!m)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  m->backend = opt->backend;
  galley_status st =
      opt->backend == JIT_TCC ? jit_tcc(src, symbols, nsym, fns, m, err)
                              : jit_clang(opt, src, symbols, nsym, fns, m, err);
  if (st != GALLEY_OK) {
    jit_free(m);
    for (int k = 0; k < nsym; k++)
      fns[k] = NULL;
    return st;
  }
  *out = m;
  return GALLEY_OK;
}

void jit_free(JitModule *m) {
  if (!m)
    return;
  if (m->tcc)
    jit_tcc_free(m);
  if (m->dl)
    dlclose(m->dl);
  free(m);
}
