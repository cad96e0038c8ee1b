/*
 * tap.h - a small TAP producer shared by the tests (header-only).
 *
 * tap_plan(n) first (or tap_done() at the end for a plan printed last), then one tap_ok() per
 * check.  Exit codes: 0 all passed, 1 a failure, 99 hard error.
 * MPI tests print from rank 0 only, after reducing each check's verdict over the ranks.
 *
 * The skip contract, the only one of this test suite (C programs, MPI programs and shell
 * scripts alike):
 *   - a whole program skips by printing the plan "1..0 # SKIP <reason>" as its only plan and
 *     exiting 0 (tap_skip_all; mpitest.h's mt_skip_all for MPI programs, which first agrees on
 *     the skip over every rank and calls MPI_Finalize);
 *   - one check skips as "ok N - <what> # SKIP <reason>" (tap_skip; t_skip in mpitest.sh);
 *   - the reason is never empty: tests/summary.sh lists every skip with its reason.
 * There is no skip exit status: automake's TAP driver reads skips from the TAP stream only and
 * calls every non-zero exit an error (77 included), so a non-zero exit is always a failure.
 * A skip is for a machine that lacks something (a GPU, memory), never for a setup that failed
 * where it should have worked: that is a failure (see gpu/gputest.sh).
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

/* Skip one check: it counts as a TAP result ("ok N - what # SKIP why"), neither passed nor
 * failed. */
static inline void tap_skip(const char *why, const char *fmt, ...)
{
    va_list ap;
    ++tap_count_;
    if (!tap_quiet_) {
        printf("ok %d - ", tap_count_);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf(" # SKIP %s\n", (NULL != why && '\0' != why[0]) ? why : "(no reason given)");
        fflush(stdout);
    }
}

/* Skip the whole program (no plan printed yet, no check made): the skip plan, exit 0.  An MPI
 * program must not call this between MPI_Init and MPI_Finalize (mpirun calls an exit without
 * MPI_Finalize an error): use mt_skip_all (mpi/mpitest.h). */
static inline void tap_skip_all(const char *why)
{
    if (!tap_quiet_) {
        printf("1..0 # SKIP %s\n", (NULL != why && '\0' != why[0]) ? why : "(no reason given)");
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
