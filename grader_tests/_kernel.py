"""Starts a Jupyter kernel inside the jail on listening sockets the grader made.

Run by ``autograde.JailedKernelManager`` inside the jail as
``python /opt/grader/kernel_launch.py SOCKETS -m ipykernel_launcher -f CONNECTION_FILE``.
``SOCKETS`` is ``PATH=FD,PATH=FD,...``: for each of the kernel's five sockets (shell,
iopub, stdin, control, heartbeat), the ``ipc://`` path of the connection file and the
descriptor of a Unix socket the grader already bound to that path, in a folder of its
own on the host, and listening. The kernel's ``bind`` to that path takes the descriptor
(ZeroMQ's ``ZMQ_USE_FD``) instead of making a socket file: nothing the kernel can reach
names, makes or replaces the files the grader connects to (the folder is not in the jail
at all). Imports only the standard library and pyzmq; nothing here is trusted by the
grader, which only ever connects to its own files.
"""

import os
import runpy
import sys


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
    sys.path[0] = os.getcwd()  # as ``python -m`` would: the notebook's folder
    if rest[:1] == ["-m"]:
        sys.argv = [rest[1]] + rest[2:]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    main()
