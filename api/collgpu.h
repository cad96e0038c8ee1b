/*
 * collgpu.h - coll/gpu's C API for MPI programs: 16-bit floating-point reductions.
 *
 * MPI has no bfloat16 datatype, and Open MPI 4.1 no float16 one, while mixed-precision codes
 * reduce in both.  This library (libcollgpu, installed with coll/gpu) hands out a datatype for
 * each and the reduction ops on them:
 *
 *     MPI_Datatype bf16;
 *     MPI_Op sum;
 *     collgpu_type_bfloat16(&bf16);        // after MPI_Init; the same handle on every call
 *     collgpu_op(MPI_SUM, bf16, &sum);
 *     MPI_Allreduce(MPI_IN_PLACE, dbuf, n, bf16, sum, comm);
 *
 * The handles are made once per process, at the first call after MPI_Init, and freed by
 * MPI_Finalize (do not free them).  The ops are MPI user ops (commutative) whose functions
 * reduce on the host, so they work in any MPI, with or without coll/gpu; coll/gpu recognises
 * them and reduces device buffers in its GPU kernels instead.  Both compute the same answer:
 *
 *   - two operands: each is widened to float, the op applied in float (MIN is b < a ? b : a,
 *     MAX b > a ? b : a), the result rounded to the 16-bit type (nearest, ties to even).  For
 *     SUM and PROD that is the correctly rounded 16-bit IEEE result;
 *   - where coll/gpu's kernels fold more than two ranks' data at once (its one-shot and fused
 *     allreduces), they accumulate in float and round once, as NCCL does: with three or more
 *     ranks an answer may differ from a pairwise fold in the last bit, as any change of the
 *     order of a floating-point reduction may.
 *
 * The ops take any datatype made of 16-bit elements densely (these two, MPI_UINT16_T, a
 * contiguous type of them): the op, not the datatype, says which format the bits are.  Every
 * function returns MPI_SUCCESS or an MPI error class: MPI_ERR_OTHER before MPI_Init or after
 * MPI_Finalize, MPI_ERR_TYPE or MPI_ERR_OP for what it does not serve, MPI_ERR_ARG for NULL.
 * Thread safe.
 */
#ifndef COLLGPU_H
#define COLLGPU_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLLGPU_API_VERSION 1

/* IEEE 754 binary16 ("half", torch.float16, CUDA's __half). */
int collgpu_type_float16(MPI_Datatype *type);
/* bfloat16: the upper 16 bits of a binary32 (torch.bfloat16, CUDA's __nv_bfloat16). */
int collgpu_type_bfloat16(MPI_Datatype *type);
/* The op that applies op (MPI_SUM, MPI_PROD, MPI_MIN or MPI_MAX) to elements of type (one of
 * the two above). */
int collgpu_op(MPI_Op op, MPI_Datatype type, MPI_Op *out);
/* The formats, as collgpu_op_query tells them. */
#define COLLGPU_FLOAT16 1
#define COLLGPU_BFLOAT16 2
/* Is op one that collgpu_op handed out?  Then the format it reads (COLLGPU_FLOAT16 or
 * COLLGPU_BFLOAT16), and the predefined op it applies in *base (base may be NULL); else 0.
 * Never creates anything (coll/gpu asks it on every call with a user op). */
int collgpu_op_query(MPI_Op op, MPI_Op *base);

#ifdef __cplusplus
}
#endif

#endif /* COLLGPU_H */
