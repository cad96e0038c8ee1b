"""ProcessGroupCollGPU: torch.distributed's collectives as MPI calls on the tensors' memory.

CPU and CUDA tensors alike: a CUDA tensor's device pointer goes to MPI as it is, and coll/gpu,
loaded in that MPI, runs the call on the GPU (or stages it through the host where it must).

Ordering (what training loops rely on): a call reads a CUDA tensor only after the work queued
on the tensor's current stream before the call has ended; when the call (or, with async_op, its
Work's wait()) returns, the result is in the tensor, visible to any stream.

Synchronous and asynchronous calls: where torch tells a process group that a call is async_op
(its options' asyncOp, torch 2.7 and later; the default of C++ callers such as DDP's reducer),
the call is queued to one communication thread per process, which makes the MPI calls in the
order they were issued, and the caller goes on (compute overlaps the call); the Work completes
when the thread has made it.  Every other call runs in the caller's thread, after the queue has
drained (so that every rank issues its MPI calls in the order of the program).  Older torch
gives no such flag: there every call completes before it returns.
"""

import ctypes
import functools
import queue
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

from . import _native as nat

_TYPES = {
    torch.float32: nat.F32, torch.float64: nat.F64, torch.float16: nat.F16,
    torch.bfloat16: nat.BF16, torch.int8: nat.I8, torch.uint8: nat.U8, torch.int16: nat.I16,
    torch.int32: nat.I32, torch.int64: nat.I64, torch.bool: nat.BOOL,
}
_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_RED = dist.ReduceOp.RedOpType if hasattr(dist.ReduceOp, "RedOpType") else dist.ReduceOp
# by the ops' integer values: comparing or hashing torch's op enums costs 1-2 us a time in
# Python, an int() of one 0.6 (tests/bench/torch_bench.py --breakdown)
_OPS = {
    int(_RED.SUM): nat.SUM, int(_RED.PRODUCT): nat.PROD, int(_RED.MIN): nat.MIN,
    int(_RED.MAX): nat.MAX, int(_RED.BAND): nat.BAND, int(_RED.BOR): nat.BOR,
    int(_RED.BXOR): nat.BXOR,
}
_AVG = int(_RED.AVG)
_BITWISE = (int(_RED.BAND), int(_RED.BOR), int(_RED.BXOR))
_op_codes = {}  # (op value, dtype) -> what _op returns: its checks made once per pair


def _dtype(t):
    try:
        return _TYPES[t.dtype]
    except KeyError:
        raise ValueError(f"collgpu: tensors of dtype {t.dtype} are not supported (supported: "
                         + ", ".join(str(d) for d in _TYPES) + ")") from None


def _op(red, t):
    """(MPI op code, average) of a torch reduce op for tensor t; errors name what is refused."""
    kind = red if type(red) is _RED else red.op  # a ReduceOp wraps its RedOpType
    # by value: a RedOpType object may be made per access (torch 2.11), so neither its id()
    # (another op's once it is freed) nor its identity can stand for the op
    key = (int(kind), t.dtype)
    code = _op_codes.get(key)
    if code is None:
        code = _op_codes[key] = _op_code(kind, key[0], t.dtype)
    return code


def _op_code(kind, value, dtype):
    if dtype in (torch.float16, torch.bfloat16) and not nat.half_ops():
        raise ValueError(f"collgpu: reducing dtype {dtype} needs coll/gpu's libcollgpu "
                         "(libcollgpu.so.0: loaded with coll/gpu's component, or on the "
                         "library path)")
    if value == _AVG:
        if dtype not in _FLOATS:
            raise ValueError(f"collgpu: ReduceOp.AVG on dtype {dtype}: average is defined "
                             "here for floating-point tensors only")
        return nat.SUM, True
    if value not in _OPS:
        raise ValueError(f"collgpu: reduce op {kind} is not supported (SUM, AVG, PRODUCT, MIN, "
                         "MAX, BAND, BOR, BXOR)")
    if value in _BITWISE and dtype in _FLOATS:
        raise ValueError(f"collgpu: reduce op {kind} on dtype {dtype}: bitwise ops take "
                         "integer and bool tensors")
    return _OPS[value], False


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None)
_cu_sync = None  # the driver's cuStreamSynchronize, or False where it cannot be had


