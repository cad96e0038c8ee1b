/*
 * test_topo_file.c - the topology text format (topo/FORMAT.md): every fixture loads with the
 * expected contents, dump -> load gives an identical model and a byte-identical second dump,
 * and malformed files are rejected with the offending line number.
 */
#include "tap.h"
#include "topo.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TOPO_FIXTURE_DIR
#define TOPO_FIXTURE_DIR "tests/fixtures"
#endif

static const char *const fixtures[] = {
    "dgx-h200-8gpu",
    "pcie-4gpu-nvlink-pairs",
    "pcie-8gpu-2socket",
    "h200x2-nv18",
};
#define NFIXTURES ((int) (sizeof(fixtures) / sizeof(fixtures[0])))

static topo_t *load_fixture(const char *name)
{
    char path[1024], err[TOPO_ERR_LEN];
    topo_t *topo = NULL;
    snprintf(path, sizeof(path), "%s/%s.topo", TOPO_FIXTURE_DIR, name);
    if (TOPO_OK != topo_load_file(path, &topo, err, sizeof(err))) {
        tap_diag("load %s: %s", path, err);
        return NULL;
    }
    return topo;
}

/* Fixture contents as written: counts, a UUID, bus ids, NUMA placement, NICs. */
static void check_contents(void)
{
    topo_t *t = load_fixture("dgx-h200-8gpu");
    char uuid[TOPO_UUID_STRLEN];
    tap_ok(NULL != t, "dgx-h200-8gpu loads");
    if (NULL == t) {
        return;
    }
    tap_ok(8 == t->ngpus && 8 == t->nnics && 2 == t->nnuma, "dgx: 8 GPUs, 8 NICs, 2 NUMA nodes");
    topo_uuid_format(t->gpus[3].uuid, uuid);
    tap_ok(0 == strcmp(uuid, "GPU-5d1c0a7e-0003-4b2e-9f3a-0c0ffee0d603"), "dgx: gpu 3 uuid %s",
           uuid);
    tap_ok(0 == strcmp(t->gpus[4].bus_id, "0000:9d:00.0") && 1 == t->gpus[4].numa &&
               0 == strcmp(t->gpus[4].cpus, "56-111,168-223"),
           "dgx: gpu 4 on bus 9d, NUMA 1, CPUs 56-111,168-223");
    tap_ok(TOPO_NIC_IB == t->nics[5].kind && 400000 == t->nics[5].speed &&
               0 == strcmp(t->nics[5].name, "mlx5_5"),
           "dgx: nic 5 is mlx5_5, InfiniBand, 400 Gb/s");
    tap_ok(TOPO_LINK_PIX == t->gpu_nic[2][2] && TOPO_LINK_PHB == t->gpu_nic[2][0] &&
               TOPO_LINK_SYS == t->gpu_nic[2][6],
           "dgx: gpu 2 is PIX to nic 2, PHB to nic 0, SYS to nic 6");
    tap_ok(18 == t->gpus[0].nvswitch_links && 25000 == t->gpus[0].nvlink_bw && 90 == t->gpus[0].sm,
           "dgx: 18 NVSwitch links of 25 GB/s, sm 90");
    tap_ok(3 == topo_find_gpu_by_bus_id(t, "00000000:61:00.0"), "find gpu by NVML-style bus id");
    tap_ok(3 == topo_find_gpu_by_uuid(t, t->gpus[3].uuid), "find gpu by uuid");
    topo_free(t);

    t = load_fixture("pcie-4gpu-nvlink-pairs");
    tap_ok(NULL != t && 14062 == t->gpus[0].nvlink_bw && 56248 == t->links[0][1].bw,
           "pcie-4: NV4 bandwidth defaults to 4 x 14.062 GB/s");
    tap_ok(NULL != t && TOPO_NIC_ROCE == t->nics[1].kind && TOPO_NIC_ETH == t->nics[0].kind,
           "pcie-4: a RoCE and an Ethernet NIC");
    topo_free(t);

    t = load_fixture("pcie-8gpu-2socket");
    /* no bw= in this fixture: PCIe Gen4 x16 defaults, 80% through the host bridge, half across */
    tap_ok(NULL != t && 24000 == t->links[0][1].bw && 19200 == t->links[0][2].bw &&
               24000 == t->links[4][6].bw && 12000 == t->links[0][7].bw,
           "pcie-8: default bandwidths PIX 24, PHB 19.2, PXB 24, SYS 12 GB/s");
    topo_free(t);

    t = load_fixture("h200x2-nv18");
    tap_ok(NULL != t && 2 == t->ngpus && 0 == t->nnics && 0 == t->nnuma &&
               TOPO_LINK_NVL == t->links[0][1].cls && 18 == t->links[0][1].nvlinks &&
               450000 == t->links[1][0].bw && -1 == t->gpus[0].numa,
           "h200x2: two GPUs, NV18 at 450 GB/s, no NUMA or NIC information");
    topo_free(t);
}

