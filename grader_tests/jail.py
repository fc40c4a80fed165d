"""The jail every run of student code goes through: Debian's bubblewrap (``bwrap``).

What a jailed process gets, and nothing else:

- its own network, PID, IPC and UTS namespaces: no network at all (only a loopback of
  its own), no view of the host's processes, and it dies with the grader
  (``--die-with-parent``; the PID namespace takes every child with it);
- an unprivileged identity: run as root, the jail starts ``setpriv`` inside to become
  a uid of its own (``JAIL_UID_BASE`` + a number per jail) with no capability and
  ``no_new_privs``; run as an ordinary user, a user namespace maps that user only;
- read-only: the system (``/usr``), a few files of ``/etc`` the interpreter and the
  dynamic loader read (no passwords, keys or host configuration), the Python
  environment (``sys.base_prefix`` and the virtual environment), with the kit's own
  packages masked when they live inside it (a non-editable install);
- read-only, the folder of the one submission being graded, and the files the caller
  names (the sandbox worker's code, a kernel's connection file); a private ``/tmp`` in
  memory, capped in size, as the only writable place: nothing of the host's disk is
  bound writable (a kernel's Unix sockets are made and bound by the grader in a folder
  of its own outside the jail and passed in as descriptors: ``autograde``);
- a minimal ``/dev`` with no pseudo-terminal (no devpts: ``/dev/ptmx`` leads nowhere);
- no course directory: no reference solutions, no graders' checks, no gradebook, no other
  student, no home directory (``~/.pgpass``), no ``/tmp`` of the host;
- an environment cleared to a short allow-list (``ENV_ALLOWED`` plus what the caller sets);
- resource limits set before ``exec`` (``Limits``): CPU seconds, processes, file size,
  open files, no core dumps; the caller adds an address-space cap where it knows the size;
- a control group of its own (``cgroup.py``; v2 where the grader's group can have the
  controllers, v1 otherwise), joined before bubblewrap starts: one memory limit for all
  the jail's processes and its ``/tmp`` together, a CPU weight and quota (student code
  burning CPU in many processes slows only itself) and a process limit, all from
  ``Limits``; where no group can be made the jail is refused (``problem``), unless
  ``CGROUPS_ENV`` opts out;
- no new namespace and no mount, whoever runs the kit: bubblewrap's ``--disable-userns``
  where the jail has a user namespace of its own (not run as root), and, always, a
  seccomp filter built with libseccomp (``seccomp_bpf``) from the reviewed rule list
  ``DENIED_SYSCALLS``, ``CLONE_NAMESPACE_FLAGS`` and ``ENOSYS_SYSCALLS`` (namespaces,
  mounts, tracing, io_uring, userfaultfd, eBPF, perf events, keyrings, the ways to hold
  memory that no address-space cap counts), and every system call of another ABI, passed
  to bubblewrap with ``--seccomp``.

If bubblewrap is missing or cannot create namespaces on this machine, ``require()`` raises
``JailUnavailable`` with one line saying what to install; grading untrusted code without
the jail happens only when the instructor opts in (``unjailed_allowed``).
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from . import cgroup
from .i18n import N_, _

# Environment variables a jailed process may inherit from the grader (values only of
# these names; everything else is cleared).
ENV_ALLOWED = ("LANG", "LC_ALL", "TZ")
# What every jailed process sees in its environment besides the allowed ones.
ENV_BASE = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
# Files and folders of /etc bound read-only (when they exist): the dynamic loader's cache,
# Debian's alternatives, fonts for matplotlib, the time zone, user and group names.
ETC_ALLOWED = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts",
               "localtime", "passwd", "group", "nsswitch.conf", "mime.types",
               "matplotlibrc")
# Jailed processes run as JAIL_UID_BASE + n (n < JAIL_UIDS) when the grader is root, so
# that the process limit of one jail is not shared with another.
JAIL_UID_BASE = 200000
JAIL_UIDS = 50000
# Where, inside the jail, the submission's folder and the caller's files appear.
SUBMISSION_DIR = "/submission"
CODE_DIR = "/opt/grader"
INSTALL_HINT = N_("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; the "
                  "kit's .ci/run does it) on a Linux machine that allows namespaces")


class JailUnavailable(RuntimeError):
    """bubblewrap is missing, or it cannot build a jail on this machine."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of a jailed process (``setrlimit``, set before ``exec``).

    Attributes:
        cpu_seconds: int, CPU time (seconds) the whole jail's main process may use.
        processes: int, processes and threads the jail's user may have at once.
        file_bytes: int, largest file it may write (bytes).
        open_files: int, file descriptors it may hold.
        tmp_bytes: int, size of its private ``/tmp`` (bytes, in memory).
        address_space_bytes: int or None, virtual memory cap (bytes); None leaves it to
            the process (the sandbox worker caps itself after loading NumPy).
        memory_bytes: int, memory of the whole jail (bytes): every process and the pages
            of its ``/tmp`` together (its cgroup's limit; no swap on top).
        cpu_weight: int, 1..10000, the jail's share of the CPU under contention against
            any other group (cgroup v2's scale: 100 is an equal share; v1 ``cpu.shares``
            1024).
        cpus: float, CPUs' worth of time the whole jail may use at once (its cgroup's
            quota; the jailed code runs one BLAS thread); 0 for no quota.

    ``processes`` also caps the jail's cgroup (``pids.max``), with ``JAIL_OWN_PROCESSES``
    more for the launcher and bubblewrap.
    """

    cpu_seconds: int = 600
    processes: int = 64
    file_bytes: int = 64 * 2**20
    open_files: int = 256
    tmp_bytes: int = 128 * 2**20
    address_space_bytes: int | None = None
    memory_bytes: int = 2 * 2**30
    cpu_weight: int = 100
    cpus: float = 1.0


# Processes of a jail that are not the jailed program's: the launcher (which becomes
# bubblewrap), bubblewrap's own child in the PID namespace, setpriv.
JAIL_OWN_PROCESSES = 4
# The one opt-out of the jail's control group (its memory, CPU and process limits), for a
# machine where none can be made (not root, no delegated cgroup v2): ``off`` in the
# environment of the grader (``ATTENTION_KIT_CGROUPS=off``); every jail is refused there
# otherwise.
CGROUPS_ENV = "ATTENTION_KIT_CGROUPS"


def cgroups_wanted() -> bool:
    """False only when the instructor opted out of the jail's cgroup (``CGROUPS_ENV``)."""
    return os.environ.get(CGROUPS_ENV, "").strip().lower() != "off"


