"""A non-editable install ships the kernel sources inside the package and works from another directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_non_editable_install_finds_its_kernels(tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                    "--target", str(target), str(ROOT)], check=True, cwd=tmp_path)
    assert (target / "tcreduce" / "kernels" / "tensorcore.cu").is_file()
    assert (target / "tcreduce" / "kernels" / "common.cuh").is_file()
    code = (
        "import tcreduce, tcreduce._compile as c\n"
        "d = c.kernel_dir()\n"
        "assert str(d).startswith(%r), d\n"
        "ck = c.compile_kernel('tensorcore.cu', 'tc_flat<__half, 256, 2, 1, float, 2, 6>', 'sm_90', use_cache=False)\n"
        "assert 'mma.sync' in ck.ptx\n"
        "print(len(tcreduce.methods()))\n" % str(target)
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env=env, capture_output=True,
                         text=True)
    assert int(out.stdout.strip()) >= 4
