"""A control group of its own for each jail: the whole jail's memory, CPU weight and
process count, enforced by the kernel.

Every process of a jail (the launcher, bubblewrap, the jailed program and all it starts)
runs in one group made for that jail, below the grader's own group:

- **memory**: a limit for all of them together, the pages of the jail's private ``/tmp``
  (tmpfs, counted as shared memory by the kernel) included; swap adds nothing (cgroup v1
  ``memory.memsw.limit_in_bytes`` equal to the limit where it exists, v2
  ``memory.swap.max`` 0). Past it the kernel reclaims, then its OOM killer ends a process
  of that group only.
- **CPU**: a weight (v2 ``cpu.weight``, v1 ``cpu.shares`` = weight x 1024 / 100), so that
  under contention each jail gets its share whatever number of processes it runs, and a
  quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` per ``cpu.cfs_period_us``) of CPUs it may
  use at once: student code burning CPU in many processes slows only itself.
- **processes**: ``pids.max``, a fork bomb ends at the limit inside its own group.

cgroup v2 is used where the grader's own group there offers the ``memory``, ``cpu`` and
``pids`` controllers to its children (a delegated subtree); otherwise cgroup v1, where
each controller is mounted apart (``/sys/fs/cgroup/<controller>``) and the grader may make
child groups (root). Groups are named ``attention-kit-<pid>-<n>`` after the grader's
process: ``sweep_stale`` kills what is left in the groups of a grader that was killed and
removes them.

The kernel's counters (``memory.failcnt``, ``memory.oom_control``, ``memory.events``,
``pids.events``) say whether a limit was reached: ``Group.observations`` reads them for
the grader's report.
"""

from __future__ import annotations

import atexit
import errno
import itertools
import os
import re
import signal
import time
from dataclasses import dataclass, field

CONTROLLERS = ("memory", "cpu", "pids")
PREFIX = "attention-kit-"
CGROUP_ROOT = "/sys/fs/cgroup"
# cpu.weight of cgroup v2 that one cpu.shares of v1 (1024) stands for.
V2_DEFAULT_WEIGHT = 100
V1_DEFAULT_SHARES = 1024


class CgroupUnavailable(RuntimeError):
    """No control group can be made for a jail here (the message says why, one line)."""


@dataclass
class Group:
    """One jail's control group.

    Attributes:
        version: 1 or 2.
        paths: the group's folders, one per controller (v1) or one (v2).
        memory_bytes: int, the memory limit written (bytes).
        pids: int, the process limit written.
        removed: bool, True once ``remove`` is done.
        owner: int, the process that made it (the only one that removes it at exit).
    """

    version: int
    paths: list[str]
    memory_bytes: int
    pids: int
    removed: bool = field(default=False, compare=False)
    owner: int = field(default_factory=os.getpid, compare=False)

    def join(self) -> None:
        """Move the calling process into the group (every controller): run in the child
        between ``fork`` and ``exec`` (``preexec_fn``), before any student code.

        Raises:
            OSError: the group cannot be joined (the child must not go on).
        """
        pid = str(os.getpid())
        for path in self.paths:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(pid)

    def processes(self) -> list[int]:
        """Process ids in the group now (empty once it is removed)."""
        found: set[int] = set()
        for path in self.paths:
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    found.update(int(x) for x in f.read().split())
            except OSError:
                continue
        return sorted(found)

    def _read(self, name: str) -> dict[str, int]:
        """``key value`` lines of a file of the group (any folder that has it)."""
        for path in self.paths:
            try:
                with open(os.path.join(path, name)) as f:
                    text = f.read()
            except OSError:
                continue
            values: dict[str, int] = {}
            for line in text.splitlines():
                parts = line.split()
                if len(parts) == 1 and parts[0].isdigit():
                    values[""] = int(parts[0])
                elif len(parts) == 2 and parts[1].lstrip("-").isdigit():
                    values[parts[0]] = int(parts[1])
            return values
        return {}

    def observations(self) -> dict[str, int]:
        """What the kernel counted in this group: how often usage met the memory limit,
        how many processes its OOM killer ended, how often a new process was refused.

        Returns:
            dict with ``memory_limit_hits``, ``oom_kills`` and ``pids_limit_hits`` (counts;
            0 when the kernel does not say).
        """
        if self.version == 2:
            memory = self._read("memory.events")
            hits, kills = memory.get("max", 0), memory.get("oom_kill", 0)
        else:
            hits = max(self._read("memory.failcnt").get("", 0),
                       self._read("memory.memsw.failcnt").get("", 0))
            kills = self._read("memory.oom_control").get("oom_kill", 0)
        return {"memory_limit_hits": hits, "oom_kills": kills,
                "pids_limit_hits": self._read("pids.events").get("max", 0)}

    def remove(self, timeout: float = 10.0) -> None:
        """Kill every process left in the group, then remove it (idempotent).

        Raises:
            nothing: a group that cannot be removed within ``timeout`` is left for
            ``sweep_stale`` of a later grader.
        """
        if self.removed:
            return
        _kill_and_remove(self.paths, timeout)
        self.removed = True
        _MADE.pop(id(self), None)


