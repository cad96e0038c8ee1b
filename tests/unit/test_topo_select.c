/*
 * test_topo_select.c - the algorithm decision table of topo_select.c: enum values and names,
 * choices over sizes x ranks per node (2, 4, 8) x link class, the peer-access fallbacks,
 * several nodes, forced algorithms and the kernel overrides.
 */
#include "tap.h"
#include "topo.h"

#include <string.h>

#ifndef TOPO_FIXTURE_DIR
#define TOPO_FIXTURE_DIR "tests/fixtures"
#endif

#define KiB ((size_t) 1024)
#define MiB (1024 * KiB)

/* A single-node team of rpn ranks on rpn GPUs joined by one link class. */
static topo_select_in_t team(topo_coll_t coll, size_t bytes, int rpn, topo_link_class_t link,
                             bool p2p_all, bool p2p_ring)
{
    topo_select_in_t in;
    memset(&in, 0, sizeof(in));
    in.coll = coll;
    in.bytes = bytes;
    in.ranks_per_node = rpn;
    in.gpus_per_node = rpn;
    in.nodes = 1;
    in.link = link;
    in.nvlinks = (TOPO_LINK_NVL == link || TOPO_LINK_NVS == link) ? 18 : 0;
    in.p2p_all = p2p_all;
    in.p2p_ring = p2p_ring;
    return in;
}

static int pick(topo_coll_t coll, size_t bytes, int rpn, topo_link_class_t link, bool all,
                bool ring)
{
    topo_select_in_t in = team(coll, bytes, rpn, link, all, ring);
    topo_plan_t plan;
    topo_select(&in, &plan);
    return plan.alg;
}

static void check_names(void)
{
    tap_ok(0 == TOPO_AR_AUTO && 1 == TOPO_AR_STAGED && 2 == TOPO_AR_ONESHOT &&
               3 == TOPO_AR_TWOSHOT && 4 == TOPO_AR_RING && 5 == TOPO_AR_FUSED &&
               6 == TOPO_AR_TWOSHOT_CE,
           "allreduce enum values are fixed (MCA enum, MPI_T)");
    tap_ok(0 == TOPO_BC_AUTO && 1 == TOPO_BC_STAGED && 2 == TOPO_BC_PUSH && 3 == TOPO_BC_CHAIN &&
               4 == TOPO_BC_TREE && 5 == TOPO_BC_PULL,
           "bcast enum values are fixed (MCA enum, MPI_T)");
    int n = 0;
    for (const topo_enum_value_t *v = topo_allreduce_alg_values; NULL != v->name; ++v) {
        n += (v->value == n && v->value == topo_alg_from_name(TOPO_COLL_ALLREDUCE, v->name));
    }
    tap_ok(TOPO_AR_COUNT == n, "allreduce value table lists 0..6 in order, names round-trip");
    n = 0;
    for (const topo_enum_value_t *v = topo_bcast_alg_values; NULL != v->name; ++v) {
        n += (v->value == n && v->value == topo_alg_from_name(TOPO_COLL_BCAST, v->name));
    }
    tap_ok(TOPO_BC_COUNT == n, "bcast value table lists 0..5 in order, names round-trip");
    n = 0;
    for (const topo_enum_value_t *v = topo_p2p_level_values; NULL != v->name; ++v) {
        n += (v->value == n && v->value == topo_p2p_level_from_name(v->name));
    }
    tap_ok(TOPO_P2P_LEVEL_COUNT == n, "p2p level value table: auto NVL PIX PXB PHB SYS");
    tap_ok(0 == strcmp("twoshot", topo_alg_name(TOPO_COLL_ALLREDUCE, TOPO_AR_TWOSHOT)) &&
               0 == strcmp("chain", topo_alg_name(TOPO_COLL_BCAST, TOPO_BC_CHAIN)) &&
               TOPO_BC_TREE == topo_alg_from_name(TOPO_COLL_BCAST, "TREE") &&
               0 == strcmp("fused", topo_alg_name(TOPO_COLL_ALLREDUCE, TOPO_AR_FUSED)) &&
               TOPO_AR_TWOSHOT_CE == topo_alg_from_name(TOPO_COLL_ALLREDUCE, "twoshot_ce") &&
               TOPO_BC_PULL == topo_alg_from_name(TOPO_COLL_BCAST, "pull") &&
               -1 == topo_alg_from_name(TOPO_COLL_BCAST, "fused") &&
               -1 == topo_alg_from_name(TOPO_COLL_ALLREDUCE, "tree"),
           "algorithm names per collective");
}

