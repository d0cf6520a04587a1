/*
 * cli.h -- what the parts of the galleyc command share (not installed;
 * the library's API is galley.h).
 *
 *  - msg.c: messages on standard error.  Every error starts
 *    "galleyc: error: " or "FILE:LINE[:COL]: error: " (tin.md section
 *    7), every warning "galleyc: warning: "; and the progress line shown
 *    on a terminal while a long run works, which each message clears
 *    first.
 *  - stage.c: results written all or none: each to a temporary file in
 *    the output directory, then all renamed; temporaries are removed on
 *    failure and by SIGINT, SIGTERM and SIGHUP, and stale ones left by a
 *    kill -9 are swept.
 */
#ifndef GALLEYC_CLI_H
#define GALLEYC_CLI_H

#include "galley.h"

/* Exit status of the command (--help and galleyc(1) list them). */
enum {
  EXIT_PROGRAM = 1, /* malformed or meaningless .tin program */
  EXIT_USAGE = 2,   /* bad command line */
  EXIT_DATA = 3,    /* unreadable or malformed data, bad format, data that
                       does not fit the program, out of memory */
  EXIT_INTERNAL = 4 /* a bug, or a kernel that failed to compile */
};

/* ---- msg.c ---- */

double cli_now(void); /* monotonic seconds */

/* "galleyc: error: MESSAGE\n" and "galleyc: warning: MESSAGE\n". */
void cli_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void cli_warning(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* A library message in the command's form: kept when it starts
 * "FILE:LINE[:COL]: error: ", else "galleyc: error: " with the library's
 * own "error: " dropped ("x.tns: error: cannot open" becomes "galleyc:
 * error: x.tns: cannot open"). */
void cli_report_text(const char *msg);
/* Text written to standard error as is (clearing the progress line). */
void cli_stderr(const char *text);
void cli_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The exit status of a library status: out of memory is a resource (data)
 * error, not an internal one. */
int cli_exit_status(galley_status status);

/* The progress line: shown only when standard error is a terminal, from
 * one second after cli_progress_start, refreshed four times a second by a
 * thread of its own, as "galleyc: WHAT (N.N s)". */
void cli_progress_start(double t0);
void cli_progress_set(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void cli_progress_stop(void);
/* Async-signal-safe: erase the line before dying of a signal. */
void cli_progress_erase_on_signal(void);

/* ---- stage.c ---- */

/* Remove temporaries and die of SIGINT, SIGTERM or SIGHUP (exit status
 * 130, 143, 129 as a shell reports it). */
void cli_install_signal_cleanup(void);

/* Remove NAME.tns.tmpXXXXXX (and .mtx, .gz) files in dir whose last
 * change is older than CLI_STALE_SECONDS: left by a process killed while
 * writing (a live writer keeps changing its file).  The number removed. */
#define CLI_STALE_SECONDS (15 * 60)
int cli_sweep_stale_temps(const char *dir);

/* One result to write: its path and the temporary it is staged in. */
typedef struct cli_staged {
  char *path;   /* DIR/NAME.tns */
  char *tmp;    /* DIR/NAME.tns.tmpXXXXXX, or NULL */
  char *bak;    /* a hard link to the previous result (rollback), or NULL */
  int existed;  /* a file was at path before */
} cli_staged;

/* Write output k of gp's last run to a new temporary next to s->path
 * (s->path set by the caller; large outputs formatted on gp's threads);
 * 0, or an exit status after the message. */
int cli_stage(cli_staged *s, const galley_program *gp, int k);
/* Rename every staged temporary onto its path, or none: a failed rename
 * puts the results renamed before it back (their previous files, or
 * nothing).  Signals wait until it is done.  0, or an exit status after
 * the message. */
int cli_commit(cli_staged *s, int n);
/* Remove what is left of the staging (temporaries, backups); free it. */
void cli_discard(cli_staged *s, int n);

#endif