# The seccomp filter of every jail, as reviewed data: built with libseccomp (the
# ``pyseccomp`` binding), exported as BPF and handed to bubblewrap (``--seccomp FD``),
# which installs it, with ``no_new_privs``, right before the jailed program starts.
# Every call below fails with EPERM; so does every system call of another ABI (i386 or
# x32 numbers from a 64-bit process: libseccomp's bad-architecture action).
# name -> why it is refused.
DENIED_SYSCALLS: dict[str, str] = {
    # memory that no address-space cap counts
    "memfd_create": "anonymous file", "memfd_secret": "anonymous file",
    "shmget": "System V shared memory", "msgget": "System V message queue",
    # namespaces: a user namespace gives its maker every capability inside it
    "unshare": "new namespace", "setns": "join a namespace",
    # mounts, old and new API
    "mount": "mount", "umount2": "mount", "pivot_root": "mount", "chroot": "mount",
    "move_mount": "mount", "open_tree": "mount", "fsopen": "mount", "fsconfig": "mount",
    "fsmount": "mount", "fspick": "mount", "mount_setattr": "mount",
    # reaching other processes and the kernel's larger surfaces
    "ptrace": "tracing", "process_vm_readv": "tracing", "process_vm_writev": "tracing",
    "io_uring_setup": "io_uring", "io_uring_enter": "io_uring",
    "io_uring_register": "io_uring", "userfaultfd": "userfaultfd", "bpf": "eBPF",
    "perf_event_open": "perf events", "keyctl": "kernel keyring",
    "add_key": "kernel keyring", "request_key": "kernel keyring",
}
# ``clone`` is refused (EPERM) when its flags (first argument) ask for any of these new
# namespaces; a thread or a plain fork is allowed.
CLONE_NAMESPACE_FLAGS: dict[str, int] = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080,
}
# ``clone3`` passes its flags in memory a filter cannot read: it fails with ENOSYS, which
# makes the C library fall back to ``clone`` (threads, ``fork``, ``posix_spawn``).
ENOSYS_SYSCALLS: tuple[str, ...] = ("clone3",)
# The error every refused call gets (a test sets another to tell the filter's refusal
# from the kernel's own).
REFUSED_ERRNO = 1  # EPERM
SECCOMP_HINT = N_("install libseccomp (Debian/Ubuntu: `sudo apt-get install libseccomp2`) "
                  "and the kit's Python dependencies (`pip install -e .`; pyseccomp)")


