/*
 * reference.h - plain-C reference of every kernel of the device layer.
 *
 * Written to be obviously right rather than fast: it is the emulated backend's kernel, the
 * host-side reduce (dev_reduce_host) and the yardstick the GPU kernels are tested against.
 * Internal to libcoll_gpu_dev; the tests reach it only through the public API.
 */
#ifndef COLL_GPU_REFERENCE_H
#define COLL_GPU_REFERENCE_H

#include "dev.h"

/*
 * dst[i] = a[i] op b[i] for i < count, on host memory.
 *
 * Semantics (the GPU kernels follow the same rules):
 *   - integer SUM and PROD wrap modulo 2^bits (two's complement), signed or not;
 *   - MIN is (b < a ? b : a) and MAX is (b > a ? b : a), also for floating point;
 *   - LAND, LOR, LXOR treat non-zero as true and store 0 or 1;
 *   - complex PROD is (ar*br - ai*bi, ar*bi + ai*br), without C99 Annex G's NaN repair;
 *   - MINLOC/MAXLOC keep the smaller (larger) value; on equal values the smaller index (MPI);
 *   - binary16 and bfloat16: both operands are converted to float (exactly), the op is applied
 *     in float (MIN and MAX as above, on the float values), and the result is rounded to the
 *     16-bit type once, to nearest, ties to even (halfprec.h, bit for bit CUDA's _rn
 *     conversions; every NaN becomes 0x7fff).  For SUM and PROD this is the correctly rounded
 *     result of the 16-bit operation: the float op rounds first, but float's 24 bits are at
 *     least 2p + 2 for p = 11 and p = 8, so that double rounding never changes the result.
 * dst may be a or b; other overlaps are not allowed.
 * Returns DEV_OK, or DEV_ERR_UNSUPPORTED when dev_op_valid(op, dtype) is false.
 */
int dev_ref_reduce(void *dst, const void *a, const void *b, size_t count, dev_dtype_t dtype,
                   dev_op_t op);

/*
 * dev_reduce_multi on host memory: v = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i],
 * folded left to right (acc = acc op srcs[k][i], acc the first operand of dev_ref_reduce), then
 * dsts[k][i] = v for every k.  binary16 and bfloat16 are the exception to the pairwise rule:
 * the fold runs in float (acc = float(srcs[0][i]), then acc = acc op float(srcs[k][i])) and v is
 * acc rounded to the 16-bit type once, at the end, as the GPU kernels do (reduce_ops.cuh); so
 * the multi-source result is generally not a chain of dev_ref_reduce calls.  nsrc == 1 copies
 * (any dtype, bits unchanged, NaN payloads too).  Works through a private buffer a
 * block of elements at a time: every source element of a block is read before any destination
 * element of that block is written, so a dst may be a src (or another mapping of it).
 * Arguments as dev.c checks them for the backends (count > 0, 1 <= nsrc, ndst <= 16, ...).
 */
int dev_ref_reduce_multi(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                         size_t count, dev_dtype_t dtype, dev_op_t op);

#endif /* COLL_GPU_REFERENCE_H */
