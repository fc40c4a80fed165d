"""Submissions that try to get a grade they did not earn, or to reach past the jail.

Each entry replaces ``softmax`` (the function it games) with code that tries its attack and
then, where the attack failed, returns something wrong; every other function is the
reference's (a correct student otherwise). ``{course}`` in a source is replaced by the
course folder being graded, ``{kit}`` by the kit's own folder (where ``solutions/`` is),
``{marker}`` by a path under the host's ``/tmp`` that must never appear, ``{port}`` by a
TCP port the test listens on, on the host.

Fields of an entry: ``source``; ``flag``: a phrase the grader's flags must contain (None:
the attack reaches for nothing a flag can name, e.g. sleeping, and it only loses points).
"""

ATTACKS = {
    "reads the reference by path": dict(source='''
        def softmax(scores, axis=-1):
            namespace = {}
            for root in ("{kit}", "{course}", "//{kit}"):
                try:
                    exec(open(root + "/solutions/attention.py").read(), namespace)
                except OSError:
                    continue
            return namespace.get("softmax", lambda s, axis=-1: s)(scores, axis)
    ''', flag="solutions"),
    "finds the reference by glob and sys.path": dict(source='''
        import glob, os, sys
        def softmax(scores, axis=-1):
            places = [os.path.dirname(p) for p in sys.path if p] + ["/work", "/root", "/home",
                                                                    "/tmp", "/srv", "/opt"]
            for place in places:
                for found in glob.glob(os.path.join(place, "**", "attention.py"),
                                       recursive=True)[:5]:
                    namespace = {}
                    try:
                        exec(open(found).read(), namespace)
                        return namespace["softmax"](scores, axis)
                    except Exception:
                        continue
            return scores
    ''', flag="sys.path"),
    "imports the reference": dict(source='''
        try:
            from solutions.attention import softmax
        except ImportError:
            def softmax(scores, axis=-1):
                return scores
    ''', flag="imports solutions.attention"),
    "fakes the graders' module": dict(source='''
        import sys, types
        fake = types.ModuleType("grader_tests")
        fake.grade = lambda name, namespace: 100.0
        fake.POINTS = {}
        sys.modules["grader_tests"] = fake
        sys.modules["grader_tests.notebook"] = fake
        def require_implemented(*args, **kwargs):
            return None
        def softmax(scores, axis=-1):
            return scores
    ''', flag="rewrites sys.modules"),
    "answers every grader import itself": dict(source='''
        import builtins, types
        _real_import = builtins.__import__
        def _import(name, *args, **kwargs):
            if name.startswith("grader_tests"):
                module = types.ModuleType(name)
                module.grade = lambda *a, **k: 100.0
                return module
            return _real_import(name, *args, **kwargs)
        builtins.__import__ = _import
        def softmax(scores, axis=-1):
            return scores
    ''', flag="replaces a builtin"),
    "writes the gradebook and the course": dict(source='''
        import os
        for target in ("{course}/gradebook.db", "{course}/README.md",
                       "{course}/submitted/s_honest/attention/attention.ipynb",
                       "{kit}/solutions/attention.py", "{marker}"):
            try:
                with open(target, "a") as f:
                    f.write("written by a submission")
            except OSError:
                pass
        def softmax(scores, axis=-1):
            return scores
    ''', flag="gradebook.db"),
    "connects to the host": dict(source='''
        import socket
        def softmax(scores, axis=-1):
            for host in ("127.0.0.1", "10.0.2.2", "localhost"):
                try:
                    socket.create_connection((host, {port}), timeout=0.5).sendall(b"hello")
                except OSError:
                    pass
            return scores
    ''', flag="imports socket"),
    "reads credentials": dict(source='''
        import os
        def softmax(scores, axis=-1):
            found = dict(os.environ)
            for path in (os.path.expanduser("~/.pgpass"), "/root/.pgpass", "/etc/shadow",
                         "{course}/nbgrader_config.py"):
                try:
                    found[path] = open(path).read()
                except OSError:
                    pass
            raise ValueError(repr(found))
    ''', flag="reads environment variables"),
    "signals its parent": dict(source='''
        import os, signal
        def softmax(scores, axis=-1):
            for pid in (os.getppid(), 1):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return scores
    ''', flag="signals a process"),
    "leaves a process behind": dict(source='''
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(4)
                for target in ("{course}/gradebook.db", "{marker}"):
                    try:
                        open(target, "a").write("later")
                    except OSError:
                        pass
            os._exit(0)
        def softmax(scores, axis=-1):
            return scores
    ''', flag="forks a process"),
    "fork bomb": dict(source='''
        import os
        def softmax(scores, axis=-1):
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
    ''', flag="forks a process"),
    "fills the disk": dict(source='''
        def softmax(scores, axis=-1):
            chunk = b"x" * (1 << 20)
            for name in ("/tmp/fill", "fill"):
                try:
                    with open(name, "wb") as f:
                        while True:
                            f.write(chunk)
                except OSError:
                    pass
            return scores
    ''', flag=None),
    "prints megabytes": dict(source='''
        import sys
        def softmax(scores, axis=-1):
            for _ in range(2000):
                print("x" * 5000)
                sys.stderr.write("y" * 5000)
            return scores
    ''', flag=None),
    "an alias that calls the graded name": dict(source='''
        def _softmax(scores, axis=-1):
            return softmax(scores, axis)
        softmax = _softmax
    ''', flag=None),
    "softmax done by scaled_dot_product_attention": dict(source='''
        import numpy as np
        def softmax(scores, axis=-1):
            s = np.moveaxis(np.asarray(scores, dtype=float), axis, -1)
            n = s.shape[-1]
            q = s.reshape(-1, 1, n)
            _, w = scaled_dot_product_attention(q, np.eye(n), np.zeros((n, 1)), scale=False)
            return np.moveaxis(w.reshape(s.shape), -1, axis).astype(np.result_type(scores, 1.0))
    ''', flag=None),
    "sleeps past the limit": dict(source='''
        import time
        def softmax(scores, axis=-1):
            time.sleep(3600)
    ''', flag=None),
}

