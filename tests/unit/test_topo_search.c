/*
 * test_topo_search.c - link classes, rings, broadcast trees, peer-access decisions and team
 * summaries on the fixtures of tests/fixtures (no GPU needed).
 */
#include "tap.h"
#include "topo.h"

#include <stdlib.h>
#include <string.h>

#ifndef TOPO_FIXTURE_DIR
#define TOPO_FIXTURE_DIR "tests/fixtures"
#endif

static topo_t *load_fixture(const char *name)
{
    char path[1024], err[TOPO_ERR_LEN];
    topo_t *topo = NULL;
    snprintf(path, sizeof(path), "%s/%s.topo", TOPO_FIXTURE_DIR, name);
    if (TOPO_OK != topo_load_file(path, &topo, err, sizeof(err))) {
        tap_diag("load %s: %s", path, err);
        tap_ok(0, "fixture %s loads", name);
        exit(tap_done() ? 1 : TAP_HARD_ERROR_EXIT);
    }
    return topo;
}

static void all_gpus(const topo_t *t, int *team)
{
    for (int i = 0; i < t->ngpus; ++i) {
        team[i] = i;
    }
}

static bool label_is(const topo_t *t, int a, int b, const char *want)
{
    char buf[TOPO_LABEL_LEN];
    topo_link_label(&t->links[a][b], buf);
    if (0 != strcmp(buf, want)) {
        tap_diag("link %d-%d is %s, expected %s", a, b, buf, want);
        return false;
    }
    return true;
}

static uint32_t bw_of(const topo_t *t, const int *team, int a, int b)
{
    return (team[a] == team[b]) ? TOPO_BW_LOCAL : t->links[team[a]][team[b]].bw;
}

/* Every position exactly once, starting at 0. */
static bool is_permutation(const int *order, int n)
{
    int seen[256] = {0};
    if (0 != order[0]) {
        return false;
    }
    for (int i = 0; i < n; ++i) {
        if (order[i] < 0 || order[i] >= n || seen[order[i]]++) {
            return false;
        }
    }
    return true;
}

/* Brute force over all rings of the team: the best achievable slowest hop. */
static uint32_t best_slowest(const topo_t *t, const int *team, int n)
{
    int perm[16];
    uint32_t best = 0;
    for (int i = 0; i < n; ++i) {
        perm[i] = i;
    }
    /* permutations of positions 1..n-1 in lexicographic order */
    for (;;) {
        uint32_t m = UINT32_MAX;
        for (int i = 0; i < n; ++i) {
            uint32_t bw = bw_of(t, team, perm[i], perm[(i + 1) % n]);
            m = (bw < m) ? bw : m;
        }
        best = (m > best) ? m : best;
        int k = n - 2;
        while (k >= 1 && perm[k] > perm[k + 1]) {
            --k;
        }
        if (k < 1) {
            break;
        }
        int l = n - 1;
        while (perm[l] < perm[k]) {
            --l;
        }
        int x = perm[k];
        perm[k] = perm[l];
        perm[l] = x;
        for (int a = k + 1, b = n - 1; a < b; ++a, --b) {
            x = perm[a];
            perm[a] = perm[b];
            perm[b] = x;
        }
    }
    return best;
}

static int count_hops(const topo_t *t, const int *team, const int *order, int n,
                      topo_link_class_t cls)
{
    int k = 0;
    for (int i = 0; i < n; ++i) {
        int a = team[order[i]], b = team[order[(i + 1) % n]];
        k += (a != b && t->links[a][b].cls == cls);
    }
    return k;
}

static bool adjacent_in_ring(const int *order, int n, int a, int b)
{
    for (int i = 0; i < n; ++i) {
        int x = order[i], y = order[(i + 1) % n];
        if ((x == a && y == b) || (x == b && y == a)) {
            return true;
        }
    }
    return false;
}

