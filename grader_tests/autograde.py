"""nbgrader's autograde on the trusted result: the notebook's kernel in the jail, and the
points of every hidden cell from the jailed grader.

``nbgrader autograde`` runs a submission's notebook in a kernel and reads each grade
cell's points from that cell's outputs. Left as it is, the student's code runs in that
kernel as the instructor, and whatever the kernel prints for a hidden cell becomes the
grade. ``nbgrader_config.py`` replaces two of its steps with the classes here:

- ``JailedExecute`` runs the notebook in a kernel started in the jail
  (``JailedKernelManager``: ``jail.py``; the kernel talks to nbgrader over Unix sockets
  the grader made in a folder of its own that is not in the jail, handed to the kernel
  as descriptors, since the jail has no network). The hidden cells are
  not run there (the graders are not in the jail); once a cell runs out of time, the
  cells after it are not run either, so a function that never returns costs the class
  one time-out, not one per cell that calls it.
- ``TrustedGrades`` grades the notebook with ``sandbox.grade_isolated`` (the jail again,
  a fresh process) and writes, as each hidden cell's outputs, the graders' report, the
  machine-readable result and the points, which nbgrader's ``SaveAutoGrades`` then
  stores. Nothing the kernel printed, displayed or wrote to stderr reaches a grade.
- ``FlagForReview`` (after ``SaveAutoGrades``) marks a submission the grader flagged:
  the notebook ``flagged`` and every hidden cell ``needs_manual_grade`` in the gradebook,
  so nbgrader's formgrader lists it for review and the training gate stays closed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import weakref
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Float, Integer

from . import _kernel, jail
from .relay import KernelRelay
from .i18n import DEFAULT_LANGUAGE, _, config_language, use_language
from .submission import nbgrader_metadata

RESULT_MIME = "application/vnd.attention-kit.result+json"
HIDDEN_SUFFIX = "_hidden_checks"
# Exception names by which a cell says it ran out of time (the notebooks' own
# ``time_limit`` raises TimeoutError; nbgrader's cell time-out records CellTimeoutError).
TIMEOUT_NAMES = ("TimeoutError", "CellTimeoutError", "DeadKernelError")
# Bytes a kernel may send the grader over its life, all sockets and messages together
# (``JailedExecute.output_bytes``, counted at the socket by ``relay.KernelRelay``).
OUTPUT_BYTES = 4 * 2**20


class JoinDuplicateCells(NbGraderPreprocessor):
    """nbgrader's ``DeduplicateIds``, kind to students: cells that carry the same nbgrader
    id (a solution cell duplicated, or split in JupyterLab with both halves keeping the
    metadata; a test cell pasted twice) are graded as the student wrote them.

    Solution cells of one id are joined into the first, in order (an exact copy counted
    once), with a first comment line naming what was joined; copies of any other nbgrader
    cell are dropped (locked cells are restored from the source anyway). Cell ids are made
    unique. nbgrader's own step empties the copies' metadata instead, and its next step
    then stops the whole submission with ``KeyError: 'grade_id'``.
    """

    def preprocess(self, nb: NotebookNode, resources: dict):
        first: dict[str, NotebookNode] = {}
        kept: list[NotebookNode] = []
        ids: set[str] = set()
        for cell in nb.cells:
            meta = nbgrader_metadata(cell)  # (a student's notebook: any shape)
            grade_id = meta.get("grade_id")
            if grade_id and grade_id in first:
                self.log.warning("cell %s appears more than once: graded as one", grade_id)
                head = first[grade_id]
                if meta.get("solution") and cell.get("source") != head.get("source") and \
                        cell.get("cell_type") == head.get("cell_type"):
                    note = f"# [grading] cells with the nbgrader id {grade_id} joined here\n"
                    if not head.source.startswith(note):
                        head.source = note + head.source
                    head.source += "\n" + cell.source
                continue
            if grade_id:
                first[grade_id] = cell
            if "id" in cell:
                while cell["id"] in ids:
                    cell["id"] = f"{cell['id']}-{len(ids)}"[:64]
                ids.add(cell["id"])
            kept.append(cell)
        nb.cells = kept
        return nb, resources


class JailedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels start in the jail and talk over Unix sockets that
    the grader made.

    The connection file lives in a folder made for the one kernel (``<scratch>/k``), bound
    read-only into its jail. The kernel's five sockets are made by the grader, before the
    kernel starts, in ``<scratch>/s``: a folder on the host owned by the grader (0700,
    inside the 0700 ``<scratch>``) that is not bound into the jail at all. Each is bound
    to its path, listening, and handed to the kernel as a descriptor (``_kernel.py``
    makes the kernel's ``bind`` take it: ZeroMQ's ``ZMQ_USE_FD``); the grader connects to
    those paths of its own folder, so no name the grader opens is one the student's code
    can make, replace or point elsewhere, and no path is ever resolved through the jail's
    root. Should a socket file change all the same (another file, or the folder), the
    kernel is ended with a message in the log and its cell reported as one whose kernel
    stopped (``is_alive``). A kernel that closes its sockets only loses its own
    connection: the grader reconnects to the same files, refused. The notebook's folder
    and, beside it, the student's other assignments (``../attention`` for the training
    gate) are bound read-only at ``jail.SUBMISSION_DIR``; the kernel's working directory
    is the notebook's folder there.
    """

    # The launcher, inside the jail (read-only).
    LAUNCHER = f"{jail.CODE_DIR}/kernel_launch.py"
    # The kernel's jail: CPU seconds and processes for a whole notebook, an address-space
    # cap per process, and the jail's cgroup (its memory, CPU share) as ``jail.Limits``.
    LIMITS = jail.Limits(cpu_seconds=1800, processes=128, address_space_bytes=8 * 2**30)
    # Bytes the kernel may send before it is stopped (``JailedExecute.output_bytes``).
    message_budget: int = OUTPUT_BYTES
    # Bytes of the largest output the kernel sends (``JailedExecute`` sets it: its
    # ``message_limit``, at most the budget); 0: no limit told to the kernel.
    message_limit = 0

    async def _jail_pre_start(self, **kw: Any):
        jail.require()
        self._jail_parent: str | None = jail.scratch_folder("kernel")
        weakref.finalize(self, shutil.rmtree, self._jail_parent, True)  # a failed start too
        self._jail_dir = os.path.join(self._jail_parent, "k")
        os.mkdir(self._jail_dir)
        os.chmod(self._jail_dir, 0o755)  # read-only in the jail: the connection file
        # The sockets' folder: the grader's, on the host, never in the jail.
        self._jail_sockets = os.path.join(self._jail_parent, "s")
        os.mkdir(self._jail_sockets, 0o700)
        self._socket_ids: dict[str, tuple[int, int]] = {}
        self._socket_fds: list[int] = []
        self._socket_changed: str | None = None
        self.transport = "ipc"
        self.ip = os.path.join(self._jail_sockets, "kernel")
        self.connection_file = os.path.join(self._jail_dir, "kernel.json")
        self._notebook_dir = os.path.abspath(kw.get("cwd") or os.getcwd())
        return await super()._async_pre_start_kernel(**kw)

    def _make_sockets(self) -> list[tuple[str, int]]:
        """Bind and listen on the kernel's five sockets in the grader's folder; return
        ``(path, fd)`` for each (the descriptors are inherited by the kernel)."""
        import fcntl
        import socket
        import stat

        made, relayed = [], []
        for port in (self.shell_port, self.iopub_port, self.stdin_port, self.hb_port,
                     self.control_port):
            path = f"{self.ip}-{port}"
            kernel_path = f"{path}-kernel"  # the kernel's; the client's is the relay's
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(kernel_path)
            sock.listen(16)
            info = os.lstat(kernel_path)
            if not stat.S_ISSOCK(info.st_mode):
                raise jail.JailUnavailable(f"{kernel_path}: not the socket the grader made")
            # Above the descriptor the jail's launcher gives bubblewrap's seccomp filter
            # (jail.SECCOMP_FD), which a redirection would otherwise replace.
            detached = sock.detach()
            fd = fcntl.fcntl(detached, fcntl.F_DUPFD, jail.SECCOMP_FD + 1)
            os.close(detached)
            os.set_inheritable(fd, True)
            self._socket_ids[kernel_path] = (info.st_dev, info.st_ino)
            self._socket_fds.append(fd)
            made.append((path, fd))
            relayed.append((path, kernel_path))
        self._relay = KernelRelay(relayed, self.message_budget)
        for path, _kernel_path in relayed:
            info = os.lstat(path)
            self._socket_ids[path] = (info.st_dev, info.st_ino)
        self._relay.start()
        return made

    def over_budget(self) -> bool:
        """True once the kernel sent more than ``message_budget`` bytes (``relay``)."""
        relay = getattr(self, "_relay", None)
        return relay is not None and relay.over_budget

    def sockets_changed(self) -> str | None:
        """The first of the kernel's socket files (or their folder) that is no longer what
        the grader made, or None when all are as made."""
        import stat

        if self._socket_changed:
            return self._socket_changed
        try:
            folder = os.lstat(self._jail_sockets)
        except OSError:
            folder = None
        if folder is None or not stat.S_ISDIR(folder.st_mode) or \
                folder.st_uid != os.geteuid() or stat.S_IMODE(folder.st_mode) != 0o700:
            self._socket_changed = self._jail_sockets
            return self._socket_changed
        for path, ids in getattr(self, "_socket_ids", {}).items():
            try:
                info = os.lstat(path)
            except OSError:
                info = None
            if info is None or not stat.S_ISSOCK(info.st_mode) or \
                    (info.st_dev, info.st_ino) != ids:
                self._socket_changed = path
                return path
        return None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        """The kernel's command wrapped in the jail (``jail.command``), started by the
        launcher on the sockets the grader made (``_make_sockets``)."""
        cmd = super().format_kernel_cmd(extra_arguments)
        os.chmod(self.connection_file, 0o644)  # written 0600 for the grader's user
        sockets = self._make_sockets()
        student_dir = os.path.dirname(self._notebook_dir)
        inside = f"{jail.SUBMISSION_DIR}/{os.path.basename(self._notebook_dir)}"
        launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kernel.py")
        command = jail.command(
            [cmd[0], self.LAUNCHER, ",".join(f"{p}={fd}" for p, fd in sockets)]
            + cmd[1:],
            readonly=[(self._jail_dir, self._jail_dir), (launcher, self.LAUNCHER)],
            submission_dir=student_dir, keep_fds=[fd for _, fd in sockets],
            cwd=inside, limits=self.LIMITS,
            env={"JUPYTER_RUNTIME_DIR": "/tmp", "IPYTHONDIR": "/tmp/.ipython",
                 # the kernel refuses, with a note, an output the grader would not receive
                 _kernel.MESSAGE_LIMIT_VARIABLE: str(int(self.message_limit))},
            new_session=False)
        self._jail_preexec = command.preexec
        self._jail_uid, self._jail_group = command.uid, command.group
        return command.argv

    def _close_socket_fds(self) -> None:
        for fd in getattr(self, "_socket_fds", ()):
            try:
                os.close(fd)
            except OSError:
                pass
        self._socket_fds = []

    async def _async_pre_start_kernel(self, **kw: Any):
        kernel_cmd, kw = await self._jail_pre_start(**kw)
        # The kernel inherits its listening sockets and no other descriptor of the
        # grader's; the preexec sets the limits; the kernel's own output goes nowhere.
        kw["preexec_fn"] = self._jail_preexec
        kw["pass_fds"] = tuple(self._socket_fds)
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        return kernel_cmd, kw

    async def _async_post_start_kernel(self, **kw: Any) -> None:
        # The kernel holds its listening sockets now; the grader keeps only the files, so a
        # kernel that closes them is refused on reconnection, never answered by another.
        self._close_socket_fds()
        await super()._async_post_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        try:
            await super()._async_launch_kernel(kernel_cmd, **kw)
        except BaseException:
            self._close_socket_fds()
            raise

    async def _async_is_alive(self) -> bool:
        """False, and the kernel ended, once a socket file changed under the grader."""
        changed = self.sockets_changed()
        if changed is not None or self.over_budget():
            if changed is not None:
                self.log.error("the kernel's socket %s changed under the grader: the kernel "
                               "is stopped", changed)
            else:
                self.log.error("the kernel sent more than %d bytes: the kernel is stopped",
                               self.message_budget)
            if await super()._async_is_alive():
                await self._async_kill_kernel()
            return False
        return await super()._async_is_alive()

    is_alive = _async_is_alive  # type: ignore[assignment]

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        self._close_socket_fds()
        if getattr(self, "_relay", None) is not None:
            self._relay.close()
        jail.reap(getattr(self, "_jail_uid", None), group=getattr(self, "_jail_group", None))
        self._jail_group = None
        if not restart and getattr(self, "_jail_parent", None):
            shutil.rmtree(self._jail_parent, ignore_errors=True)  # type: ignore[arg-type]
            self._jail_parent = None

    # nbclient ends a kernel found dead with ``cleanup_resources`` alone, which the async
    # manager binds to the base class's coroutine: this one, so the jail's leftovers and
    # its cgroup go with that kernel too.
    cleanup_resources = _async_cleanup_resources  # type: ignore[assignment]


