"""collgpu_torch: the torch.distributed backend "collgpu", over MPI and coll/gpu.

    import collgpu_torch                     # under mpirun: MPI up, rank and size from it
    import torch.distributed as dist
    dist.init_process_group("collgpu")       # nothing else to set

Importing the package initialises MPI (unless the program did) and, for torch's front end,
which still asks every third-party backend for a rendezvous, fills in what it reads from the
environment and was not set: RANK and WORLD_SIZE (MPI's), LOCAL_RANK and LOCAL_WORLD_SIZE
(the launcher's), MASTER_ADDR (127.0.0.1 when every rank is on one host, else rank 0's host
name), MASTER_PORT (a free port of rank 0's) and USE_LIBUV=0 (the store every torch build
has).  So the import is collective: every rank of
MPI_COMM_WORLD makes it.  new_group() makes MPI communicators of the groups' members.
"""

import atexit
import os
import socket

import torch.distributed as dist

from . import _native
from ._pg import ProcessGroupCollGPU

__all__ = ["ProcessGroupCollGPU", "world_rank", "world_size"]

world_rank, world_size = _native.init()
atexit.register(_native.finalize)


def _rendezvous_env():
    """The variables torch's env:// rendezvous reads, from MPI where the user set none."""
    import ctypes

    env = os.environ
    env.setdefault("RANK", str(world_rank))
    env.setdefault("WORLD_SIZE", str(world_size))
    for mine, theirs in (("LOCAL_RANK", ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")),
                         ("LOCAL_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"))):
        for name in theirs:
            if mine not in env and name in env:
                env[mine] = env[name]
    # the store's libuv server is missing from some builds of torch (Debian's), and the
    # classic one serves every build; a rendezvous of one store per job needs no more
    env.setdefault("USE_LIBUV", "0")
    if "MASTER_ADDR" in env and "MASTER_PORT" in env:
        return
    # every rank's host name, then rank 0's address and port to all (collective)
    width = 256
    mine = ctypes.create_string_buffer(socket.gethostname().encode()[:width - 1], width)
    names = ctypes.create_string_buffer(width * world_size)
    _native.call("allgather", 0, mine, names, width, _native.U8)
    hosts = {names.raw[i * width:(i + 1) * width].rstrip(b"\0") for i in range(world_size)}
    record = ctypes.create_string_buffer(width)
    if world_rank == 0:
        addr = env.get("MASTER_ADDR") or ("127.0.0.1" if len(hosts) == 1 else socket.getfqdn())
        port = env.get("MASTER_PORT")
        if not port:
            with socket.socket() as s:
                s.bind(("", 0))
                port = str(s.getsockname()[1])
        record.value = f"{addr} {port}".encode()
    _native.call("bcast", 0, record, width, _native.U8, 0)
    addr, port = record.value.decode().split()
    env.setdefault("MASTER_ADDR", addr)
    env.setdefault("MASTER_PORT", port)


def _create(backend_opts, _options=None):
    """Backend creator (torch's extended API): the group's members make its communicator."""
    ranks = list(backend_opts.global_ranks_in_group or [])
    if not ranks or ranks == list(range(world_size)):
        if backend_opts.group_size != world_size or backend_opts.group_rank != world_rank:
            raise RuntimeError(
                f"collgpu: torch's world (rank {backend_opts.group_rank} of "
                f"{backend_opts.group_size}) is not MPI's (rank {world_rank} of {world_size}); "
                "launch with mpirun and leave RANK and WORLD_SIZE to collgpu_torch")
        comm = 0
        ranks = list(range(world_size))
    else:
        comm = _native.comm_create(ranks)
    pg = ProcessGroupCollGPU(backend_opts.group_rank, backend_opts.group_size, comm, ranks)
    # torch names the process group it made, which a Python one replaces: DeviceMesh (and with
    # it FSDP2) looks groups up by that name
    pg._set_group_name(getattr(backend_opts, "group_id", "") or "")
    return pg


_rendezvous_env()
if "collgpu" not in dist.Backend.backend_list:
    dist.Backend.register_backend("collgpu", _create, extended_api=True, devices=["cpu", "cuda"])