def _driver_sync():
    global _cu_sync
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuStreamSynchronize
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = ctypes.c_int
        _cu_sync = fn
    except (OSError, AttributeError):
        _cu_sync = False
    return _cu_sync


def _driver_stream(idx):
    """The raw handle of device idx's current stream where the driver can synchronise it, else
    None.  The legacy default stream (handle 0) is the calling thread's current context's, so
    the driver serves it only when that is idx."""
    if _raw_stream is None:
        return None
    handle = _raw_stream(idx)
    return handle if handle or _current_device() == idx else None


def _sync_stream(idx):
    """Wait for the work queued on device idx's current stream.  torch's Stream object costs
    about 5 us of Python a call (tests/bench/torch_bench.py --breakdown); the stream's raw handle
    and the driver's cuStreamSynchronize cost two C calls (_driver_stream).  Anything the driver
    refuses (no context on this thread, an error) goes through torch, which raises torch's error
    if there is one."""
    fn = _cu_sync if _cu_sync is not None else _driver_sync()
    if fn:
        handle = _driver_stream(idx)
        if handle is not None and fn(handle) == 0:
            return
    torch.cuda.current_stream(idx).synchronize()


def _allreduce_synced(comm, t, op):
    """A contiguous CUDA tensor's allreduce in place with its stream's synchronisation in the
    same C call (nat.allreduce_synced) where the driver serves the stream (_driver_stream):
    True when done, False when the caller must settle and call as for any tensor (nothing
    done)."""
    handle = _driver_stream(t.get_device())
    return handle is not None and nat.allreduce_synced(handle, comm, t.data_ptr(), t.numel(),
                                                       _dtype(t), op)


def _settle(*tensors):
    """The work queued on each CUDA tensor's current stream ends before MPI reads or writes it."""
    if len(tensors) == 1:  # the common case, without the set
        t = tensors[0]
        if t is not None and t.is_cuda:
            _sync_stream(t.get_device())
        return
    seen = set()
    for t in tensors:
        if t is not None and t.is_cuda:
            idx = t.get_device()
            if idx not in seen:
                seen.add(idx)
                _sync_stream(idx)


# torch.futures.Future() is torch._C.Future([]) behind two Python wrappers (its __init__ and
# set_result), which cost a synchronous call about 0.3 us; the C class where it is there
_CFuture = getattr(torch._C, "Future", None)


def _done(result):
    """A completed Work whose result (and future's value) is result.  A C++ Work, not a Python
    subclass of dist._Work (which is made in half the time): C++ callers such as DDP's reducer
    keep only the C++ part, and once the Python object is freed its get_future is gone
    ("Work::getFuture not implemented", torch 2.6)."""
    fut = _CFuture([]) if _CFuture is not None else Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


class _Queue:
    """The communication thread of async_op calls, and the order of every call.

    A call runs in its caller's thread when nothing is queued (the common, synchronous case
    costs no hand-over), else it joins the queue behind the calls before it: the MPI calls of a
    process leave in issue order either way.  In the thread a call runs on a side stream of its
    device (its own copies are ordered there, apart from the caller's later compute) after the
    caller's stream reached the point of issue (an event), and the side stream is synchronised
    before the Work completes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending = 0
        self._jobs = queue.SimpleQueue()
        self._thread = None
        self._local = threading.local()  # .inside: this thread is running a call's body
        self._streams = {}

    def inside(self):
        return getattr(self._local, "inside", False)

    def busy(self):
        """Are calls queued or running on the thread?  (Read without the lock: a call that
        another thread issues at this very moment is that program's race, as in MPI.)"""
        return self._pending > 0

    def issue(self, body, asynchronous, device):
        with self._lock:
            queued = asynchronous or self._pending > 0
            if queued:
                self._pending += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="collgpu-comm",
                                                    daemon=True)
                    self._thread.start()
        if not queued:
            self._local.inside = True
            try:
                return _done(body())
            finally:
                self._local.inside = False
        event = None
        if device is not None:
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(device))
        fut = Future()
        self._jobs.put((body, device, event, fut))
        if not asynchronous:  # a synchronous call behind queued ones: wait for it here
            fut.wait()
        return _create_work_from_future(fut)

    def _loop(self):
        self._local.inside = True
        while True:
            body, device, event, fut = self._jobs.get()
            try:
                if device is None:
                    result = body()
                else:
                    stream = self._streams.get(device)
                    if stream is None:
                        stream = self._streams[device] = torch.cuda.Stream(device)
                    event.synchronize()
                    with torch.cuda.device(device), torch.cuda.stream(stream):
                        result = body()
                    stream.synchronize()
                error = None
            except BaseException as e:  # handed to whoever waits
                error = e
            with self._lock:
                self._pending -= 1
            if error is None:
                fut.set_result(result)
            else:
                fut.set_exception(error)


