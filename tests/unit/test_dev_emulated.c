/*
 * test_dev_emulated.c - the device layer on its emulated backend: lifecycle, devices,
 * allocation and classification, the PROT_NONE guarantee, copies in every direction, ranges
 * and buffer ids, streams and events, IPC between processes, threads, and cleanup.
 */
#define _GNU_SOURCE
#include "dev.h"
#include "tap.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define POISON_HOST 0xa5
#define POISON_DEV 0x5a

/* Number of /dev/shm segments this process created and has not removed. */
static int shm_segments_of_this_process(void)
{
    char prefix[64];
    struct dirent *e;
    int n = 0;
    DIR *d = opendir("/dev/shm");

    if (NULL == d) {
        return -1;
    }
    snprintf(prefix, sizeof(prefix), "collgpu-%d-", (int) getpid());
    while (NULL != (e = readdir(d))) {
        if (0 == strncmp(e->d_name, prefix, strlen(prefix))) {
            ++n;
        }
    }
    closedir(d);
    return n;
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i) {
        p[i] = (unsigned char) (1 + (i * 131 + seed * 17) % 251); /* never zero */
    }
}

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; ++i) {
        if (v != p[i]) {
            return false;
        }
    }
    return true;
}

/* Run fn(arg) in a child; return the signal that killed it, or 0 if it exited. */
static int child_signal(void (*fn)(void *), void *arg)
{
    int status;
    pid_t pid = fork();
    if (0 == pid) {
        fn(arg);
        _exit(0);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return -1;
    }
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static void read_byte(void *p)
{
    volatile unsigned char c = *(volatile unsigned char *) p;
    (void) c;
}

static void write_byte(void *p)
{
    *(volatile unsigned char *) p = 1;
}

/* ---- lifecycle ----------------------------------------------------------------------------*/

static void test_lifecycle(void)
{
    int rc;
    void *p = NULL;

    tap_ok(DEV_BACKEND_NONE == dev_backend(), "no backend is open at start");
    rc = dev_mem_alloc(&p, 64);
    tap_ok(DEV_ERR_ARG == rc && '\0' != dev_error_string()[0],
           "dev_mem_alloc without a backend fails with DEV_ERR_ARG and a message (%s)",
           dev_error_string());
    tap_ok(DEV_MEM_HOST == dev_mem_classify(&rc), "classify without a backend answers host");
    tap_ok(DEV_BACKEND_EMULATED == dev_backend_from_name("Emulated")
               && DEV_BACKEND_CUDA == dev_backend_from_name("CUDA")
               && DEV_BACKEND_NONE == dev_backend_from_name("gpu")
               && DEV_BACKEND_NONE == dev_backend_from_name(NULL),
           "dev_backend_from_name parses case-insensitively");

    setenv("COLL_GPU_EMULATED_DEVICES", "zero", 1);
    rc = dev_open(DEV_BACKEND_EMULATED);
    tap_ok(DEV_ERR_ARG == rc && DEV_BACKEND_NONE == dev_backend(),
           "a malformed COLL_GPU_EMULATED_DEVICES fails dev_open (%s)", dev_error_string());
    setenv("COLL_GPU_EMULATED_DEVICES", "3", 1);

    tap_ok(DEV_OK == dev_open(DEV_BACKEND_EMULATED), "dev_open(emulated)");
    tap_ok(DEV_BACKEND_EMULATED == dev_backend(), "dev_backend() is emulated");
    tap_ok(DEV_OK == dev_open(DEV_BACKEND_EMULATED), "a second dev_open(emulated) counts");
    rc = dev_open(DEV_BACKEND_CUDA);
    tap_ok(DEV_ERR_ARG == rc || DEV_ERR_UNSUPPORTED == rc,
           "dev_open(cuda) while emulated is open fails (%s)", dev_status_name(rc));
    dev_close();
    tap_ok(DEV_BACKEND_EMULATED == dev_backend(), "still open after one of two dev_close");
}

/* ---- devices ------------------------------------------------------------------------------*/

static void test_devices(void)
{
    int count = 0, cur = -1;
    dev_uuid_t u0, u1, u0again;
    char pci[32] = "";
    bool can = false;

    dev_device_count(&count);
    tap_ok(3 == count,
           "COLL_GPU_EMULATED_DEVICES=3 gives 3 devices (%d)", count);
    tap_ok(DEV_OK == dev_current_device(&cur) && 0 == cur, "current device starts at 0");
    tap_ok(DEV_OK == dev_set_device(2) && DEV_OK == dev_current_device(&cur) && 2 == cur,
           "dev_set_device(2) sticks");
    tap_ok(DEV_ERR_ARG == dev_set_device(3), "dev_set_device(3) of 3 fails");
    dev_set_device(0);
    tap_ok(DEV_OK == dev_device_uuid(0, &u0) && DEV_OK == dev_device_uuid(1, &u1)
               && DEV_OK == dev_device_uuid(0, &u0again),
           "dev_device_uuid answers");
    tap_ok(0 != memcmp(&u0, &u1, sizeof(u0)) && 0 == memcmp(&u0, &u0again, sizeof(u0)),
           "uuids differ between devices and repeat for one device");
    tap_ok(DEV_OK == dev_device_pci_bus_id(1, pci, sizeof(pci))
               && 0 == strcmp(pci, "0000:01:00.0"),
           "pci bus id of device 1 is 0000:01:00.0 (%s)", pci);
    tap_ok(DEV_ERR_ARG == dev_device_pci_bus_id(0, pci, 4), "pci bus id into a short buffer fails");
    tap_ok(DEV_OK == dev_device_can_access_peer(0, 2, &can) && can, "peers can access each other");
}

/* ---- memory -------------------------------------------------------------------------------*/

/* Which memory the legacy IPC can export: plain device allocations only.  Pool memory is
 * device memory in every other respect (classification, copies, PROT_NONE). */
static void test_ipc_capable(void)
{
    enum { N = 3000 };
    unsigned char in[N], out[N];
    void *d = NULL, *pool = NULL, *m = NULL, *h = NULL, *r = NULL;
    char *heap = malloc(N);
    dev_ipc_handle_t handle;
    size_t size = 0;
    uint64_t id = 0;

    dev_open(DEV_BACKEND_EMULATED);
    tap_ok(DEV_OK == dev_mem_alloc(&d, N) && DEV_OK == dev_mem_alloc_pool(&pool, N)
               && DEV_OK == dev_mem_alloc_managed(&m, N) && DEV_OK == dev_host_alloc(&h, N),
           "device, pool, managed and pinned allocations");
    tap_ok(dev_mem_ipc_capable(d) && dev_mem_ipc_capable((char *) d + N - 1),
           "a device allocation is IPC-capable (base and last byte)");
    tap_ok(DEV_MEM_DEVICE == dev_mem_classify(pool) && DEV_MEM_DEVICE == dev_mem_classify(
               (char *) pool + N - 1), "pool memory is classified device");
    tap_ok(!dev_mem_ipc_capable(pool) && !dev_mem_ipc_capable((char *) pool + 17),
           "pool memory is not IPC-capable");
    tap_ok(!dev_mem_ipc_capable(m) && !dev_mem_ipc_capable(h) && !dev_mem_ipc_capable(heap)
               && !dev_mem_ipc_capable(NULL),
           "managed, pinned, heap memory and NULL are not IPC-capable");
    tap_ok(DEV_ERR_UNSUPPORTED == dev_ipc_export(pool, &handle),
           "dev_ipc_export of pool memory is refused with DEV_ERR_UNSUPPORTED");
    tap_ok(DEV_ERR_UNSUPPORTED == dev_ipc_export(m, &handle),
           "dev_ipc_export of managed memory is refused with DEV_ERR_UNSUPPORTED");
    tap_ok(DEV_OK == dev_ipc_export(d, &handle), "dev_ipc_export of the device allocation works");
    tap_ok(DEV_OK == dev_mem_range((char *) pool + 5, &r, &size, &id) && r == pool && N == size,
           "dev_mem_range of pool memory");
    fill_pattern(in, N, 9);
    memset(out, POISON_HOST, N);
    tap_ok(DEV_OK == dev_memcpy(pool, in, N) && DEV_OK == dev_memcpy(out, pool, N)
               && 0 == memcmp(in, out, N),
           "copies into and out of pool memory");
    tap_ok(DEV_OK == dev_mem_free(pool) && !dev_mem_ipc_capable(pool)
               && DEV_MEM_DEVICE != dev_mem_classify(pool),
           "dev_mem_free releases pool memory");
    dev_mem_free(d);
    dev_mem_free(m);
    dev_host_free(h);
    dev_close();
    free(heap);
}

static void test_classify(void)
{
    enum { N = 1000 };
    void *d = NULL, *m = NULL, *h = NULL, *r;
    char *heap = malloc(N);
    int stack = 0;
    size_t size = 0;
    uint64_t id = 0, id2 = 0;

    tap_ok(DEV_OK == dev_mem_alloc(&d, N) && NULL != d, "dev_mem_alloc(%d)", N);
    tap_ok(DEV_OK == dev_mem_alloc_managed(&m, N) && NULL != m, "dev_mem_alloc_managed(%d)", N);
    tap_ok(DEV_OK == dev_host_alloc(&h, N) && NULL != h, "dev_host_alloc(%d)", N);

    tap_ok(DEV_MEM_DEVICE == dev_mem_classify(d), "device base is device");
    tap_ok(DEV_MEM_DEVICE == dev_mem_classify((char *) d + 1)
               && DEV_MEM_DEVICE == dev_mem_classify((char *) d + N - 1),
           "interior and last byte of a device allocation are device");
    tap_ok(DEV_MEM_HOST == dev_mem_classify((char *) d + N), "one past the end is not device");
    tap_ok(DEV_MEM_MANAGED == dev_mem_classify(m)
               && DEV_MEM_MANAGED == dev_mem_classify((char *) m + N / 2),
           "managed memory is managed");
    tap_ok(DEV_MEM_HOST == dev_mem_classify(h), "pinned host memory is host");
    tap_ok(DEV_MEM_HOST == dev_mem_classify(heap) && DEV_MEM_HOST == dev_mem_classify(&stack)
               && DEV_MEM_HOST == dev_mem_classify(NULL),
           "heap, stack and NULL are host");

    tap_ok(DEV_OK == dev_mem_range((char *) d + 123, &r, &size, &id) && r == d && N == size
               && 0 != id,
           "dev_mem_range of an interior pointer gives base, size and an id");
    tap_ok(DEV_OK == dev_mem_range(m, &r, &size, &id2) && r == m && id2 != id,
           "managed memory has a range and its own id");
    tap_ok(DEV_ERR_ARG == dev_mem_range(heap, &r, &size, &id), "dev_mem_range of malloc fails");

    tap_ok(DEV_ERR_ARG == dev_mem_free((char *) d + 8), "dev_mem_free of an interior pointer fails");
    tap_ok(DEV_ERR_ARG == dev_mem_free(heap), "dev_mem_free of malloc memory fails");
    tap_ok(DEV_ERR_ARG == dev_mem_free(h), "dev_mem_free of pinned memory fails");
    tap_ok(DEV_ERR_ARG == dev_host_free(d), "dev_host_free of device memory fails");
    tap_ok(DEV_OK == dev_mem_free(d), "dev_mem_free(device)");
    tap_ok(DEV_MEM_HOST == dev_mem_classify(d) && DEV_MEM_HOST == dev_mem_classify((char *) d + 5),
           "a freed device allocation is no longer device");
    tap_ok(DEV_ERR_ARG == dev_mem_range(d, &r, &size, &id), "dev_mem_range of freed memory fails");
    tap_ok(DEV_ERR_ARG == dev_mem_free(d), "a second dev_mem_free fails");
    tap_ok(DEV_OK == dev_mem_free(m) && DEV_OK == dev_host_free(h), "free managed and pinned");
    tap_ok(DEV_OK == dev_mem_alloc(&d, 0) && NULL == d && DEV_OK == dev_mem_free(NULL),
           "zero-byte allocation gives NULL; freeing NULL is fine");
    free(heap);
}

/* dev_mem_device: the device current at allocation time; host memory has none. */
static void test_mem_device(void)
{
    void *d0 = NULL, *d2 = NULL, *m = NULL, *h = NULL;
    int heap = 0, ord = -1, ord2 = -1;

    dev_set_device(0);
    dev_mem_alloc(&d0, 100);
    dev_set_device(2);
    dev_mem_alloc(&d2, 100);
    dev_mem_alloc_managed(&m, 100);
    dev_set_device(0);
    dev_host_alloc(&h, 100);
    tap_ok(DEV_OK == dev_mem_device((char *) d0 + 99, &ord) && 0 == ord,
           "dev_mem_device of memory allocated on device 0 is 0 (%d)", ord);
    tap_ok(DEV_OK == dev_mem_device(d2, &ord) && 2 == ord
               && DEV_OK == dev_mem_device(m, &ord2) && 2 == ord2,
           "device and managed memory allocated on device 2 say 2 (%d, %d)", ord, ord2);
    tap_ok(DEV_ERR_ARG == dev_mem_device(h, &ord) && DEV_ERR_ARG == dev_mem_device(&heap, &ord)
               && DEV_ERR_ARG == dev_mem_device((char *) d0 + 100, &ord),
           "pinned, stack and one-past-the-end memory have no device (DEV_ERR_ARG)");
    dev_mem_free(d0);
    dev_mem_free(d2);
    dev_mem_free(m);
    dev_host_free(h);
}

/* A buffer freed and allocated again must get a new id, whether or not the address repeats. */
static void test_buffer_ids(void)
{
    enum { N = 1 << 16, TRIES = 16 };
    void *p = NULL, *q = NULL, *base;
    uint64_t id1 = 0, id2 = 0;
    size_t size;
    bool reused = false, distinct = true;

    for (int i = 0; i < TRIES; ++i) {
        if (DEV_OK != dev_mem_alloc(&p, N) || DEV_OK != dev_mem_range(p, &base, &size, &id1)
            || DEV_OK != dev_mem_free(p) || DEV_OK != dev_mem_alloc(&q, N)
            || DEV_OK != dev_mem_range(q, &base, &size, &id2) || DEV_OK != dev_mem_free(q)) {
            distinct = false;
            break;
        }
        reused = reused || (p == q);
        distinct = distinct && (id1 != id2);
    }
    tap_ok(distinct, "buffer ids differ across free and re-allocation (address reused: %s)",
           reused ? "yes" : "no");
}

static void test_fault(void)
{
    void *d = NULL, *m = NULL;
    int sig;

    dev_mem_alloc(&d, 4096);
    dev_mem_alloc_managed(&m, 4096);
    sig = child_signal(read_byte, (char *) d + 100);
    tap_ok(SIGSEGV == sig, "host read of device memory dies of SIGSEGV (signal %d)", sig);
    sig = child_signal(write_byte, d);
    tap_ok(SIGSEGV == sig, "host write of device memory dies of SIGSEGV (signal %d)", sig);
    sig = child_signal(write_byte, m);
    tap_ok(0 == sig, "host write of managed memory works (signal %d)", sig);
    dev_mem_free(d);
    dev_mem_free(m);
}

/* Copy [off, off + len) of a pattern between every pair of memory kinds, with poisoned
 * destinations; check the copied bytes and that the bytes around them are untouched. */
static void test_copies(void)
{
    enum { N = 8192, OFF = 13, LEN = 5000 };
    const char *names[] = {"host", "device", "managed", "pinned"};
    unsigned char *src_pattern = malloc(N), *check = malloc(N);
    void *buf[2][4];
    bool ok_all = true;

    fill_pattern(src_pattern, N, 3);
    for (int s = 0; s < 2; ++s) {
        buf[s][0] = malloc(N);
        dev_mem_alloc(&buf[s][1], N);
        dev_mem_alloc_managed(&buf[s][2], N);
        dev_host_alloc(&buf[s][3], N);
    }
    for (int from = 0; from < 4; ++from) {
        for (int to = 0; to < 4; ++to) {
            void *src = buf[0][from], *dst = buf[1][to];
            bool ok = true;
            int rc;
            /* source: the pattern (through dev_memcpy for device memory) */
            ok = ok && DEV_OK == dev_memcpy(src, src_pattern, N);
            /* destination: poison */
            ok = ok && DEV_OK == dev_memset(dst, 1 == to ? POISON_DEV : POISON_HOST, N);
            rc = dev_memcpy((char *) dst + OFF, (char *) src + OFF, LEN);
            ok = ok && DEV_OK == rc;
            ok = ok && DEV_OK == dev_memcpy(check, dst, N);
            unsigned char poison = 1 == to ? POISON_DEV : POISON_HOST;
            ok = ok && all_bytes(check, OFF, poison)
                 && 0 == memcmp(check + OFF, src_pattern + OFF, LEN)
                 && all_bytes(check + OFF + LEN, N - OFF - LEN, poison);
            tap_ok(ok, "dev_memcpy %s -> %s at an offset, surroundings untouched", names[from],
                   names[to]);
            ok_all = ok_all && ok;
        }
    }

    /* within one device allocation, overlapping */
    {
        void *d = buf[0][1];
        bool ok = DEV_OK == dev_memcpy(d, src_pattern, N)
                  && DEV_OK == dev_memcpy((char *) d + 100, d, 1000)
                  && DEV_OK == dev_memcpy(check, d, N);
        ok = ok && 0 == memcmp(check + 100, src_pattern, 1000)
             && 0 == memcmp(check, src_pattern, 100);
        tap_ok(ok, "overlapping copy inside one device allocation");
    }

    /* async on a stream, with an event */
    {
        dev_stream_t *st = NULL;
        dev_event_t *ev = NULL;
        bool ok = DEV_OK == dev_stream_create(&st) && DEV_OK == dev_event_create(&ev);
        ok = ok && DEV_OK == dev_memset(buf[1][1], POISON_DEV, N);
        ok = ok && DEV_OK == dev_memcpy_async(buf[1][1], src_pattern, N, st);
        ok = ok && DEV_OK == dev_event_record(ev, st) && DEV_OK == dev_event_query(ev)
             && DEV_OK == dev_event_sync(ev) && DEV_OK == dev_stream_sync(st)
             && DEV_OK == dev_stream_sync(NULL);
        ok = ok && DEV_OK == dev_memcpy_async(check, buf[1][1], N, NULL)
             && DEV_OK == dev_stream_sync(NULL) && 0 == memcmp(check, src_pattern, N);
        ok = ok && DEV_OK == dev_event_destroy(ev) && DEV_OK == dev_stream_destroy(st);
        tap_ok(ok, "memcpy_async on a stream and on the default stream, events complete");
    }

    /* out of bounds */
    {
        int rc = dev_memcpy((char *) buf[1][1] + N - 10, src_pattern, 11);
        tap_ok(DEV_ERR_ARG == rc && NULL != strstr(dev_error_string(), "past the end"),
               "a copy running past a device allocation fails (%s)", dev_error_string());
        rc = dev_memset((char *) buf[1][1] + 1, 0, N);
        tap_ok(DEV_ERR_ARG == rc, "a memset running past a device allocation fails");
    }

    for (int s = 0; s < 2; ++s) {
        free(buf[s][0]);
        dev_mem_free(buf[s][1]);
        dev_mem_free(buf[s][2]);
        dev_host_free(buf[s][3]);
    }
    free(src_pattern);
    free(check);
    (void) ok_all;
}

/* ---- IPC ----------------------------------------------------------------------------------*/

enum { IPC_N = 3 * 4096 + 100 };

/* Parent exports, child imports: the child checks what the parent wrote, writes its own
 * pattern, closes the mapping and exits 0 on success. */
static void test_ipc_parent_exports(void)
{
    void *d = NULL, *own = NULL;
    unsigned char *pat = malloc(IPC_N), *check = malloc(IPC_N);
    dev_ipc_handle_t handle;
    int status = -1, rc;
    pid_t pid;

    fill_pattern(pat, IPC_N, 5);
    dev_mem_alloc(&d, IPC_N);
    dev_memcpy(d, pat, IPC_N);
    tap_ok(DEV_OK == dev_ipc_export(d, &handle), "dev_ipc_export of a device allocation");
    tap_ok(DEV_ERR_ARG == dev_ipc_export((char *) d + 64, &handle),
           "export of an interior pointer is refused");
    rc = dev_ipc_import(&handle, &own);
    tap_ok(DEV_ERR_ARG == rc, "importing one's own export is refused, as CUDA does (%s)",
           dev_error_string());
    dev_ipc_export(d, &handle);

    pid = fork();
    if (0 == pid) {
        void *p = NULL;
        unsigned char *buf = malloc(IPC_N), *mine = malloc(IPC_N);
        int code = 0;
        if (DEV_OK != dev_ipc_import(&handle, &p) || p == d) {
            _exit(10);
        }
        if (DEV_MEM_DEVICE != dev_mem_classify((char *) p + IPC_N - 1)) {
            _exit(11);
        }
        if (DEV_OK != dev_memcpy(buf, p, IPC_N) || 0 != memcmp(buf, pat, IPC_N)) {
            _exit(12);
        }
        fill_pattern(mine, IPC_N, 9);
        if (DEV_OK != dev_memcpy(p, mine, IPC_N)) {
            _exit(13);
        }
        if (DEV_OK != dev_ipc_close(p) || DEV_MEM_HOST != dev_mem_classify(p)) {
            _exit(14);
        }
        _exit(code); /* no dev_close: the parent's segments are not ours to release */
    }
    waitpid(pid, &status, 0);
    tap_ok(WIFEXITED(status) && 0 == WEXITSTATUS(status),
           "child imports the parent's export, reads it, writes it, closes it (exit %d)",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fill_pattern(pat, IPC_N, 9);
    tap_ok(DEV_OK == dev_memcpy(check, d, IPC_N) && 0 == memcmp(check, pat, IPC_N),
           "parent sees the child's writes");
    dev_mem_free(d);
    free(pat);
    free(check);
}

/* Child allocates and exports through a pipe, parent imports: the importer side runs in the
 * process whose checks we report, and the owner frees only after the importer is done. */
static void test_ipc_child_exports(void)
{
    int to_parent[2], to_child[2], status = -1;
    dev_ipc_handle_t handle;
    unsigned char *pat = malloc(IPC_N), *check = malloc(IPC_N);
    void *p = NULL, *base = NULL;
    size_t size = 0;
    uint64_t id = 0;
    int dev = -1;
    char go = 0;
    bool got;
    pid_t pid;

    if (0 != pipe(to_parent) || 0 != pipe(to_child)) {
        tap_ok(0, "pipe");
        return;
    }
    fill_pattern(pat, IPC_N, 21);
    pid = fork();
    if (0 == pid) {
        void *d = NULL;
        unsigned char *buf = malloc(IPC_N), *want = malloc(IPC_N);
        close(to_parent[0]);
        close(to_child[1]);
        dev_set_device(1); /* the importer learns the device through the handle */
        if (DEV_OK != dev_mem_alloc(&d, IPC_N) || DEV_OK != dev_memcpy(d, pat, IPC_N)
            || DEV_OK != dev_ipc_export(d, &handle)) {
            _exit(20);
        }
        if (sizeof(handle) != write(to_parent[1], &handle, sizeof(handle))) {
            _exit(21);
        }
        if (1 != read(to_child[0], &go, 1)) {
            _exit(22);
        }
        fill_pattern(want, IPC_N, 22);
        if (DEV_OK != dev_memcpy(buf, d, IPC_N) || 0 != memcmp(buf, want, IPC_N)) {
            _exit(23);
        }
        if (DEV_OK != dev_mem_free(d) || 0 != shm_segments_of_this_process()) {
            _exit(24);
        }
        _exit(0);
    }
    close(to_parent[1]);
    close(to_child[0]);
    got = sizeof(handle) == read(to_parent[0], &handle, sizeof(handle));
    tap_ok(got && DEV_OK == dev_ipc_import(&handle, &p), "import a handle exported by a child (%s)",
           dev_error_string());
    tap_ok(DEV_MEM_DEVICE == dev_mem_classify(p) && DEV_OK == dev_mem_range((char *) p + 77, &base,
                                                                            &size, &id)
               && base == p && IPC_N == size,
           "an imported mapping is device memory with the exporter's size");
    tap_ok(DEV_OK == dev_mem_device((char *) p + 5, &dev) && 1 == dev,
           "an imported mapping is on the exporter's device (%d)", dev);
    tap_ok(DEV_OK == dev_memcpy(check, p, IPC_N) && 0 == memcmp(check, pat, IPC_N),
           "parent reads the child's data through the import");
    fill_pattern(pat, IPC_N, 22);
    tap_ok(DEV_OK == dev_memcpy(p, pat, IPC_N), "parent writes through the import");
    tap_ok(DEV_ERR_ARG == dev_mem_free(p), "dev_mem_free of an imported mapping is refused");
    tap_ok(DEV_OK == dev_ipc_close(p) && DEV_MEM_HOST == dev_mem_classify(p),
           "dev_ipc_close unmaps it");
    tap_ok(DEV_ERR_ARG == dev_ipc_close(p), "a second dev_ipc_close fails");
    (void) !write(to_child[1], "g", 1);
    waitpid(pid, &status, 0);
    tap_ok(WIFEXITED(status) && 0 == WEXITSTATUS(status),
           "child saw the parent's writes and freed its segment (exit %d)",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    close(to_parent[0]);
    close(to_child[1]);
    free(pat);
    free(check);
}

/* ---- threads ------------------------------------------------------------------------------*/

static void *thread_body(void *arg)
{
    uintptr_t fails = 0;
    unsigned char in[256], out[256];
    (void) arg;
    for (int i = 0; i < 200; ++i) {
        void *d = NULL;
        size_t n = 1 + (size_t) (i * 37) % 256;
        memset(in, i + 1, n);
        fails += DEV_OK != dev_mem_alloc(&d, n);
        fails += DEV_MEM_DEVICE != dev_mem_classify((char *) d + n - 1);
        fails += DEV_OK != dev_memcpy(d, in, n);
        fails += DEV_OK != dev_memcpy(out, d, n);
        fails += 0 != memcmp(in, out, n);
        fails += DEV_OK != dev_mem_free(d);
    }
    return (void *) fails;
}

static void test_threads(void)
{
    enum { T = 4 };
    pthread_t th[T];
    uintptr_t fails = 0;
    for (int i = 0; i < T; ++i) {
        pthread_create(&th[i], NULL, thread_body, NULL);
    }
    for (int i = 0; i < T; ++i) {
        void *r;
        pthread_join(th[i], &r);
        fails += (uintptr_t) r;
    }
    tap_ok(0 == fails, "%d threads allocate, classify, copy and free concurrently (%lu failures)",
           T, (unsigned long) fails);
}

/* ---- close --------------------------------------------------------------------------------*/

static void test_close(void)
{
    void *d = NULL;
    tap_ok(DEV_OK == dev_mem_alloc(&d, 100) && 1 == shm_segments_of_this_process(),
           "one live allocation has one shared-memory segment");
    dev_close();
    tap_ok(DEV_BACKEND_NONE == dev_backend(), "last dev_close closes the backend");
    tap_ok(0 == shm_segments_of_this_process(), "and removes every segment it created");
    tap_ok(DEV_OK == dev_open(DEV_BACKEND_EMULATED) && DEV_MEM_HOST == dev_mem_classify(d),
           "re-open works; what the last close released is gone");
    dev_close();
}

/* A process that dies without freeing leaves its names: segments (/collgpu-<pid>-<n>) and,
 * killed while a node team sets up, the team's control block (/collgpu-ctl-<pid>-<n>,
 * coll_gpu_team.c).  The next dev_open removes both when that pid is gone, and leaves those of
 * live processes alone. */
static void test_sweep(void)
{
    static const char *const forms[] = {"/collgpu-%d-999", "/collgpu-ctl-%d-999"};
    static const char *const what[] = {"segment", "control block"};
    char dead[2][64], alive[2][64];
    int status, fd;
    pid_t pid = fork();

    if (0 == pid) {
        _exit(0);
    }
    waitpid(pid, &status, 0); /* pid is now unused (reuse within this test is unlikely) */
    for (int f = 0; f < 2; ++f) {
        snprintf(dead[f], sizeof(dead[f]), forms[f], (int) pid);
        snprintf(alive[f], sizeof(alive[f]), forms[f], (int) getppid());
        fd = shm_open(dead[f], O_CREAT | O_RDWR, 0600);
        if (fd >= 0) {
            close(fd);
        }
        fd = shm_open(alive[f], O_CREAT | O_RDWR, 0600);
        if (fd >= 0) {
            close(fd);
        }
    }
    dev_open(DEV_BACKEND_EMULATED);
    dev_close();
    for (int f = 0; f < 2; ++f) {
        fd = shm_open(dead[f], O_RDWR, 0);
        tap_ok(fd < 0, "dev_open removed the %s name of a dead process", what[f]);
        if (fd >= 0) {
            close(fd);
            shm_unlink(dead[f]);
        }
        fd = shm_open(alive[f], O_RDWR, 0);
        tap_ok(fd >= 0, "and kept the %s name of a live process", what[f]);
        if (fd >= 0) {
            close(fd);
        }
        shm_unlink(alive[f]);
    }
}

int main(void)
{
    test_lifecycle();
    test_devices();
    test_classify();
    test_ipc_capable();
    test_mem_device();
    test_buffer_ids();
    test_fault();
    test_copies();
    test_ipc_parent_exports();
    test_ipc_child_exports();
    test_threads();
    test_close();
    test_sweep();
    printf("# %d passed, %d failed\n", tap_count_ - tap_failures(), tap_failures());
    return tap_done();
}