def is_hidden_cell(cell: NotebookNode) -> bool:
    """True for a hidden-check grade cell (``<name>_hidden_checks``)."""
    meta = nbgrader_metadata(cell)
    return bool(meta.get("grade")) and str(meta.get("grade_id", "")).endswith(HIDDEN_SUFFIX)


class JailedExecute(Execute):
    """nbgrader's ``Execute`` with the kernel in the jail, hidden cells left to the
    grader, no cell run after one that ran out of time, at most ``output_bytes`` sent by
    the kernel and ``max_outputs`` outputs kept from the whole run (a flood would fill the
    grader's memory and disk), and at most ``notebook_seconds`` of wall time for the
    notebook's own cells.

    Every byte the kernel sends, on any socket, counts against ``output_bytes`` before the
    grader reads it (``relay.KernelRelay``, between the kernel and nbclient's client); past
    the budget the kernel is stopped, the cell that was running says so and the cells after
    it are not run (the hidden cells are graded apart, so the points do not change). Past
    ``max_outputs`` outputs, only the messages that end a cell are still read and a short
    note stands for the rest. Once ``notebook_seconds`` have passed since the first cell
    started, only the test cells whose points come from the kernel (and the solution cells
    before them) still run; the hidden cells are graded apart (``TrustedGrades``), so the
    points do not depend on the others, which get a note saying why they were not run. The
    notebook written to ``autograded/`` is cleaned of what a student could put into the
    pages that show it (``feedback.clean_notebook``).
    """

    output_bytes = Integer(OUTPUT_BYTES, help="Bytes the kernel may send the grader (all "
                                              "cells and sockets together, whole messages "
                                              "of every kind), counted at the socket before "
                                              "they are read; a kernel that sends more is "
                                              "stopped and its cell says why."
                           ).tag(config=True)
    message_limit = Integer(16 * 2**20, help="Bytes of the largest part of one kernel message "
                                             "the grader receives; the kernel sends a note of "
                                             "a larger output's size instead (one that does "
                                             "not is dropped unread), and the notebook goes "
                                             "on.").tag(config=True)
    max_outputs = Integer(2000, help="Outputs (all cells together) kept from the kernel's "
                                     "run; the rest are dropped with a note.").tag(config=True)
    notebook_seconds = Float(600, help="Seconds of wall time for all the notebook's cells "
                                       "together; past them only test cells graded in the "
                                       "kernel (and their solution cells) still run."
                             ).tag(config=True)

    # Messages that end or frame a cell's run, read whatever the budget (small by kind).
    _FRAMING = ("status", "execute_input")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        jailed = jail.use_jail(jail.allowed_by_config(self.config))
        self.kernel_manager_class = JailedKernelManager if jailed else AsyncKernelManager
        self.store_widget_state = False  # no widget state from the kernel into the notebook
        self._language = DEFAULT_LANGUAGE  # the course's, set by each preprocess

    def preprocess(self, nb: NotebookNode, resources: dict, retry: int | None = None):
        from .feedback import clean_notebook

        self._stopped_at: int | None = None
        self._stopped_name = ""
        self._stopped_too_large = False
        self._cells = nb.cells
        self._language = config_language(self.config)  # of the notes written in the cells
        self._kept_outputs, self._capped = 0, False
        self._run_started: float | None = None
        self._over_time_at: int | None = None
        self._last_graded_in_kernel = max(
            (i for i, c in enumerate(nb.cells) if self._graded_in_kernel(c)), default=-1)
        nb, resources = super().preprocess(nb, resources, retry)
        if self._run_started is not None:
            relay = getattr(self.km, "_relay", None)
            self.log.info("the notebook's cells ran in %.1f s (limit %g s); kernel messages "
                          "%s bytes, %d outputs", time.monotonic() - self._run_started,
                          self.notebook_seconds, relay.received if relay else "uncounted",
                          self._kept_outputs)
        return clean_notebook(nb), resources

    async def async_start_new_kernel_client(self):
        """nbclient's kernel client, whose sockets refuse any message part larger than
        ``message_limit`` bytes: ZeroMQ drops it before the grader holds it, and the
        connection with it (the kernel, told the limit, sends a note in place of such an
        output; one that sends it all the same loses it, and ``_async_poll_for_reply``
        connects anew for the next cells)."""
        import zmq

        make_client = self.km.client

        def client(**kwargs: Any):
            kc = make_client(**kwargs)
            kc.context.setsockopt(zmq.MAXMSGSIZE, int(self.message_limit))
            return kc

        self.km.client = client
        try:
            return await super().async_start_new_kernel_client()
        finally:
            del self.km.client

    async def _async_poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg,
                                    task_poll_kernel_alive):
        """nbclient's wait for a cell's reply, where a cell whose reply came but whose
        outputs stopped short (a message past ``message_limit``, dropped unread with the
        connection it came on) is no time-out: the kernel finished the cell, the notebook
        goes on, and the cell says what was refused (``_outputs_refused``)."""
        raising, self.raise_on_iopub_timeout = self.raise_on_iopub_timeout, False
        try:
            reply = await super()._async_poll_for_reply(msg_id, cell, timeout,
                                                        task_poll_output_msg,
                                                        task_poll_kernel_alive)
        finally:
            self.raise_on_iopub_timeout = raising
        if task_poll_output_msg.cancelled():  # nbclient gave up on the cell's outputs
            self._outputs_refused = True
            # ZeroMQ closed the connection the refused message came on: a new one for the
            # cells after this one
            channel, self.kc._iopub_channel = self.kc._iopub_channel, None
            if channel is not None:
                channel.close()
            self.kc.iopub_channel.start()
            await asyncio.sleep(0.5)  # (its subscription reaching the kernel)
        return reply

    def create_kernel_manager(self):
        """nbclient's kernel manager, whose kernel may send ``output_bytes`` bytes in all
        and is told the largest output it may send: ``message_limit``, and never more than
        the whole budget (its kernel then refuses a larger output itself, with a note, and
        the notebook goes on, where sending it would stop the kernel)."""
        km = super().create_kernel_manager()
        km.message_limit = min(int(self.message_limit), int(self.output_bytes))
        if isinstance(km, JailedKernelManager):
            km.message_budget = int(self.output_bytes)
        return km

    def start_new_kernel_client(self):
        """The same, for nbclient's synchronous ``setup_kernel`` (which nbconvert uses)."""
        from nbclient.util import run_sync

        return run_sync(JailedExecute.async_start_new_kernel_client)(self)

    def _drop_note(self, outs: list) -> None:
        if not self._capped:
            self._capped = True
            with use_language(self._language):
                note = _("[outputs past the first {outputs} dropped while grading]"
                         ).format(outputs=self.max_outputs)
            outs.append(nbformat.v4.new_output("stream", name="stdout", text=f"\n{note}\n"))

    def process_message(self, msg: dict, cell: NotebookNode, cell_index: int):
        """nbclient's handling of one message of the kernel (its bytes were counted at the
        socket: ``relay``); past ``max_outputs`` outputs only the messages that frame a
        cell are handled."""
        kind = msg.get("msg_type")
        if kind in self._FRAMING:
            return super().process_message(msg, cell, cell_index)
        if str(kind).startswith("comm"):
            return None  # widgets: nothing the kit shows or grades
        if self._kept_outputs >= self.max_outputs:
            self._drop_note(cell.outputs)
            return None
        return super().process_message(msg, cell, cell_index)

    def on_cell_executed(self, **kwargs: Any) -> None:
        """nbgrader's record of a cell's error from the kernel's reply (the shell message
        that ends a cell); past ``max_outputs`` outputs the error is recorded by its name
        only (``TIMEOUT_NAMES`` still see a time-out)."""
        cell, reply = kwargs["cell"], kwargs.get("execute_reply") or {}
        content = reply.get("content") or {}
        before = len(cell.outputs)
        if content.get("status") == "error" and self._kept_outputs >= self.max_outputs:
            ename = str(content.get("ename", "Error"))[:200]
            if not any(o.get("output_type") == "error" and o.get("ename") == ename
                       for o in cell.outputs):
                with use_language(self._language):
                    cell.outputs.append(nbformat.v4.new_output(
                        "error", ename=ename,
                        evalue=_("[message dropped: past the output budget]"),
                        traceback=[_("{error}: its message and traceback were dropped while "
                                     "grading, past the output budget").format(error=ename)]))
        else:
            super().on_cell_executed(**kwargs)
        self._kept_outputs += len(cell.outputs) - before

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int):
        """nbclient's handling of one output message; a stream's text joins the stream
        output just before it (as Jupyter shows it), other outputs count as one each."""
        content = msg.get("content", {})
        last = outs[-1] if outs else None
        if msg.get("msg_type") == "stream" and last is not None and not display_id and \
                not getattr(self, "clear_before_next_output", False) and \
                last.get("output_type") == "stream" and last.get("name") == content.get("name") \
                and isinstance(content.get("text"), str) and isinstance(last.get("text"), str):
            last["text"] += content["text"]
            return last
        refused = (content.get("data") or {}).get(_kernel.REFUSED_MIME) \
            if isinstance(content.get("data"), dict) else None
        if msg.get("msg_type") == "display_data" and isinstance(refused, dict):
            # the kernel's note of an output too large to send (``_kernel``), in words
            size = refused.get("bytes")
            with use_language(self._language):
                note = _("[an output of {size} bytes was refused: a single message may hold "
                         "at most {mib:g} MiB while grading (a large image or array "
                         "shown?); the rest of the cell and of the notebook ran]").format(
                             size=size if isinstance(size, int) else "?",
                             mib=min(self.message_limit, self.output_bytes) / 2**20)
            out = nbformat.v4.new_output("stream", name="stderr", text=note + "\n")
            outs.append(out)
            self._kept_outputs += 1
            return out
        before = len(outs)
        out = super().output(outs, msg, display_id, cell_index)
        self._kept_outputs += len(outs) - before
        return out

    @staticmethod
    def _graded_in_kernel(cell: NotebookNode) -> bool:
        """A test cell whose points come from the kernel's run (not a hidden cell)."""
        meta = cell.get("metadata")
        meta = meta.get("nbgrader") if isinstance(meta, dict) else None
        return cell.get("cell_type") == "code" and isinstance(meta, dict) and \
            bool(meta.get("grade")) and bool(meta.get("grade_id")) and not is_hidden_cell(cell)

    def _runs_past_time(self, cell: NotebookNode, index: int) -> bool:
        """True for a cell that still runs once ``notebook_seconds`` are spent: a test cell
        of the assignment whose points come from the kernel, and the solution cells when
        such a test cell follows (nbgrader's autograde kept a grade id only if the
        assignment has it, and one cell per id, so their number is the release's). The
        kit's own notebooks have none: every test cell is hidden and graded apart."""
        if self._graded_in_kernel(cell):
            return True
        meta = cell.get("metadata")
        meta = meta.get("nbgrader") if isinstance(meta, dict) else None
        return isinstance(meta, dict) and bool(meta.get("grade_id")) and \
            bool(meta.get("solution")) and index < self._last_graded_in_kernel

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if cell.cell_type != "code":
            return cell, resources
        if is_hidden_cell(cell):
            cell.outputs = []  # graded outside the kernel (TrustedGrades)
            return cell, resources
        if self._stopped_at is not None:
            with use_language(self._language):
                if self._stopped_too_large:
                    note = _("[not run: the kernel sent more than {mib:g} MiB while {cell} "
                             "ran and was stopped, so the cells after it were not run while "
                             "grading]").format(cell=self._stopped_name,
                                                mib=self.output_bytes / 2**20)
                else:
                    note = _("[not run: {cell} ran out of time, so the cells after it were "
                             "not run while grading]").format(cell=self._stopped_name)
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=note + "\n")]
            return cell, resources
        if self._run_started is None:
            self._run_started = time.monotonic()
        elif self._over_time_at is None and \
                time.monotonic() - self._run_started > self.notebook_seconds:
            self._over_time_at = index
            self.log.warning("the notebook's cells ran past %g s: cells from %d on are not "
                             "run but test cells graded in the kernel", self.notebook_seconds,
                             index + 1)
        if self._over_time_at is not None and \
                not self._runs_past_time(cell, index):
            with use_language(self._language):
                note = _("[not run: the notebook's cells had run for more than {seconds:g} s "
                         "in all when grading reached this one, so the cells from here on were "
                         "not run (only test cells graded in the kernel would be); your graded "
                         "functions were graded as usual]").format(seconds=self.notebook_seconds)
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=note + "\n")]
            return cell, resources
        self._outputs_refused = False
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            if self._outputs_refused:
                with use_language(self._language):
                    note = _("[an output of this cell was refused: a single message larger "
                             "than {mib:g} MiB is not received while grading (a large image "
                             "or array shown?); the cell ran to its end, and the notebook "
                             "went on]").format(mib=self.message_limit / 2**20)
                cell.outputs = list(cell.get("outputs", [])) + [
                    nbformat.v4.new_output("stream", name="stderr", text=note + "\n")]
        except (CellTimeoutError, DeadKernelError, RuntimeError) as exc:
            # The kernel stopped answering (a fork bomb, a flood, memory), or was stopped
            # for sending past its budget: the cells after this one are not run; the points
            # come from the jailed grader all the same. The jail's cgroup says whether its
            # memory limit ended the kernel.
            over = isinstance(self.km, JailedKernelManager) and self.km.over_budget()
            memory = None if over else self._memory_limit_reached()
            with use_language(self._language):
                if over:
                    refusal = _("the kernel sent more than {mib:g} MiB while this cell ran, "
                                "so it was stopped unread").format(
                                    mib=self.output_bytes / 2**20)
                    error = nbformat.v4.new_output("error", ename="OutputTooLarge",
                                                   evalue=refusal, traceback=[refusal])
                else:
                    said = _("the kernel's processes reached the jail's memory limit ({mib} MiB "
                             "for all of them and /tmp together) and the kernel ended them"
                             ).format(mib=memory // 2**20) if memory else \
                        _("the kernel stopped responding")
                    error = nbformat.v4.new_output(
                        "error", ename=type(exc).__name__, evalue=said,
                        traceback=[_("{error}: {said} while this cell ran").format(
                            error=type(exc).__name__, said=said)])
                cell.outputs = list(cell.get("outputs", [])) + [error]
            self._stop(index, too_large=over)
            return cell, resources
        if any(o.get("output_type") == "error" and o.get("ename") in TIMEOUT_NAMES
               for o in cell.get("outputs", [])):
            self._stop(index)
        return cell, resources

    def _memory_limit_reached(self) -> int | None:
        """The jail's memory limit (bytes) when the kernel's cgroup counted it reached (the
        kernel's OOM killer, or usage at the limit), else None."""
        group = getattr(getattr(self, "km", None), "_jail_group", None)
        if group is None:
            return None
        seen = group.observations()
        if seen["memory_limit_hits"] or seen["oom_kills"]:
            self.log.warning("the kernel's cgroup reached its memory limit (%d bytes): %s",
                             group.memory_bytes, seen)
            return int(group.memory_bytes)
        return None

    def _stop(self, index: int, too_large: bool = False) -> None:
        """No cell after cell ``index`` runs; the note in each names that cell as the
        feedback page shows it (``submission.cell_name``: by its id and graded part, never
        by a number the page does not show) and why: it ran out of time, or the kernel
        sent past ``output_bytes`` while it ran (``too_large``)."""
        from .submission import cell_name

        self._stopped_at = index
        self._stopped_too_large = too_large
        with use_language(self._language):
            self._stopped_name = cell_name(self._cells, index)


class TrustedGrades(NbGraderPreprocessor):
    """Every hidden cell's outputs from the jailed grader (see the module doc)."""

    memory_mb = Float(1024, help="Address space (MiB) the jailed grader's worker may add "
                                 "after start-up.").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict):
        from . import assignments
        from .report import format_result
        from .sandbox import grade_isolated
        from .submission import assignment_of

        jail.sweep_stale_folders()  # left by graders killed before they cleaned up
        folder = jail.scratch_folder("autograde")
        try:
            name = f"{resources.get('unique_key') or 'submission'}.ipynb"
            path = os.path.join(folder, os.path.basename(name))
            nbformat.write(nb, path)
            # The assignment nbgrader is grading, never what the notebook says it is (a
            # training notebook without its gate cell is still graded as training).
            assignment = resources.get("nbgrader", {}).get("assignment") or assignment_of(path)
            if assignment not in assignments.ASSIGNMENTS:
                assignment = assignment_of(path)
            started = time.perf_counter()
            jailed = jail.use_jail(jail.allowed_by_config(self.config))
            # the course's language, from the configuration nbgrader loaded for the course
            # (never from the submission's folder)
            language = config_language(self.config)
            results, cell_errors, flags = grade_isolated(path, assignment=assignment,
                                                         memory_mb=int(self.memory_mb),
                                                         jailed=jailed, language=language)
            self.log.info("graded in the jail in %.1f s", time.perf_counter() - started)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        points = assignments.get(assignment).points
        for cell in nb.cells:
            if cell.cell_type != "code" or not is_hidden_cell(cell):
                continue
            graded = cell.metadata["nbgrader"]["grade_id"][: -len(HIDDEN_SUFFIX)]
            result = results.get(graded)
            if result is None or graded not in points:
                # A hidden cell the grader has no result for earns nothing (nbgrader would
                # give a cell with no output full marks).
                with use_language(language):
                    cell.outputs = [nbformat.v4.new_output(
                        "error", ename="NotGraded", evalue=graded,
                        traceback=[_("{name} is not a graded name of assignment "
                                     "{assignment}: this cell earns no points").format(
                                         name=graded, assignment=assignment)])]
                continue
            with use_language(language):
                report = format_result(result)
                if flags:
                    report += "\n\n" + _("Flagged for the instructor's review:") + "\n" + \
                        "\n".join(f"  - {f}" for f in flags)
            cell.outputs = [
                nbformat.v4.new_output("stream", name="stdout", text=report + "\n"),
                nbformat.v4.new_output("display_data", data={RESULT_MIME: result.to_json()}),
                nbformat.v4.new_output("execute_result", data={"text/plain": repr(
                    float(result.score))}, execution_count=cell.get("execution_count")),
            ]
        resources["attention_kit"] = {"flags": flags, "cell_errors": cell_errors,
                                      "assignment": assignment}
        return nb, resources


