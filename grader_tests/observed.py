"""What the machine's kernel saw a jail do: the system calls its seccomp filter refused.

bubblewrap installs the jail's filter (``jail.seccomp_bpf``) without asking the kernel to
log what it refuses, so the sandbox worker's start-up, before it loads any student code,
installs the same filter once more with the kernel's log flag
(``SECCOMP_FILTER_FLAG_LOG``; the file is bound read-only at ``LOGGED_FILTER``). A filter
cannot be removed, and every process the student's code starts inherits it. The kernel
then sends each refusal to the audit system as a record of type 1326 (``AUDIT_SECCOMP``)
naming the process's uid, the system call and the filter's action; the grader reads them
on the audit system's read-only multicast group (a netlink socket opened before the jail
starts, which the kernel's log's rate limit does not thin out). Run as root, every jail
has a uid of its own (``jail.JAIL_UID_BASE`` + a number), so the records of that uid,
sent while the jail ran, are that submission's reaches, observed from outside every
process the student's code controls. Where the socket cannot be opened (the kit run as
an ordinary user: it takes ``CAP_AUDIT_READ``), or the jail has no uid of its own,
nothing is observed and nothing is reported: the walls hold all the same.
"""

from __future__ import annotations

import errno
import re
import socket
import struct
import time

from . import jail

# The audit system's netlink protocol, its read-only multicast group, and the record type
# of a seccomp action (linux/netlink.h, linux/audit.h).
NETLINK_AUDIT, AUDIT_NLGRP_READLOG, AUDIT_SECCOMP = 9, 1, 1326
# Where the worker's jail finds the filter it loads once more, logged.
LOGGED_FILTER = f"{jail.CODE_DIR}/seccomp.bpf"
# ``audit(1796306913.542:2): auid=4294967295 uid=2001 ... syscall=272 ... code=0x50000``
_RECORD = re.compile(r"audit\((?P<time>[0-9.]+):[0-9]+\):.*?\buid=(?P<uid>[0-9]+)"
                     r".*?\barch=(?P<arch>[0-9a-f]+).*?\bsyscall=(?P<nr>[0-9]+)"
                     r".*?\bcode=0x(?P<code>[0-9a-f]+)")
# The action of a filter's answer (the record gives the action without its error number).
SECCOMP_RET_ERRNO, SECCOMP_RET_ACTION_FULL = 0x00050000, 0xFFFF0000
# Messages read at most per look (bytes each: ``RECORD_BYTES``).
MAX_RECORDS, RECORD_BYTES = 100_000, 16 * 2**10
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr: length, type, flags, seq, pid


class RefusedCalls:
    """The system calls the jail's filter refused to one jail's uid while it ran.

    Made before the jail starts (it listens from then on), read after it ended
    (``names``).

    Args:
        uid: the jail's own uid (``jail.Command.uid``), or None where the jail has none
            (then nothing is observed).
    """

    def __init__(self, uid: int | None) -> None:
        self.uid = uid
        self.started = time.time()
        self._socket: socket.socket | None = None
        if uid is None:
            return
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK |
                                 socket.SOCK_CLOEXEC, NETLINK_AUDIT)
        except (OSError, AttributeError):
            return
        try:
            sock.bind((0, 1 << (AUDIT_NLGRP_READLOG - 1)))
        except OSError:  # no CAP_AUDIT_READ: nothing observed
            sock.close()
            return
        self._socket = sock

    def names(self) -> list[str]:
        """The refused calls' names (libseccomp's names, first refusal first, each once);
        stops listening. Empty where nothing could be observed."""
        sock, self._socket = self._socket, None
        if sock is None:
            return []
        found: list[str] = []
        try:
            for _ in range(MAX_RECORDS):
                try:
                    data = sock.recv(RECORD_BYTES)
                except BlockingIOError:
                    break  # nothing more was sent
                except OSError as exc:
                    if exc.errno == errno.ENOBUFS:  # records dropped meanwhile: go on
                        continue
                    break
                if len(data) < _HEADER.size:
                    break
                length, kind = _HEADER.unpack_from(data)[:2]
                if kind != AUDIT_SECCOMP:
                    continue
                name = self._refused(data[_HEADER.size:length].decode("utf-8", "replace"))
                if name is not None and name not in found:
                    found.append(name)
        finally:
            sock.close()
        return found

    def _refused(self, text: str) -> str | None:
        """The name of the call an ``AUDIT_SECCOMP`` record's ``text`` says the kit's
        filter refused to this jail's uid, or None."""
        match = _RECORD.search(text)
        if match is None or int(match["uid"]) != self.uid or \
                float(match["time"]) < self.started:
            return None
        if int(match["code"], 16) & SECCOMP_RET_ACTION_FULL != SECCOMP_RET_ERRNO:
            return None  # not a refusal of the kit's filter (which only answers errors)
        name = _syscall_name(int(match["arch"], 16), int(match["nr"]))
        # ``clone3``'s ENOSYS is what the C library expects (it falls back to ``clone``);
        # the record does not say which error a refusal got, so the name tells them apart.
        return None if name in jail.ENOSYS_SYSCALLS else name


def _syscall_name(arch: int, number: int) -> str:
    """libseccomp's name of system call ``number`` of audit architecture ``arch``."""
    try:
        import pyseccomp as seccomp

        name = seccomp.resolve_syscall(arch, number)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # an architecture libseccomp does not know: the number says it
        return f"#{number}"
