/*
 * mpitest.h - the harness shared by the MPI tests of tests/mpi (header-only, like tap.h).
 *
 *   mt_init()          MPI_Init, errors returned (not fatal) on the world communicator, rank 0
 *                      prints TAP and the others are quiet, crash and hang reports per case
 *   mt_device_open()   opens the device backend that coll/gpu was told to use
 *                      (OMPI_MCA_coll_gpu_device, exported by tests/run-mpi.sh from
 *                      COLL_GPU_TEST_DEVICE); collective, so every rank agrees on the outcome;
 *                      prints each rank's backend and device; where the device is required
 *                      (COLL_GPU_TEST_REQUIRE_DEVICE, set by gpu/gputest.sh on a machine with a
 *                      GPU) a failure to open it ends the program with an error, not a skip
 *   mt_agree()         every rank's local set-up verdict, before a collective is entered
 *   mt_skip_all()      the skip of tap.h for an MPI program: agreed, then MPI_Finalize
 *   mt_mem_*()         host or device buffers behind one interface
 *   mt_check()         one TAP verdict per case: the ranks' verdicts reduced over
 *                      MPI_COMM_WORLD, and every failing rank's diagnostic printed by rank 0
 *   mt_finish()        MPI_Finalize and the TAP plan; the exit code for main()
 *
 * Every check is collective over MPI_COMM_WORLD: all ranks must call mt_check() for every case,
 * also when the case itself ran on a sub-communicator.
 */
#ifndef COLL_GPU_MPITEST_H
#define COLL_GPU_MPITEST_H

#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev.h"
#include "tap.h"

#define MT_DIAG_LEN 512

typedef enum {
    MT_MEM_NONE = 0, /* no buffer: NULL is passed (non-root receive buffers and the like) */
    MT_MEM_HOST = 1,
    MT_MEM_DEVICE = 2
} mt_mem_t;

static int mt_rank = 0;
static int mt_size = 1;
static int mt_device_is_open = 0;
static unsigned mt_case_timeout = 120;
/* The case now running, for the crash and hang reports (written before the case starts). */
static char mt_case_name[512] = "(setup)";
static char mt_rank_prefix[64] = "coll/gpu test rank ?: ";

static inline void mt_write_str(const char *s)
{
    ssize_t rc = write(2, s, strlen(s));
    (void) rc;
}

/* Name the case that crashed or hung; then die of the same signal so that mpirun reports it. */
static inline void mt_fatal_signal(int sig)
{
    if (!tap_quiet_) {
        /* rank 0 tells the TAP driver too, so that the summary names the case */
        ssize_t rc = write(1, "Bail out! ", 10);
        (void) rc;
        rc = write(1, mt_rank_prefix, strlen(mt_rank_prefix));
        const char *what = SIGTERM == sig   ? "terminated (time limit, or another rank failed)"
                           : SIGALRM == sig ? "timed out (a hang? COLL_GPU_TEST_CASE_TIMEOUT)"
                                            : strsignal(sig);
        rc = write(1, what, strlen(what));
        rc = write(1, " in case: ", 10);
        rc = write(1, mt_case_name, strlen(mt_case_name));
        rc = write(1, "\n", 1);
    }
    mt_write_str(mt_rank_prefix);
    mt_write_str(SIGALRM == sig   ? "timed out (COLL_GPU_TEST_CASE_TIMEOUT)"
                 : SIGTERM == sig ? "terminated"
                                  : strsignal(sig));
    mt_write_str(" in case: ");
    mt_write_str(mt_case_name);
    mt_write_str("\n");
    signal(sig, SIG_DFL); /* (SA_RESETHAND did it already) */
    raise(sig);
}

static inline void mt_set_case(const char *name)
{
    snprintf(mt_case_name, sizeof(mt_case_name), "%s", name);
    alarm(mt_case_timeout);
}

