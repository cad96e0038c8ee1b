"""A stand-in for CuPy over coll/gpu's device layer (libcoll_gpu_dev), for running mpi4py's own
test suite with device arrays where there is no GPU (tests/thirdparty/mpi4py-tests.sh, mode
emucupy).

mpi4py's tests use a small part of CuPy (their arrayimpl.py): arrays made by zeros() and
asarray(), filled, assigned, read element by element, and handed to MPI through
__cuda_array_interface__ or DLPack.  Here an array's elements live in the device layer's
memory: the emulated device's in make check (memory that faults on host access, as a GPU's
does, so every element MPI wrote was written by coll/gpu's device path or its staging), or a
real GPU's with the cuda backend.  Every host access goes through dev_memcpy.  Only what the
tests touch is here: one-dimensional and zero-dimensional arrays, element reads and writes,
fill and whole-array assignment.

Environment: COLL_GPU_DEV_LIB (the library; required), COLL_GPU_DEV_BACKEND (default
emulated).
"""

import ctypes
import os

import numpy

__version__ = "13.0.0"  # what the tests compare against (bool arrays from 11.6 on)

_lib = ctypes.CDLL(os.environ["COLL_GPU_DEV_LIB"])
_lib.dev_backend_from_name.restype = ctypes.c_int
_lib.dev_backend_from_name.argtypes = [ctypes.c_char_p]
_lib.dev_open.argtypes = [ctypes.c_int]
_lib.dev_mem_alloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
_lib.dev_mem_free.argtypes = [ctypes.c_void_p]
_lib.dev_memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
_lib.dev_error_string.restype = ctypes.c_char_p
if _lib.dev_open(_lib.dev_backend_from_name(
        os.environ.get("COLL_GPU_DEV_BACKEND", "emulated").encode())) != 0:
    raise ImportError("emucupy: dev_open: " + _lib.dev_error_string().decode())


def _check(rc, what):
    if rc != 0:
        raise RuntimeError("emucupy: %s: %s" % (what, _lib.dev_error_string().decode()))


class ndarray:
    """count elements of dtype in device memory (at least one byte is allocated)."""

    def __init__(self, shape, dtype):
        self.dtype = numpy.dtype(dtype)
        if self.dtype.char in "gG":
            raise ValueError("emucupy: no long double")
        self.shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        self.size = int(numpy.prod(self.shape)) if self.shape else 1
        self.itemsize = self.dtype.itemsize
        self.nbytes = self.size * self.itemsize
        self._ptr = ctypes.c_void_p()
        _check(_lib.dev_mem_alloc(ctypes.byref(self._ptr), max(self.nbytes, 1)), "alloc")

    def __del__(self):
        if getattr(self, "_ptr", None) is not None and self._ptr.value:
            _lib.dev_mem_free(self._ptr)
            self._ptr = None

    # the device side
    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self._ptr.value or 0, False), "strides": None, "version": 2}

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, stream=None):
        """A DLPack capsule of the device memory, made with the tests' own dlpackimpl (their
        folder is on the path when they run)."""
        import dlpackimpl

        class _Described:  # what dlpackimpl.make_dl_tensor reads of an array.array
            typecode, itemsize = self.dtype.char, self.itemsize

            def buffer_info(_):
                return (self._ptr.value or 0, self.size)

        managed = dlpackimpl.make_dl_managed_tensor(_Described())
        managed.dl_tensor.device = dlpackimpl.DLDevice(dlpackimpl.DLDeviceType.kDLCUDA, 0)
        self._managed = managed  # the capsule points into it
        return dlpackimpl.make_py_capsule(managed)

    def _put(self, host):
        host = numpy.ascontiguousarray(host, dtype=self.dtype).reshape(-1)
        assert host.size == self.size
        if self.nbytes:
            _check(_lib.dev_memcpy(self._ptr, host.ctypes.data, self.nbytes), "copy in")

    def get(self):
        host = numpy.empty(self.size, dtype=self.dtype)
        if self.nbytes:
            _check(_lib.dev_memcpy(host.ctypes.data, self._ptr, self.nbytes), "copy out")
        return host.reshape(self.shape)

    # what the tests do with an array
    def fill(self, value):
        self._put(numpy.full(self.size, _cast(value, self.dtype)))

    def ravel(self):
        return self

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __getitem__(self, i):
        return self.get().reshape(-1)[i] if self.shape else self.get()[()]

    def __setitem__(self, i, value):
        host = self.get().reshape(-1)
        host[i] = value.get().reshape(-1) if isinstance(value, ndarray) else \
            _cast(value, self.dtype)
        self._put(host)

    def __iter__(self):
        return iter(self.get().reshape(-1))


def _cast(value, dtype):
    """value in dtype as CuPy 14 converts it: a Python integer outside an integer type's range
    is refused, as NumPy 2 refuses it ("OverflowError: Python integer -1 out of bounds for
    uint8", seen on the GPU machine), whatever NumPy is here; the rest the C way (astype).
    mpi4py's tests fill unsigned arrays with -1: mpi4py-tests.sh converts those first."""
    dtype = numpy.dtype(dtype)
    if dtype.kind in "iu":
        info = numpy.iinfo(dtype)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if type(v) is int and not info.min <= v <= info.max:
                raise OverflowError(f"Python integer {v} out of bounds for {dtype}")
    return numpy.asarray(value).astype(dtype, casting="unsafe")


def zeros(shape, dtype):
    a = ndarray(shape, dtype)
    a.fill(0)
    return a


def asarray(obj, dtype=None):
    host = obj.get() if isinstance(obj, ndarray) else obj  # Python values: _cast checks them
    host = numpy.asarray(host) if dtype is None else _cast(host, dtype)
    a = ndarray(host.shape, host.dtype)
    a._put(host)
    return a


def array(obj, dtype=None):
    return asarray(obj, dtype)


class _Stream:
    def synchronize(self):
        pass  # every copy here is synchronous


class _Runtime:
    is_hip = False


class cuda:  # noqa: N801 (CuPy's module name)
    runtime = _Runtime()

    @staticmethod
    def get_current_stream():
        return _Stream()
