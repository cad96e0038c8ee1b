"""torch_bench.py - the collgpu torch backend's cost and bandwidth against MPI from C.

    mpirun -np 2 python3 torch_bench.py [--device cuda|cpu] [--iters N]

Times dist.all_reduce through the backend (torch's front end, the Python process group, the
ctypes call into libcollgpu_torch, MPI_Allreduce) against MPI_Allreduce on the same tensor's
memory through one ctypes call of the same library (no torch, no process group: the floor a
Python caller has), at 4 bytes (float32) and at 64 MiB of float32 against the same element
count of bfloat16 (16 Mi elements each).  One line per case: microseconds per call (median of
rounds) and, for the large ones, algorithm bandwidth (bytes / time).
"""

import statistics
import sys
import time

import collgpu_torch  # noqa: F401  (registers the backend, rendezvous from MPI)
import torch
import torch.distributed as dist
from collgpu_torch import _native as nat


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
    from collgpu_torch import _pg
    t = torch.ones(1, device=dev)
    import gc
    group = dist.distributed_c10d._get_default_group()
    pg = next(o for o in gc.get_objects() if isinstance(o, _pg.ProcessGroupCollGPU))
    opts = dist.AllreduceOptions()
    fut = _pg._done([t])
    steps = [
        ("MPI_Allreduce through ctypes", lambda: nat.call("allreduce", 0, None, t.data_ptr(), 1,
                                                          nat.F32, nat.SUM)),
        ("stream synchronize", lambda: torch.cuda.current_stream(t.device).synchronize()
         if t.is_cuda else None),
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
    cases = [("4 B float32", torch.float32, 1, iters * 10),
             ("64 MiB float32", torch.float32, 16 << 20, max(iters // 20, 5)),
             ("16 Mi bfloat16 (32 MiB)", torch.bfloat16, 16 << 20, max(iters // 20, 5))]
    if big:
        cases += [(f"{big} Mi float32 ({big * 4} MiB)", torch.float32, big << 20, 5),
                  (f"{big} Mi bfloat16 ({big * 2} MiB)", torch.bfloat16, big << 20, 5)]
    if "--breakdown" in sys.argv:
        breakdown(dev, iters * 10, sync)
    for name, dtype, n, it in cases:
        t = (torch.rand(n, device=dev) + 0.5).to(dtype)
        for _ in range(3):  # warm: the team, the mappings, the pools
            dist.all_reduce(t)
        torch_s = timed(lambda: dist.all_reduce(t), it, 5, sync)

        def raw():
            # what dist.all_reduce ends in, minus torch and the process group: the stream's work
            # settled, then one ctypes call of MPI_Allreduce on the tensor's memory
            if t.is_cuda:
                torch.cuda.current_stream().synchronize()
            nat.call("allreduce", 0, None, t.data_ptr(), n, codes[dtype], nat.SUM)
        raw_s = timed(raw, it, 5, sync)
        if rank == 0:
            nbytes = n * t.element_size()
            bw = f", {nbytes / torch_s / 1e9:.1f} GB/s torch, {nbytes / raw_s / 1e9:.1f} GB/s C" \
                if nbytes > 4096 else ""
            print(f"torch_bench {dev} {name}: dist.all_reduce {torch_s * 1e6:.1f} us, "
                  f"MPI_Allreduce through ctypes {raw_s * 1e6:.1f} us, added "
                  f"{(torch_s - raw_s) * 1e6:.1f} us{bw}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
