"""The collgpu torch backend against a reference and against gloo, under mpirun (any size >= 2).

    mpirun -np N python3 test_collgpu_torch.py [collectives|ddp|groups|all] [--device cpu|cuda]

Every rank can make every rank's input (a seeded generator per rank and case), so each rank
computes the exact expected result itself; values are small integers, exact in every dtype, so
the comparison is exact.  gloo, run on the same inputs in the same processes, must agree where it
supports the dtype and op.  Cases: every collective x dtype x op the backend supports, the
errors it must raise (dtype, op), async_op, coalescing, point to point, subgroups, DDP training
(an MLP and a CNN, 20 steps) equal to single-process training on the whole batch.  Rank 0
prints TAP; a case is ok only where it is ok on every rank.
"""

import sys

import collgpu_torch  # noqa: F401  (registers "collgpu"; MPI up)
import torch
import torch.distributed as dist

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool]
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
R = dist.ReduceOp

results = []  # (ok on this rank, name, detail)


def check(ok, name, detail=""):
    results.append((bool(ok), name, detail))


def data(rank, dtype, n, case, low=0, high=5):
    """Rank `rank`'s input of a case: small integers, exact in every dtype."""
    g = torch.Generator().manual_seed(1000003 * (rank + 1) + 7919 * case)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    lo = max(low, 0) if dtype == torch.uint8 else low
    return torch.randint(lo, high, (n,), generator=g).to(dtype)


def ops_for(dtype):
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dtype in FLOATS:
        ops.append(R.AVG)
    else:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def fold(op, tensors):
    """The reference reduction, in float64 or int64 (bool: logical)."""
    if tensors[0].dtype == torch.bool:
        s = torch.stack(tensors)
        if op in (R.SUM, R.MAX, R.BOR):
            return s.any(0)
        if op in (R.PRODUCT, R.MIN, R.BAND):
            return s.all(0)
        return s.sum(0) % 2 == 1
    wide = [t.double() if t.dtype in FLOATS else t.long() for t in tensors]
    s = torch.stack(wide)
    if op == R.SUM:
        out = s.sum(0)
    elif op == R.AVG:
        out = s.sum(0) / len(tensors)
    elif op == R.PRODUCT:
        out = s.prod(0)
    elif op == R.MIN:
        out = s.min(0).values
    elif op == R.MAX:
        out = s.max(0).values
    else:
        out = wide[0].clone()
        for t in wide[1:]:
            out = out & t if op == R.BAND else out | t if op == R.BOR else out ^ t
    return out.to(tensors[0].dtype)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.cpu(), b.cpu())