static void check_classes(void)
{
    topo_t *dgx = load_fixture("dgx-h200-8gpu");
    topo_t *p4 = load_fixture("pcie-4gpu-nvlink-pairs");
    topo_t *p8 = load_fixture("pcie-8gpu-2socket");
    topo_t *h2 = load_fixture("h200x2-nv18");

    tap_ok(label_is(dgx, 0, 7, "NVS18") && label_is(dgx, 5, 2, "NVS18") && label_is(dgx, 3, 3, "X"),
           "dgx: every pair NVS18, the diagonal X");
    tap_ok(TOPO_LINK_NVS == dgx->links[1][6].cls && 450000 == dgx->links[1][6].bw,
           "dgx: NVSwitch class at 450 GB/s");
    tap_ok(label_is(p4, 0, 1, "NV4") && label_is(p4, 3, 2, "NV4") && label_is(p4, 1, 2, "PHB") &&
               label_is(p4, 0, 3, "PHB"),
           "pcie-4: bridged pairs NV4, the rest PHB");
    tap_ok(label_is(p8, 0, 1, "PIX") && label_is(p8, 4, 6, "PXB") && label_is(p8, 0, 2, "PHB") &&
               label_is(p8, 3, 4, "SYS") && label_is(p8, 7, 0, "SYS"),
           "pcie-8: PIX within a switch, PXB under the upper switch, PHB across root ports, SYS "
           "across sockets");
    tap_ok(label_is(h2, 0, 1, "NV18") && 450000 == h2->links[0][1].bw, "h200x2: NV18, 450 GB/s");
    topo_free(dgx);
    topo_free(p4);
    topo_free(p8);
    topo_free(h2);
}

static void check_rings(void)
{
    const char *names[] = {"dgx-h200-8gpu", "pcie-4gpu-nvlink-pairs", "pcie-8gpu-2socket",
                           "h200x2-nv18"};
    int team[TOPO_MAX_GPUS], order[TOPO_MAX_GPUS];
    uint32_t slowest;

    for (int f = 0; f < 4; ++f) {
        topo_t *t = load_fixture(names[f]);
        all_gpus(t, team);
        tap_ok(TOPO_OK == topo_ring(t, team, t->ngpus, order, &slowest) &&
                   is_permutation(order, t->ngpus),
               "%s: the ring visits every GPU once, from GPU 0", names[f]);
        tap_ok(slowest == best_slowest(t, team, t->ngpus),
               "%s: slowest hop %u MB/s is the best achievable (brute force)", names[f], slowest);
        topo_free(t);
    }

    topo_t *p4 = load_fixture("pcie-4gpu-nvlink-pairs");
    all_gpus(p4, team);
    topo_ring(p4, team, 4, order, &slowest);
    tap_ok(adjacent_in_ring(order, 4, 0, 1) && adjacent_in_ring(order, 4, 2, 3) &&
               2 == count_hops(p4, team, order, 4, TOPO_LINK_NVL),
           "pcie-4: the ring uses both NVLink pairs (%d %d %d %d)", order[0], order[1], order[2],
           order[3]);
    tap_ok(19200 == slowest, "pcie-4: slowest hop is PHB, 19.2 GB/s");

    /* ranks sharing a GPU sit together; position 0 starts the ring */
    int shared[6] = {2, 0, 2, 1, 3, 0};
    tap_ok(TOPO_OK == topo_ring(p4, shared, 6, order, &slowest) && is_permutation(order, 6),
           "pcie-4: ring over 6 ranks on 4 GPUs");
    int local_hops = 0;
    for (int i = 0; i < 6; ++i) {
        local_hops += (shared[order[i]] == shared[order[(i + 1) % 6]]);
    }
    tap_ok(2 == local_hops && 19200 == slowest,
           "pcie-4: co-located ranks adjacent (2 local hops), slowest still PHB");
    int one[3] = {1, 1, 1};
    tap_ok(TOPO_OK == topo_ring(p4, one, 3, order, &slowest) && TOPO_BW_LOCAL == slowest &&
               0 == order[0] && 1 == order[1] && 2 == order[2],
           "one GPU, three ranks: ring 0 1 2 at local bandwidth");
    int badteam[2] = {0, 4};
    tap_ok(TOPO_ERR_ARG == topo_ring(p4, badteam, 2, order, NULL), "a GPU outside the model is "
           "rejected");
    topo_free(p4);

    topo_t *p8 = load_fixture("pcie-8gpu-2socket");
    all_gpus(p8, team);
    topo_ring(p8, team, 8, order, &slowest);
    tap_ok(2 == count_hops(p8, team, order, 8, TOPO_LINK_SYS) &&
               4 == count_hops(p8, team, order, 8, TOPO_LINK_PIX),
           "pcie-8: the ring crosses the sockets twice and uses all four PIX pairs");
    /* a sub-team in a scattered order still starts at its position 0 */
    int sub[4] = {6, 1, 7, 0};
    topo_ring(p8, sub, 4, order, &slowest);
    tap_ok(is_permutation(order, 4) && 12000 == slowest &&
               2 == count_hops(p8, sub, order, 4, TOPO_LINK_PIX),
           "pcie-8: sub-team {6,1,7,0} pairs 6-7 and 0-1");
    topo_free(p8);

    /* above the exact-search limit: two 6-GPU NVSwitch islands joined across sockets */
    topo_t *big = topo_new();
    big->ngpus = 12;
    for (int i = 0; i < 12; ++i) {
        big->gpus[i].nvswitch_links = 18;
        big->gpus[i].sm = 90;
        snprintf(big->gpus[i].bus_id, sizeof(big->gpus[i].bus_id), "0000:%02x:00.0", i + 1);
        big->gpus[i].uuid[15] = (uint8_t) i;
    }
    for (int a = 0; a < 12; ++a) {
        for (int b = a + 1; b < 12; ++b) {
            /* interleave the islands in the numbering so that order 0..11 would be poor */
            bool same = (a % 2) == (b % 2);
            topo_set_link(big, a, b, same ? TOPO_LINK_NVS : TOPO_LINK_SYS, 0, 0);
        }
    }
    all_gpus(big, team);
    tap_ok(TOPO_OK == topo_ring(big, team, 12, order, &slowest) && is_permutation(order, 12) &&
               2 == count_hops(big, team, order, 12, TOPO_LINK_SYS),
           "12 GPUs in two islands (heuristic search): the ring crosses between islands twice");
    topo_free(big);
}