/* The initial thresholds, row by row: a change detector (it restates the table's current
 * choices, so it fails when the table is retuned, not when a decision is wrong); the property
 * checks of check_table_sweep and check_fallbacks are the tests of the table. */
static void check_table_points(void)
{
    const topo_coll_t AR = TOPO_COLL_ALLREDUCE, BC = TOPO_COLL_BCAST;
    /* 2xH200 NV18 */
    tap_ok(TOPO_AR_FUSED == pick(AR, 8, 2, TOPO_LINK_NVL, true, true) &&
               TOPO_AR_FUSED == pick(AR, 256 * KiB, 2, TOPO_LINK_NVL, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 256 * KiB + 4, 2, TOPO_LINK_NVL, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 32 * MiB, 2, TOPO_LINK_NVL, true, true) &&
               TOPO_AR_TWOSHOT_CE == pick(AR, 32 * MiB + 4, 2, TOPO_LINK_NVL, true, true) &&
               TOPO_AR_TWOSHOT_CE == pick(AR, 1024 * MiB, 2, TOPO_LINK_NVL, true, true),
           "NV18, 2 ranks: fused up to 256 KiB, twoshot to 32 MiB, twoshot_ce above");
    tap_ok(TOPO_BC_PUSH == pick(BC, 64 * KiB, 2, TOPO_LINK_NVL, true, true) &&
               TOPO_BC_PULL == pick(BC, 64 * KiB + 8, 2, TOPO_LINK_NVL, true, true) &&
               TOPO_BC_PULL == pick(BC, 1024 * MiB, 2, TOPO_LINK_NVL, true, true),
           "NV18, 2 ranks: bcast push up to 64 KiB, pull above");
    /* NVSwitch, 4 and 8 ranks */
    tap_ok(TOPO_AR_FUSED == pick(AR, 128 * KiB, 4, TOPO_LINK_NVS, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 256 * KiB, 4, TOPO_LINK_NVS, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 1024 * MiB, 4, TOPO_LINK_NVS, true, true),
           "NVS, 4 ranks: fused up to 128 KiB, twoshot above");
    tap_ok(TOPO_AR_FUSED == pick(AR, 64 * KiB, 8, TOPO_LINK_NVS, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 128 * KiB, 8, TOPO_LINK_NVS, true, true),
           "NVS, 8 ranks: fused up to 64 KiB");
    {
        /* ranks sharing GPUs time-slice them: no fused kernel that waits on a peer's */
        topo_select_in_t in = team(AR, 8, 4, TOPO_LINK_NVL, true, true);
        topo_plan_t p;
        in.gpus_per_node = 2;
        topo_select(&in, &p);
        tap_ok(TOPO_AR_ONESHOT == p.alg, "4 ranks on 2 NVLink GPUs, 8 B: oneshot, not fused (%s)",
               p.reason);
        in.forced_alg = TOPO_AR_FUSED;
        topo_select(&in, &p);
        tap_ok(TOPO_AR_FUSED == p.alg && p.forced && p.nblocks >= 1,
               "... a forced fused is honoured all the same (%s)", p.reason);
    }
    tap_ok(TOPO_BC_PUSH == pick(BC, 64 * KiB, 8, TOPO_LINK_NVS, true, true) &&
               TOPO_BC_TREE == pick(BC, 1 * MiB, 8, TOPO_LINK_NVS, true, true) &&
               TOPO_BC_TREE == pick(BC, 4 * MiB, 4, TOPO_LINK_NVS, true, true) &&
               TOPO_BC_CHAIN == pick(BC, 8 * MiB, 8, TOPO_LINK_NVS, true, true),
           "NVS, 4-8 ranks: bcast push, then tree up to 4 MiB, then chain");
    /* several ranks on one GPU behave like NVLink */
    tap_ok(TOPO_AR_ONESHOT == pick(AR, 4 * KiB, 4, TOPO_LINK_X, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 64 * MiB, 4, TOPO_LINK_X, true, true),
           "one GPU shared by 4 ranks: NVLink rows");
    /* PCIe switches */
    tap_ok(TOPO_AR_ONESHOT == pick(AR, 32 * KiB, 4, TOPO_LINK_PIX, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 64 * KiB, 4, TOPO_LINK_PIX, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 1 * MiB, 2, TOPO_LINK_PXB, true, true) &&
               TOPO_AR_RING == pick(AR, 2 * MiB, 4, TOPO_LINK_PXB, true, true),
           "PIX/PXB: oneshot to 32 KiB (<= 4 ranks), twoshot to 1 MiB, ring above");
    tap_ok(TOPO_AR_ONESHOT == pick(AR, 16 * KiB, 8, TOPO_LINK_PIX, true, true) &&
               TOPO_AR_TWOSHOT == pick(AR, 32 * KiB, 8, TOPO_LINK_PIX, true, true),
           "PIX, 8 ranks: oneshot only to 16 KiB");
    tap_ok(TOPO_BC_PUSH == pick(BC, 16 * KiB, 8, TOPO_LINK_PIX, true, true) &&
               TOPO_BC_TREE == pick(BC, 1 * MiB, 8, TOPO_LINK_PIX, true, true) &&
               TOPO_BC_CHAIN == pick(BC, 1 * MiB, 2, TOPO_LINK_PIX, true, true) &&
               TOPO_BC_CHAIN == pick(BC, 2 * MiB, 8, TOPO_LINK_PXB, true, true),
           "PIX/PXB bcast: push to 16 KiB, tree to 1 MiB from 4 ranks, chain above");
    /* peer access through the CPU, allowed by the level */
    tap_ok(TOPO_AR_ONESHOT == pick(AR, 16 * KiB, 2, TOPO_LINK_PHB, true, true) &&
               TOPO_AR_RING == pick(AR, 32 * KiB, 2, TOPO_LINK_SYS, true, true) &&
               TOPO_BC_PUSH == pick(BC, 16 * KiB, 4, TOPO_LINK_SYS, true, true) &&
               TOPO_BC_CHAIN == pick(BC, 32 * KiB, 4, TOPO_LINK_PHB, true, true),
           "PHB/SYS with peer access: oneshot/push to 16 KiB, then ring/chain");
}