/* mt_init's part after MPI is initialized. */
static inline void mt_init_after_mpi(void)
{
    const char *t = getenv("COLL_GPU_TEST_CASE_TIMEOUT");
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    tap_set_quiet(0 != mt_rank);
    if (NULL != t && atoi(t) > 0) {
        mt_case_timeout = (unsigned) atoi(t);
    }
    snprintf(mt_rank_prefix, sizeof(mt_rank_prefix), "coll/gpu test rank %d: ", mt_rank);
    {
        /* an alternate stack, so that a stack overflow (runaway recursion) is reported too */
        static char altstack[64 * 1024];
        stack_t ss;
        struct sigaction sa;
        int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM, SIGTERM};
        ss.ss_sp = altstack;
        ss.ss_size = sizeof(altstack);
        ss.ss_flags = 0;
        sigaltstack(&ss, NULL);
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = mt_fatal_signal;
        sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); ++i) {
            if (SIGTERM != sigs[i] || 0 == mt_rank) {
                sigaction(sigs[i], &sa, NULL);
            }
        }
    }
}

static inline void mt_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    mt_init_after_mpi();
}

/* The backend name the component was given ("emulated" when nothing is set). */
static inline const char *mt_device_name(void)
{
    const char *name = getenv("OMPI_MCA_coll_gpu_device");
    if (NULL == name || '\0' == name[0]) {
        name = getenv("COLL_GPU_TEST_DEVICE");
    }
    if (NULL == name || '\0' == name[0]) {
        name = "emulated";
    }
    return name;
}

/* Whether the run must use a device (gpu/gputest.sh sets COLL_GPU_TEST_REQUIRE_DEVICE=1 where
 * nvidia-smi lists a GPU). */
static inline int mt_device_required(void)
{
    const char *r = getenv("COLL_GPU_TEST_REQUIRE_DEVICE");
    return NULL != r && '\0' != r[0] && 0 != strcmp(r, "0");
}

/* The record of what each rank ran on: rank 0 prints one TAP comment per rank with the backend
 * and the device as the device layer reports them (ordinal, UUID, PCI bus id).  Collective. */
static inline void mt_device_report(void)
{
    char mine[160], *all = NULL;
    int ordinal = -1, count = 0;
    dev_uuid_t u;
    char pci[32] = "?";

    memset(&u, 0, sizeof(u));
    if (DEV_OK != dev_current_device(&ordinal) || DEV_OK != dev_device_count(&count)
        || DEV_OK != dev_device_uuid(ordinal, &u)) {
        snprintf(mine, sizeof(mine), "pid %d, backend %s, no device: %s", (int) getpid(),
                 dev_backend_name(dev_backend()), dev_error_string());
    } else {
        const uint8_t *b = u.bytes;
        (void) dev_device_pci_bus_id(ordinal, pci, sizeof(pci));
        snprintf(mine, sizeof(mine),
                 "pid %d, backend %s, device %d of %d, GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
                 "%02x%02x-%02x%02x%02x%02x%02x%02x, pci %s",
                 (int) getpid(), dev_backend_name(dev_backend()), ordinal, count, b[0], b[1], b[2],
                 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15],
                 pci);
    }
    if (0 == mt_rank) {
        all = calloc((size_t) mt_size, sizeof(mine));
    }
    MPI_Gather(mine, sizeof(mine), MPI_CHAR, all, sizeof(mine), MPI_CHAR, 0, MPI_COMM_WORLD);
    for (int r = 0; NULL != all && r < mt_size; ++r) {
        tap_diag("device: rank %d: %.*s", r, (int) sizeof(mine), all + (size_t) r * sizeof(mine));
    }
    free(all);
}

/*
 * Open the device backend on every rank (after MPI_Init, so that the component, which shares
 * libcoll_gpu_dev with this process, has opened it first).  "auto" means cuda here.  With cuda,
 * each rank takes GPU (local rank % GPUs).  Returns 1 when every rank has a device, else 0 with
 * the first reason in why; but where the device is required (the emulated backend, which
 * needs nothing; cuda with COLL_GPU_TEST_REQUIRE_DEVICE; an unknown name) a failure ends the
 * program with "Bail out!" and exit 99 on every rank, so that it cannot pass as a skip.
 */
