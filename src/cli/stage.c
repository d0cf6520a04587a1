/*
 * stage.c -- results written all or none (tin.md section 7: "a result is
 * written only when the whole run succeeded").
 *
 * Every result is first written to a temporary file beside its
 * destination, DIR/NAME.tns.tmpXXXXXX (same directory: rename is atomic).
 * Only when all are written are they renamed, with SIGINT, SIGTERM and
 * SIGHUP held back meanwhile; if a rename fails, the results renamed
 * before it are put back (a hard link kept the previous file) or removed,
 * so a disk that fills up while writing the second of two results, or a
 * name taken by a directory, leaves the previous results as they were.
 *
 * Temporaries are kept in a list that the signal handler reads: it
 * unlinks each (unlink is async-signal-safe) and dies of the signal, so
 * Ctrl-C or a kill leaves nothing behind and the shell sees 130 or 143.
 * A kill -9 cannot be caught: the temporaries it leaves are swept by the
 * next run writing into the same directory once they are older than
 * CLI_STALE_SECONDS.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- the live temporaries: what a signal removes ----
 * Changed only with the signals blocked, so that the handler never sees
 * the list half-updated. */
static char **live;                 /* paths, owned by the staging */
static volatile sig_atomic_t nlive; /* live[0 .. nlive) */
static int caplive;

static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};
enum { NSIGNALS = sizeof cleanup_signals / sizeof cleanup_signals[0] };

static void block_signals(sigset_t *old) {
  sigset_t set;
  sigemptyset(&set);
  for (int k = 0; k < NSIGNALS; k++)
    sigaddset(&set, cleanup_signals[k]);
  sigprocmask(SIG_BLOCK, &set, old);
}

static void restore_signals(const sigset_t *old) {
  sigprocmask(SIG_SETMASK, old, NULL);
}

/* Add path to the list; -1 when out of memory. */
static int live_add(char *path) {
  sigset_t old;
  block_signals(&old);
  int ok = 1;
  if (nlive == caplive) {
    int cap = caplive ? 2 * caplive : 16;
    char **grown = realloc(live, (size_t)cap * sizeof *grown);
    if (grown) {
      live = grown;
      caplive = cap;
    } else {
      ok = 0;
    }
  }
  if (ok) {
    live[nlive] = path;
    nlive = nlive + 1;
  }
  restore_signals(&old);
  return ok ? 0 : -1;
}

static void live_remove(const char *path) {
  sigset_t old;
  block_signals(&old);
  for (int k = 0; k < nlive; k++)
    if (live[k] == path) {
      live[k] = live[nlive - 1];
      nlive = nlive - 1;
      break;
    }
  restore_signals(&old);
}

/* Remove every live temporary, then die of the signal (the handler is
 * reset to the default action by SA_RESETHAND, and SA_NODEFER lets the
 * raise act at once). */
static void on_signal(int sig) {
  cli_progress_erase_on_signal();
  for (int k = 0; k < nlive; k++)
    unlink(live[k]);
  raise(sig);
  _exit(128 + sig); /* not reached */
}

void cli_install_signal_cleanup(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int k = 0; k < NSIGNALS; k++) {
    struct sigaction prev;
    /* a signal the caller ignores (nohup, a background job) stays so */
    if (sigaction(cleanup_signals[k], NULL, &prev) == 0 &&
        prev.sa_handler == SIG_IGN)
      continue;
    sigaction(cleanup_signals[k], &sa, NULL);
  }
}

/* ---- stale temporaries ---- */

static int ends_with(const char *s, size_t n, const char *suffix) {
  size_t m = strlen(suffix);
  return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* NAME.tns.tmpXXXXXX (or .mtx, either .gz): the temporaries of galleyc
 * and of the library's writer (six letters or digits after ".tmp"). */
static int is_temp_name(const char *name) {
  size_t n = strlen(name);
  if (n < 11 || memcmp(name + n - 10, ".tmp", 4) != 0)
    return 0;
  for (size_t k = n - 6; k < n; k++) {
    char c = name[k];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
          (c >= 'A' && c <= 'Z')))
      return 0;
  }
  n -= 10;
  if (ends_with(name, n, ".gz"))
    n -= 3;
  return ends_with(name, n, ".tns") || ends_with(name, n, ".mtx");
}

