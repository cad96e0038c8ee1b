"""The C library (collgpu_native.c) through ctypes: MPI calls on raw pointers.

Every entry returns an MPI error code; call() turns a non-zero one into a RuntimeError that
carries MPI's own message, and the request slots of the nonblocking forms come back as ints.
"""

import ctypes
import glob
import os
import threading

# element types and ops, numbered as in collgpu_native.c
F32, F64, F16, BF16, I8, U8, I16, I32, I64, BOOL = range(10)
SUM, PROD, MIN, MAX, BAND, BOR, BXOR = range(7)

_lib = None
_serial = None  # a lock around every call when MPI gives less than MPI_THREAD_MULTIPLE
_MPI_THREAD_MULTIPLE_AT_LEAST = 3  # MPI_THREAD_MULTIPLE in Open MPI and MPICH


def _find_library():
    """The library installed beside this file (pip install), or COLLGPU_TORCH_NATIVE."""
    path = os.environ.get("COLLGPU_TORCH_NATIVE")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libcollgpu_torch*.so")))
    if not found:
        raise ImportError(
            "collgpu_torch: libcollgpu_torch.so is not beside the package; install it with "
            "'pip install ./python' from a coll/gpu checkout (it needs mpicc), or point "
            "COLLGPU_TORCH_NATIVE at a build of python/collgpu_torch/collgpu_native.c")
    return found[0]


def _declare(lib):
    i32, i64, vp = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
    pi = ctypes.POINTER(ctypes.c_int)
    sig = {
        "cg_init": [pi, pi, pi],
        "cg_finalize": [],
        "cg_comm_create": [i32, pi, pi],
        "cg_comm_free": [i32],
        "cg_allreduce": [i32, vp, vp, i64, i32, i32, pi],
        "cg_allreduce_synced": [vp, i32, vp, i64, i32, i32],
        "cg_reduce": [i32, vp, vp, i64, i32, i32, i32, pi],
        "cg_bcast": [i32, vp, i64, i32, i32, pi],
        "cg_allgather": [i32, vp, vp, i64, i32, pi],
        "cg_reduce_scatter": [i32, vp, vp, i64, i32, i32, pi],
        "cg_gather": [i32, vp, vp, i64, i32, i32, pi],
        "cg_scatter": [i32, vp, vp, i64, i32, i32, pi],
        "cg_alltoallv": [i32, vp, pi, pi, vp, pi, pi, i32, pi],
        "cg_barrier": [i32, pi],
        "cg_send": [i32, vp, i64, i32, i32, i32, pi],
        "cg_recv": [i32, vp, i64, i32, i32, i32, pi],
        "cg_wait": [i32, pi],
        "cg_test": [i32, pi],
        "cg_half_ops": [],
        "cg_cuda_aware": [],
    }
    for name, args in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    lib.cg_error_string.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.cg_error_string.restype = None


def _error(name, code):
    buf = ctypes.create_string_buffer(512)
    _lib.cg_error_string(code, buf, len(buf))
    return RuntimeError(f"collgpu: {name} failed: {buf.value.decode(errors='replace')} "
                        f"(MPI error {code})")


def init():
    """MPI initialised (if nobody did); (world rank, world size)."""
    global _lib, _serial
    if _lib is None:
        lib = ctypes.CDLL(_find_library(), mode=ctypes.RTLD_GLOBAL)
        _declare(lib)
        _lib = lib
    rank, size, level = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    rc = _lib.cg_init(ctypes.byref(rank), ctypes.byref(size), ctypes.byref(level))
    if rc != 0:
        raise _error("MPI initialisation", rc)
    if level.value < _MPI_THREAD_MULTIPLE_AT_LEAST and _serial is None:
        _serial = threading.Lock()
    global _level, _cuda_aware
    _level = level.value
    _cuda_aware = bool(_lib.cg_cuda_aware())  # fixed once MPI is up: asked once
    return rank.value, size.value


_level = 0
_cuda_aware = False
_MPI_THREAD_SERIALIZED_AT_LEAST = 2  # MPI_THREAD_SERIALIZED in Open MPI and MPICH


def can_overlap():
    """May a communication thread make MPI calls (the thread level is at least serialized; the
    calls are then made one at a time under _serial where it is below multiple)?"""
    return _level >= _MPI_THREAD_SERIALIZED_AT_LEAST


def cuda_aware():
    """Does this MPI read and write device memory itself (Open MPI's MPIX_Query_cuda_support)?
    coll/gpu takes device buffers in collectives either way; point-to-point calls need this."""
    return _cuda_aware


def half_ops():
    """Can float16 and bfloat16 be reduced (coll/gpu's libcollgpu was found)?"""
    return bool(_lib.cg_half_ops())


def finalize():
    if _lib is not None:
        _lib.cg_finalize()


_fns = {}  # name -> the library's cg_<name> (a ctypes attribute lookup costs a dict's 10x)


def _fn(name):
    """The library's cg_<name>, looked up once (call's miss)."""
    fn = _fns[name] = getattr(_lib, "cg_" + name)
    return fn


def call(name, *args, tail=None):
    """cg_<name>(*args, tail): tail is a nonblocking form's request slot (None: blocking)."""
    fn = _fns.get(name) or _fn(name)
    if _serial is None:
        rc = fn(*args, tail)
    else:
        with _serial:
            rc = fn(*args, tail)
    if rc != 0:
        raise _error(name, rc)


_UNSYNCED = -1  # cg_allreduce_synced: the driver did not synchronise the stream; nothing done


def allreduce_synced(stream, comm, ptr, count, dt, op):
    """A blocking allreduce in place after the driver synchronised stream (a raw CUstream), in
    one C call: True, or False when the driver could not (nothing done: synchronise through
    torch and call again).  call()'s lock and errors, without its request slot: this is the
    4-byte critical path, where each ctypes argument costs about 75 ns."""
    fn = _fns.get("allreduce_synced") or _fn("allreduce_synced")
    if _serial is None:
        rc = fn(stream, comm, ptr, count, dt, op)
    else:
        with _serial:
            rc = fn(stream, comm, ptr, count, dt, op)
    if rc != 0 and rc != _UNSYNCED:
        raise _error("allreduce", rc)
    return rc == 0


def call_nonblocking(name, *args):
    """cg_<name>(*args) in its nonblocking form: the request slot it filled (an int)."""
    req = ctypes.c_int(-1)
    call(name, *args, tail=ctypes.byref(req))
    return req.value


def wait(req):
    """Wait for a request slot; the source rank of a receive (else -1)."""
    src = ctypes.c_int(-1)
    rc = _lib.cg_wait(req, ctypes.byref(src))
    if rc != 0:
        raise _error("wait", rc)
    return src.value


def test(req):
    done = ctypes.c_int(0)
    rc = _lib.cg_test(req, ctypes.byref(done))
    if rc != 0:
        raise _error("test", rc)
    return bool(done.value)


def comm_create(world_ranks):
    arr = (ctypes.c_int * len(world_ranks))(*world_ranks)
    cid = ctypes.c_int(-1)
    rc = _lib.cg_comm_create(len(world_ranks), arr, ctypes.byref(cid))
    if rc != 0:
        raise _error("communicator creation", rc)
    return cid.value


def comm_free(cid):
    if _lib is not None:
        _lib.cg_comm_free(cid)


def int_array(values):
    return (ctypes.c_int * len(values))(*values)