def seccomp_bpf() -> bytes:
    """The jail's seccomp filter for this machine, compiled by libseccomp to BPF.

    Returns:
        bytes, the BPF program (``struct sock_filter`` records, 8 bytes each) that
        bubblewrap's ``--seccomp`` reads.

    Raises:
        JailUnavailable: libseccomp or its binding is missing (one line: what to install).
    """
    return _seccomp_bpf(REFUSED_ERRNO)


@functools.lru_cache(maxsize=4)
def _seccomp_bpf(refused: int) -> bytes:
    import errno
    import tempfile

    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as exc:
        hint = _(SECCOMP_HINT)
        raise JailUnavailable(f"{exc}: {hint}") from exc
    refuse = seccomp.ERRNO(refused)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    rules.set_attr(seccomp.Attr.ACT_BADARCH, refuse)
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(refuse, name)
        except (RuntimeError, ValueError, OSError):  # unknown to this machine's table
            continue
    for flag in CLONE_NAMESPACE_FLAGS.values():
        rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    for name in ENOSYS_SYSCALLS:
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    with tempfile.TemporaryFile() as f:
        rules.export_bpf(f)
        f.seek(0)
        return f.read()


_SECCOMP_FILES: dict[tuple[int, int], str] = {}


def _seccomp_file() -> str:
    """A file of this process (in a 0700 scratch folder of its own, made again after a
    fork or a sweep) holding ``seccomp_bpf()``."""
    key = (os.getpid(), REFUSED_ERRNO)
    path = _SECCOMP_FILES.get(key)
    if path is None or not os.path.isfile(path):
        import atexit

        bpf = seccomp_bpf()
        folder = scratch_folder("seccomp")
        path = os.path.join(folder, "filter.bpf")
        with open(path, "wb") as f:
            f.write(bpf)
        _SECCOMP_FILES[key] = path
        atexit.register(_remove_own, folder, os.getpid())
    return path


def seccomp_file() -> str:
    """Path of a file of this process holding ``seccomp_bpf()``: bound read-only into the
    sandbox worker's jail, whose start-up loads the same filter once more with the kernel's
    log flag, before any student code (``observed``).

    Raises:
        JailUnavailable: the filter cannot be built (``seccomp_bpf``).
    """
    return _seccomp_file()