static bool valid_tree(const int *parent, int n, int root, int max_children)
{
    if (-1 != parent[root]) {
        return false;
    }
    for (int i = 0; i < n; ++i) {
        int children[TOPO_MAX_GPUS];
        int steps = 0;
        if (i != root && (parent[i] < 0 || parent[i] >= n)) {
            return false;
        }
        for (int p = i; p != root; p = parent[p]) {
            if (p < 0 || ++steps > n) {
                return false; /* a cycle or a broken chain */
            }
        }
        if (topo_tree_children(parent, n, i, children, TOPO_MAX_GPUS) > max_children) {
            return false;
        }
    }
    return true;
}

static void check_trees(void)
{
    int team[TOPO_MAX_GPUS], parent[TOPO_MAX_GPUS], ring[TOPO_MAX_GPUS];
    const int roots[] = {0, 3, 7};
    topo_t *dgx = load_fixture("dgx-h200-8gpu");
    all_gpus(dgx, team);
    for (int r = 0; r < 3; ++r) {
        int root = roots[r];
        tap_ok(TOPO_OK == topo_tree(dgx, team, 8, root, TOPO_TREE_BINARY, NULL, parent) &&
                   valid_tree(parent, 8, root, 2) && 3 == topo_tree_depth(parent, 8),
               "dgx: binary tree rooted at %d is balanced (depth 3)", root);
        tap_ok(TOPO_OK == topo_tree(dgx, team, 8, root, TOPO_TREE_CHAIN, NULL, parent) &&
                   valid_tree(parent, 8, root, 1) && 7 == topo_tree_depth(parent, 8),
               "dgx: chain rooted at %d visits all 8 GPUs", root);
    }
    topo_free(dgx);

    topo_t *p4 = load_fixture("pcie-4gpu-nvlink-pairs");
    all_gpus(p4, team);
    topo_ring(p4, team, 4, ring, NULL);
    for (int root = 0; root < 4; ++root) {
        int mate = root ^ 1; /* the NVLink partner */
        tap_ok(TOPO_OK == topo_tree(p4, team, 4, root, TOPO_TREE_BINARY, ring, parent) &&
                   valid_tree(parent, 4, root, 2) && root == parent[mate] &&
                   (parent[root ^ 2] == (root ^ 3) || parent[root ^ 3] == (root ^ 2)),
               "pcie-4: binary tree at %d: NVLink partner under the root, other pair linked", root);
        tap_ok(TOPO_OK == topo_tree(p4, team, 4, root, TOPO_TREE_CHAIN, ring, parent) &&
                   valid_tree(parent, 4, root, 1) && root == parent[mate],
               "pcie-4: chain at %d starts over its NVLink (leaves the PHB hop out)", root);
        int nvl_edges = 0;
        for (int i = 0; i < 4; ++i) {
            nvl_edges += (i != root && TOPO_LINK_NVL == p4->links[i][parent[i]].cls);
        }
        tap_ok(2 == nvl_edges, "pcie-4: chain at %d uses both NVLink pairs", root);
    }
    topo_free(p4);

    topo_t *p8 = load_fixture("pcie-8gpu-2socket");
    all_gpus(p8, team);
    for (int r = 0; r < 3; ++r) {
        int root = roots[r], sys_edges = 0;
        topo_tree(p8, team, 8, root, TOPO_TREE_BINARY, NULL, parent);
        for (int i = 0; i < 8; ++i) {
            sys_edges += (i != root && TOPO_LINK_SYS == p8->links[i][parent[i]].cls);
        }
        tap_ok(valid_tree(parent, 8, root, 2) && 1 == sys_edges,
               "pcie-8: binary tree at %d crosses the sockets once", root);
    }
    int bad[4];
    tap_ok(TOPO_ERR_ARG == topo_tree(p8, team, 8, 8, TOPO_TREE_BINARY, NULL, bad),
           "a root outside the team is rejected");
    topo_free(p8);

    /* several ranks on one GPU: still a valid tree */
    topo_t *h2 = load_fixture("h200x2-nv18");
    int shared[5] = {0, 1, 0, 1, 1};
    tap_ok(TOPO_OK == topo_tree(h2, shared, 5, 2, TOPO_TREE_BINARY, NULL, parent) &&
               valid_tree(parent, 5, 2, 2) &&
               TOPO_OK == topo_tree(h2, shared, 5, 4, TOPO_TREE_CHAIN, NULL, parent) &&
               valid_tree(parent, 5, 4, 1),
           "h200x2: trees over 5 ranks on 2 GPUs");
    topo_free(h2);
}

