"""Builds libcollgpu_torch.so (collgpu_torch/collgpu_native.c) with the MPI compiler wrapper
(MPICC, default mpicc) into the package, beside the Python files that load it with ctypes.
It does not include or link torch: one build serves every torch version."""

import os
import shlex
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithNative(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        src = os.path.join(here, "collgpu_torch", "collgpu_native.c")
        out_dir = os.path.join(self.build_lib, "collgpu_torch")
        os.makedirs(out_dir, exist_ok=True)
        out = os.path.join(out_dir, "libcollgpu_torch.so")
        cc = shlex.split(os.environ.get("MPICC", "mpicc"))
        cmd = cc + ["-O2", "-std=c11", "-D_GNU_SOURCE", "-shared", "-fPIC",
                    "-fvisibility=hidden", "-o", out, src, "-ldl"]
        print(" ".join(cmd))
        subprocess.check_call(cmd)


setup(cmdclass={"build_py": BuildWithNative})