def _remove_own(folder: str, pid: int) -> None:
    """Remove ``folder`` at exit, in the process that made it only (not a forked child)."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


# bubblewrap reads the filter from this descriptor, opened by a shell that then becomes
# bubblewrap (``exec``): ``subprocess`` closes every descriptor it was not told to keep
# after the caller's ``preexec``, so the kit's callers need not pass one.
SECCOMP_FD = 9
_SECCOMP_EXEC = f'exec "$@" {SECCOMP_FD}<"$0"'


@functools.lru_cache(maxsize=1)
def bwrap_options() -> frozenset[str]:
    """The options this bubblewrap knows (from ``bwrap --help``; empty if it cannot run)."""
    try:
        text = subprocess.run([bwrap_path() or "bwrap", "--help"], capture_output=True,
                              text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(w for w in text.split() if w.startswith("--"))


def bwrap_path() -> str | None:
    """Path of the ``bwrap`` executable, or None."""
    return shutil.which("bwrap") or next(
        (p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None)


def problem() -> str | None:
    """Why no jail can be made here (one line, in the current language of ``i18n``), or
    None when it can: bubblewrap present and this Python, run in a trial jail, imports
    NumPy. The trial is made once for the life of the process."""
    found = _problem()
    if found is None:
        return None
    message, detail = found
    return _(message).format(detail=detail, hint=_(INSTALL_HINT))


@functools.lru_cache(maxsize=1)
def _problem() -> tuple[str, str] | None:
    """``(msgid, detail)`` of ``problem``, or None."""
    if not sys.platform.startswith("linux"):
        return N_("the jail needs Linux namespaces; this is {detail}: {hint}"), sys.platform
    if bwrap_path() is None:
        return N_("bubblewrap (bwrap) is not installed: {hint}"), ""
    if cgroups_wanted() and cgroup.problem():
        return N_("no cgroup can be made for the jail here ({detail}): run the grader as root "
                  "or in a cgroup v2 group delegated to its user, or set ATTENTION_KIT_CGROUPS=off "
                  "to grade without the jail's memory, CPU and process shares"), \
            str(cgroup.problem())
    try:
        trial = command([sys.executable, "-I", "-c", "import numpy"], readonly=(),
                        submission_dir=None)
    except JailUnavailable as exc:
        return N_("no seccomp filter can be built here ({detail})"), str(exc)
    try:
        done = subprocess.run(trial.argv, preexec_fn=trial.preexec, capture_output=True,
                              timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return N_("bubblewrap could not start ({detail}): {hint}"), str(exc)
    finally:
        if trial.group is not None:
            trial.group.remove()
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return N_("bubblewrap cannot build a jail here ({detail}): {hint}"), \
            str(said[-1] if said else done.returncode)
    return None


# Forgetting the trial (``problem.cache_clear()``, as when ``problem`` itself was cached).
problem.cache_clear = _problem.cache_clear  # type: ignore[attr-defined]


def require() -> None:
    """Raise ``JailUnavailable`` (one line: what to install) if no jail can be made."""
    reason = problem()
    if reason:
        raise JailUnavailable(reason)


def use_jail(allow_unjailed: bool = False) -> bool:
    """Whether student code goes to the jail: True when a jail can be made here; False
    when it cannot and the instructor allowed unjailed grading (``--unjailed``, or
    ``c.AttentionKit.allow_unjailed = True`` in ``nbgrader_config.py``).

    Raises:
        JailUnavailable: no jail here and unjailed grading not allowed (one line: what to
            install, and the opt-in).
    """
    reason = problem()
    if reason is None:
        return True
    if allow_unjailed:
        return False
    raise JailUnavailable(_("{reason}; or, for code you trust, allow grading without the jail "
                            "(--unjailed, or c.AttentionKit.allow_unjailed = True)").format(
                                reason=reason))


def allowed_by_config(config: object) -> bool:
    """``c.AttentionKit.allow_unjailed`` of a traitlets ``Config`` (False when unset)."""
    try:
        return bool(config.AttentionKit.get("allow_unjailed", False))  # type: ignore[attr-defined]
    except AttributeError:
        return False


@dataclass
class Command:
    """A jailed command: ``subprocess.Popen(c.argv, preexec_fn=c.preexec, ...)``.

    Attributes:
        argv: list of str, bubblewrap's command line.
        preexec: callable run in the child before ``exec`` (limits, descriptors).
        uid: int or None, the uid the jailed program runs as when the grader is root
            (None otherwise: then it runs as the grader's user in a user namespace).
        group: the jail's control group (``cgroup.Group``), joined by ``preexec``; None
            where the instructor opted out (``CGROUPS_ENV``). ``reap`` removes it.
    """

    argv: list[str]
    preexec: Callable[[], object] | None
    uid: int | None = None
    group: cgroup.Group | None = None


def processes_of(uid: int) -> list[int]:
    """Process ids of the machine whose real uid is ``uid``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                line = next(x for x in f if x.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if int(line.split()[1]) == uid:
            found.append(int(name))
    return found


def reap(uid: int | None, timeout: float = 5.0,
         group: cgroup.Group | None = None) -> None:
    """Kill every process left with a jail's ``uid`` and wait until none is left; then
    kill what is left in the jail's ``group`` and remove it (``Command.group``).

    Killing bubblewrap ends its jail through the kernel (``--die-with-parent``, then the
    PID namespace), but not at once; a caller that must know the jail is gone (the next
    student, a test that looks for left processes) calls this. Does nothing for None.
    """
    if group is not None:
        group.remove(timeout)
    if uid is None:
        return
    deadline = time.monotonic() + timeout
    while True:
        left = processes_of(uid)
        if not left or time.monotonic() > deadline:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def _parents(path: str) -> list[str]:
    """The folders above ``path``, outermost first (``/a/b/c`` -> ``/a``, ``/a/b``)."""
    parts, out = path.strip("/").split("/")[:-1], []
    for i in range(len(parts)):
        out.append("/" + "/".join(parts[: i + 1]))
    return out


def _under(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def python_roots() -> list[str]:
    """Folders of the running Python to bind read-only: its base installation and the
    virtual environment (each once, none under ``/usr``, which is bound whole)."""
    roots: list[str] = []
    for p in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))):
        p = os.path.realpath(p)
        if os.path.basename(p) == "bin" and p != os.path.realpath(sys.prefix):
            p = os.path.dirname(p)
        if _under(p, "/usr") or any(_under(p, r) for r in roots):
            continue
        roots = [r for r in roots if not _under(r, p)] + [p]
    return roots


