"""Starts a Jupyter kernel inside the jail on listening sockets the grader made.

Run by ``autograde.JailedKernelManager`` inside the jail as
``python /opt/grader/kernel_launch.py SOCKETS -m ipykernel_launcher -f CONNECTION_FILE``.
``SOCKETS`` is ``PATH=FD,PATH=FD,...``: for each of the kernel's five sockets (shell,
iopub, stdin, control, heartbeat), the ``ipc://`` path of the connection file and the
descriptor of a Unix socket the grader already bound to that path, in a folder of its
own on the host, and listening. The kernel's ``bind`` to that path takes the descriptor
(ZeroMQ's ``ZMQ_USE_FD``) instead of making a socket file: nothing the kernel can reach
names, makes or replaces the files the grader connects to (the folder is not in the jail
at all). An output message larger than the grader receives is replaced by a note of its
size (``refuse_outputs_larger_than``). Imports only the standard library, pyzmq and
jupyter_client; nothing here is trusted by the grader, which only ever connects to its own
files.
"""

import os
import runpy
import sys


# The environment variable through which the grader gives the largest message part it
# receives (bytes, ``JailedExecute.message_limit``).
MESSAGE_LIMIT_VARIABLE = "ATTENTION_KIT_MESSAGE_LIMIT"
# What the kernel sends in place of an output past the limit: a display of this kind,
# ``{"bytes": size, "output": msg_type}``, which the grader words in the course's language
# (``autograde.JailedExecute.output``).
REFUSED_MIME = "application/vnd.attention-kit.refused+json"
OUTPUT_TYPES = ("stream", "display_data", "update_display_data", "execute_result", "error")


def refuse_outputs_larger_than(limit: int) -> None:
    """Make the kernel's session send, in place of an output message (``OUTPUT_TYPES``)
    whose content or one of whose buffers is larger than ``limit`` bytes, a small display
    of ``REFUSED_MIME`` saying how large it was: the grader refuses such a message unread
    (and the connection it came on, so every later output of the notebook would be lost);
    this way only that output is, and the notebook goes on. A kernel that undoes this only
    loses its own outputs.

    Args:
        limit: int, bytes.
    """
    from jupyter_client.session import Session

    send = Session.send

    def sizes(session, content, buffers):
        out = [len(session.pack(content))] if content is not None else [0]
        return out + [memoryview(b).nbytes for b in buffers or ()]

    def refusing_send(self, stream, msg_or_type, content=None, parent=None, ident=None,
                      buffers=None, track=False, header=None, metadata=None):
        given = isinstance(msg_or_type, dict)
        kind = (msg_or_type.get("header") or {}).get("msg_type") if given else msg_or_type
        if kind in OUTPUT_TYPES:
            parts = sizes(self, msg_or_type.get("content") if given else content,
                          (buffers or msg_or_type.get("buffers")) if given else buffers)
            if max(parts) > limit:
                refused = {"data": {REFUSED_MIME: {"bytes": sum(parts), "output": kind}},
                           "metadata": {}, "transient": {}}
                if given:
                    parent = parent or msg_or_type.get("parent_header")
                msg_or_type, content, buffers = "display_data", refused, None
        return send(self, stream, msg_or_type, content=content, parent=parent, ident=ident,
                    buffers=buffers, track=track, header=header, metadata=metadata)

    Session.send = refusing_send  # type: ignore[method-assign]


def main() -> None:
    """Make the kernel's ``bind`` to each path of ``sys.argv[1]`` take the grader's
    descriptor, then run the kernel's command (``-m MODULE ARGS`` or ``SCRIPT ARGS``, the
    rest of ``sys.argv``) with the notebook's folder first on the import path.

    Raises:
        ValueError: ``sys.argv[1]`` is not ``PATH=FD,...``.
    """
    sockets = {}
    for item in sys.argv[1].split(","):
        path, _, fd = item.rpartition("=")
        sockets[path] = int(fd)
    rest = sys.argv[2:]

    import zmq

    bind = zmq.Socket.bind

    def bind_to_grader_socket(self, addr, *args, **kwargs):
        fd = sockets.pop(addr[len("ipc://"):], None) if isinstance(addr, str) and \
            addr.startswith("ipc://") else None
        if fd is not None:
            self.setsockopt(zmq.USE_FD, fd)
        return bind(self, addr, *args, **kwargs)

    zmq.Socket.bind = bind_to_grader_socket  # type: ignore[method-assign]
    limit = int(os.environ.pop(MESSAGE_LIMIT_VARIABLE, "0") or 0)
    if limit > 0:
        refuse_outputs_larger_than(limit)
    sys.path[0] = os.getcwd()  # as ``python -m`` would: the notebook's folder
    if rest[:1] == ["-m"]:
        sys.argv = [rest[1]] + rest[2:]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    main()