def _kill_and_remove(paths: list[str], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    for path in paths:
        if os.path.exists(os.path.join(path, "cgroup.kill")):
            try:
                with open(os.path.join(path, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                pass
    while True:
        left = False
        for path in paths:
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            for pid in pids:
                left = True
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if not left:
            break
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    done = True
    for path in paths:
        while True:
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:  # the last processes still leaving
                if time.monotonic() > deadline:
                    done = False
                    break
                time.sleep(0.01)
    return done


def _own_paths() -> dict[str, str]:
    """``controller -> path`` of the calling process's groups (``/proc/self/cgroup``);
    cgroup v2's under the key ``""``."""
    found: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            for name in parts[1].split(",") if parts[1] else [""]:
                found[name] = parts[2]
    return found


def _mounts() -> dict[str, str]:
    """``controller -> mount point`` of cgroup v1 hierarchies, and ``"" -> mount point``
    of the cgroup v2 one (``/proc/self/mounts``)."""
    found: dict[str, str] = {}
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 4:
                continue
            point = parts[1].replace("\\040", " ")
            if parts[2] == "cgroup2":
                found.setdefault("", point)
            elif parts[2] == "cgroup":
                for option in parts[3].split(","):
                    if option in CONTROLLERS:
                        found.setdefault(option, point)
    return found


def _writable(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def _v2_base() -> str | None:
    """The folder of the grader's own v2 group when its children can have the three
    controllers (enabling them in ``cgroup.subtree_control`` if need be), else None.

    cgroup v2 lets a group hand controllers to its children only when it holds no process
    itself: in a group delegated to the grader (``systemd-run -p Delegate=yes``) that
    holds the grader alone, the grader first moves into a leaf of its own
    (``attention-kit-<pid>-grader``) and the jails' groups are made beside it."""
    mount = _mounts().get("")
    own = _own_paths().get("")
    if mount is None or own is None:
        return None
    base = os.path.join(mount, own.lstrip("/"))
    if os.path.basename(base) == f"{PREFIX}{os.getpid()}-grader":
        base = os.path.dirname(base)  # moved there by an earlier call
    if not _writable(base):
        return None
    try:
        with open(os.path.join(base, "cgroup.subtree_control")) as f:
            enabled = set(f.read().split())
        missing = [c for c in CONTROLLERS if c not in enabled]
        if not missing:
            return base
        with open(os.path.join(base, "cgroup.controllers")) as f:
            if not set(missing) <= set(f.read().split()):
                return None
        enable = " ".join(f"+{c}" for c in missing)
        try:
            with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                f.write(enable)
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            leaf = os.path.join(base, f"{PREFIX}{os.getpid()}-grader")
            os.makedirs(leaf, exist_ok=True)
            with open(os.path.join(leaf, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                f.write(enable)  # EBUSY again: other processes share the group
    except OSError:  # not delegated, or the group holds other processes (EBUSY)
        return None
    return base


def _v1_bases() -> dict[str, str] | None:
    """``controller -> folder of the grader's own v1 group`` when each of the three is
    mounted and writable, else None."""
    mounts, own = _mounts(), _own_paths()
    bases = {}
    for name in CONTROLLERS:
        if name not in mounts or name not in own:
            return None
        base = os.path.join(mounts[name], own[name].lstrip("/"))
        if not _writable(base):
            return None
        bases[name] = base
    return bases


def hierarchy() -> tuple[int, list[str]]:
    """Where this process makes jails' groups: ``(2, [folder])`` or ``(1, [memory, cpu,
    pids folders])``.

    Raises:
        CgroupUnavailable: neither a v2 group with the three controllers nor writable v1
            ones (one line: what is missing).
    """
    base = _v2_base()
    if base is not None:
        return 2, [base]
    bases = _v1_bases()
    if bases is not None:
        return 1, [bases[c] for c in CONTROLLERS]
    if not os.path.isdir(CGROUP_ROOT):
        raise CgroupUnavailable(f"{CGROUP_ROOT} is not mounted")
    raise CgroupUnavailable(
        f"neither a cgroup v2 group offering {', '.join(CONTROLLERS)} to its children nor "
        f"writable cgroup v1 {'/'.join(CONTROLLERS)} groups for uid {os.geteuid()}")


_COUNTER = itertools.count()
_MADE: dict[int, Group] = {}
_SWEPT: set[int] = set()


CPU_PERIOD_US = 100_000


def make(memory_bytes: int, cpu_weight: int, pids: int, cpus: float = 1.0) -> Group:
    """A new group for one jail, its limits written, empty until a process ``join``s.

    Args:
        memory_bytes: int, memory of all the group's processes and tmpfs pages (bytes).
        cpu_weight: int, 1..10000, cgroup v2's scale (100: the same as any other group).
        pids: int, processes and threads at once.
        cpus: float, CPUs' worth of time the group may use at once (0: no quota).

    Returns:
        Group (removed by ``Group.remove``, or at the grader's exit).

    Raises:
        CgroupUnavailable: no group can be made or a limit cannot be written here.
    """
    version, bases = hierarchy()
    quota = int(CPU_PERIOD_US * cpus)
    if os.getpid() not in _SWEPT:
        _SWEPT.add(os.getpid())
        sweep_stale()
    name = f"{PREFIX}{os.getpid()}-{next(_COUNTER)}"
    paths = [os.path.join(b, name) for b in bases]
    made: list[str] = []
    try:
        for path in paths:
            os.mkdir(path)
            made.append(path)
        if version == 2:
            settings = [("memory.max", memory_bytes), ("memory.swap.max", 0),
                        ("cpu.weight", cpu_weight), ("pids.max", pids)]
            if quota > 0:
                settings.append(("cpu.max", f"{quota} {CPU_PERIOD_US}"))
            writes = [(paths[0], f, v) for f, v in settings]
        else:
            memory, cpu, pid_group = paths
            shares = max(2, cpu_weight * V1_DEFAULT_SHARES // V2_DEFAULT_WEIGHT)
            writes = [(memory, "memory.limit_in_bytes", memory_bytes),
                      (memory, "memory.memsw.limit_in_bytes", memory_bytes),
                      (cpu, "cpu.shares", shares), (pid_group, "pids.max", pids)]
            if quota > 0:
                writes += [(cpu, "cpu.cfs_period_us", CPU_PERIOD_US),
                           (cpu, "cpu.cfs_quota_us", quota)]
        for path, name_, value in writes:
            target = os.path.join(path, name_)
            if name_ in ("memory.swap.max", "memory.memsw.limit_in_bytes") and \
                    not os.path.exists(target):
                continue  # no swap accounting on this kernel: no swap to add
            with open(target, "w") as f:
                f.write(str(value))
    except OSError as exc:
        _kill_and_remove(made, 2.0)
        raise CgroupUnavailable(f"cannot set up the jail's cgroup {paths[0]}: "
                                f"{exc.strerror or exc}") from None
    group = Group(version, paths, memory_bytes, pids)
    _MADE[id(group)] = group
    return group


def problem() -> str | None:
    """Why no group can be made here (one line), or None when one can."""
    try:
        hierarchy()
    except CgroupUnavailable as exc:
        return str(exc)
    return None


def sweep_stale() -> list[str]:
    """Kill the processes left in the groups of graders that have ended and remove the
    groups (``attention-kit-<pid>-<n>`` and ``attention-kit-<pid>-grader`` beside this
    process's jails, ``<pid>`` no longer running).

    Returns:
        The folders removed.
    """
    try:
        _, bases = hierarchy()
    except CgroupUnavailable:
        return []
    pattern = re.compile(rf"^{re.escape(PREFIX)}(\d+)-(\d+|grader)$")
    removed: list[str] = []
    for base in bases:
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            match = pattern.match(name)
            if not match or alive(int(match.group(1))):
                continue
            path = os.path.join(base, name)
            if _kill_and_remove([path], 5.0):
                removed.append(path)
    return removed


def alive(pid: int) -> bool:
    """True if process ``pid`` exists (one of another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@atexit.register
def _remove_made() -> None:
    """The groups this process made and did not remove (a grader ending mid-batch)."""
    for group in list(_MADE.values()):
        if group.owner == os.getpid():
            group.remove(timeout=2.0)