def kit_packages() -> list[str]:
    """Folders of the kit's own packages (``grader_tests``, ``solutions``, and
    ``authoring``, whose builders read the reference solutions)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [here] + [os.path.join(os.path.dirname(here), name)
                     for name in ("solutions", "authoring")]


def _limits_preexec(limits: Limits, keep_fds: tuple[int, ...],
                    group: cgroup.Group | None = None):
    """What runs in the child before ``exec``: the jail's control group joined (an error
    there stops the start: no student code runs outside it), a session of its own (unless
    the caller made one), the limits, and close-on-exec on every inherited descriptor but
    the standard ones and ``keep_fds`` (bubblewrap passes open descriptors on)."""
    def preexec():
        if group is not None:
            group.join()
        try:
            os.setsid()
        except OSError:  # already a session leader (start_new_session)
            pass
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2 and fd not in keep_fds:
                try:
                    os.set_inheritable(fd, False)
                except OSError:
                    pass
        for kind, value in ((resource.RLIMIT_CPU, limits.cpu_seconds),
                            (resource.RLIMIT_FSIZE, limits.file_bytes),
                            (resource.RLIMIT_NOFILE, limits.open_files),
                            (resource.RLIMIT_CORE, 0),
                            (resource.RLIMIT_NPROC, limits.processes)):
            resource.setrlimit(kind, (value, value))
        if limits.address_space_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limits.address_space_bytes,) * 2)
    return preexec


def command(argv: Sequence[str], *, readonly: Iterable[tuple[str, str]] = (),
            submission_dir: str | None = None,
            cwd: str = "/tmp", env: dict[str, str] | None = None,
            limits: Limits = Limits(), slot: int | None = None,
            new_session: bool = True, keep_fds: Sequence[int] = ()) -> Command:
    """The bubblewrap command line running ``argv`` in a jail.

    Args:
        argv: the program and its arguments, as paths seen inside the jail (the Python
            environment keeps its own paths).
        readonly: ``(source, destination)`` pairs bound read-only (files or folders).
        submission_dir: folder of the submission, bound read-only at ``SUBMISSION_DIR``.
        cwd: working directory inside the jail.
        env: variables set inside, on top of ``ENV_BASE`` and the allowed ones.
        limits: resource limits.
        slot: picks the jail's uid when run as root (default: from the process id).
        new_session: start the jailed program in a session of its own (no terminal to
            reach); False keeps it in the caller's process group, so that a signal to the
            group (a kernel's interrupt) reaches it.
        keep_fds: descriptors the jailed program inherits (besides 0, 1, 2); every other
            one is closed at ``exec``. None may be ``SECCOMP_FD`` (the launcher opens the
            filter there): move one with ``fcntl.F_DUPFD`` above it.

    Returns:
        Command (``argv`` and the ``preexec`` function that sets the limits).

    Raises:
        ValueError: if ``keep_fds`` holds ``SECCOMP_FD``.
        JailUnavailable: the seccomp filter cannot be built (``seccomp_bpf``), or the
            jail's control group cannot be made (``cgroup.make``; unless opted out).
    """
    bwrap = bwrap_path() or "bwrap"
    root = os.geteuid() == 0
    uid = JAIL_UID_BASE + ((os.getpid() if slot is None else slot) % JAIL_UIDS)
    args = ["/bin/sh", "-c", _SECCOMP_EXEC, _seccomp_file(), bwrap,
            "--seccomp", str(SECCOMP_FD), "--die-with-parent"] + (["--new-session"] if new_session else []) + [
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--clearenv", "--hostname", "jail"]
    if root:
        # Root needs no user namespace: the jail drops to a uid of its own with setpriv.
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        # bubblewrap's own wall where it has one (0.8.0 on); the filter refuses
        # ``unshare``/``clone`` of a namespace either way.
        args += ["--unshare-user"] + [
            o for o in ("--disable-userns", "--assert-userns-disabled") if o in bwrap_options()]
    made = {"/"}

    def directory(path):
        for p in _parents(path):
            if p not in made:
                args.extend(["--perms", "0755", "--dir", p])
                made.add(p)

    for top in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + top
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    # /proc, /dev and the private /tmp first: a bind below /tmp (a kit cloned there, the
    # Python environment inside it) must come after the tmpfs, or the tmpfs hides it.
    # /dev: bubblewrap's minimal one (null, zero, full, random, urandom, tty), with its
    # devpts hidden under an empty read-only folder: no pseudo-terminal can be opened
    # (``/dev/ptmx`` leads nowhere), none counts against the machine's limit.
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "0555", "--size", "4096", "--tmpfs", "/dev/pts",
             "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    made.add("/tmp")
    args += ["--perms", "0755", "--dir", "/etc"]
    made.add("/etc")
    for name in ETC_ALLOWED:
        path = os.path.join("/etc", name)
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in python_roots():
        directory(path)
        args += ["--ro-bind", path, path]
        made.add(path)
    for package in kit_packages():  # a non-editable install inside the environment
        if os.path.isdir(package) and any(_under(package, r) for r in python_roots()):
            args += ["--tmpfs", package]
    if submission_dir is not None:
        directory(SUBMISSION_DIR)
        args += ["--ro-bind", submission_dir, SUBMISSION_DIR]
    for source, dest in readonly:
        directory(dest)
        args += ["--ro-bind", source, dest]
    variables = {k: os.environ[k] for k in ENV_ALLOWED if k in os.environ}
    variables.update(ENV_BASE)
    variables.update(env or {})
    for key, value in variables.items():
        args += ["--setenv", key, value]
    args += ["--chdir", cwd, "--"]
    if root:
        args += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--no-new-privs", "--"]
    args += list(argv)
    if SECCOMP_FD in keep_fds:
        raise ValueError(f"descriptor {SECCOMP_FD} is the seccomp filter's: keep_fds "
                         "must not hold it")
    group = None
    if cgroups_wanted():
        try:
            group = cgroup.make(limits.memory_bytes, limits.cpu_weight,
                                limits.processes + JAIL_OWN_PROCESSES, limits.cpus)
        except cgroup.CgroupUnavailable as exc:
            raise JailUnavailable(str(exc)) from None
    return Command(args, _limits_preexec(limits, tuple(keep_fds), group),
                   uid if root else None, group)


def chown_for_jail(path: str) -> None:
    """Make ``path`` (a folder or file the grader made) readable inside the jail: a jailed
    process is another user, so it needs the read (and, for folders, search) bits."""
    mode = 0o755 if os.path.isdir(path) else 0o644
    os.chmod(path, mode)


# Temporary folders of the grader (a submission's private copy, a kernel's sockets) are
# named ``attention-kit-<kind>-<pid>-<random>`` after the process that made them, so that
# the folders of a process killed before it could clean up (SIGKILL) are found and removed
# by the next grader (``sweep_stale_folders``).
SCRATCH_PREFIX = "attention-kit-"


def scratch_folder(kind: str) -> str:
    """A new private temporary folder ``attention-kit-<kind>-<pid>-<random>`` (0700).

    Args:
        kind: a word naming what it holds (``"submission"``, ``"kernel"``).

    Returns:
        The folder's absolute path, in ``tempfile.gettempdir()``.
    """
    import tempfile

    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{kind}-{os.getpid()}-")


def sweep_stale_folders(folder: str | None = None) -> list[str]:
    """Remove the grader's temporary folders whose making process has ended.

    Only folders named by ``scratch_folder`` and owned by this user are looked at; a
    folder whose process is alive (or whose id was reused) is left.

    Args:
        folder: where to look (default ``tempfile.gettempdir()``).

    Returns:
        The paths removed.
    """
    import re
    import tempfile

    folder = folder or tempfile.gettempdir()
    pattern = re.compile(rf"^{re.escape(SCRATCH_PREFIX)}[a-z]+-(\d+)-")
    removed: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        match = pattern.match(name)
        path = os.path.join(folder, name)
        if not match or cgroup.alive(int(match.group(1))):
            continue
        try:
            if os.lstat(path).st_uid != os.getuid() or not os.path.isdir(path) \
                    or os.path.islink(path):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
