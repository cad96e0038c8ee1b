"""test_mpi4py_device.py - mpi4py, the way Python programs reach MPI, with device arrays.

    mpirun -np N python3 test_mpi4py_device.py LIBCOLL_GPU_DEV BACKEND [SEED]

A device array here is what CuPy and Numba arrays are to mpi4py: an object with a
__cuda_array_interface__ whose pointer is device memory, here coll/gpu's device layer's
(libcoll_gpu_dev, the library the component itself uses in this process: the emulated device
in make check, whose device memory faults on host access as a GPU's does; cuda on a GPU
machine).  mpi4py hands the pointer to MPI as it is.  Host arrays are array.array objects.

The program opens as CUDA-aware programs do (MPI_Comm_split_type of the world), then, on the
world and on a dup, with the memory kind of each rank's buffers chosen per call (device
everywhere; device on even ranks, host on odd; drawn per rank from SEED): Allreduce (in place
too), Bcast from the last rank, Reduce to rank 0, Allgather, Alltoall, Reduce_scatter_block,
Iallreduce + Wait and Ibcast + Wait.  Fresh data per call, outputs poisoned first, each result
compared with a reference computed here.  TAP from rank 0: one line per case, right on every
rank.
"""

import array
import ctypes
import random
import sys

from mpi4py import MPI

N = 1031  # elements a rank: not a multiple of anything the algorithms cut by
POISON = -0x5a5a5a5b

lib = ctypes.CDLL(sys.argv[1])
lib.dev_backend_from_name.restype = ctypes.c_int
lib.dev_backend_from_name.argtypes = [ctypes.c_char_p]
lib.dev_open.argtypes = [ctypes.c_int]
lib.dev_mem_alloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
lib.dev_mem_free.argtypes = [ctypes.c_void_p]
lib.dev_memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
lib.dev_error_string.restype = ctypes.c_char_p


class DeviceInts:
    """n C ints of device memory, as CuPy would present them to mpi4py."""

    def __init__(self, n):
        self.n = n
        self.ptr = ctypes.c_void_p()
        if lib.dev_mem_alloc(ctypes.byref(self.ptr), max(n, 1) * 4) != 0:
            raise MemoryError(lib.dev_error_string().decode())

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.n,), "typestr": "<i4", "data": (self.ptr.value, False),
                "strides": None, "version": 2}

    def put(self, values):
        host = array.array("i", values)
        addr, _ = host.buffer_info()
        if lib.dev_memcpy(self.ptr, addr, self.n * 4) != 0:
            raise RuntimeError(lib.dev_error_string().decode())

    def get(self):
        host = array.array("i", bytes(self.n * 4))
        addr, _ = host.buffer_info()
        if lib.dev_memcpy(addr, self.ptr, self.n * 4) != 0:
            raise RuntimeError(lib.dev_error_string().decode())
        return host.tolist()

    def free(self):
        lib.dev_mem_free(self.ptr)


class HostInts:
    """n C ints of host memory, with the same put and get."""

    def __init__(self, n):
        self.a = array.array("i", bytes(n * 4))

    def put(self, values):
        self.a[:] = array.array("i", values)

    def get(self):
        return self.a.tolist()

    def free(self):
        pass


def buf(obj):
    return [obj if isinstance(obj, DeviceInts) else obj.a, MPI.INT]


def value(r, i, salt):
    return (r * 131 + i * 7 + salt * 1009) % 65521 - 30000


class Run:
    """The cases of one communicator.  Their TAP numbers are their salts (one per case, counted
    on across communicators)."""

    def __init__(self, comm, seed):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.failed = 0
        self.rng = random.Random(seed * 1000 + MPI.COMM_WORLD.Get_rank())

    def kinds(self, mode):
        """This rank's kind for the send and the receive side of one call."""
        if mode == "device":
            return (True, True)
        if mode == "even-device":
            return (self.rank % 2 == 0,) * 2
        return (self.rng.random() < 0.5, self.rng.random() < 0.5)

    def report(self, right, number, what):
        every = MPI.COMM_WORLD.allreduce(1 if right else 0, op=MPI.MIN)
        self.failed += not every
        if MPI.COMM_WORLD.Get_rank() == 0:
            print("%s %d - %s" % ("ok" if every else "not ok", number, what), flush=True)

    def case(self, name, mode, salt, where, fn):
        dev_in, dev_out = self.kinds(mode)
        try:
            right = fn(dev_in, dev_out, salt)
        except MPI.Exception as e:
            sys.stderr.write("rank %d: %s: %s\n" % (self.rank, name, e))
            right = False
        self.report(right, salt, "%s, %s, %s" % (name, mode, where))


def new(dev, n):
    return DeviceInts(n) if dev else HostInts(n)


def call_into(dev_in, dev_out, sent, out_n, call):
    """One call on fresh buffers: the input (None: none) holding sent, the output of out_n
    elements poisoned; call(input, output) makes the MPI call; the output's values after it."""
    src = None
    if sent is not None:
        src = new(dev_in, len(sent))
        src.put(sent)
    out = new(dev_out, out_n)
    out.put([POISON] * out_n)
    try:
        call(src, out)
        return out.get()
    finally:
        out.free()
        if src is not None:
            src.free()