/* dump -> load -> equal model; second dump byte-identical; the file path works too. */
static void check_round_trip(const char *name)
{
    topo_t *a = load_fixture(name), *b = NULL, *c = NULL;
    char *t1 = NULL, *t2 = NULL, err[TOPO_ERR_LEN] = "";
    char path[] = "/tmp/test_topo_file_XXXXXX";
    int fd;
    if (!tap_ok(NULL != a, "%s: loads", name)) {
        return;
    }
    tap_ok(TOPO_OK == topo_dump_string(a, &t1), "%s: dumps", name);
    tap_ok(TOPO_OK == topo_load_string(t1, "dump1", &b, err, sizeof(err)), "%s: dump loads %s",
           name, err);
    tap_ok(topo_equal(a, b), "%s: dump -> load gives an identical model", name);
    tap_ok(NULL != b && TOPO_OK == topo_dump_string(b, &t2) && 0 == strcmp(t1, t2),
           "%s: second dump is byte-identical", name);
    fd = mkstemp(path);
    if (fd >= 0) {
        close(fd);
        tap_ok(TOPO_OK == topo_dump_file(a, path, err, sizeof(err)) &&
                   TOPO_OK == topo_load_file(path, &c, err, sizeof(err)) && topo_equal(a, c),
               "%s: topo_dump_file -> topo_load_file round trip %s", name, err);
        unlink(path);
    } else {
        tap_ok(0, "%s: mkstemp", name);
    }
    topo_free(a);
    topo_free(b);
    topo_free(c);
    free(t1);
    free(t2);
}

/* A valid minimal file, then variations that must fail on a given line. */
#define HDR "coll_gpu_topo 1\n"
#define G0 "gpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=0000:01:00.0\n"
#define G1 "gpu 1 uuid=GPU-00000000-0000-0000-0000-000000000001 bus=0000:02:00.0\n"

