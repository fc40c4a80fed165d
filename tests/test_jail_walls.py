"""The jail's walls against the kernel: no new namespace, no mount, none of the calls the
seccomp filter's rule list refuses (``jail.DENIED_SYSCALLS``, ``CLONE_NAMESPACE_FLAGS``,
``ENOSYS_SYSCALLS``) and no other ABI, whether the grader runs as root (the jail drops to
a uid of its own) or not (the jail has a user namespace of its own); an honest program's
threads, forks and child processes unchanged.

Each rule is tried from inside a jail and judged from outside, on what the jailed program
printed. A refusal by the filter is told from the kernel's own (a call an unprivileged
process may not make fails with EPERM anyway) by building the filter, for the test, with
an error no such call gives (``jail.REFUSED_ERRNO``)."""

from __future__ import annotations

import errno
import json
import os
import platform
import subprocess
import sys

import pytest

from grader_tests import jail

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason="no jail here")

# An error no call of the list gives on its own: only the filter returns it.
MARKER = errno.ENOTRECOVERABLE

PROBE = r'''
import ctypes, json, os, subprocess, sys, threading
calls = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def call(number, *args):
    ctypes.set_errno(0)
    got = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    if got == 0 and number == calls["clone"][0]:
        os._exit(0)  # a clone the filter let through: its child leaves at once
    return 0 if got >= 0 else ctypes.get_errno()

seen = {"calls": {name: call(number, *([0] * 6)) for name, (number,) in calls["denied"].items()}}
seen["clone"] = {name: call(calls["clone"][0], flag | 17, 0, 0, 0, 0)
                 for name, flag in calls["flags"].items()}
seen["enosys"] = {name: call(number, 0, 0) for name, (number,) in calls["enosys"].items()}
if calls.get("x32") is not None:
    seen["x32"] = call(calls["x32"])
def spawn(argv):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        return [done.returncode, done.stderr.strip()]
    except OSError as exc:
        return [-1, str(exc)]
seen["unshare -Urm"] = spawn(["unshare", "-Urm", "true"])
seen["mount"] = spawn(["mount", "-t", "tmpfs", "none", "/tmp"])
# honest: a thread, a fork, a child through posix_spawn
box = []
t = threading.Thread(target=lambda: box.append(1)); t.start(); t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
seen["fork"] = os.waitpid(pid, 0)[1] >> 8
seen["thread"] = box
child = os.posix_spawn("/bin/sh", ["sh", "-c", "exit 5"], {})
seen["posix_spawn"] = os.waitpid(child, 0)[1] >> 8
print(json.dumps(seen))
'''


def _numbers() -> dict:
    """The system call numbers of this machine, from libseccomp (outside the jail)."""
    import pyseccomp

    arch = pyseccomp.system_arch()
    number = {n: pyseccomp.resolve_syscall(arch, n) for n in
              list(jail.DENIED_SYSCALLS) + list(jail.ENOSYS_SYSCALLS) + ["clone"]}
    return {"denied": {n: [number[n]] for n in jail.DENIED_SYSCALLS},
            "enosys": {n: [number[n]] for n in jail.ENOSYS_SYSCALLS},
            "clone": [number["clone"]], "flags": jail.CLONE_NAMESPACE_FLAGS,
            "x32": 0x40000000 + 39 if platform.machine() == "x86_64" else None}  # getpid


@pytest.fixture(params=["root", "not root"])
def path(request, monkeypatch):
    """The jail as the grader builds it as root, and as it builds it for an ordinary user
    (a user namespace of its own with ``--disable-userns``: chosen by the grader's
    effective uid, which the test sets)."""
    if request.param == "not root" and os.geteuid() == 0:
        monkeypatch.setattr(jail.os, "geteuid", lambda: 1000)
    if request.param == "root" and os.geteuid() != 0:
        pytest.skip("the root path needs root")
    return request.param


