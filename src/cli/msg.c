/*
 * msg.c -- the galleyc command's messages on standard error, in the forms
 * of tin.md section 7, and the progress line of a long run.
 *
 * The progress line is drawn by a thread of its own (the library works
 * in one long call that cannot report back), only when standard error is
 * a terminal, from one second into the run.  Every message goes through
 * here and takes the same lock, so that it first erases the line and a
 * message never lands in the middle of it.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* The progress line's state: the command's one piece of shared state
 * between its two threads, always under `lock`. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  int running;    /* the thread exists */
  int stop;       /* the thread is asked to end */
  int shown;      /* a line is on the terminal now */
  double t0;      /* when the run began */
  double after;   /* seconds before the line shows (GALLEY_PROGRESS_AFTER,
                     default 1) */
  char what[200]; /* what the run is doing */
} progress = {.lock = PTHREAD_MUTEX_INITIALIZER,
              .wake = PTHREAD_COND_INITIALIZER};

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Erase the progress line (lock held). */
static void erase_line(void) {
  if (progress.shown) {
    fputs("\r\033[K", stderr);
    progress.shown = 0;
  }
}

static void vmessage(const char *kind, const char *fmt, va_list ap) {
  pthread_mutex_lock(&progress.lock);
  erase_line();
  fprintf(stderr, "galleyc: %s: ", kind);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  fflush(stderr);
  pthread_mutex_unlock(&progress.lock);
}

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("error", fmt, ap);
  va_end(ap);
}

void cli_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("warning", fmt, ap);
  va_end(ap);
}

void cli_printf(const char *fmt, ...) {
  pthread_mutex_lock(&progress.lock);
  erase_line();
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
  pthread_mutex_unlock(&progress.lock);
}

void cli_stderr(const char *text) {
  pthread_mutex_lock(&progress.lock);
  erase_line();
  fputs(text, stderr);
  fflush(stderr);
  pthread_mutex_unlock(&progress.lock);
}

/* Whether msg, up to `at` (where ": error: " begins), ends in ":LINE" or
 * ":LINE:COL" after a nonempty file name. */
static int located_prefix(const char *msg, const char *at) {
  const char *p = at;
  int groups = 0;
  while (groups < 2) {
    const char *q = p;
    while (q > msg && isdigit((unsigned char)q[-1]))
      q--;
    if (q == p || q - 1 <= msg || q[-1] != ':')
      break;
    p = q - 1;
    groups++;
  }
  return groups > 0;
}

void cli_report_text(const char *msg) {
  const char *at = strstr(msg, ": error: ");
  if (at && located_prefix(msg, at)) {
    cli_stderr(msg);
    cli_stderr("\n");
  } else if (strncmp(msg, "error: ", 7) == 0) {
    cli_error("%s", msg + 7);
  } else if (at) {
    cli_error("%.*s: %s", (int)(at - msg), msg, at + 9);
  } else {
    cli_error("%s", msg);
  }
}

int cli_exit_status(galley_status status) {
  switch (status) {
  case GALLEY_OK:
    return 0;
  case GALLEY_EPROGRAM:
    return EXIT_PROGRAM;
  case GALLEY_EIO:
  case GALLEY_EDATA:
  case GALLEY_EINVAL:
  case GALLEY_EOVERFLOW:
  case GALLEY_EBIND:
  case GALLEY_ENOMEM: /* a resource error: the data is too large */
    return EXIT_DATA;
  default:
    return EXIT_INTERNAL;
  }
}

/* ---- the progress line ---- */

/* Wait until `seconds` from now or a wake-up (lock held). */
static void wait_for(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); /* the condition's clock */
  long ns = ts.tv_nsec + (long)(seconds * 1e9);
  ts.tv_sec += ns / 1000000000L;
  ts.tv_nsec = ns % 1000000000L;
  pthread_cond_timedwait(&progress.wake, &progress.lock, &ts);
}

static void *progress_main(void *unused) {
  (void)unused;
  pthread_mutex_lock(&progress.lock);
  while (!progress.stop) {
    wait_for(0.25);
    double elapsed = cli_now() - progress.t0;
    if (progress.stop || elapsed < progress.after || !progress.what[0])
      continue;
    fprintf(stderr, "\r\033[Kgalleyc: %s (%.1f s)", progress.what, elapsed);
    fflush(stderr);
    progress.shown = 1;
  }
  erase_line();
  pthread_mutex_unlock(&progress.lock);
  return NULL;
}

void cli_progress_start(double t0) {
  if (!isatty(STDERR_FILENO) || progress.running)
    return;
  progress.t0 = t0;
  const char *after = getenv("GALLEY_PROGRESS_AFTER");
  char *end = NULL;
  progress.after = after ? strtod(after, &end) : 1.0;
  if (!after || end == after || !(progress.after >= 0))
    progress.after = 1.0;
  progress.stop = 0;
  progress.what[0] = '\0';
  progress.running =
      pthread_create(&progress.thread, NULL, progress_main, NULL) == 0;
}

void cli_progress_set(const char *fmt, ...) {
  pthread_mutex_lock(&progress.lock);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(progress.what, sizeof progress.what, fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&progress.lock);
}

/* From a signal handler: erase the line with write(2) alone (the lock
 * may be held by the interrupted code; a stale `shown` only costs an
 * escape sequence). */
void cli_progress_erase_on_signal(void) {
  static const char erase[] = "\r\033[K";
  if (progress.shown && write(STDERR_FILENO, erase, sizeof erase - 1) < 0)
    return;
}

void cli_progress_stop(void) {
  if (!progress.running)
    return;
  pthread_mutex_lock(&progress.lock);
  progress.stop = 1;
  pthread_cond_signal(&progress.wake);
  pthread_mutex_unlock(&progress.lock);
  pthread_join(progress.thread, NULL);
  progress.running = 0;
}