_queue = _Queue()


def _cuda_device(args):
    """The device of the first CUDA tensor among a call's arguments (lists searched), or None."""
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.is_cuda:
                return a.device
        elif isinstance(a, (list, tuple)):
            d = _cuda_device(a)
            if d is not None:
                return d
    return None


def _call(method):
    """A process group method whose body makes MPI calls and returns what its Work's result is:
    issued through _queue (asynchronously where the options say asyncOp), a Work returned.
    Calls between methods (one method's body calling another's) run inside, directly."""

    @functools.wraps(method)
    def issue(self, *args, **kwargs):
        opts = kwargs.get("opts", args[-1] if args else None)
        asynchronous = getattr(opts, "asyncOp", False) and nat.can_overlap()
        if not asynchronous and not _queue.busy():  # the common case: here, now
            return _done(method(self, *args, **kwargs))
        if _queue.inside():
            return method(self, *args, **kwargs)
        device = _cuda_device(args) if asynchronous else None
        return _queue.issue(lambda: method(self, *args, **kwargs), asynchronous, device)

    return issue


def _flat(tensors):
    """One contiguous tensor holding the given ones back to back (their own storage when there
    is one tensor and it is contiguous)."""
    if len(tensors) == 1 and tensors[0].is_contiguous():
        return tensors[0].view(-1)
    return torch.cat([x.reshape(-1) for x in tensors])


class _Dense:
    """A tensor as MPI sees it: itself when contiguous, else a contiguous copy written back.
    With host=True a CUDA tensor goes through a host copy: point-to-point calls, which coll/gpu
    does not take, on an MPI that cannot read device memory itself (nat.cuda_aware())."""

    def __init__(self, t, read=True, host=False):
        self.t = t
        if host and t.is_cuda and not nat.cuda_aware():
            self.buf = t.to("cpu", memory_format=torch.contiguous_format) if read else \
                torch.empty(t.shape, dtype=t.dtype, device="cpu")
            return
        self.buf = t if t.is_contiguous() else (t.contiguous() if read else torch.empty_like(
            t, memory_format=torch.contiguous_format))

    def ptr(self):
        return self.buf.data_ptr()

    def back(self):
        if self.buf is not self.t:
            self.t.copy_(self.buf)


class _RecvAnyWork(dist._Work):
    """The Work of recv_anysource: complete, and it knows who sent."""

    def __init__(self, tensors, source):
        super().__init__()
        self._tensors = tensors
        self._source = source

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def _source_rank(self):
        return self._source

    def result(self):
        return self._tensors


