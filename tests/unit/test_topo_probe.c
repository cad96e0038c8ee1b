/*
 * test_topo_probe.c - topo_probe() without a GPU: CUDA answers come from fake callbacks (as
 * the component passes the device layer's), NVML is left out or points at a library that does
 * not exist, hwloc is this machine's.  Checks the merge, the ordering by PCI bus id, the
 * peer-access answers, the status text and log lines, and that nothing breaks when every
 * source is missing.  The NVML path itself needs a GPU machine (coll_gpu_topo there).
 */
#include "tap.h"
#include "topo.h"

#include <stdlib.h>
#include <string.h>

/* ---- a fake node of three GPUs, as a process would see it through CUDA -------------------- */

/* a PCI domain no real machine uses, so that hwloc never matches these to real devices */
static const char *const fake_bus[] = {"00007E57:3B:00.0", "7e57:1a:00.0", "7e57:1B:00.0"};
static int fake_count_rc = 0;
static int fake_uuid_fail = -1; /* ordinal whose uuid query fails */

static int fake_count(int *count)
{
    *count = 3;
    return fake_count_rc;
}

static int fake_uuid(int ordinal, uint8_t uuid[TOPO_UUID_BYTES])
{
    memset(uuid, 0xa0, TOPO_UUID_BYTES);
    uuid[15] = (uint8_t) ordinal;
    return (ordinal == fake_uuid_fail) ? 7 : 0;
}

static int fake_bus_id(int ordinal, char *buf, size_t len)
{
    snprintf(buf, len, "%s", fake_bus[ordinal]);
    return 0;
}

/* ordinals 1 and 2 (bus 1a and 1b) reach each other; ordinal 0 (bus 3b) reaches nobody */
static int fake_can_access(int ordinal, int peer, bool *can)
{
    *can = (0 != ordinal && 0 != peer);
    return 0;
}

static int fake_name(int ordinal, char *buf, size_t len)
{
    snprintf(buf, len, "Fake \"GPU\" %d", ordinal);
    return 0;
}

static int fake_sm(int ordinal, int *major, int *minor)
{
    (void) ordinal;
    *major = 9;
    *minor = 0;
    return 0;
}

static int fake_p2p_attr(int ordinal, int peer, topo_p2p_attr_t attr, int *value)
{
    if (TOPO_P2P_ATTR_PERF_RANK == attr) {
        *value = (0 == ordinal || 0 == peer) ? 2 : 0;
        return 0;
    }
    if (TOPO_P2P_ATTR_NATIVE_ATOMICS == attr) {
        *value = (0 != ordinal && 0 != peer);
        return 0;
    }
    return 1;
}

static const topo_gpu_probe_ops_t fake_ops = {
    .device_count = fake_count,
    .device_uuid = fake_uuid,
    .device_pci_bus_id = fake_bus_id,
    .device_can_access_peer = fake_can_access,
    .device_name = fake_name,
    .device_sm = fake_sm,
    .device_p2p_attr = fake_p2p_attr,
};

/* ---- log capture ------------------------------------------------------------------------- */

static char logbuf[8192];

static void capture(void *ctx, int level, const char *msg)
{
    size_t used = strlen(logbuf);
    (void) ctx;
    snprintf(logbuf + used, sizeof(logbuf) - used, "%d|%s\n", level, msg);
}

static topo_t *probe(const topo_gpu_probe_ops_t *ops, bool no_nvml, bool no_hwloc,
                     const char *nvml_library)
{
    topo_probe_opts_t opts;
    topo_t *t = NULL;
    memset(&opts, 0, sizeof(opts));
    opts.gpu_ops = ops;
    opts.no_nvml = no_nvml;
    opts.no_hwloc = no_hwloc;
    opts.nvml_library = nvml_library;
    opts.log = capture;
    logbuf[0] = '\0';
    if (TOPO_OK != topo_probe(&opts, &t)) {
        return NULL;
    }
    return t;
}

