#!/usr/bin/env python3
"""python_bench.py - MPI_Allreduce on GPU buffers from Python (mpi4py), and where the time goes.

Run under mpirun with coll/gpu loaded, one GPU per rank, e.g.

    mpirun -np 2 --bind-to none python3 tests/bench/python_bench.py [--iters N] [--max BYTES]

For each size (float32 sum, in place, as `comm.Allreduce(MPI.IN_PLACE, t)`), it times:

  torch      a torch CUDA tensor handed to mpi4py as it is
  cupy       a CuPy array handed to mpi4py as it is
  pointer    the same device memory handed as a raw address (MPI.buffer.fromaddress), so that
             mpi4py does not look at the array at all: the MPI call plus mpi4py's own call cost
and, once, the parts that are not the collective:

  torch __cuda_array_interface__ / __dlpack__ export, tensor.data_ptr(), CuPy's interface,
  a 1-element host (NumPy) Allreduce through mpi4py (mpi4py's fixed cost plus the host MPI call)

Time per call is the mean over the iterations, the maximum over ranks; results are checked
(each rank's buffer holds rank + 1 before the call; the sum is known) so a wrong answer fails
the run.  Prints one table; exit status 1 on a wrong result.
"""
import argparse
import sys
import time

from mpi4py import MPI


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--min", type=int, default=4, help="smallest size in bytes")
    ap.add_argument("--max", type=int, default=32 << 20, help="largest size in bytes")
    ap.add_argument("--factor", type=int, default=8)
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()

    import cupy
    import numpy
    import torch

    ngpu = torch.cuda.device_count()
    dev = rank % max(ngpu, 1)
    torch.cuda.set_device(dev)
    cupy.cuda.Device(dev).use()

    def timed(fn, iters, warmup):
        for _ in range(warmup):
            fn()
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t1 = time.perf_counter()
        local = (t1 - t0) / iters * 1e6
        return comm.allreduce(local, op=MPI.MAX)

    expect = size * (size + 1) / 2
    bad = 0
    out = []
    if 0 == rank:
        print(f"# python_bench: {size} ranks, {ngpu} GPU(s) visible, torch {torch.__version__}, "
              f"cupy {cupy.__version__}, mpi4py {__import__('mpi4py').__version__}, "
              f"{MPI.Get_library_version().splitlines()[0]}")

    # ---- the parts that are not the collective -------------------------------------------
    t = torch.full((1,), float(rank + 1), device="cuda", dtype=torch.float32)
    c = cupy.full((1,), rank + 1, dtype=cupy.float32)
    h = numpy.full((1,), rank + 1, dtype=numpy.float32)
    parts = [
        ("torch __cuda_array_interface__", lambda: t.__cuda_array_interface__),
        ("torch __dlpack__()", lambda: t.__dlpack__()),
        ("torch data_ptr()", lambda: t.data_ptr()),
        ("cupy __cuda_array_interface__", lambda: c.__cuda_array_interface__),
        ("host Allreduce, 1 float (numpy)", lambda: comm.Allreduce(MPI.IN_PLACE, h)),
    ]
    for name, fn in parts:
        us = timed(fn, args.iters, args.warmup)
        out.append(f"# part: {name:34s} {us:9.2f} us")

    # ---- the collective, three ways --------------------------------------------------------
    rows = []
    nbytes = args.min
    while nbytes <= args.max:
        n = max(1, nbytes // 4)
        t = torch.empty((n,), device="cuda", dtype=torch.float32)
        c = cupy.empty((n,), dtype=cupy.float32)
        # MPI.buffer from mpi4py 4, MPI.memory before
        ptr_buf = getattr(MPI, "buffer", getattr(MPI, "memory", None)).fromaddress(t.data_ptr(),
                                                                                  n * 4)
        cols = []
        for name, arr, call in (
            ("torch", t, lambda: comm.Allreduce(MPI.IN_PLACE, t)),
            ("cupy", c, lambda: comm.Allreduce(MPI.IN_PLACE, c)),
            ("pointer", t, lambda: comm.Allreduce(MPI.IN_PLACE, [ptr_buf, MPI.FLOAT])),
        ):
            fill = arr.fill if name == "cupy" else arr.fill_  # CuPy's fill, torch's fill_
            fill(rank + 1)
            torch.cuda.synchronize()
            us = timed(call, args.iters, args.warmup)
            # check: one more call on known data
            fill(rank + 1)
            torch.cuda.synchronize()
            call()
            torch.cuda.synchronize()
            host = arr.cpu().numpy() if name != "cupy" else cupy.asnumpy(arr)
            if not numpy.all(host == expect):
                bad += 1
                print(f"rank {rank}: {name} {nbytes} B: wrong result "
                      f"(first {host[0]}, expected {expect})", file=sys.stderr)
            cols.append(us)
        rows.append((nbytes, cols))
        nbytes *= args.factor

    bad = comm.allreduce(bad, op=MPI.SUM)
    if 0 == rank:
        print("\n".join(out))
        print(f"# {'bytes':>10s} {'torch us':>10s} {'cupy us':>10s} {'pointer us':>10s}")
        for nbytes, cols in rows:
            print(f"  {nbytes:10d} " + " ".join(f"{x:10.2f}" for x in cols))
        print(f"# check: {'ok' if 0 == bad else f'{bad} WRONG'}")
    return 0 if 0 == bad else 1


if __name__ == "__main__":
    sys.exit(main())