def collectives(dev, gloo):
    rank, n = dist.get_rank(), dist.get_world_size()
    case = 0
    gloo_agreed = gloo_skipped = 0

    def against_gloo(fn, want):
        """fn(group) -> result on this rank; compare gloo's with want where gloo can."""
        nonlocal gloo_agreed, gloo_skipped
        try:
            got = fn(gloo)
        except (RuntimeError, ValueError, TypeError):
            gloo_skipped += 1
            return True
        gloo_agreed += 1
        return same(got, want)

    for dtype in DTYPES:
        for op in ops_for(dtype):
            case += 1
            count = 37
            high = 3 if op == R.PRODUCT else 5
            mine = data(rank, dtype, count, case, high=high).to(dev)
            want = fold(op, [data(r, dtype, count, case, high=high) for r in range(n)])
            t = mine.clone()
            dist.all_reduce(t, op=op)
            ok = same(t, want.to(dev))
            ok &= against_gloo(lambda g: (lambda x: (dist.all_reduce(x, op=op, group=g), x)[1])(
                mine.cpu().clone()), want)
            check(ok, f"all_reduce {dtype} {op}")

            # reduce to the last rank
            root = n - 1
            t = mine.clone()
            dist.reduce(t, dst=root, op=op)
            ok = same(t, want.to(dev)) if rank == root else same(t, mine)
            check(ok, f"reduce {dtype} {op} to rank {root}")

            # reduce_scatter_tensor and reduce_scatter: block r of everyone's input
            inp = data(rank, dtype, count * n, case + 5000, high=high).to(dev)
            full = fold(op, [data(r, dtype, count * n, case + 5000, high=high) for r in range(n)])
            out = torch.empty(count, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, inp, op=op)
            ok = same(out, full[rank * count:(rank + 1) * count].to(dev))
            out2 = torch.empty(count, dtype=dtype, device=dev)
            dist.reduce_scatter(out2, list(inp.chunk(n)), op=op)
            ok &= same(out2, out)
            check(ok, f"reduce_scatter(_tensor) {dtype} {op}")

        case += 1
        count = 29
        mine = data(rank, dtype, count, case).to(dev)
        everyone = [data(r, dtype, count, case) for r in range(n)]
        for root in range(n):
            t = mine.clone()
            dist.broadcast(t, src=root)
            check(same(t, everyone[root].to(dev)), f"broadcast {dtype} from rank {root}")
        whole = torch.empty(count * n, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(whole, mine)
        ok = same(whole, torch.cat(everyone).to(dev))
        parts = [torch.empty(count, dtype=dtype, device=dev) for _ in range(n)]
        dist.all_gather(parts, mine)
        ok &= all(same(p, e.to(dev)) for p, e in zip(parts, everyone))
        ok &= against_gloo(lambda g: (lambda o: (dist.all_gather_into_tensor(
            o, mine.cpu(), group=g), o)[1])(torch.empty(count * n, dtype=dtype)),
            torch.cat(everyone))
        check(ok, f"all_gather(_into_tensor) {dtype}")
        root = 0
        gl = [torch.empty(count, dtype=dtype, device=dev) for _ in range(n)] if rank == root \
            else None
        dist.gather(mine, gl, dst=root)
        ok = rank != root or all(same(p, e.to(dev)) for p, e in zip(gl, everyone))
        check(ok, f"gather {dtype}")
        out = torch.empty(count, dtype=dtype, device=dev)
        src = [data(root, dtype, count, case + 100 + r).to(dev) for r in range(n)]
        dist.scatter(out, src if rank == root else None, src=root)
        check(same(out, data(root, dtype, count, case + 100 + rank).to(dev)), f"scatter {dtype}")
        # all_to_all_single, even and uneven splits (rank r sends r + 1 + s rows to rank s)
        even_in = data(rank, dtype, 3 * n, case + 200).to(dev)
        even_out = torch.empty(3 * n, dtype=dtype, device=dev)
        dist.all_to_all_single(even_out, even_in)
        want = torch.cat([data(r, dtype, 3 * n, case + 200)[3 * rank:3 * rank + 3]
                          for r in range(n)])
        ok = same(even_out, want.to(dev))
        sizes_in = [rank + 1 + s for s in range(n)]
        sizes_out = [r + 1 + rank for r in range(n)]
        rows_in = data(rank, dtype, 2 * sum(sizes_in), case + 300).to(dev).view(-1, 2)
        rows_out = torch.empty(sum(sizes_out), 2, dtype=dtype, device=dev)
        dist.all_to_all_single(rows_out, rows_in, sizes_out, sizes_in)
        pieces = []
        for r in range(n):
            theirs = data(r, dtype, 2 * sum(r + 1 + s for s in range(n)), case + 300).view(-1, 2)
            start = sum(r + 1 + s for s in range(rank))
            pieces.append(theirs[start:start + r + 1 + rank])
        ok &= same(rows_out, torch.cat(pieces).to(dev))
        outs = [torch.empty(2, dtype=dtype, device=dev) for _ in range(n)]
        dist.all_to_all(outs, list(even_in[:2 * n].chunk(n)))
        ok &= all(same(outs[r], data(r, dtype, 3 * n, case + 200)[2 * rank:2 * rank + 2]
                       .to(dev)) for r in range(n))
        check(ok, f"all_to_all(_single) {dtype}, even and uneven splits")

    # errors: a dtype and ops the backend does not take raise, naming them
    for bad, what in ((lambda: dist.all_reduce(torch.zeros(2, dtype=torch.uint32,
                                                           device=dev)), "uint32"),
                      (lambda: dist.all_reduce(torch.zeros(2, device=dev), op=R.BAND), "BAND"),
                      (lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int32, device=dev),
                                               op=R.AVG), "AVG")):
        try:
            bad()
            check(False, f"refused: {what}", "no error raised")
        except ValueError as e:
            check(what in str(e), f"refused: {what}", str(e))

    # complex: torch's front end sums them as pairs of reals
    c = torch.tensor([complex(rank, 1), complex(1, -rank)], dtype=torch.complex64, device=dev)
    dist.all_reduce(c)
    check(same(c, torch.tensor([complex(sum(range(n)), n), complex(n, -sum(range(n)))],
                               dtype=torch.complex64, device=dev)), "all_reduce complex64 SUM")

    # async_op, coalescing, point to point, barrier
    t = torch.full((5,), float(rank + 1), device=dev)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    fut = dist.all_reduce(t, async_op=True).get_future()
    fut.wait()
    check(same(t, torch.full((5,), float(n * (n + 1) / 2 * n), device=dev)),
          "async_op: Work.wait and get_future")
    # many in flight, waited for in reverse order; one chained on its future; one that
    # completes with nobody waiting (the completion thread), as DDP's hooks need
    ts = [torch.full((3,), float(rank + k), device=dev) for k in range(8)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for w in reversed(works):
        w.wait()
    ok = all(same(x, torch.full((3,), float(sum(range(n)) + n * k), device=dev))
             for k, x in enumerate(ts))
    x = torch.full((2,), 1.0, device=dev)
    chained = dist.all_reduce(x, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    ok &= same(chained.wait(), torch.full((2,), 2.0 * n, device=dev))
    x = torch.full((2,), 1.0, device=dev)
    w = dist.all_reduce(x, async_op=True)
    fut = w.get_future()
    deadline = __import__("time").time() + 30
    while not fut.done() and __import__("time").time() < deadline:
        __import__("time").sleep(0.001)
    background = fut.done()
    w.wait()
    ok &= same(x, torch.full((2,), float(n), device=dev))
    y = torch.full((2,), 1.0, device=dev)
    w = dist.all_reduce(y, async_op=True)
    while not w.is_completed() and __import__("time").time() < deadline:
        pass
    ok &= w.is_completed() and same(y, torch.full((2,), float(n), device=dev))
    check(ok and background, "async_op: 8 in flight waited in reverse, a chained future, a "
          f"future that completes with nobody waiting ({'yes' if background else 'no'}), "
          "is_completed polled to the end")
    # overlap: where torch tells the process group that a call is async_op (asyncOp, torch 2.7
    # on), the call runs on the backend's communication thread and the caller goes on: with the
    # last rank 0.5 s late, the others get their Work back at once, compute, and then wait
    if hasattr(dist.AllreduceOptions(), "asyncOp"):
        import time
        z = torch.full((1 << 16,), float(rank + 1), device=dev)
        m = torch.rand(256, 256, device=dev)
        dist.barrier()
        if rank == n - 1:
            time.sleep(0.5)
        t0 = time.time()
        w = dist.all_reduce(z, async_op=True)
        issued, pending = time.time() - t0, not w.is_completed()
        for _ in range(50):  # compute (GPU work on cuda) while the call waits for the late rank
            m = torch.tanh(m @ m)
        float(m.sum())
        computed = time.time() - t0
        w.wait()
        ok = same(z, torch.full((1 << 16,), float(n * (n + 1) // 2), device=dev))
        if rank != n - 1:
            ok &= issued < 0.25 and pending and computed < 0.45
        check(ok, f"async_op overlaps: the Work back in {issued * 1e3:.1f} ms and compute done "
              f"in {computed * 1e3:.0f} ms while a peer is 500 ms late; the result right after "
              "wait()", f"issued {issued:.3f} s, pending {pending}, computed {computed:.3f} s")
    elif rank == 0:
        print(f"# async_op overlap not tested: torch {torch.__version__} gives process groups no "
              "asyncOp", flush=True)
    a = torch.full((3,), float(rank), device=dev)
    b = torch.full((4,), 2.0 * rank, device=dev)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    s = float(sum(range(n)))
    check(same(a, torch.full((3,), s, device=dev)) and same(b, torch.full((4,), 2 * s,
                                                                          device=dev)),
          "coalesced all_reduce")
    # FSDP's: all_gather_into_tensor and reduce_scatter_tensor coalesced
    ins = [torch.full((k,), float(rank + k), device=dev) for k in (2, 3)]
    outs = [torch.empty(k * n, device=dev) for k in (2, 3)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    ok = all(same(o, torch.cat([torch.full((k,), float(r + k), device=dev) for r in range(n)]))
             for o, k in zip(outs, (2, 3)))
    rs_in = [torch.arange(k * n, dtype=torch.float32, device=dev) + rank for k in (2, 3)]
    rs_out = [torch.empty(k, device=dev) for k in (2, 3)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(rs_out, rs_in):
            dist.reduce_scatter_tensor(o, i)
    cm.wait()
    for o, k in zip(rs_out, (2, 3)):
        want = (torch.arange(k * n, dtype=torch.float32) * n + sum(range(n)))[
            rank * k:(rank + 1) * k]
        ok &= same(o, want.to(dev))
    check(ok, "coalesced all_gather_into_tensor and reduce_scatter_tensor")
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    msg = torch.full((6,), float(rank), device=dev)
    got = torch.empty(6, device=dev)
    if rank % 2 == 0:
        dist.send(msg, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(msg, nxt)
    ok = same(got, torch.full((6,), float(prv), device=dev))
    if rank == 0:
        senders = set()
        for _ in range(n - 1):
            x = torch.empty(1, device=dev)
            src = dist.recv(x, tag=7)
            ok &= int(x.item()) == src
            senders.add(src)
        ok &= senders == set(range(1, n))
    else:
        dist.send(torch.tensor([float(rank)], device=dev), 0, tag=7)
    dist.barrier()
    check(ok, "send/recv ring, recv from any source")
    return gloo_agreed, gloo_skipped


def groups(dev):
    rank, n = dist.get_rank(), dist.get_world_size()
    evens = list(range(0, n, 2))
    odds = list(range(1, n, 2))
    ge, go = dist.new_group(evens), dist.new_group(odds)
    mine = evens if rank % 2 == 0 else odds
    g = ge if rank % 2 == 0 else go
    t = torch.tensor([float(rank + 1)], device=dev)
    dist.all_reduce(t, group=g)
    check(same(t, torch.tensor([float(sum(r + 1 for r in mine))], device=dev)),
          f"new_group: all_reduce within {mine}")
    b = torch.tensor([float(rank)], device=dev)
    dist.broadcast(b, src=mine[-1], group=g)
    check(same(b, torch.tensor([float(mine[-1])], device=dev)),
          f"new_group: broadcast from world rank {mine[-1]}")
    # DeviceMesh (FSDP2's and tensor parallelism's groups, found by the groups' names): rows
    # of a 2 x n/2 mesh where n is even
    from torch.distributed.device_mesh import init_device_mesh
    shape = (2, n // 2) if n % 2 == 0 and n > 2 else (n,)
    mesh = init_device_mesh(dev, shape)
    grp = mesh.get_group(len(shape) - 1)
    members = dist.get_process_group_ranks(grp)
    t = torch.tensor([float(rank)], device=dev)
    dist.all_reduce(t, group=grp)
    check(same(t, torch.tensor([float(sum(members))], device=dev)),
          f"DeviceMesh {shape}: all_reduce over the last dimension {members}")


def ddp(dev):
    """20 SGD steps through DDP equal 20 steps of one process on the concatenated batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, n = dist.get_rank(), dist.get_world_size()
    models = {
        "MLP": lambda: torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                           torch.nn.Linear(32, 4)),
        "CNN": lambda: torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1),
                                           torch.nn.ReLU(), torch.nn.Flatten(),
                                           torch.nn.Linear(4 * 6 * 6, 4)),
    }
    shapes = {"MLP": (8, 16), "CNN": (8, 2, 6, 6)}
    for name, make in models.items():
        torch.manual_seed(1234)
        ref = make().to(dev)
        torch.manual_seed(99 + rank)  # different initial weights per rank: DDP broadcasts
        model = DDP(make().to(dev))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
        ref.load_state_dict({k.removeprefix("module."): v for k, v in model.state_dict().items()})
        for step in range(20):
            batches = []
            for r in range(n):
                g = torch.Generator().manual_seed(step * 1000 + r)
                x = torch.randn(*shapes[name], generator=g)
                y = torch.randn(shapes[name][0], 4, generator=g)
                batches.append((x.to(dev), y.to(dev)))
            x, y = batches[rank]
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            ref_opt.zero_grad()
            xs = torch.cat([b[0] for b in batches])
            ys = torch.cat([b[1] for b in batches])
            torch.nn.functional.mse_loss(ref(xs), ys).backward()
            ref_opt.step()
        worst = 0.0
        for p, q in zip(model.module.parameters(), ref.parameters()):
            worst = max(worst, ((p - q).abs() / q.abs().clamp_min(1e-3)).max().item())
        check(worst <= 1e-5, f"DDP {name}, 20 steps: parameters equal to one process on the "
              f"whole batch (worst relative difference {worst:.2e})")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "all"
    dev = "cuda" if "--device" in sys.argv and sys.argv[sys.argv.index("--device") + 1] \
        == "cuda" else "cpu"
    if dev == "cuda":
        torch.cuda.set_device(int(__import__("os").environ.get("LOCAL_RANK", "0"))
                              % torch.cuda.device_count())
    dist.init_process_group("collgpu")
    check(dist.get_backend() == "collgpu" and dist.get_world_size() == collgpu_torch.world_size
          and dist.get_rank() == collgpu_torch.world_rank,
          "init_process_group('collgpu') with nothing set: rank and size are MPI's")
    gloo = dist.new_group(backend="gloo")
    agreed = skipped = 0
    if what in ("collectives", "all"):
        agreed, skipped = collectives(dev, gloo)
    if what in ("groups", "all"):
        groups(dev)
    if what in ("ddp", "all"):
        ddp(dev)
    # a case is ok where it is ok on every rank (through gloo: the backend under test reports)
    flags = torch.tensor([1 if ok else 0 for ok, _, _ in results], dtype=torch.int32)
    dist.all_reduce(flags, op=R.MIN, group=gloo)
    if dist.get_rank() == 0:
        print(f"1..{len(results)}")
        for i, ((ok_here, name, detail), ok_all) in enumerate(zip(results, flags.tolist()), 1):
            print(f"{'ok' if ok_all else 'not ok'} {i} - {name}"
                  + ("" if ok_all or not detail else f" # rank 0: {detail}"))
        print(f"# gloo agreed on {agreed} cases and does not support {skipped}")
    for ok, name, detail in results:
        if not ok:
            print(f"# rank {dist.get_rank()}: failed: {name} {detail}", file=sys.stderr)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