class NoteChosenNotebook(NbGraderPreprocessor):
    """Open the autograded notebook with the note of ``notebook_choice`` (which notebook of
    the submission folder was graded, which were not, what was set aside), when there is
    one: the feedback then says it. ``grading_note`` metadata on any cell of the student's
    is removed first, so the kit's note is the only cell that carries it."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        from .notebook_choice import note_cell, read_note

        for cell in nb.cells:  # only the kit's own note may say it is the note
            meta = cell.get("metadata")
            if isinstance(meta, dict):
                meta.pop("grading_note", None)
        folder = (resources.get("metadata") or {}).get("path")
        note = read_note(folder) if folder else None
        if note:
            nb.cells.insert(0, nbformat.from_dict(note_cell(note, nb.get("nbformat_minor", 0))))
        return nb, resources


class FlagForReview(NbGraderPreprocessor):
    """After ``SaveAutoGrades``: a flagged submission waits for the instructor."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        flags = resources.get("attention_kit", {}).get("flags")
        if not flags:
            return nb, resources
        from nbgrader.api import Gradebook

        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            notebook = gb.find_submission_notebook(info["notebook"], info["assignment"],
                                                   info["student"])
            notebook.flagged = True
            for grade in notebook.grades:
                if grade.name.endswith(HIDDEN_SUFFIX):
                    grade.needs_manual_grade = True
            gb.db.commit()
        self.log.warning("flagged for review: %s", "; ".join(flags))
        return nb, resources