static void check_p2p(void)
{
    topo_t *p4 = load_fixture("pcie-4gpu-nvlink-pairs");
    topo_t *p8 = load_fixture("pcie-8gpu-2socket");
    const char *why;
    /* expected for (NV4 pair 0-1, PHB pair 0-2, PIX 0-1 on p8, PXB 4-6, SYS 3-4) per level */
    static const struct {
        topo_p2p_level_t level;
        bool nvl, phb, pix, pxb, sys;
    } want[] = {
        {TOPO_P2P_LEVEL_AUTO, true, false, true, true, false},
        {TOPO_P2P_LEVEL_NVL, true, false, false, false, false},
        {TOPO_P2P_LEVEL_PIX, true, false, true, false, false},
        {TOPO_P2P_LEVEL_PXB, true, false, true, true, false},
        {TOPO_P2P_LEVEL_PHB, true, true, true, true, false},
        {TOPO_P2P_LEVEL_SYS, true, true, true, true, true},
    };
    for (int i = 0; i < 6; ++i) {
        topo_p2p_level_t lv = want[i].level;
        tap_ok(want[i].nvl == topo_p2p_allowed(p4, 0, 1, lv, false, NULL) &&
                   want[i].phb == topo_p2p_allowed(p4, 0, 2, lv, false, NULL) &&
                   want[i].pix == topo_p2p_allowed(p8, 0, 1, lv, false, NULL) &&
                   want[i].pxb == topo_p2p_allowed(p8, 4, 6, lv, false, NULL) &&
                   want[i].sys == topo_p2p_allowed(p8, 3, 4, lv, false, NULL),
               "p2p level %s: NVL %d PHB %d PIX %d PXB %d SYS %d", topo_p2p_level_name(lv),
               want[i].nvl, want[i].phb, want[i].pix, want[i].pxb, want[i].sys);
    }
    tap_ok(!topo_p2p_allowed(p4, 0, 1, TOPO_P2P_LEVEL_SYS, true, &why) &&
               NULL != strstr(why, "p2p_disable"),
           "p2p_disable refuses even NVLink (%s)", why);
    tap_ok(topo_p2p_allowed(p4, 2, 2, TOPO_P2P_LEVEL_NVL, true, &why),
           "the same GPU is always allowed (%s)", why);
    p4->links[0][1].p2p = p4->links[1][0].p2p = 0;
    tap_ok(!topo_p2p_allowed(p4, 1, 0, TOPO_P2P_LEVEL_SYS, false, &why) &&
               NULL != strstr(why, "driver"),
           "the driver's 'no' wins over the level (%s)", why);
    tap_ok(!topo_p2p_allowed(p4, 0, 9, TOPO_P2P_LEVEL_SYS, false, NULL),
           "a GPU outside the model is refused");
    tap_ok(TOPO_P2P_LEVEL_PHB == topo_p2p_level_from_name("phb") &&
               TOPO_P2P_LEVEL_AUTO == topo_p2p_level_from_name("AUTO") &&
               -1 == topo_p2p_level_from_name("NVLINK"),
           "p2p level names parse case-insensitively");
    topo_free(p4);
    topo_free(p8);
}

