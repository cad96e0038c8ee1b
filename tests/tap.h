/*
 * tap.h - a small TAP producer shared by the tests (header-only).
 *
 * tap_plan(n) first (or tap_done() at the end for a plan printed last), then one tap_ok() per
 * check.  Exit codes: 0 all passed, 1 a failure, 99 hard error.  A skipped program prints the
 * TAP plan "1..0 # SKIP why" and exits 0: under the TAP driver a non-zero status (77 included)
 * is an error, and the plan is what says "skipped".
 * MPI tests print from rank 0 only, after reducing each check's verdict over the ranks.
 */
#ifndef COLL_GPU_TAP_H
#define COLL_GPU_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define TAP_SKIP_EXIT 0
#define TAP_HARD_ERROR_EXIT 99

static int tap_count_ = 0;
static int tap_failed_ = 0;
static int tap_quiet_ = 0; /* set on MPI ranks other than 0 */

static inline void tap_set_quiet(int quiet)
{
    tap_quiet_ = quiet;
}

static inline void tap_plan(int n)
{
    if (!tap_quiet_) {
        printf("1..%d\n", n);
        fflush(stdout);
    }
}

/* Record one check; returns its verdict so callers can chain diagnostics. */
static inline int tap_ok(int ok, const char *fmt, ...)
{
    va_list ap;
    ++tap_count_;
    if (!ok) {
        ++tap_failed_;
    }
    if (!tap_quiet_) {
        printf("%s %d - ", ok ? "ok" : "not ok", tap_count_);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
    }
    return ok;
}

static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    if (tap_quiet_) {
        return;
    }
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* Skip the whole program (no plan printed yet). */
static inline void tap_skip_all(const char *why)
{
    if (!tap_quiet_) {
        printf("1..0 # SKIP %s\n", why);
        fflush(stdout);
    }
    exit(TAP_SKIP_EXIT);
}

/* Print the plan at the end when it was not known up front; return the exit code. */
static inline int tap_done(void)
{
    if (!tap_quiet_) {
        printf("1..%d\n", tap_count_);
        fflush(stdout);
    }
    return tap_failed_ ? 1 : 0;
}

static inline int tap_failures(void)
{
    return tap_failed_;
}

#endif /* COLL_GPU_TAP_H */