/* Every size x rpn x link x peer access: structural rules of any decision. */
static void check_table_sweep(void)
{
    const topo_link_class_t links[] = {TOPO_LINK_X,   TOPO_LINK_NVL, TOPO_LINK_NVS,
                                       TOPO_LINK_PIX, TOPO_LINK_PXB, TOPO_LINK_PHB,
                                       TOPO_LINK_SYS};
    const int rpns[] = {2, 4, 8};
    int bad_p2p = 0, bad_shape = 0, bad_monotone = 0, bad_back = 0, cases = 0;
    for (int c = 0; c < TOPO_COLL_COUNT; ++c) {
        for (int l = 0; l < 7; ++l) {
            for (int r = 0; r < 3; ++r) {
                for (int access = 0; access < 3; ++access) {
                    bool all = (0 == access), ring = (access <= 1);
                    int last_alg = -1, switches = 0;
                    unsigned seen = 0;
                    for (size_t bytes = 8; bytes <= ((size_t) 1 << 30); bytes *= 2) {
                        topo_select_in_t in = team((topo_coll_t) c, bytes, rpns[r], links[l],
                                                   all, ring);
                        topo_plan_t p;
                        topo_select(&in, &p);
                        ++cases;
                        bad_p2p += (topo_alg_needs_p2p_all((topo_coll_t) c, p.alg) && !all) ||
                                   (topo_alg_needs_p2p_ring((topo_coll_t) c, p.alg) && !ring);
                        bad_shape += (p.alg <= 0 ||
                                      p.alg >= (TOPO_COLL_BCAST == c ? TOPO_BC_COUNT
                                                                     : TOPO_AR_COUNT) ||
                                      '\0' == p.reason[0] ||
                                      NULL == strstr(p.reason, topo_alg_name((topo_coll_t) c,
                                                                             p.alg)) ||
                                      (0 != p.chunk_bytes &&
                                       p.nchunks * p.chunk_bytes < bytes) ||
                                      (TOPO_AR_STAGED != p.alg && p.nblocks < 1) ||
                                      (TOPO_AR_STAGED != p.alg && p.nthreads < 32) || p.forced);
                        switches += (p.alg != last_alg);
                        /* leaving an algorithm for good: it may not come back at a larger size */
                        bad_back += (p.alg != last_alg && 0 != (seen & (1u << p.alg)));
                        seen |= 1u << p.alg;
                        last_alg = p.alg;
                    }
                    /* a size sweep moves through at most three algorithms, never back */
                    bad_monotone += (switches > 3);
                }
            }
        }
    }
    tap_ok(0 == bad_p2p, "%d decisions: none needs peer access the team lacks", cases);
    tap_ok(0 == bad_shape, "%d decisions: valid algorithm, reason names it, chunks cover the "
           "message, kernels get blocks and threads", cases);
    tap_ok(0 == bad_monotone, "size sweeps change algorithm at most twice");
    tap_ok(0 == bad_back, "size sweeps never return to an algorithm they left (%d returns)",
           bad_back);

    /* quiet: the same plan, without its text */
    int differ = 0;
    for (int c = 0; c < TOPO_COLL_COUNT; ++c) {
        for (size_t bytes = 8; bytes <= ((size_t) 1 << 30); bytes *= 4) {
            for (int forced = 0; forced < 3; ++forced) {
                topo_select_in_t in = team((topo_coll_t) c, bytes, 2, TOPO_LINK_NVL, true, true);
                topo_plan_t loud, quiet;
                in.forced_alg = (0 == forced) ? 0 : (1 == forced) ? 2 : 3;
                topo_select(&in, &loud);
                in.quiet = true;
                topo_select(&in, &quiet);
                differ += loud.alg != quiet.alg || loud.nblocks != quiet.nblocks ||
                          loud.nthreads != quiet.nthreads ||
                          loud.chunk_bytes != quiet.chunk_bytes ||
                          loud.nchunks != quiet.nchunks || loud.forced != quiet.forced ||
                          '\0' != quiet.reason[0] || '\0' == loud.reason[0];
            }
        }
    }
    tap_ok(0 == differ, "quiet selection: the same plans, no reason text (%d differ)", differ);
}