def reduction(run, op, mine, want_at, call):
    """A reduction case: this rank sends mine(rank, salt); want_at(p, salt, rank) is the
    reduced vector that rank must find, or None where its output must keep its poison."""
    def fn(dev_in, dev_out, salt):
        sent = mine(run.rank, salt)
        want = want_at(run.size, salt, run.rank)
        got = call_into(dev_in, dev_out, sent, len(want or sent),
                        lambda s, o: call(run.comm, s, o, op))
        return got == (want if want is not None else [POISON] * len(got))
    return fn


def reduced(fold, p, salt, lo=0, n=N):
    return [fold(value(r, lo + i, salt) for r in range(p)) for i in range(n)]


def mine_n(n):
    return lambda rank, salt: [value(rank, i, salt) for i in range(n)]


def allreduce(run, in_place):
    if not in_place:
        return reduction(run, MPI.SUM, mine_n(N), lambda p, s, r: reduced(sum, p, s),
                         lambda c, a, b, op: c.Allreduce(buf(a), buf(b), op=op))

    def fn(dev_in, dev_out, salt):
        def call(src, out):
            out.put([value(run.rank, i, salt) for i in range(N)])
            run.comm.Allreduce(MPI.IN_PLACE, buf(out), op=MPI.SUM)
        return call_into(dev_in, dev_out, None, N, call) == reduced(sum, run.size, salt)
    return fn


def rooted(run, root, nonblocking):
    """Bcast (Ibcast + Wait) from root: the root's buffer of its input kind, the others' of
    their output kind."""
    def fn(dev_in, dev_out, salt):
        want = [value(root, i, salt) for i in range(N)]

        def call(src, b):
            if run.rank == root:
                b.put(want)
            if nonblocking:
                run.comm.Ibcast(buf(b), root=root).Wait()
            else:
                run.comm.Bcast(buf(b), root=root)
        kind = dev_in if run.rank == root else dev_out
        return call_into(kind, kind, None, N, call) == want
    return fn


def bcast(run):
    return rooted(run, run.size - 1, False)


def ibcast(run):
    return rooted(run, 0, True)


def reduce(run):
    # MPI leaves the receive buffers of the ranks but the root alone
    return reduction(run, MPI.MAX, mine_n(N),
                     lambda p, s, r: reduced(max, p, s) if r == 0 else None,
                     lambda c, a, b, op: c.Reduce(buf(a), buf(b), op=op, root=0))


def iallreduce(run):
    return reduction(run, MPI.MIN, mine_n(N), lambda p, s, r: reduced(min, p, s),
                     lambda c, a, b, op: c.Iallreduce(buf(a), buf(b), op=op).Wait())


def reduce_scatter_block(run):
    return reduction(run, MPI.SUM,
                     lambda rank, salt: [value(rank, j, salt) for j in range(N * run.size)],
                     lambda p, s, r: reduced(sum, p, s, lo=r * N),
                     lambda c, a, b, op: c.Reduce_scatter_block(buf(a), buf(b), op=op))


def allgather(run):
    def fn(dev_in, dev_out, salt):
        p = run.size
        got = call_into(dev_in, dev_out, [value(run.rank, i, salt) for i in range(N)], N * p,
                        lambda a, b: run.comm.Allgather(buf(a), buf(b)))
        return got == [value(r, i, salt) for r in range(p) for i in range(N)]
    return fn


def alltoall(run):
    def fn(dev_in, dev_out, salt):
        p, me = run.size, run.rank
        sent = [value(me * p + d, i, salt) for d in range(p) for i in range(N)]  # block d to d
        got = call_into(dev_in, dev_out, sent, N * p,
                        lambda a, b: run.comm.Alltoall(buf(a), buf(b)))
        return got == [value(s * p + me, i, salt) for s in range(p) for i in range(N)]
    return fn


def main():
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    backend = lib.dev_backend_from_name(sys.argv[2].encode())
    if lib.dev_open(backend) != 0:
        sys.stderr.write("dev_open: %s\n" % lib.dev_error_string().decode())
        MPI.COMM_WORLD.Abort(1)
    world = MPI.COMM_WORLD
    node = world.Split_type(MPI.COMM_TYPE_SHARED)  # as CUDA-aware programs open
    dup = world.Dup()
    calls = [("Allreduce", allreduce, {"in_place": False}),
             ("Allreduce in place", allreduce, {"in_place": True}),
             ("Bcast from the last rank", bcast, {}), ("Reduce to rank 0", reduce, {}),
             ("Allgather", allgather, {}), ("Alltoall", alltoall, {}),
             ("Reduce_scatter_block", reduce_scatter_block, {}),
             ("Iallreduce + Wait", iallreduce, {}), ("Ibcast + Wait", ibcast, {})]
    modes = ["device", "even-device", "drawn"]
    if world.Get_rank() == 0:
        print("1..%d" % (2 * len(calls) * len(modes)), flush=True)
        print("# seed %d" % seed, flush=True)
    salt = failed = 0
    for comm, where in ((world, "world"), (dup, "a dup of world")):
        run = Run(comm, seed)
        for mode in modes:
            for name, make, kw in calls:
                salt += 1
                run.case(name, mode, salt, where, make(run, **kw))
        failed += run.failed
    dup.Free()
    node.Free()
    sys.exit(1 if failed else 0)


main()