static inline int mt_device_open(char *why, size_t len)
{
    const char *name = mt_device_name();
    dev_backend_t backend = dev_backend_from_name(name);
    int ok = 1, all_ok = 0, rc;

    why[0] = '\0';
    if (0 == strcmp(name, "auto")) {
        backend = DEV_BACKEND_CUDA;
    }
    if (DEV_BACKEND_NONE == backend) {
        snprintf(why, len, "device backend '%s' is neither cuda nor emulated", name);
        ok = 0;
    } else if (DEV_OK != (rc = dev_open(backend))) {
        snprintf(why, len, "dev_open(%s) failed (%d): %s", name, rc, dev_error_string());
        ok = 0;
    } else {
        mt_device_is_open = 1;
        if (DEV_BACKEND_CUDA == backend) {
            MPI_Comm node;
            int local = 0, count = 0;
            MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
            MPI_Comm_rank(node, &local);
            MPI_Comm_free(&node);
            if (DEV_OK != dev_device_count(&count) || count < 1) {
                snprintf(why, len, "no cuda device: %s", dev_error_string());
                ok = 0;
            } else if (DEV_OK != dev_set_device(local % count)) {
                snprintf(why, len, "dev_set_device(%d): %s", local % count, dev_error_string());
                ok = 0;
            }
        }
    }
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok && ok) {
        snprintf(why, len, "another rank could not open device backend '%s'", name);
    }
    if (!all_ok
        && (DEV_BACKEND_EMULATED == backend || DEV_BACKEND_NONE == backend
            || mt_device_required())) {
        /* the emulated backend runs on every machine, and on a GPU machine cuda must run: a
         * build without the backend, or a backend that does not open, must not pass as a skip */
        if (0 == mt_rank) {
            printf("Bail out! device backend '%s' is required here (%s) but cannot be used: %s\n",
                   name,
                   DEV_BACKEND_EMULATED == backend ? "it runs on every machine"
                   : DEV_BACKEND_NONE == backend   ? "a misspelt backend is an error"
                                                   : "COLL_GPU_TEST_REQUIRE_DEVICE",
                   why);
            fflush(stdout);
        }
        MPI_Finalize();
        exit(TAP_HARD_ERROR_EXIT);
    }
    if (all_ok) {
        mt_device_report();
    }
    return all_ok;
}

/*
 * Every rank's local verdict (set-up of buffers, a device call) reduced over comm (mt_agree:
 * MPI_COMM_WORLD): 1 when it is 1 on every rank.  Called before a collective whose set-up may
 * fail on one rank, so that no rank leaves the case while its peers enter the collective and
 * wait for it.
 */
static inline int mt_agree_on(MPI_Comm comm, int ok)
{
    int all_ok = 0;
    ok = ok ? 1 : 0;
    if (MPI_SUCCESS != MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm)) {
        all_ok = 0;
    }
    return all_ok;
}

static inline int mt_agree(int ok)
{
    return mt_agree_on(MPI_COMM_WORLD, ok);
}

/* tap.h's skip for an MPI program: the skip plan (rank 0), MPI_Finalize, exit 0 on every rank.
 * Collective: every rank calls it, after the ranks agreed to skip (mt_agree, or a verdict that
 * is the same everywhere, as mt_device_open's). */
static inline void mt_skip_all(const char *why)
{
    if (0 == mt_rank) {
        printf("1..0 # SKIP %s\n", (NULL != why && '\0' != why[0]) ? why : "(no reason given)");
        fflush(stdout);
    }
    MPI_Finalize();
    exit(TAP_SKIP_EXIT);
}

/* mt_init with MPI_Init_thread(MPI_THREAD_MULTIPLE), for the tests whose threads make MPI
 * calls; skips where MPI does not provide it. */
static inline void mt_init_threads(int *argc, char ***argv)
{
    int provided = 0;

    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    mt_init_after_mpi();
    if (MPI_THREAD_MULTIPLE != provided) {
        mt_skip_all("MPI_THREAD_MULTIPLE not provided");
    }
}

/* ---- memory ------------------------------------------------------------------------------ */

static inline const char *mt_mem_name(mt_mem_t kind)
{
    return MT_MEM_DEVICE == kind ? "dev" : MT_MEM_HOST == kind ? "host" : "null";
}