static void check_fake_cuda(void)
{
    topo_t *t = probe(&fake_ops, true, false, NULL);
    if (!tap_ok(NULL != t && 3 == t->ngpus, "probe with fake CUDA callbacks finds 3 GPUs")) {
        topo_free(t);
        return;
    }
    tap_ok(0 == strcmp(t->gpus[0].bus_id, "7e57:1a:00.0") &&
               0 == strcmp(t->gpus[1].bus_id, "7e57:1b:00.0") &&
               0 == strcmp(t->gpus[2].bus_id, "7e57:3b:00.0"),
           "GPUs ordered by normalised PCI bus id, not by CUDA ordinal");
    tap_ok(1 == t->gpus[0].uuid[15] && 2 == t->gpus[1].uuid[15] && 0 == t->gpus[2].uuid[15],
           "each GPU keeps its UUID");
    tap_ok(0 == strcmp(t->gpus[0].name, "Fake 'GPU' 1"),
           "name from the callback, quotes made safe for the file format: %s", t->gpus[0].name);
    tap_ok(90 == t->gpus[2].sm, "compute capability from the callback");
    tap_ok(1 == t->links[0][1].p2p && 0 == t->links[0][2].p2p && 0 == t->links[2][1].p2p,
           "peer access from can_access_peer, both directions required");
    tap_ok(1 == t->links[0][1].atomics && 0 == t->links[1][2].atomics &&
               0 == t->links[0][1].perf_rank && 2 == t->links[2][0].perf_rank,
           "native atomics and performance rank from the optional callback");
    tap_ok(TOPO_LINK_SYS == t->links[0][1].cls && NULL != strstr(logbuf, "assumed SYS"),
           "without NVML and without the GPUs in hwloc the path is assumed SYS, and logged");
    tap_ok(NULL != strstr(t->source, "NVML not asked") &&
               NULL != strstr(t->source, "CUDA: 3 devices visible") &&
               NULL != strstr(t->source, "hwloc"),
           "status text names every source: %s", t->source);
    tap_ok(t->nnuma >= 1 && -1 == t->gpus[0].numa,
           "hwloc gives this machine's NUMA nodes (%d); the fake GPUs have no place", t->nnuma);

    /* the probed model goes through the file format unchanged */
    char *text = NULL, err[TOPO_ERR_LEN] = "";
    topo_t *back = NULL;
    tap_ok(TOPO_OK == topo_dump_string(t, &text) &&
               TOPO_OK == topo_load_string(text, "probed", &back, err, sizeof(err)) &&
               topo_equal(t, back),
           "a probed model dumps and loads back identical %s", err);
    free(text);
    topo_free(back);
    topo_free(t);
}

static void check_missing_sources(void)
{
    topo_t *t = probe(&fake_ops, false, true, "libcoll-gpu-no-such-nvml.so.1");
    tap_ok(NULL != t && 3 == t->ngpus && NULL != strstr(t->source, "NVML not available") &&
               NULL != strstr(t->source, "hwloc not asked") && 0 == t->nnuma,
           "NVML missing: GPUs still come from CUDA (%s)", NULL != t ? t->source : "");
    tap_ok(NULL != strstr(logbuf, "3|topo: NVML not available"),
           "the missing NVML is logged at info level");
    topo_free(t);

    t = probe(NULL, true, false, NULL);
    tap_ok(NULL != t && 0 == t->ngpus && t->nnuma >= 1 && NULL != strstr(t->source, "no GPU"),
           "no CUDA, no NVML: no GPU, hwloc's view kept (%s)", NULL != t ? t->source : "");
    topo_free(t);

    fake_count_rc = -2; /* DEV_ERR_NO_DRIVER */
    t = probe(&fake_ops, true, true, NULL);
    tap_ok(NULL != t && 0 == t->ngpus && NULL != strstr(t->source, "CUDA: no device"),
           "a failing device count means no GPU, not an error (%s)", NULL != t ? t->source : "");
    topo_free(t);
    fake_count_rc = 0;

    fake_uuid_fail = 1;
    t = probe(&fake_ops, true, true, NULL);
    tap_ok(NULL != t && 2 == t->ngpus && NULL != strstr(logbuf, "CUDA device 1: no UUID"),
           "a device whose UUID cannot be read is skipped and logged");
    topo_free(t);
    fake_uuid_fail = -1;

    topo_gpu_probe_ops_t partial = {.device_count = fake_count};
    t = probe(&partial, true, true, NULL);
    tap_ok(NULL != t && 0 == t->ngpus && NULL != strstr(t->source, "incomplete callbacks"),
           "incomplete callbacks are refused, not called");
    topo_free(t);

    /* no options at all: quiet, must not crash */
    t = NULL;
    tap_ok(TOPO_OK == topo_probe(NULL, &t) && NULL != t, "topo_probe(NULL options) works");
    topo_free(t);
    tap_ok(TOPO_ERR_ARG == topo_probe(NULL, NULL), "topo_probe without an output is refused");
}

int main(void)
{
    check_fake_cuda();
    check_missing_sources();
    return tap_done();
}