class ProcessGroupCollGPU(dist.ProcessGroup):
    """A torch ProcessGroup over one MPI communicator (ids of collgpu_native.c)."""

    def __init__(self, rank, size, comm_id, world_ranks):
        super().__init__(rank, size)
        self._comm = comm_id
        self._world_ranks = list(world_ranks)

    # ---- names -----------------------------------------------------------------------------

    def getBackendName(self):
        return "collgpu"

    # torch keeps a group's name in its C++ backends, which a Python process group has none
    # of: the name lives here (DeviceMesh, and with it FSDP2, looks groups up by it)
    def _set_group_name(self, name):
        self._group_name = name

    @property
    def group_name(self):
        return getattr(self, "_group_name", "")

    def _set_group_desc(self, desc):
        self._group_desc = desc

    @property
    def group_desc(self):
        return getattr(self, "_group_desc", "")

    def name(self):
        return "collgpu"

    # ---- reductions ------------------------------------------------------------------------

    @_call
    def allreduce(self, tensors, opts=None):
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        for t in tensors:
            op, avg = _op(red, t)
            if t.is_contiguous() and not avg:  # the common case, without the wrapper's cost
                if not (t.is_cuda and _allreduce_synced(self._comm, t, op)):
                    _settle(t)
                    nat.call("allreduce", self._comm, None, t.data_ptr(), t.numel(), _dtype(t),
                             op)
                continue
            d = _Dense(t)
            _settle(t)
            nat.call("allreduce", self._comm, None, d.ptr(), t.numel(), _dtype(t), op)
            if avg:
                d.buf.div_(self.size())
            d.back()
        return tensors

    @_call
    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    @_call
    def reduce(self, tensors, opts):
        root = opts.rootRank
        for t in tensors:
            op, avg = _op(opts.reduceOp, t)
            d = _Dense(t)
            _settle(t)
            if self.rank() == root:
                nat.call("reduce", self._comm, None, d.ptr(), t.numel(), _dtype(t), op, root)
                if avg:
                    d.buf.div_(self.size())
                d.back()
            else:
                nat.call("reduce", self._comm, d.ptr(), None, t.numel(), _dtype(t), op, root)
        return tensors

    @_call
    def _reduce_scatter_base(self, output, input, opts=None):
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"collgpu: reduce_scatter_tensor: the input holds {input.numel()} "
                             f"elements, {self.size()} x the output's {output.numel()} needed")
        if input.dtype != output.dtype:
            raise ValueError("collgpu: reduce_scatter_tensor: input and output dtypes differ "
                             f"({input.dtype}, {output.dtype})")
        op, avg = _op(red, output)
        src, dst = _Dense(input), _Dense(output, read=False)
        _settle(input, output)
        nat.call("reduce_scatter", self._comm, src.ptr(), dst.ptr(), output.numel(),
                 _dtype(output), op)
        if avg:
            dst.buf.div_(self.size())
        dst.back()
        return [output]

    @_call
    def reduce_scatter(self, outputs, inputs, opts=None):
        for out, parts in zip(outputs, inputs):
            if len(parts) != self.size():
                raise ValueError(f"collgpu: reduce_scatter: {len(parts)} input tensors for "
                                 f"{self.size()} ranks")
            self._reduce_scatter_base(out, _flat(parts), opts)
        return outputs

    @_call
    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        for out, inp in zip(outputs, inputs):
            self._reduce_scatter_base(out, inp, opts)
        return outputs

    # ---- data movement ---------------------------------------------------------------------

    @_call
    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        for t in tensors:
            d = _Dense(t, read=(self.rank() == root))
            _settle(t)
            nat.call("bcast", self._comm, d.ptr(), t.numel(), _dtype(t), root)
            d.back()
        return tensors

    @_call
    def _allgather_base(self, output, input, opts=None):
        if output.numel() != input.numel() * self.size():
            raise ValueError(f"collgpu: all_gather_into_tensor: the output holds "
                             f"{output.numel()} elements, {self.size()} x the input's "
                             f"{input.numel()} needed")
        if input.dtype != output.dtype:
            raise ValueError("collgpu: all_gather_into_tensor: input and output dtypes differ "
                             f"({input.dtype}, {output.dtype})")
        src, dst = _Dense(input), _Dense(output, read=False)
        _settle(input, output)
        nat.call("allgather", self._comm, src.ptr(), dst.ptr(), input.numel(), _dtype(input))
        dst.back()
        return [output]

    @_call
    def allgather(self, outputs, inputs, opts=None):
        for outs, inp in zip(outputs, inputs):
            if len(outs) != self.size():
                raise ValueError(f"collgpu: all_gather: {len(outs)} output tensors for "
                                 f"{self.size()} ranks")
            whole = torch.empty(self.size() * inp.numel(), dtype=inp.dtype, device=inp.device)
            self._allgather_base(whole, inp, opts)
            for i, o in enumerate(outs):
                o.copy_(whole[i * inp.numel():(i + 1) * inp.numel()].view_as(o))
        return outputs

    @_call
    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for out, inp in zip(outputs, inputs):
            self._allgather_base(out, inp, opts)
        return outputs

    @_call
    def allgather_coalesced(self, output_lists, inputs, opts=None):
        return self.allgather(output_lists, inputs, opts)

    @_call
    def gather(self, outputs, inputs, opts):
        root = opts.rootRank
        inp = inputs[0]
        src = _Dense(inp)
        whole = None
        if self.rank() == root:
            if len(outputs[0]) != self.size():
                raise ValueError(f"collgpu: gather: {len(outputs[0])} output tensors for "
                                 f"{self.size()} ranks")
            whole = torch.empty(self.size() * inp.numel(), dtype=inp.dtype, device=inp.device)
        _settle(inp)
        nat.call("gather", self._comm, src.ptr(), None if whole is None else whole.data_ptr(),
                 inp.numel(), _dtype(inp), root)
        if whole is not None:
            for i, o in enumerate(outputs[0]):
                o.copy_(whole[i * inp.numel():(i + 1) * inp.numel()].view_as(o))
        return outputs

    @_call
    def scatter(self, outputs, inputs, opts):
        root = opts.rootRank
        out = outputs[0]
        dst = _Dense(out, read=False)
        whole = None
        if self.rank() == root:
            if len(inputs[0]) != self.size():
                raise ValueError(f"collgpu: scatter: {len(inputs[0])} input tensors for "
                                 f"{self.size()} ranks")
            whole = _flat(inputs[0])
        _settle(out, whole)
        nat.call("scatter", self._comm, None if whole is None else whole.data_ptr(), dst.ptr(),
                 out.numel(), _dtype(out), root)
        dst.back()
        return outputs

    @_call
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        n = self.size()
        row_in = input[0].numel() if input.dim() > 0 and input.shape[0] > 0 else 1
        row_out = output[0].numel() if output.dim() > 0 and output.shape[0] > 0 else 1
        if input.dim() == 0 or output.dim() == 0:
            raise ValueError("collgpu: all_to_all_single needs tensors of at least one dimension")
        if not input_split_sizes:
            if input.shape[0] % n:
                raise ValueError(f"collgpu: all_to_all_single: {input.shape[0]} rows do not "
                                 f"split evenly over {n} ranks")
            input_split_sizes = [input.shape[0] // n] * n
        if not output_split_sizes:
            if output.shape[0] % n:
                raise ValueError(f"collgpu: all_to_all_single: {output.shape[0]} rows do not "
                                 f"split evenly over {n} ranks")
            output_split_sizes = [output.shape[0] // n] * n
        scounts = [s * row_in for s in input_split_sizes]
        rcounts = [s * row_out for s in output_split_sizes]
        sdispls = [sum(scounts[:i]) for i in range(n)]
        rdispls = [sum(rcounts[:i]) for i in range(n)]
        src, dst = _Dense(input), _Dense(output, read=False)
        _settle(input, output)
        nat.call("alltoallv", self._comm, src.ptr(), nat.int_array(scounts),
                 nat.int_array(sdispls), dst.ptr(), nat.int_array(rcounts),
                 nat.int_array(rdispls), _dtype(input))
        dst.back()
        return [output]

    @_call
    def alltoall(self, outputs, inputs, opts=None):
        whole_in = _flat(inputs)
        whole_out = torch.empty(sum(o.numel() for o in outputs), dtype=outputs[0].dtype,
                                device=outputs[0].device)
        self.alltoall_base(whole_out, whole_in, [o.numel() for o in outputs],
                           [i.numel() for i in inputs], opts)
        off = 0
        for o in outputs:
            o.copy_(whole_out[off:off + o.numel()].view_as(o))
            off += o.numel()
        return outputs

    @_call
    def barrier(self, opts=None):
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.current_stream().synchronize()
        nat.call("barrier", self._comm)
        return []

    # ---- point to point --------------------------------------------------------------------

    @_call
    def send(self, tensors, dstRank, tag=0):
        for t in tensors:
            d = _Dense(t, host=True)
            _settle(t)
            nat.call("send", self._comm, d.ptr(), t.numel(), _dtype(t), dstRank, tag)
        return tensors

    @_call
    def recv(self, tensors, srcRank, tag=0):
        for t in tensors:
            d = _Dense(t, read=False, host=True)
            _settle(t)
            nat.call("recv", self._comm, d.ptr(), t.numel(), _dtype(t), srcRank, tag)
            d.back()
        return tensors

    def recv_anysource(self, tensors, tag=0):
        t = tensors[0]
        source = []

        def body():
            d = _Dense(t, read=False, host=True)
            _settle(t)
            req = nat.call_nonblocking("recv", self._comm, d.ptr(), t.numel(), _dtype(t), -1,
                                       tag)
            source.append(nat.wait(req))
            d.back()
            return tensors

        _queue.issue(body, False, None).wait()  # in order behind queued calls
        return _RecvAnyWork(tensors, source[0])