static const struct {
    const char *text;
    int line;          /* expected line in the message */
    const char *words; /* expected in the message */
} bad_files[] = {
    {"", 1, "empty file"},
    {"# only a comment\n", 1, "empty file"},
    {"gpu 0 uuid=x bus=y\n", 1, "first line must be"},
    {"coll_gpu_topo 2\nend\n", 1, "version 2"},
    {HDR G0 G1 "link 0 1 NV4\n", 4, "missing 'end'"},
    {HDR G0 G1 "end\n", 4, "no link line for gpus 0 and 1"},
    {HDR G0 G1 "link 0 1 NV4\nend\nhost x\n", 6, "after end"},
    {HDR "gpu 1 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=0000:01:00.0\n", 2,
     "expected gpu 0"},
    {HDR "gpu 0 uuid=GPU-0000000-0000-0000-0000-000000000000 bus=0000:01:00.0\n", 2, "uuid"},
    {HDR "gpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=01:00\n", 2, "bus"},
    {HDR "gpu 0 bus=0000:01:00.0\n", 2, "uuid= and bus= are required"},
    {HDR G0 "gpu 1 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=0000:02:00.0\n", 3,
     "uuid of gpu 0"},
    {HDR G0 "gpu 1 uuid=GPU-00000000-0000-0000-0000-000000000001 bus=0000:01:00.0\n", 3,
     "bus id of gpu 0"},
    {HDR "gpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=0000:01:00.0 color=red\n", 2,
     "unknown key 'color'"},
    {HDR "gpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=0000:01:00.0 sm=9O\n", 2,
     "sm"},
    {HDR "gpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=0000:01:00.0 name=\"H200\n", 2,
     "unterminated quote"},
    {HDR "gpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=0000:01:00.0 sm=90 sm=80\n", 2,
     "given twice"},
    {HDR "numa 0\ngpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 bus=0000:01:00.0 numa=3\n",
     3, "numa 3 is not defined"},
    {HDR "numa 0 cpus=0-\n", 2, "cpus"},
    {HDR G0 G1 "link 0 1 NV\n", 4, "NVLink count"},
    {HDR G0 G1 "link 0 1 FAST\n", 4, "not a link class"},
    {HDR G0 G1 "link 0 1 X\n", 4, "not a link class"},
    {HDR G0 G1 "link 0 2 PIX\n", 4, "gpu 2 is not defined"},
    {HDR G0 G1 "link 0 0 PIX\n", 4, "two different gpus"},
    {HDR G0 G1 "link 0 1 PIX\nlink 1 0 PIX\n", 5, "given twice"},
    {HDR G0 G1 "link 0 1 PIX bw=12.3456\n", 4, "at most 3 decimals"},
    {HDR G0 G1 "link 0 1 PIX bw=0\n", 4, "more than 0"},
    {HDR G0 G1 "link 0 1 PIX p2p=maybe\n", 4, "yes, no or unknown"},
    {HDR G0 G1 "link 0 1 NVS\nend\n", 5, "no nvswitch= links"},
    {HDR G0 "nic 0 name=mlx5_0 kind=opa\n", 3, "ib, roce or eth"},
    {HDR G0 "nic 0 kind=ib\n", 3, "name= and kind= are required"},
    {HDR G0 "nic 0 name=mlx5_0 kind=ib\nnicpath 0 0 NV2\n", 4, "PIX, PXB, PHB or SYS"},
    {HDR G0 "nic 0 name=mlx5_0 kind=ib\nend\n", 4, "no nicpath line for gpu 0 and nic 0"},
    {HDR G0 "nicpath 0 0 PIX\n", 3, "nic 0 is not defined"},
    {HDR "frobnicate 1\n", 2, "unknown record 'frobnicate'"},
    {HDR "=3\n", 2, "no key"},
    {HDR "host a b\n", 2, "host"},
};

static void check_malformed(void)
{
    int n = (int) (sizeof(bad_files) / sizeof(bad_files[0]));
    for (int i = 0; i < n; ++i) {
        char err[TOPO_ERR_LEN] = "", want[64];
        topo_t *t = (topo_t *) 1;
        int rc = topo_load_string(bad_files[i].text, "bad", &t, err, sizeof(err));
        snprintf(want, sizeof(want), "bad:%d: ", bad_files[i].line);
        tap_ok(TOPO_ERR_PARSE == rc && NULL == t && 0 == strncmp(err, want, strlen(want)) &&
                   NULL != strstr(err, bad_files[i].words),
               "malformed file %d rejected at line %d: %s", i, bad_files[i].line, err);
    }
}