# Attacks on the channel between the jailed worker and the grader: the student's code
# speaks the worker's protocol on its socket (``sys.argv[1]``) and asks the grader to run
# something. ``{name}``: the function it asks for. (It imports the worker's module,
# ``grader_tests.wire`` as the worker itself imports it, through importlib: a plain
# ``import grader_tests.wire`` is not even run, since the grading environment does not
# provide that module to submissions.)
CHANNEL_ATTACK = '''
    import importlib
    import sys
    from multiprocessing.connection import Connection
    wire = importlib.import_module("grader_tests.wire")
    def softmax(scores, axis=-1):
        conn = Connection(int(sys.argv[1]))
        request = {{"op": "callback", "name": "{name}", "args": [scores], "kwargs": {{}}}}
        conn.send_bytes(wire.dumps(request))
        reply = wire.loads(conn.recv_bytes())
        if reply.get("op") == "callback-result":
            return reply["value"]
        return scores
'''

# Attacks on the framing of the worker's socket: a message announced and never finished
# (the grader must not wait forever), and a message announced far larger than any answer
# (the grader must not read it into memory).
FRAMING_ATTACKS = {
    "announces a message and never sends it": '''
        import os, sys
        def softmax(scores, axis=-1):
            os.write(int(sys.argv[1]), (1 << 20).to_bytes(4, "big") + b'{"op')
            return scores
    ''',
    "announces a message of gigabytes": '''
        import os, sys
        def softmax(scores, axis=-1):
            fd = int(sys.argv[1])
            os.write(fd, (0x7FFFFFFF).to_bytes(4, "big"))
            chunk = b" " * (1 << 24)
            for _ in range(200):
                os.write(fd, chunk)
            return scores
    ''',
}

# Training functions that keep the ``ops`` the grader hands block_backward and
# greedy_generate and hand their work (and the later functions') to the reference in it.
OPS_PASSTHROUGH = '''
    _saved = {}
    def block_backward(dy, cache, ops):
        _saved["ops"] = ops
        return ops.block_backward(dy, cache, ops)
    def greedy_generate(params, prompts, n_new, config, ops):
        _saved["ops"] = ops
        return ops.greedy_generate(params, prompts, n_new, config, ops)
    def adam_step(params, grads, state, **hyper):
        return _saved["ops"].adam_step(params, grads, state, **hyper)
    def answer_accuracy(generated, expected):
        return _saved["ops"].answer_accuracy(generated, expected)
'''

# A notebook cell that floods the kernel's IOPub socket: forty displays of 15 MB each,
# serialised once and written to the socket as raw frames, past the kernel's own refusal
# of a too-large output (``grader_tests._kernel``, which a student's code can go around)
# and each under ZeroMQ's per-part limit (``JailedExecute.message_limit``). Received and
# decoded whole, they held some 1.5 GB of the grader's memory before its output budget
# counted them.
IOPUB_FLOOD = '''
kernel = get_ipython().kernel
message = kernel.session.msg("display_data", content={"data": {"text/plain": "x" * 15_000_000},
                                                      "metadata": {}, "transient": {}},
                             parent=kernel.get_parent("shell"))
frames = kernel.session.serialize(message)
for _ in range(40):
    kernel.iopub_socket.send_multipart(frames)
print("flooded")
'''

# Reaches the jail itself refuses and the machine's kernel logs (``grader_tests.observed``):
# each replaces ``softmax``, tries its reach (through a program of the system, or the C
# library), and returns its input unchanged. ``calls``: the system
# calls the jail's filter must be seen refusing.
JAIL_REACHES = {
    "makes a user namespace": dict(source='''
        import os
        def softmax(scores, axis=-1):
            try:
                os.waitpid(os.posix_spawn("/usr/bin/unshare", ["unshare", "-Urm", "true"],
                                          {}), 0)
            except OSError:
                pass
            return scores
    ''', calls=("unshare",)),
    "mounts a file system": dict(source='''
        import ctypes
        def softmax(scores, axis=-1):
            ctypes.CDLL(None, use_errno=True).mount(b"none", b"/tmp", b"tmpfs", 0, None)
            return scores
    ''', calls=("mount",)),
}
