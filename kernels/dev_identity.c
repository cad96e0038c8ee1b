/*
 * dev_identity.c - dev_process_identity(): a name for this process that is unique on the host,
 * for the owner of exported buffers (coll_gpu_xbuf_t.owner, the key of the component's table
 * of peer mappings).
 *
 * A pid alone is not unique on a host: ranks in separate containers (one PID namespace each)
 * that share IPC and /dev/shm may all be pid 1, and an importer would then take one peer's
 * mapping for another's allocation.  The identity hashes the boot id (a pid is only unique
 * until the next boot; two hosts never share memory anyway), the PID namespace's device and
 * inode (the same for every process of one namespace, different between namespaces) and the
 * pid.  Computed once per process: a forked child inherits its parent's identity, which is
 * fine as long as it exports nothing (coll/gpu runs in MPI processes, which are not forked
 * from one another).  Where a real pid is needed (names in /dev/shm, the checks that an owner
 * is alive) getpid() stays.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev.h"

/* FNV-1a over bytes, continuing from h. */
static uint64_t identity_fnv(uint64_t h, const void *bytes, size_t len)
{
    const unsigned char *p = bytes;

    for (size_t i = 0; i < len; ++i) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

uint64_t dev_process_identity_of(const char *boot_id, uint64_t ns_dev, uint64_t ns_ino,
                                 uint64_t pid)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    uint64_t words[3] = {ns_dev, ns_ino, pid};

    if (NULL != boot_id) {
        h = identity_fnv(h, boot_id, strlen(boot_id));
    }
    h = identity_fnv(h, "", 1); /* the end of the boot id: no two fields run into each other */
    h = identity_fnv(h, words, sizeof(words));
    /* splitmix64's finalizer: FNV's last bytes (the pid's) only reach the low bits otherwise */
    h ^= h >> 30;
    h *= UINT64_C(0xbf58476d1ce4e5b9);
    h ^= h >> 27;
    h *= UINT64_C(0x94d049bb133111eb);
    h ^= h >> 31;
    return (0 == h) ? 1 : h; /* 0 means "no owner" (a free slot of the mapping table) */
}

uint64_t dev_process_identity(void)
{
    static _Atomic uint64_t identity = 0;
    uint64_t id = identity;

    if (0 == id) {
        /* racing threads compute the same value: no lock needed */
        char boot_id[64] = "";
        struct stat ns;
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

        if (NULL != f) {
            if (NULL == fgets(boot_id, sizeof(boot_id), f)) {
                boot_id[0] = '\0';
            }
            fclose(f);
        }
        /* without /proc the namespace is unknown: the pid still tells the processes of one
         * namespace apart, as before */
        if (0 != stat("/proc/self/ns/pid", &ns)) {
            memset(&ns, 0, sizeof(ns));
        }
        id = dev_process_identity_of(boot_id, (uint64_t) ns.st_dev, (uint64_t) ns.st_ino,
                                     (uint64_t) getpid());
        identity = id;
    }
    return id;
}