static void check_fallbacks(void)
{
    const topo_coll_t AR = TOPO_COLL_ALLREDUCE, BC = TOPO_COLL_BCAST;
    topo_select_in_t in;
    topo_plan_t p;

    tap_ok(TOPO_AR_RING == pick(AR, 8, 4, TOPO_LINK_NVL, false, true) &&
               TOPO_AR_RING == pick(AR, 64 * MiB, 8, TOPO_LINK_PHB, false, true) &&
               TOPO_BC_CHAIN == pick(BC, 8, 4, TOPO_LINK_PIX, false, true),
           "peer access only between ring neighbours: ring / chain at every size");
    tap_ok(TOPO_AR_STAGED == pick(AR, 8, 2, TOPO_LINK_NVL, false, false) &&
               TOPO_AR_STAGED == pick(AR, 1 * MiB, 8, TOPO_LINK_SYS, false, false) &&
               TOPO_BC_STAGED == pick(BC, 1 * MiB, 8, TOPO_LINK_NVS, false, false),
           "no peer access (p2p_disable, or the level refuses): staged");

    in = team(AR, 1 * MiB, 4, TOPO_LINK_NVS, true, true);
    in.nodes = 2;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_STAGED == p.alg && !p.forced && NULL != strstr(p.reason, "several nodes") &&
               NULL != strstr(p.reason, "2 nodes"),
           "two nodes: staged (%s)", p.reason);
    in.forced_alg = TOPO_AR_ONESHOT;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_STAGED == p.alg && !p.forced && NULL != strstr(p.reason, "ignored"),
           "two nodes: a forced oneshot is ignored (%s)", p.reason);
    in.forced_alg = TOPO_AR_STAGED;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_STAGED == p.alg && p.forced, "two nodes: a forced staged is honoured");

    in = team(BC, 4 * KiB, 1, TOPO_LINK_X, true, true);
    in.gpus_per_node = 1;
    topo_select(&in, &p);
    tap_ok(TOPO_BC_PUSH == p.alg && NULL != strstr(p.reason, "one rank"),
           "one rank: the trivial path (%s)", p.reason);
}

