/*
 * coll_gpu_team.h - the node team of a communicator: what the NVLink fast path needs.
 *
 * Built on the first device-buffer call that the fast path takes (the setup's two rounds:
 * coll_gpu_team.c):
 *   - a control block in POSIX shared memory (created by rank 0, mapped by all): one
 *     cache-line record per rank with an arrival, a completion and a step counter, and the
 *     exported handles of the user buffers of the current call;
 *   - symmetric device scratch: every rank allocates the same size, exports it, and maps
 *     every peer's once;
 *   - the team's ring (the node model's, computed once by rank 0 and shipped to all), which
 *     the ring allreduce and the chain bcast walk;
 *   - a cache of our own exports, keyed by allocation base and buffer id; peers' buffers are
 *     mapped through the process's one table of mappings (coll_gpu_ipcmap.c).
 */
#ifndef MCA_COLL_GPU_TEAM_H
#define MCA_COLL_GPU_TEAM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dev.h"
#include "topo.h"

#define COLL_GPU_TEAM_MAX 16            /* ranks per node the fast path serves */
#define COLL_GPU_REGCACHE_ENTRIES 64    /* exports of our own buffers kept (LRU) */
#define COLL_GPU_CHAIN_DEPTH 4          /* chain bcast: chunk copies in flight per rank */
/* The head of each scratch slot of an n-rank team holds the fused allreduce's flags and
 * low-latency areas (dev.h, DEV_FUSED_HEAD_BYTES; zeroed at setup, never written by anything
 * else); other algorithms use the slot after it. */
#define COLL_GPU_SLOT_RESERVED(n) DEV_FUSED_HEAD_BYTES(n)

/* The step counter holds (seq << COLL_GPU_STEP_BITS) | step, so that it only grows, across
 * calls too; a failed rank publishes COLL_GPU_STEP_FAILED, which releases every waiter of that
 * call (who then reads the failure flag). */
#define COLL_GPU_STEP_BITS 24
#define COLL_GPU_STEP_FAILED ((UINT64_C(1) << COLL_GPU_STEP_BITS) - 1)
#define COLL_GPU_STEP(seq, k) (((uint64_t) (seq) << COLL_GPU_STEP_BITS) | (uint64_t) (k))

/* A buffer as exported for one call: the allocation's handle and where the buffer sits in it.
 * owner (the exporting process: dev_process_identity, unique on the host where a pid is not),
 * base and buffer_id identify the allocation (a freed and reallocated range gets a new
 * buffer_id, so a stale mapping is never used); base and size
 * let an importer find the stale mappings a new allocation overlaps (coll_gpu_ipcmap.c).
 * seq and bytes stamp the record with the call it was published for and the bytes that call
 * uses from offset on: the record stays in the control block after the call, and a peer of an
 * erroneous call (counts that differ, or an algorithm that publishes no buffer) must not map
 * it, or write past what the exporter brought (mca_coll_gpu_team_import refuses both). */
typedef struct coll_gpu_xbuf_t {
    dev_ipc_handle_t handle;
    uint64_t owner;
    uint64_t base;
    uint64_t size;
    uint64_t buffer_id;
    uint64_t offset;
    uint64_t seq;
    uint64_t bytes;
} coll_gpu_xbuf_t;

/* A hold on a mapping of coll_gpu_ipcmap.c (slot UINT32_MAX: none). */
typedef struct coll_gpu_ipcmap_hold_t {
    uint32_t slot;
    uint32_t gen;
} coll_gpu_ipcmap_hold_t;

/* Mappings one call of a team may hold: every peer's send and receive buffers. */
#define COLL_GPU_CALL_HOLDS (2 * COLL_GPU_TEAM_MAX)

/* What a rank brings to one bcast or allreduce through the team, published before it waits
 * for anyone.  bcast: the root's record is the call's plan (every rank runs the root's
 * algorithm and chunk), and a rank whose byte count differs from the root's sits the call out
 * with MPI_ERR_TRUNCATE instead of moving data.  allreduce: every rank reads every record, and
 * a byte count, op, element type or use of MPI_IN_PLACE that differs anywhere makes every rank
 * sit the call out with the same error (coll_gpu_nvl.c, mca_coll_gpu_nvl_allreduce_check).
 * Two records per rank, by seq parity: no rank can publish for seq + 2 before every rank has
 * arrived at seq + 1, hence finished reading the records of seq (short of a rank that gave up:
 * its later records stand for "gone past this call"). */
