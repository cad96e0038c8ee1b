/*
 * test_topo_tool.c - the coll_gpu_topo command on the fixtures: the matrix, ring, trees and
 * algorithm table it prints, --dump (to a file and to standard output), error handling, and a
 * plain probe of this machine (which must work with or without a GPU).
 */
#include "tap.h"
#include "topo.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TOPO_FIXTURE_DIR
#define TOPO_FIXTURE_DIR "tests/fixtures"
#endif
#ifndef TOPO_TOOL
#define TOPO_TOOL "topo/coll_gpu_topo"
#endif

static char out[1 << 17];

/* Run the tool with args (stderr folded in); returns its exit status, output in out. */
static int run(const char *args)
{
    char cmd[2048];
    size_t len = 0, got;
    FILE *p;
    int status;
    snprintf(cmd, sizeof(cmd), "%s %s 2>&1", TOPO_TOOL, args);
    p = popen(cmd, "r");
    if (NULL == p) {
        return -1;
    }
    while (len + 1 < sizeof(out) && 0 < (got = fread(out + len, 1, sizeof(out) - len - 1, p))) {
        len += got;
    }
    out[len] = '\0';
    status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool has(const char *what)
{
    if (NULL == strstr(out, what)) {
        tap_diag("missing '%s' in the output", what);
        return false;
    }
    return true;
}

int main(void)
{
    char args[1024], tmp[] = "/tmp/test_topo_tool_XXXXXX", err[TOPO_ERR_LEN];
    topo_t *a = NULL, *b = NULL;
    int fd, rc;

    if (0 != access(TOPO_TOOL, X_OK)) {
        tap_skip_all("coll_gpu_topo is not built (make -C topo)");
    }

    snprintf(args, sizeof(args), "--load %s/h200x2-nv18.topo", TOPO_FIXTURE_DIR);
    rc = run(args);
    tap_ok(0 == rc && has("GPU0\tX      NV18") && has("GPU1\tNV18   X") && has("CPU Affinity"),
           "h200x2: matrix with NV18 between the GPUs");
    tap_ok(has("Ring (slowest hop 450 GB/s)") && has("root 1   chain") &&
               has("Algorithms (2 ranks/node, 1 node, NV18)"),
           "h200x2: ring, trees and algorithm table");
    tap_ok(has("256 KiB   fused") && has("512 KiB   twoshot   ") &&
               has("64 KiB    fused     ") && has("8 B       fused") &&
               has("32 MiB    twoshot   ") && has("64 MiB    twoshot_ce") &&
               has("1 GiB     twoshot_ce") &&
               has("64 KiB    fused     -         2      512       push") &&
               has("128 KiB   fused     -         4      512       pull"),
           "h200x2: table rows from 8 B to 1 GiB, fused, twoshot, then twoshot_ce; bcast push "
           "then pull");

    snprintf(args, sizeof(args), "--load %s/h200x2-nv18.topo -r 4 --reasons", TOPO_FIXTURE_DIR);
    rc = run(args);
    tap_ok(0 == rc && has("Team: 4 ranks on GPUs 0,1,0,1") && has("allreduce: oneshot:"),
           "--ranks-per-node 4 spreads ranks over the GPUs; --reasons prints the reasons");

    snprintf(args, sizeof(args), "--load %s/pcie-4gpu-nvlink-pairs.topo", TOPO_FIXTURE_DIR);
    rc = run(args);
    tap_ok(0 == rc && has("WARNING: links are mixed") && has("NIC1\tPHB    PHB    PIX    PIX") &&
               has("mlx5_0  RoCE"),
           "pcie-4: mixed-link warning, NIC rows, NIC kinds");
    snprintf(args, sizeof(args), "--load %s/pcie-4gpu-nvlink-pairs.topo -p PHB -g 0,1",
             TOPO_FIXTURE_DIR);
    rc = run(args);
    tap_ok(0 == rc && has("Team: 2 ranks on GPUs 0,1; coll_gpu_p2p_level PHB") &&
               has("worst NV4"),
           "--gpus and --p2p-level choose the team and the level");

    snprintf(args, sizeof(args), "--load %s/dgx-h200-8gpu.topo --p2p-disable", TOPO_FIXTURE_DIR);
    rc = run(args);
    tap_ok(0 == rc && has("NVS18") && has("8 B       staged") && has("1 GiB     staged"),
           "dgx with --p2p-disable: every size staged");
    snprintf(args, sizeof(args), "--load %s/dgx-h200-8gpu.topo -a ring -b tree", TOPO_FIXTURE_DIR);
    rc = run(args);
    tap_ok(0 == rc && has("8 B       ring") && has("tree"), "forced algorithms show in the table");

    /* --dump to a file: loads back to the same model */
    fd = mkstemp(tmp);
    if (fd >= 0) {
        close(fd);
    }
    snprintf(args, sizeof(args), "--load %s/dgx-h200-8gpu.topo --dump %s -q", TOPO_FIXTURE_DIR,
             tmp);
    rc = run(args);
    snprintf(args, sizeof(args), "%s/dgx-h200-8gpu.topo", TOPO_FIXTURE_DIR);
    tap_ok(0 == rc && '\0' == out[0] && TOPO_OK == topo_load_file(tmp, &a, err, sizeof(err)) &&
               TOPO_OK == topo_load_file(args, &b, err, sizeof(err)) && topo_equal(a, b),
           "--dump FILE -q writes the model silently; it loads back equal");
    topo_free(a);
    a = NULL;

    /* --dump - writes the file format to standard output */
    snprintf(args, sizeof(args), "--load %s/dgx-h200-8gpu.topo --dump -", TOPO_FIXTURE_DIR);
    rc = run(args);
    tap_ok(0 == rc && TOPO_OK == topo_load_string(out, "stdout", &a, err, sizeof(err)) &&
               topo_equal(a, b),
           "--dump - prints only the model %s", err);
    topo_free(a);
    topo_free(b);

    /* a broken file: exit 1 and the line number */
    FILE *f = fopen(tmp, "w");
    if (NULL != f) {
        fputs("coll_gpu_topo 1\ngpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 "
              "bus=0000:01:00.0\nlink 0 1 NV4\nend\n",
              f);
        fclose(f);
    }
    snprintf(args, sizeof(args), "--load %s", tmp);
    rc = run(args);
    tap_ok(1 == rc && has(":3: link 0 1: gpu 1 is not defined above"),
           "a malformed file: exit 1 with file and line");
    unlink(tmp);

    rc = run("--no-such-option");
    tap_ok(2 == rc && has("usage: coll_gpu_topo"), "a bad option: usage, exit 2");
    rc = run("--load /nonexistent/file.topo");
    tap_ok(1 == rc && has("cannot open"), "a missing file: exit 1");

    /* probing this machine: GPU or not, it prints the model and exits 0 */
    rc = run("");
    tap_ok(0 == rc && has("coll/gpu node model of") && has("probed: probe:"),
           "probe of this machine exits 0");
    if (NULL != strstr(out, "No GPU found")) {
        tap_ok(has("What hwloc sees") && has("NUMA nodes:"),
               "without a GPU it says so and still shows hwloc's view");
    } else {
        tap_ok(has("Algorithms ("), "with GPUs it prints the algorithm table");
    }
    rc = run("--no-cuda --no-nvml --no-hwloc");
    tap_ok(0 == rc && has("No GPU found: left out (--no-cuda)") && has("NVML not asked"),
           "every source left out: no GPU, no crash");
    return tap_done();
}
