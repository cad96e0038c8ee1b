"""torch_bench.py - the collgpu torch backend's cost and bandwidth against MPI from C.

    mpirun -np 2 python3 torch_bench.py [--device cuda|cpu] [--iters N]

Times dist.all_reduce through the backend (torch's front end, the Python process group, the
ctypes call into libcollgpu_torch, MPI_Allreduce) against MPI_Allreduce on the same tensor's
memory through one ctypes call of the same library (no torch, no process group: the floor a
Python caller has), at 4 bytes (float32), at 64 MiB of float32 and of bfloat16, and at float32
of the bfloat16's element count (32 Mi), for bfloat16's speed-up over float32.  One line per
case: microseconds per call (median of rounds) and, for the large ones, algorithm bandwidth
(bytes / time); then the speed-up at each bfloat16 count that float32 was also run at.
"""

import statistics
import sys
import time

import collgpu_torch  # noqa: F401  (registers the backend, rendezvous from MPI)
import torch
import torch.distributed as dist
from collgpu_torch import _native as nat
from collgpu_torch import _pg


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def timed(fn, iters, rounds, sync):
    """Median over rounds of the seconds per call of fn (every rank starts a round together)."""
    per = []
    for _ in range(rounds):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        per.append((time.perf_counter() - t0) / iters)
    return statistics.median(per)


def breakdown(dev, iters, sync):
    """Where a 4-byte dist.all_reduce spends its time: each layer timed on its own."""
    t = torch.ones(1, device=dev)
    import gc
    group = dist.distributed_c10d._get_default_group()
    pg = next(o for o in gc.get_objects() if isinstance(o, _pg.ProcessGroupCollGPU))
    opts = dist.AllreduceOptions()
    if hasattr(opts, "asyncOp"):  # torch >= 2.7: true by default, which the backend serves
        opts.asyncOp = False      # on its communication thread; dist.all_reduce passes false
    fut = _pg._done([t])
    steps = [
        ("MPI_Allreduce through ctypes", lambda: nat.call("allreduce", 0, None, t.data_ptr(), 1,
                                                          nat.F32, nat.SUM)),
        ("stream synchronize through torch's Stream", lambda: torch.cuda.current_stream(
            t.device).synchronize() if t.is_cuda else None),
        ("stream synchronize, the backend's (_settle)", lambda: _pg._settle(t)),
        ("both in one C call (CUDA: _allreduce_synced; CPU, or a package without it: nothing)",
         lambda: _pg._allreduce_synced(0, t, nat.SUM)
         if t.is_cuda and hasattr(_pg, "_allreduce_synced") else None),
        ("a completed Work (Future, _create_work_from_future)", lambda: _pg._done([t])),
        ("Work.wait of a completed Work", lambda: fut.wait()),
        ("the Python process group's allreduce, called from Python", lambda: pg.allreduce([t], opts)),
        ("ProcessGroup.allreduce (torch's C++ dispatch into it)", lambda: group.allreduce([t], opts).wait()),
        ("dist.all_reduce", lambda: dist.all_reduce(t)),
    ]
    for name, fn in steps:
        for _ in range(200):
            fn()
        s = timed(fn, iters, 5, sync)
        if dist.get_rank() == 0:
            print(f"torch_bench breakdown {dev}: {name}: {s * 1e6:.2f} us", flush=True)
    if dist.get_rank() == 0:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
    for _ in range(iters):
        dist.all_reduce(t)
    if dist.get_rank() == 0:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)


def main():
    dev = arg("--device", "cuda")
    iters = int(arg("--iters", "200"))
    dist.init_process_group("collgpu")
    rank = dist.get_rank()
    if dev == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        sync = torch.cuda.synchronize
    else:
        sync = lambda: None  # noqa: E731
    codes = {torch.float32: nat.F32, torch.bfloat16: nat.BF16}
    big = int(arg("--big", "0"))  # also N Mi elements of float32 and bfloat16
    # issue 21's cases: 4 B; 64 MiB of float32 and of bfloat16; and float32 of the bfloat16's
    # element count (32 Mi, 128 MiB), against which the bfloat16 speed-up is taken
    cases = [("4 B float32", torch.float32, 1, iters * 10),
             ("64 MiB float32", torch.float32, 16 << 20, max(iters // 20, 5)),
             ("64 MiB bfloat16 (32 Mi)", torch.bfloat16, 32 << 20, max(iters // 20, 5)),
             ("32 Mi float32 (128 MiB)", torch.float32, 32 << 20, max(iters // 20, 5))]
    if big:
        cases += [(f"{big} Mi float32 ({big * 4} MiB)", torch.float32, big << 20, 5),
                  (f"{big} Mi bfloat16 ({big * 2} MiB)", torch.bfloat16, big << 20, 5)]
    if "--breakdown" in sys.argv:
        breakdown(dev, iters * 10, sync)
    times = {}
    for name, dtype, n, it in cases:
        t = (torch.rand(n, device=dev) + 0.5).to(dtype)
        for _ in range(3):  # warm: the team, the mappings, the pools
            dist.all_reduce(t)
        torch_s = timed(lambda: dist.all_reduce(t), it, 5, sync)

        def raw():
            # what dist.all_reduce ends in, minus torch and the process group: the stream's work
            # settled (the backend's own way: a C program would synchronise too), then one
            # ctypes call of MPI_Allreduce on the tensor's memory
            _pg._settle(t)
            nat.call("allreduce", 0, None, t.data_ptr(), n, codes[dtype], nat.SUM)
        raw_s = timed(raw, it, 5, sync)
        times[(dtype, n)] = (torch_s, raw_s)
        if rank == 0:
            nbytes = n * t.element_size()
            bw = f", {nbytes / torch_s / 1e9:.1f} GB/s torch, {nbytes / raw_s / 1e9:.1f} GB/s C" \
                if nbytes > 4096 else ""
            print(f"torch_bench {dev} {name}: dist.all_reduce {torch_s * 1e6:.1f} us, "
                  f"MPI_Allreduce through ctypes {raw_s * 1e6:.1f} us, added "
                  f"{(torch_s - raw_s) * 1e6:.1f} us{bw}", flush=True)
    for n in sorted({n for (d, n) in times if d == torch.bfloat16}):
        f32, b16 = times.get((torch.float32, n)), times[(torch.bfloat16, n)]
        if f32 is not None and rank == 0:
            print(f"torch_bench {dev} bfloat16 speed-up at {n >> 20} Mi elements: "
                  f"{f32[0] / b16[0]:.2f} x through torch, {f32[1] / b16[1]:.2f} x C",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