typedef struct coll_gpu_call_t {
    _Atomic uint64_t seq;      /* the call this record is for; stored last (release) */
    uint64_t bytes;            /* this rank's count x type size */
    uint64_t chunk;            /* bcast: the plan's pipeline chunk */
    int32_t alg;               /* bcast: the plan's topo_bcast_alg_t */
    int32_t dtype;             /* allreduce: the element type (dev_dtype_t) */
    int32_t op;                /* allreduce: the op (dev_op_t) */
    int32_t in_place;          /* allreduce: MPI_IN_PLACE given (1) or not (0) */
} coll_gpu_call_t;

/* One rank's record in the shared control block, alone on its cache lines. */
typedef struct coll_gpu_ctl_rank_t {
    _Atomic uint64_t arrive;   /* seq of the last call this rank entered (handles published) */
    _Atomic uint64_t done;     /* seq of the last call whose remote accesses it finished */
    _Atomic uint64_t failed;   /* seq of the last call in which this rank hit an error */
    _Atomic uint64_t step;     /* COLL_GPU_STEP(seq, steps or chunks completed): ring, chain */
    _Atomic uint64_t abandoned; /* first call this rank gave up waiting in (hang_error_seconds):
                                 * that call and every later one fail; 0: none */
    coll_gpu_xbuf_t sbuf;      /* this call's send buffer (zero-copy algorithms) */
    coll_gpu_xbuf_t rbuf;      /* this call's receive buffer */
    coll_gpu_call_t call[2];   /* bcast and allreduce agreement, by seq parity */
    /* the exchange (allgather, alltoall and their v forms): the bytes of sbuf that rank q
     * reads in this call, [offer_off[q], offer_off[q] + offer_len[q]), and the bytes this rank
     * expects from rank p, want_len[p]; written before arrive, read by peers between their
     * wait for it and their done (every rank waits for every done before its next exchange,
     * so one copy serves); the reduce-scatter and the reduce: offer_len[0] is the bytes of
     * this rank's whole input, which every rank compares */
    uint64_t offer_off[COLL_GPU_TEAM_MAX];
    uint64_t offer_len[COLL_GPU_TEAM_MAX];
    uint64_t want_len[COLL_GPU_TEAM_MAX];
} __attribute__((aligned(64))) coll_gpu_ctl_rank_t;

typedef struct coll_gpu_ctl_t {
    uint64_t magic;
    int nranks;
    coll_gpu_ctl_rank_t rank[COLL_GPU_TEAM_MAX];
} coll_gpu_ctl_t;

typedef struct coll_gpu_export_entry_t {
    uint64_t base;
    uint64_t buffer_id;
    dev_ipc_handle_t handle;
    uint64_t last_use;
} coll_gpu_export_entry_t;

typedef enum {
    COLL_GPU_TEAM_READY = 1,
    COLL_GPU_TEAM_PENDING = 2,   /* its setup's exchange is in flight (coll_gpu_team.c) */
    COLL_GPU_TEAM_FAILED = -1
} coll_gpu_team_state_t;

/* Point-to-point tags of coll/gpu's own messages on a user's communicator: the two rounds of a
 * team's setup, and the host fallback of calls queued on a team whose setup failed
 * (coll_gpu_engine.c).  No component of Open MPI 4.1 or 5.0 uses them (coll/base's tags
 * start at -7; MPI_ANY_TAG is -1, and a receive for it never matches a negative tag), and they
 * fit every PML's tag field. */
#define COLL_GPU_TAG_SETUP1 (-3)
#define COLL_GPU_TAG_SETUP2 (-4)
#define COLL_GPU_TAG_FALLBACK (-5)

/* What a wait of the engine waits for, as its hang report names it: peers' arrivals at or
 * completions of call seq (peer -1: every rank's), a peer's step, the root's record of a bcast
 * (reported as "to enter"), the fused allreduce's peers (their arrival, then their data), or
 * every rank's record of an allreduce (reported as "to enter"). */
