/*
 * test_dev_identity.c - dev_process_identity() (kernels/dev_identity.c), the owner of exported
 * buffers in coll/gpu's table of peer mappings.
 *
 * What must hold: the identity is stable within a process (the same value at every call), is
 * never 0 (the table's "no owner"), differs between two processes (a forked child that computes
 * its own), and is a function of the PID namespace and the boot as well as of the pid: the same
 * pid in two namespaces, or in one namespace across two boots, gives two identities (ranks in
 * separate containers sharing IPC and /dev/shm may have the same pid; the pid alone made their
 * buffers collide in the table).  The namespace and boot checks go through the injectable
 * hash, dev_process_identity_of.
 */
#include "dev.h"
#include "tap.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BOOT_A "8d0d8a6e-5e43-4a0c-9a53-6a8b0f1f6b11"
#define BOOT_B "1c7b2f30-0d5e-4b8e-8a3c-2f6e9d4b7a22"

/* The identity that a forked child computes for itself (the parent must not have computed its
 * own yet: a child keeps what its parent had).  0 on failure. */
static uint64_t child_identity(void)
{
    int fds[2];
    uint64_t id = 0;
    pid_t pid;
    int status;

    if (0 != pipe(fds)) {
        return 0;
    }
    pid = fork();
    if (0 == pid) {
        uint64_t mine = dev_process_identity();
        ssize_t n = write(fds[1], &mine, sizeof(mine));
        _exit(sizeof(mine) == n ? 0 : 1);
    }
    close(fds[1]);
    if (0 < pid && sizeof(id) != read(fds[0], &id, sizeof(id))) {
        id = 0;
    }
    close(fds[0]);
    if (0 < pid) {
        (void) waitpid(pid, &status, 0);
    }
    return id;
}

int main(void)
{
    uint64_t child, first, second, a, same;
    struct stat ns;

    child = child_identity();
    first = dev_process_identity();
    second = dev_process_identity();
    tap_ok(0 != first && first == second,
           "the identity is the same at every call of a process (%016" PRIx64 ")", first);
    tap_ok(0 != child && child != first,
           "a forked child's identity differs from its parent's (%016" PRIx64 ")", child);

    /* what the process computed is the hash of its own boot id, namespace and pid */
    if (0 == stat("/proc/self/ns/pid", &ns)) {
        char boot[64] = "";
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (NULL != f) {
            if (NULL == fgets(boot, sizeof(boot), f)) {
                boot[0] = '\0';
            }
            fclose(f);
        }
        tap_ok(first == dev_process_identity_of(boot, (uint64_t) ns.st_dev,
                                                (uint64_t) ns.st_ino, (uint64_t) getpid()),
               "it is the hash of this boot's id, this PID namespace and this pid");
    } else {
        tap_skip("no /proc/self/ns/pid", "it is the hash of this boot's id, namespace and pid");
    }

    a = dev_process_identity_of(BOOT_A, 4, 4026531836u, 1);
    same = dev_process_identity_of(BOOT_A, 4, 4026531836u, 1);
    tap_ok(a == same && 0 != a, "the hash is a function of its inputs");
    tap_ok(a != dev_process_identity_of(BOOT_A, 4, 4026532201u, 1),
           "pid 1 in two PID namespaces (two containers): two identities");
    tap_ok(a != dev_process_identity_of(BOOT_A, 5, 4026531836u, 1),
           "the namespace's device counts too");
    tap_ok(a != dev_process_identity_of(BOOT_B, 4, 4026531836u, 1),
           "the same pid and namespace after another boot: another identity");
    {
        /* many pids of one namespace: no two alike (what getpid() gave before) */
        enum { NPIDS = 4096 };
        static uint64_t ids[NPIDS];
        int dup = 0;
        for (int p = 0; p < NPIDS; ++p) {
            ids[p] = dev_process_identity_of(BOOT_A, 4, 4026531836u, (uint64_t) p + 1);
            for (int q = 0; q < p && !dup; ++q) {
                dup = (ids[q] == ids[p]) || 0 == ids[p];
            }
        }
        tap_ok(!dup, "%d pids of one namespace: %d distinct nonzero identities", NPIDS, NPIDS);
    }
    return tap_done();
}