static void check_forced(void)
{
    topo_select_in_t in;
    topo_plan_t p;

    in = team(TOPO_COLL_ALLREDUCE, 8, 2, TOPO_LINK_NVL, true, true);
    in.forced_alg = TOPO_AR_TWOSHOT;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_TWOSHOT == p.alg && p.forced && NULL != strstr(p.reason, "forced"),
           "forced twoshot at 8 B is honoured (%s)", p.reason);
    in.forced_alg = TOPO_AR_RING;
    in.bytes = 64 * MiB;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_RING == p.alg && p.forced && 0 != p.chunk_bytes && p.nchunks > 1,
           "forced ring is pipelined (%zu chunks of %zu B)", p.nchunks, p.chunk_bytes);

    in = team(TOPO_COLL_ALLREDUCE, 8, 4, TOPO_LINK_PIX, false, true);
    in.forced_alg = TOPO_AR_ONESHOT;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_RING == p.alg && !p.forced &&
               NULL != strstr(p.reason, "forced oneshot needs peer access between all pairs"),
           "forced oneshot without all-pairs peer access falls back to ring (%s)", p.reason);
    in.p2p_ring = false;
    in.forced_alg = TOPO_AR_RING;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_STAGED == p.alg && !p.forced &&
               NULL != strstr(p.reason, "between ring neighbours"),
           "forced ring without neighbour peer access falls back to staged (%s)", p.reason);

    in = team(TOPO_COLL_BCAST, ((size_t) 1 << 30), 8, TOPO_LINK_NVS, true, true);
    in.forced_alg = TOPO_BC_TREE;
    topo_select(&in, &p);
    tap_ok(TOPO_BC_TREE == p.alg && p.forced, "forced bcast tree at 1 GiB is honoured");
    in.forced_alg = TOPO_BC_PUSH;
    in.p2p_all = false;
    topo_select(&in, &p);
    tap_ok(TOPO_BC_CHAIN == p.alg && !p.forced, "forced push without peer access -> chain");
    in.forced_alg = 9;
    in.p2p_all = true;
    topo_select(&in, &p);
    tap_ok(TOPO_BC_CHAIN == p.alg && !p.forced && NULL != strstr(p.reason, "unknown forced"),
           "an out-of-range forced value is ignored (%s)", p.reason);
    in.forced_alg = TOPO_BC_STAGED;
    topo_select(&in, &p);
    tap_ok(TOPO_BC_STAGED == p.alg && p.forced && 0 == p.nblocks,
           "forced staged bcast: no kernel");

    /* kernel overrides */
    in = team(TOPO_COLL_ALLREDUCE, 64 * MiB, 8, TOPO_LINK_PXB, true, true);
    in.nblocks = 7;
    in.nthreads = 256;
    in.chunk_bytes = 2 * MiB;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_RING == p.alg && 7 == p.nblocks && 256 == p.nthreads &&
               2 * MiB == p.chunk_bytes && 32 == p.nchunks,
           "blocks, threads and chunk overrides apply to the ring (32 chunks of 2 MiB)");
    in.bytes = 4 * KiB;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_ONESHOT == p.alg && 7 == p.nblocks && 256 == p.nthreads &&
               0 == p.chunk_bytes && 1 == p.nchunks,
           "on oneshot the chunk override has nothing to cut");
}

/* The team summaries of the fixtures feed the table. */
static void check_from_fixtures(void)
{
    char path[1024], err[TOPO_ERR_LEN];
    topo_t *t = NULL;
    topo_team_info_t info;
    topo_select_in_t in;
    topo_plan_t p;
    int team4[4] = {0, 1, 2, 3}, team2[2] = {0, 1};

    snprintf(path, sizeof(path), "%s/h200x2-nv18.topo", TOPO_FIXTURE_DIR);
    if (!tap_ok(TOPO_OK == topo_load_file(path, &t, err, sizeof(err)), "load %s %s", path, err)) {
        return;
    }
    memset(&in, 0, sizeof(in));
    topo_team_info(t, team2, 2, NULL, TOPO_P2P_LEVEL_AUTO, false, &info);
    topo_select_in_from_team(&in, &info, 1);
    in.coll = TOPO_COLL_ALLREDUCE;
    in.bytes = 1 * MiB;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_TWOSHOT == p.alg && NULL != strstr(p.reason, "NV18"),
           "h200x2 fixture, 1 MiB allreduce: %s", p.reason);
    topo_free(t);

    snprintf(path, sizeof(path), "%s/pcie-4gpu-nvlink-pairs.topo", TOPO_FIXTURE_DIR);
    topo_load_file(path, &t, err, sizeof(err));
    topo_team_info(t, team4, 4, NULL, TOPO_P2P_LEVEL_AUTO, false, &info);
    topo_select_in_from_team(&in, &info, 1);
    in.bytes = 8;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_STAGED == p.alg, "pcie-4, default level: staged (%s)", p.reason);
    topo_team_info(t, team4, 4, NULL, TOPO_P2P_LEVEL_PHB, false, &info);
    topo_select_in_from_team(&in, &info, 1);
    topo_select(&in, &p);
    tap_ok(TOPO_AR_ONESHOT == p.alg, "pcie-4, level PHB, 8 B: oneshot (%s)", p.reason);
    in.bytes = 1 * MiB;
    topo_select(&in, &p);
    tap_ok(TOPO_AR_RING == p.alg, "pcie-4, level PHB, 1 MiB: ring (%s)", p.reason);
    topo_free(t);
}

int main(void)
{
    check_names();
    check_table_points();
    check_table_sweep();
    check_fallbacks();
    check_forced();
    check_from_fixtures();
    return tap_done();
}