typedef enum {
    COLL_GPU_WAIT_ARRIVE,
    COLL_GPU_WAIT_DONE,
    COLL_GPU_WAIT_STEP,
    COLL_GPU_WAIT_CALL,
    COLL_GPU_WAIT_FUSED,
    COLL_GPU_WAIT_RECORDS
} coll_gpu_wait_kind_t;

typedef struct coll_gpu_wait_t {
    coll_gpu_wait_kind_t kind;
    int peer;
    uint64_t seq, step;
    double start; /* first clock read of the wait; 0 before */
} coll_gpu_wait_t;

typedef struct coll_gpu_team_setup_t coll_gpu_team_setup_t;

typedef struct coll_gpu_team_t {
    coll_gpu_team_state_t state;
    int size, rank;
    uint64_t seq;                            /* calls made through the team */
    /* For the hang reports of the waits (coll_gpu_hang_warn_seconds): the communicator, the
     * last call already reported, and the call this rank gave up in
     * (coll_gpu_hang_error_seconds; 0: never). */
    int cid;
    uint64_t warned_seq;
    uint64_t abandoned;
    coll_gpu_ctl_t *ctl;
    dev_stream_t *stream;
    int device;                              /* the GPU of the stream (dev_device_enter) */
    void *scratch;                           /* ours: 2 slots of slot_bytes */
    size_t slot_bytes;
    void *peer_scratch[COLL_GPU_TEAM_MAX];   /* every rank's scratch, mapped here */
    coll_gpu_ipcmap_hold_t scratch_hold[COLL_GPU_TEAM_MAX]; /* ... and held for the team's life */
    uint64_t owner[COLL_GPU_TEAM_MAX];       /* each rank's process (coll_gpu_xbuf_t.owner) */
    dev_uuid_t uuid[COLL_GPU_TEAM_MAX];      /* each rank's GPU */
    int ngpus;                               /* distinct GPUs in the team */
    topo_team_info_t info;                   /* rank 0's summary of the team: the same on all */
    int ring_rank[COLL_GPU_TEAM_MAX];        /* ring position -> rank (rank 0's ring) */
    int ring_pos[COLL_GPU_TEAM_MAX];         /* rank -> ring position */
    dev_event_t *events[COLL_GPU_CHAIN_DEPTH]; /* chain bcast: completion of chunk copies */
    /* peers' buffers mapped for call hold_seq, held until the next call imports */
    coll_gpu_ipcmap_hold_t holds[COLL_GPU_CALL_HOLDS];
    int nholds;
    uint64_t hold_seq;
    coll_gpu_export_entry_t exports[COLL_GPU_REGCACHE_ENTRIES];
    uint64_t clock;                          /* LRU time of the exports */
    struct coll_gpu_nvl_state_t *nvl;        /* coll_gpu_nvl.c's own state, made on first use */
    /* Nonblocking calls on the team (coll_gpu_engine.c): queued in issue order, the head
     * running; the list of teams with a queue; whether a step of the head is running (a poll
     * nested in it leaves the team alone), and whether the team ever queued one. */
    struct coll_gpu_async_t *async_head, *async_tail;
    struct coll_gpu_team_t *async_next;
    bool async_listed, async_busy, async_used;
    /* The setup while its exchange is in flight (COLL_GPU_TEAM_PENDING), and whether a
     * nonblocking call began it: then the team's queue takes every later call that a team
     * could take, whatever the setup's outcome (a failed one runs them through the host,
     * coll_gpu_engine.c), since when the outcome becomes known differs between ranks. */
    coll_gpu_team_setup_t *setup;
    bool async_setup;
    /* A blocking call waited for the setup's end (mca_coll_gpu_team_get): every rank makes that
     * call in the same order, so from it on every rank knows the outcome, whoever began the
     * setup, and a nonblocking call may decide from it alone (select_nb, an exchange's
     * mca_coll_gpu_async_xcall): no more queueing for a setup a nonblocking call began. */
    bool settled;
} coll_gpu_team_t;

#endif /* MCA_COLL_GPU_TEAM_H */