def _run(refused: int) -> dict:
    os_refused = jail.REFUSED_ERRNO
    jail.REFUSED_ERRNO = refused
    try:
        cmd = jail.command([sys.executable, "-I", "-c", PROBE, json.dumps(_numbers())])
    finally:
        jail.REFUSED_ERRNO = os_refused
    done = subprocess.run(cmd.argv, preexec_fn=cmd.preexec, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    jail.reap(cmd.uid)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_every_rule_names_a_system_call_of_this_machine():
    import pyseccomp

    arch = pyseccomp.system_arch()
    for name in list(jail.DENIED_SYSCALLS) + list(jail.ENOSYS_SYSCALLS) + ["clone"]:
        assert pyseccomp.resolve_syscall(arch, name) >= 0, name
    bpf = jail.seccomp_bpf()
    assert bpf and len(bpf) % 8 == 0  # struct sock_filter records


@needs_jail
def test_each_rule_is_refused_by_the_filter(path):
    seen = _run(MARKER)
    assert seen["calls"] == {name: MARKER for name in jail.DENIED_SYSCALLS}
    assert seen["clone"] == {name: MARKER for name in jail.CLONE_NAMESPACE_FLAGS}
    assert seen["enosys"] == {name: errno.ENOSYS for name in jail.ENOSYS_SYSCALLS}
    if "x32" in seen:  # another ABI: the bad-architecture action
        assert seen["x32"] == MARKER
    # honest processes unchanged (clone3 refused: the C library falls back to clone)
    assert (seen["thread"], seen["fork"], seen["posix_spawn"]) == ([1], 7, 5)


@needs_jail
def test_no_user_namespace_and_no_mount_in_the_jail(path):
    seen = _run(errno.EPERM)
    code, said = seen["unshare -Urm"]
    assert code != 0 and "Operation not permitted" in said, said
    code, said = seen["mount"]
    assert code != 0, said
    assert set(seen["calls"].values()) == {errno.EPERM}


def test_the_command_line_asks_bubblewrap_for_its_own_walls(monkeypatch):
    monkeypatch.setattr(jail.os, "geteuid", lambda: 1000)
    argv = jail.command(["python3", "-c", "pass"]).argv
    assert "--unshare-user" in argv
    if "--disable-userns" in jail.bwrap_options():
        assert "--disable-userns" in argv
    at = argv.index("--seccomp")
    assert argv[at + 1] == str(jail.SECCOMP_FD)
    with open(argv[3], "rb") as f:  # the file the shell opens on that descriptor
        assert f.read() == jail.seccomp_bpf()


PTY = r'''
import json, os, pty
seen = {"dev": sorted(os.listdir("/dev")), "pts": sorted(os.listdir("/dev/pts"))}
for name, opener in (("openpty", os.openpty), ("ptmx", lambda: os.open("/dev/ptmx", os.O_RDWR)),
                     ("pty.fork", pty.fork)):
    try:
        opener()
        seen[name] = "opened"
    except OSError:
        seen[name] = "refused"
print(json.dumps(seen))
'''


@needs_jail
def test_no_pseudo_terminal_in_the_jail(path):
    cmd = jail.command([sys.executable, "-I", "-c", PTY])
    done = subprocess.run(cmd.argv, preexec_fn=cmd.preexec, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    jail.reap(cmd.uid)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["pts"] == []
    assert {"null", "zero", "urandom"} <= set(seen["dev"])
    assert [seen[name] for name in ("openpty", "ptmx", "pty.fork")] == ["refused"] * 3, seen


def test_no_inherited_descriptor_may_take_the_filters_place():
    """The launcher opens the seccomp filter at ``SECCOMP_FD``: a descriptor the caller
    passes on there would be replaced by the filter (a kernel's socket was, once), so
    ``command`` refuses it."""
    with pytest.raises(ValueError, match="seccomp"):
        jail.command(["/bin/true"], keep_fds=[jail.SECCOMP_FD])
    assert jail.command(["/bin/true"], keep_fds=[jail.SECCOMP_FD + 1]).argv[-1] == "/bin/true"