/* Allocate bytes of host or device memory (at least one byte); NULL on failure. */
static inline void *mt_mem_alloc(mt_mem_t kind, size_t bytes)
{
    void *p = NULL;
    if (0 == bytes) {
        bytes = 1;
    }
    if (MT_MEM_DEVICE == kind) {
        if (DEV_OK != dev_mem_alloc(&p, bytes)) {
            return NULL;
        }
    } else if (MT_MEM_HOST == kind) {
        if (0 != posix_memalign(&p, 64, bytes)) {
            return NULL;
        }
    }
    return p;
}

static inline void mt_mem_free(mt_mem_t kind, void *p)
{
    if (NULL == p) {
        return;
    }
    if (MT_MEM_DEVICE == kind) {
        dev_mem_free(p);
    } else {
        free(p);
    }
}

/* Copy host bytes into a buffer of either kind; 0 on success. */
static inline int mt_mem_put(mt_mem_t kind, void *dst, const void *src, size_t bytes)
{
    if (0 == bytes) {
        return 0;
    }
    if (MT_MEM_DEVICE == kind) {
        return DEV_OK == dev_memcpy(dst, src, bytes) ? 0 : -1;
    }
    memcpy(dst, src, bytes);
    return 0;
}

/* Copy a buffer of either kind out to host bytes; 0 on success. */
static inline int mt_mem_get(mt_mem_t kind, void *dst, const void *src, size_t bytes)
{
    if (0 == bytes) {
        return 0;
    }
    if (MT_MEM_DEVICE == kind) {
        return DEV_OK == dev_memcpy(dst, src, bytes) ? 0 : -1;
    }
    memcpy(dst, src, bytes);
    return 0;
}

/* Every kind of memory a CUDA program allocates, for tests that mix them (pool: stream-ordered
 * device memory, which the legacy IPC cannot export). */
typedef enum {
    MT_KIND_DEVICE,
    MT_KIND_HOST,
    MT_KIND_PINNED,
    MT_KIND_MANAGED,
    MT_KIND_POOL,
    MT_KIND_COUNT
} mt_kind_t;

static const char *const mt_kind_names[MT_KIND_COUNT] = {"device", "host", "pinned", "managed",
                                                         "pool"};

/* At least one byte of that kind; NULL on failure.  dev_memcpy copies between any two kinds. */
static inline void *mt_kind_alloc(mt_kind_t kind, size_t bytes)
{
    void *p = NULL;
    int rc = DEV_OK;

    bytes = (0 == bytes) ? 1 : bytes;
    switch (kind) {
    case MT_KIND_DEVICE:
        rc = dev_mem_alloc(&p, bytes);
        break;
    case MT_KIND_HOST:
        p = malloc(bytes);
        break;
    case MT_KIND_PINNED:
        rc = dev_host_alloc(&p, bytes);
        break;
    case MT_KIND_MANAGED:
        rc = dev_mem_alloc_managed(&p, bytes);
        break;
    default:
        rc = dev_mem_alloc_pool(&p, bytes);
        break;
    }
    return DEV_OK == rc ? p : NULL;
}

static inline void mt_kind_free(mt_kind_t kind, void *p)
{
    if (NULL == p) {
        return;
    } else if (MT_KIND_HOST == kind) {
        free(p);
    } else if (MT_KIND_PINNED == kind) {
        (void) dev_host_free(p);
    } else {
        (void) dev_mem_free(p);
    }
}

/* ---- verdicts ---------------------------------------------------------------------------- */

/* Append to a diagnostic string, keeping the first words when it is full. */
static inline void mt_diag_add(char *diag, const char *fmt, ...)
{
    size_t used = strlen(diag);
    va_list ap;
    if (used + 1 >= MT_DIAG_LEN) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(diag + used, MT_DIAG_LEN - used, fmt, ap);
    va_end(ap);
}

typedef struct {
    void *(*fn)(void *);
    void *item;
    int device, on_device; /* on_device: -1 no device in the process, 0 not set, 1 set */
} mt_thread_t;