int cli_sweep_stale_temps(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  time_t now = time(NULL);
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    struct stat st;
    if (!is_temp_name(e->d_name) ||
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || now - st.st_mtime <= CLI_STALE_SECONDS)
      continue;
    removed += unlinkat(dirfd(d), e->d_name, 0) == 0;
  }
  closedir(d);
  return removed;
}

/* ---- staging ---- */

/* path + ".tmpXXXXXX", malloc()ed and listed as live; NULL when out of
 * memory. */
static char *temp_template(const char *path) {
  size_t n = strlen(path);
  char *t = malloc(n + 11);
  if (!t)
    return NULL;
  memcpy(t, path, n);
  memcpy(t + n, ".tmpXXXXXX", 11);
  if (live_add(t) != 0) {
    free(t);
    return NULL;
  }
  return t;
}

/* Forget and free a temporary's name (the file is gone or renamed). */
static void temp_forget(char **t) {
  if (*t) {
    live_remove(*t);
    free(*t);
    *t = NULL;
  }
}

/* The text of a writer's failure, without its "error: " and "write
 * failed: " (the caller names the file). */
static const char *write_failure(const galley_error *err) {
  const char *m = err->msg;
  if (strncmp(m, "error: ", 7) == 0)
    m += 7;
  if (strncmp(m, "write failed: ", 14) == 0)
    m += 14;
  return m[0] ? m : galley_status_name(err->status);
}

int cli_stage(cli_staged *s, const galley_program *gp, int k) {
  if (!(s->tmp = temp_template(s->path))) {
    cli_error("%s: out of memory", s->path);
    return EXIT_DATA;
  }
  int fd = mkstemp(s->tmp);
  if (fd < 0) {
    int e = errno;
    temp_forget(&s->tmp);
    cli_error("%s: cannot write: %s", s->path, strerror(e));
    return EXIT_DATA;
  }
  /* mkstemp makes the file private; a result is an ordinary file */
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  galley_error err = {0};
  FILE *f = fdopen(fd, "w");
  galley_status st = f ? galley_program_write_output(gp, k, f, &err)
                       : GALLEY_EIO;
  int e = errno;
  if (!f)
    close(fd);
  else if (fclose(f) != 0 && st == GALLEY_OK)
    st = GALLEY_EIO, e = errno;
  if (st == GALLEY_OK)
    return 0;
  unlink(s->tmp);
  temp_forget(&s->tmp);
  if (err.msg[0])
    cli_error("%s: cannot write: %s", s->path, write_failure(&err));
  else
    cli_error("%s: cannot write: %s", s->path, strerror(e));
  return cli_exit_status(st);
}

/* Keep the previous file at s->path reachable under a temporary name (a
 * hard link), so that a failed commit can put it back. */
static void keep_previous(cli_staged *s) {
  struct stat st;
  s->existed = lstat(s->path, &st) == 0;
  if (!s->existed || !S_ISREG(st.st_mode) ||
      !(s->bak = temp_template(s->path)))
    return;
  int fd = mkstemp(s->bak); /* reserves a fresh name */
  if (fd >= 0)
    close(fd);
  if (fd < 0 || unlink(s->bak) != 0 || link(s->path, s->bak) != 0)
    temp_forget(&s->bak); /* no hard links here: no rollback for it */
}

/* Undo the rename of s: its previous file back, or no file. */
static void put_back(cli_staged *s) {
  if (s->bak) {
    if (rename(s->bak, s->path) == 0)
      temp_forget(&s->bak);
  } else if (!s->existed) {
    unlink(s->path);
  }
}

int cli_commit(cli_staged *s, int n) {
  sigset_t old;
  block_signals(&old);
  for (int k = 0; k < n; k++)
    keep_previous(&s[k]);
  int k = 0;
  while (k < n && rename(s[k].tmp, s[k].path) == 0) {
    temp_forget(&s[k].tmp);
    k++;
  }
  int rc = 0;
  if (k < n) {
    int e = errno;
    for (int j = 0; j < k; j++)
      put_back(&s[j]);
    cli_error("%s: cannot write: %s (no result written)", s[k].path,
              strerror(e));
    rc = EXIT_DATA;
  }
  restore_signals(&old);
  return rc;
}

void cli_discard(cli_staged *s, int n) {
  for (int k = 0; s && k < n; k++) {
    if (s[k].tmp)
      unlink(s[k].tmp);
    temp_forget(&s[k].tmp);
    if (s[k].bak)
      unlink(s[k].bak);
    temp_forget(&s[k].bak);
    free(s[k].path);
  }
  free(s);
}
