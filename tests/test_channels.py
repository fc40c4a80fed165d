"""The channels between the grader and a jailed kernel: the grader opens only files it
made, in a folder of its own that is not in the jail.

A kernel that points its socket files at a host socket and drops its connection (the
kind where nbgrader's process, reconnecting, followed the student's symbolic links out of
the jail) never makes the grader connect anywhere but its own, refused, files; its cell is
reported and the run goes on.
"""

from __future__ import annotations

import os
import socket
import stat
import uuid

import nbformat
import pytest

from grader_tests import jail
from grader_tests.autograde import JailedExecute, JailedKernelManager

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")

SWAP = r'''
import json, os, glob, time
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
with open(app.abs_connection_file) as f:
    info = json.load(f)
paths = [f"{info['ip']}-{info[k]}" for k in
         ("shell_port", "iopub_port", "stdin_port", "hb_port", "control_port")]
seen = [os.path.lexists(p) for p in paths]
made = []
for p in paths:
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if os.path.lexists(p):
            os.remove(p)
        os.symlink(HOST, p)
        made.append(p)
    except OSError as exc:
        made.append(type(exc).__name__)
print("seen", seen, "made", made, flush=True)
time.sleep(0.5)
for fd in range(3, 256):
    try:
        if os.path.realpath(f"/proc/self/fd/{fd}").startswith("socket:"):
            os.close(fd)
    except OSError:
        pass
time.sleep(60)
'''


@needs_jail
def test_a_kernel_that_swaps_its_sockets_never_makes_the_grader_connect_outside(tmp_path):
    host = f"/tmp/attention-kit-host-{uuid.uuid4().hex[:8]}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(host)
    listener.listen(64)
    listener.setblocking(False)
    try:
        folder = tmp_path / "attention"
        folder.mkdir()
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("print(6 * 7)"),
                    nbformat.v4.new_code_cell(f"HOST = {host!r}\n" + SWAP),
                    nbformat.v4.new_code_cell("print('after')")]
        path = folder / "attention.ipynb"
        nbformat.write(nb, path)
        execute = JailedExecute(timeout=8, startup_timeout=120, interrupt_on_timeout=True)
        out, _ = execute.preprocess(nb, {"metadata": {"path": str(folder)}})
        assert "42" in out.cells[0].outputs[0]["text"]
        texts = " ".join(str(o) for o in out.cells[1].outputs)
        # the jail never saw the grader's files; its own links pointed nowhere the grader
        # looked
        assert "seen [False, False, False, False, False]" in texts
        # nor can it make them: the folder above the connection file is not its own
        assert "made ['PermissionError', 'PermissionError'" in texts
        assert any(o.get("output_type") == "error" for o in out.cells[1].outputs)
        assert "not run" in out.cells[2].outputs[0]["text"]
        with pytest.raises(BlockingIOError):
            listener.accept()  # not one connection reached the host's socket
    finally:
        listener.close()
        os.unlink(host)


@needs_jail
def test_the_kernels_sockets_are_the_graders_files_in_a_folder_of_its_own(tmp_path):
    import asyncio

    km = JailedKernelManager()

    async def run():
        await km.start_kernel(cwd=str(tmp_path))
        try:
            folder = os.lstat(km._jail_sockets)
            assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.geteuid()
            assert "/proc/" not in km.ip and km.ip.startswith(km._jail_sockets + "/")
            assert len(km._socket_ids) == 5 and km.sockets_changed() is None
            assert await km.is_alive()
            # a socket file that changes under the grader ends the kernel
            victim = next(iter(km._socket_ids))
            os.unlink(victim)
            os.symlink("/dev/null", victim)
            assert km.sockets_changed() == victim
            assert not await km.is_alive()
            assert km.provisioner is None or not await km.provisioner.poll() is None
        finally:
            await km.shutdown_kernel(now=True)

    asyncio.run(run())