static void check_team_info(void)
{
    int team[TOPO_MAX_GPUS];
    topo_team_info_t info;
    topo_t *dgx = load_fixture("dgx-h200-8gpu");
    all_gpus(dgx, team);
    tap_ok(TOPO_OK == topo_team_info(dgx, team, 8, NULL, TOPO_P2P_LEVEL_AUTO, false, &info) &&
               !info.mixed && '\0' == info.warning[0] && TOPO_LINK_NVS == info.worst &&
               0 == strcmp(info.label, "NVS18") && info.p2p_all && info.p2p_ring &&
               8 == info.ngpus && 450000 == info.ring_bw,
           "dgx: uniform NVS18 team, no warning, peer access everywhere");
    tap_ok(TOPO_OK == topo_team_info(dgx, team, 8, NULL, TOPO_P2P_LEVEL_AUTO, true, &info) &&
               !info.p2p_all && !info.p2p_ring && '\0' == info.warning[0],
           "dgx with p2p_disable: no peer access, no partial-refusal warning");
    topo_free(dgx);

    topo_t *h2 = load_fixture("h200x2-nv18");
    int two[4] = {0, 1, 0, 1};
    tap_ok(TOPO_OK == topo_team_info(h2, two, 4, NULL, TOPO_P2P_LEVEL_AUTO, false, &info) &&
               !info.mixed && 0 == strcmp(info.label, "NV18") && 18 == info.nvlinks &&
               4 == info.n && 2 == info.ngpus && info.p2p_all,
           "h200x2: 4 ranks on 2 GPUs: NV18, not mixed");
    int solo[3] = {1, 1, 1};
    tap_ok(TOPO_OK == topo_team_info(h2, solo, 3, NULL, TOPO_P2P_LEVEL_NVL, true, &info) &&
               TOPO_LINK_X == info.worst && 0 == strcmp(info.label, "X") && info.p2p_all &&
               info.p2p_ring && 1 == info.ngpus,
           "three ranks on one GPU: class X, peer access even with p2p_disable");
    topo_free(h2);

    topo_t *p4 = load_fixture("pcie-4gpu-nvlink-pairs");
    all_gpus(p4, team);
    tap_ok(TOPO_OK == topo_team_info(p4, team, 4, NULL, TOPO_P2P_LEVEL_AUTO, false, &info) &&
               info.mixed && NULL != strstr(info.warning, "links are mixed") &&
               NULL != strstr(info.warning, "NV4 (2 pairs)") &&
               NULL != strstr(info.warning, "PHB (4 pairs)") &&
               NULL != strstr(info.warning, "refused for 4 of 6"),
           "pcie-4: mixed-link warning: %s", info.warning);
    tap_ok(!info.p2p_all && !info.p2p_ring && TOPO_LINK_PHB == info.worst &&
               TOPO_LINK_NVL == info.best,
           "pcie-4 at the default level: no peer access across the CPU, so neither all pairs "
           "nor the ring");
    tap_ok(TOPO_OK == topo_team_info(p4, team, 4, NULL, TOPO_P2P_LEVEL_PHB, false, &info) &&
               info.p2p_all && info.p2p_ring && NULL == strstr(info.warning, "refused"),
           "pcie-4 at level PHB: peer access everywhere");
    int pair[2] = {2, 3};
    tap_ok(TOPO_OK == topo_team_info(p4, pair, 2, NULL, TOPO_P2P_LEVEL_NVL, false, &info) &&
               !info.mixed && '\0' == info.warning[0] && info.p2p_all &&
               0 == strcmp(info.label, "NV4"),
           "pcie-4 team {2,3}: one NVLink pair, no warning");
    topo_free(p4);

    topo_t *p8 = load_fixture("pcie-8gpu-2socket");
    all_gpus(p8, team);
    tap_ok(TOPO_OK == topo_team_info(p8, team, 8, NULL, TOPO_P2P_LEVEL_SYS, false, &info) &&
               info.mixed && NULL != strstr(info.warning, "SYS (16 pairs)") && info.p2p_all &&
               TOPO_LINK_SYS == info.worst && 12000 == info.slowest_bw,
           "pcie-8: mixed PCIe classes warned: %s", info.warning);
    int bad[2] = {0, 8};
    tap_ok(TOPO_ERR_ARG == topo_team_info(p8, bad, 2, NULL, TOPO_P2P_LEVEL_AUTO, false, &info),
           "team info rejects a GPU outside the model");
    topo_free(p8);
}

int main(void)
{
    check_classes();
    check_rings();
    check_trees();
    check_p2p();
    check_team_info();
    return tap_done();
}