static inline void *mt_thread_start(void *arg)
{
    mt_thread_t *t = arg;
    if (0 <= t->on_device) {
        t->on_device = DEV_OK == dev_set_device(t->device);
    }
    return t->fn(t->item); /* on any device: the thread takes part in every call all the same */
}

/* Run fn on n threads at once, thread t on the item at items + t * size, and wait for all.
 * Each thread first takes the caller's device (CUDA's current device is per thread, and a new
 * thread starts on device 0).  Returns 1, or 0 with why in diag where a thread could not. */
static inline int mt_threads_run(int n, void *(*fn)(void *), void *items, size_t size,
                                 char *diag)
{
    pthread_t *th = calloc((size_t) n, sizeof(*th));
    mt_thread_t *ts = calloc((size_t) n, sizeof(*ts));
    int device = 0, has = DEV_OK == dev_current_device(&device), all = 1;

    for (int t = 0; t < n; ++t) {
        ts[t] = (mt_thread_t){fn, (char *) items + (size_t) t * size, device, has ? 0 : -1};
        pthread_create(&th[t], NULL, mt_thread_start, &ts[t]);
    }
    for (int t = 0; t < n; ++t) {
        pthread_join(th[t], NULL);
        if (0 == ts[t].on_device) {
            mt_diag_add(diag, "thread %d of %d could not take device %d; ", t + 1, n, device);
            all = 0;
        }
    }
    free(ts);
    free(th);
    return all;
}

/*
 * One TAP line for a check that every rank made: passes only when it passed on every rank.
 * diag (MT_DIAG_LEN bytes, may be NULL) says why this rank failed; rank 0 prints each failing
 * rank's reason.  Returns the global verdict.  Collective over MPI_COMM_WORLD.
 */
static inline int mt_check(int ok, const char *diag, const char *fmt, ...)
{
    int all_ok = 0;
    char line[1024];
    va_list ap;

    ok = ok ? 1 : 0;
    if (MPI_SUCCESS != MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD)) {
        all_ok = 0;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    tap_ok(all_ok, "%s", line);
    if (!all_ok) {
        char mine[MT_DIAG_LEN];
        char *all = NULL;
        memset(mine, 0, sizeof(mine));
        if (!ok) {
            snprintf(mine, sizeof(mine), "%s", (NULL != diag && diag[0]) ? diag : "failed");
        }
        if (0 == mt_rank) {
            all = calloc((size_t) mt_size, MT_DIAG_LEN);
        }
        MPI_Gather(mine, MT_DIAG_LEN, MPI_CHAR, all, MT_DIAG_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (NULL != all) {
            for (int r = 0; r < mt_size; ++r) {
                const char *d = all + (size_t) r * MT_DIAG_LEN;
                if (d[0]) {
                    tap_diag("  rank %d: %.*s", r, MT_DIAG_LEN, d);
                }
            }
            free(all);
        }
    }
    alarm(0);
    return all_ok;
}

/* Finalize MPI and return main()'s exit code (the same on every rank). */
static inline int mt_finish(void)
{
    int rc;
    snprintf(mt_case_name, sizeof(mt_case_name), "%s", "(MPI_Finalize)");
    alarm(mt_case_timeout);
    rc = tap_done();
    MPI_Finalize();
    alarm(0);
    if (mt_device_is_open) {
        dev_close();
    }
    return rc;
}

/* Rank r's input element i in round k: a small integer, never zero, exact in float, so that
 * sums over many ranks are exact too (tests compare against references they compute). */
static inline int32_t mt_input(int r, size_t i, unsigned k)
{
    uint32_t x = (uint32_t) r * 2654435761u ^ (uint32_t) i * 40503u ^ k * 2246822519u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (int32_t) (x % 1000u) + 1;
}

/* MPI's text for an error code. */
static inline const char *mt_mpi_error(int rc)
{
    static char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_SUCCESS != MPI_Error_string(rc, text, &len)) {
        snprintf(text, sizeof(text), "MPI error %d", rc);
    }
    return text;
}

#endif /* COLL_GPU_MPITEST_H */
