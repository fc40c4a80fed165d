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
import threading
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
            # the kernel's five and the relay's five the client connects to
            assert len(km._socket_ids) == 10 and km.sockets_changed() is None
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


def _echo_kernel(path: str, sends: int) -> tuple[socket.socket, threading.Thread]:
    """A stand-in for a kernel's socket at ``path``: for each connection, echo what it
    receives, then send ``sends`` bytes of its own."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)

    def serve():
        conn, _ = server.accept()
        with conn:
            data = conn.recv(1024)
            conn.sendall(data)
            try:
                conn.sendall(b"k" * sends)
            except OSError:
                pass  # the relay cut it off

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


def test_the_relay_passes_bytes_both_ways_and_cuts_a_kernel_off_past_its_budget(tmp_path):
    from grader_tests.relay import CHUNK, KernelRelay

    budget = 1_000_000
    server, thread = _echo_kernel(str(tmp_path / "k"), sends=50_000_000)
    relay = KernelRelay([(str(tmp_path / "c"), str(tmp_path / "k"))], budget)
    relay.start()
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(tmp_path / "c"))
        client.sendall(b"ping")
        got = b""
        while True:
            data = client.recv(1 << 20)
            if not data:
                break
            got += data
        assert got.startswith(b"pingkkkk")
        # the client holds at most the budget; the relay read at most one chunk past it
        assert len(got) <= budget and budget < relay.received <= budget + CHUNK
        assert relay.over_budget
        again = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with pytest.raises(ConnectionRefusedError):
            again.connect(str(tmp_path / "c"))
    finally:
        relay.close()
        server.close()
        thread.join(10)


def test_an_honest_kernels_bytes_stay_under_the_budget(tmp_path):
    from grader_tests.relay import KernelRelay

    server, thread = _echo_kernel(str(tmp_path / "k"), sends=300_000)
    open_before = len(os.listdir("/proc/self/fd"))
    relay = KernelRelay([(str(tmp_path / "c"), str(tmp_path / "k"))], 1_000_000)
    relay.start()
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(tmp_path / "c"))
        client.sendall(b"ping")
        got = b""
        while len(got) < 300_004:
            data = client.recv(1 << 20)
            assert data, len(got)
            got += data
        assert got == b"ping" + b"k" * 300_000 and not relay.over_budget
        assert relay.received == 300_004
        client.close()
    finally:
        relay.close()
        server.close()
        thread.join(10)
    # the relay keeps no descriptor once closed (a class of 300 kernels would run out)
    assert len(os.listdir("/proc/self/fd")) == open_before - 1  # the server's, closed too


@needs_jail
def test_an_iopub_flood_stops_the_kernel_before_the_grader_holds_it(tmp_path):
    """The catalogue's IOPub flood (forty displays of 15 MB, each under ZeroMQ's per-part
    limit): the grader's resident set grows by less than 64 MiB (the budget is 4 MiB;
    received and decoded, the flood held 528 MiB of this process here, 1.5 GB in
    nbgrader's), the cell says the kernel was stopped for what it sent, and the cells after
    it say so too, never that it ran out of time."""
    from tests.catalogue.attacks import IOPUB_FLOOD
    from tests.helpers import PeakMemory

    folder = tmp_path / "attention"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(6 * 7)"),
                nbformat.v4.new_code_cell(IOPUB_FLOOD),
                nbformat.v4.new_code_cell("print('after')")]
    execute = JailedExecute(timeout=60, startup_timeout=120, interrupt_on_timeout=True)
    with PeakMemory() as memory:
        out, _ = execute.preprocess(nb, {"metadata": {"path": str(folder)}})
    assert memory.growth < 64 * 2**20, memory.growth
    assert "42" in out.cells[0].outputs[0]["text"]
    assert [o.get("ename") for o in out.cells[1].outputs] == ["OutputTooLarge"]
    assert "flooded" not in str(out.cells[1].outputs)
    note = out.cells[2].outputs[0]["text"]
    assert "more than 4 MiB" in note and "ran out of time" not in note, note
    assert execute.km is None or not execute.km.has_kernel