/* Comments, blank lines, quoted names and omitted optional fields are accepted. */
static void check_lenient_parts(void)
{
    const char *text = "# comment\n\n" HDR "  # indented comment\n"
                       "host  node01   # trailing comment\n"
                       "gpu 0 uuid=gpu-00000000-0000-0000-0000-0000000000AB bus=0000:0A:00.0 "
                       "name=\"A GPU # with hash\"\n" G1 "link 0 1 PXB\n"
                       "end\n";
    char err[TOPO_ERR_LEN] = "";
    topo_t *t = NULL;
    int rc = topo_load_string(text, "ok", &t, err, sizeof(err));
    tap_ok(TOPO_ERR_PARSE == rc, "a lower-case 'gpu-' uuid prefix is rejected (%s)", err);
    text = "# comment\n\n" HDR "  # indented comment\n"
           "host  node01   # trailing comment\n"
           "gpu 0 uuid=GPU-00000000-0000-0000-0000-0000000000AB bus=0000:0A:00.0 "
           "name=\"A GPU # with hash\"\n" G1 "link 0 1 PXB\n"
           "end\n";
    rc = topo_load_string(text, "ok", &t, err, sizeof(err));
    tap_ok(TOPO_OK == rc, "comments, blank lines and quoted names load %s", err);
    if (NULL != t) {
        tap_ok(0 == strcmp(t->host, "node01") && 0 == strcmp(t->gpus[0].name, "A GPU # with hash") &&
                   0 == strcmp(t->gpus[0].bus_id, "0000:0a:00.0") && 0xab == t->gpus[0].uuid[15],
               "host, quoted name, normalised bus id and uuid read back");
        tap_ok(-1 == t->links[0][1].p2p && TOPO_LINK_PXB == t->links[1][0].cls &&
                   24000 == t->links[0][1].bw,
               "omitted p2p is unknown; the link is symmetric with a default bandwidth");
    }
    topo_free(t);
}

static void check_helpers(void)
{
    uint8_t u[TOPO_UUID_BYTES];
    char s[TOPO_UUID_STRLEN], b[TOPO_BUSID_LEN];
    tap_ok(TOPO_OK == topo_uuid_parse("GPU-0123abcd-4567-89ef-0123-456789abcdef", u) &&
               (topo_uuid_format(u, s), 0 == strcmp(s, "GPU-0123abcd-4567-89ef-0123-456789abcdef")),
           "uuid parse/format round trip");
    tap_ok(TOPO_OK == topo_uuid_parse("0123ABCD-4567-89ef-0123-456789abcdef", u),
           "uuid without GPU- prefix parses");
    tap_ok(TOPO_OK != topo_uuid_parse("GPU-0123abcd-4567-89ef-0123-456789abcdef0", u) &&
               TOPO_OK != topo_uuid_parse("GPU-0123abcd4567-89ef-0123-456789abcdef", u),
           "uuid with extra digits or a missing dash is rejected");
    tap_ok(TOPO_OK == topo_bus_id_normalize("00000000:3B:00.0", b, sizeof(b)) &&
               0 == strcmp(b, "0000:3b:00.0"),
           "NVML bus id normalised to %s", b);
    tap_ok(TOPO_OK == topo_bus_id_normalize("3b:00.1", b, sizeof(b)) &&
               0 == strcmp(b, "0000:3b:00.1"),
           "short bus id normalised to %s", b);
    tap_ok(TOPO_OK != topo_bus_id_normalize("0000:3b:00", b, sizeof(b)) &&
               TOPO_OK != topo_bus_id_normalize("0000:3g:00.0", b, sizeof(b)),
           "malformed bus ids rejected");
    tap_ok(TOPO_ERR_IO == topo_load_file("/nonexistent/x.topo", (topo_t *[]){NULL}, b, sizeof(b)),
           "a missing file is an I/O error");
}

int main(void)
{
    check_contents();
    for (int i = 0; i < NFIXTURES; ++i) {
        check_round_trip(fixtures[i]);
    }
    check_malformed();
    check_lenient_parts();
    check_helpers();
    return tap_done();
}
