import time, collgpu_torch, torch, torch.distributed as dist
from collgpu_torch import _native as nat
dist.init_process_group("collgpu")
t = torch.ones(1)
def bench(f, n=3000):
    for _ in range(200): f()
    dist.barrier(); t0 = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - t0) / n * 1e6
raw = bench(lambda: nat.call("allreduce", 0, None, t.data_ptr(), 1, nat.F32, nat.SUM))
pg = bench(lambda: dist.all_reduce(t))
if dist.get_rank() == 0: print(f"4 B allreduce: raw ctypes {raw:.1f} us, dist.all_reduce {pg:.1f} us")
dist.destroy_process_group()
