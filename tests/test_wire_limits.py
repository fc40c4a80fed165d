"""Bounded decoding of what the student's process sends the grader (``wire.loads``).

Everything in the jailed worker is the student's, its copy of ``wire`` included: a
submission can write any bytes to the socket. So the grader bounds every message before it
builds it: the size of its structure (``wire.MAX_STRUCTURE``), its depth
(``wire.MAX_DEPTH``), the call's deadline, and a fixed table of record classes. Memory is
the grader's resident set (psutil), sampled every 5 ms while it decodes or grades; the
bound each test states is the growth over the resident set just before.
"""

from __future__ import annotations

import time

import pytest

from grader_tests import jail, wire
from grader_tests.sandbox import grade_isolated
from tests.helpers import PeakMemory

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")

MiB = 2**20
NESTED = b'{"op": "result", "value": [' + b"[]," * 6_000_000 + \
    b'[]], "args": [], "kwargs": {"__dict__": []}}'  # 18 MB of nested empty lists


def test_an_amplifying_message_is_refused_before_it_is_built():
    assert len(NESTED) > 18_000_000
    with PeakMemory() as memory:
        started = time.monotonic()
        with pytest.raises(wire.Refused):
            wire.loads(NESTED)
        took = time.monotonic() - started
    assert memory.growth < 32 * MiB, memory.growth   # json.loads would take some 1.5 GB
    assert took < 5.0
    deep = b"[" * 5000 + b"]" * 5000
    with pytest.raises(wire.Refused):
        wire.loads(deep)
    with pytest.raises(wire.Refused):  # within the structure bound but nested past MAX_DEPTH
        wire.loads(b"[" * (wire.MAX_DEPTH + 5) + b"]" * (wire.MAX_DEPTH + 5))
    honest = [[1.0, 2.0]] * 1000 + [{"a": (1, 2)}]
    assert wire.loads(wire.dumps(honest)) == honest


def test_decoding_keeps_to_the_deadline():
    data = wire.dumps([[[1]]] * (wire.MAX_STRUCTURE // 4))
    with pytest.raises(wire.DeadlinePassed):
        wire.loads(data, deadline=time.monotonic() - 1)
    assert len(wire.loads(data, deadline=time.monotonic() + 60)) == wire.MAX_STRUCTURE // 4


def test_record_names_from_the_student_build_no_class():
    before = dict(wire._LOOKALIKES)
    for i in range(2000):
        message = ('{"__record__": "Config%d", "fields": {"__dict__": [["f%d", 1]]}}'
                   % (i, i)).encode()
        with pytest.raises(wire.Refused):
            wire.loads(message)
    assert wire._LOOKALIKES == before
    # the worker's side makes look-alikes for the grader's records, a bounded number
    for i in range(wire.MAX_LOOKALIKES + 5):
        try:
            wire.loads(('{"__record__": "W%d", "fields": {"__dict__": []}}' % i).encode(),
                       lookalikes=True)
        except wire.Refused:
            pass
    assert len(wire._LOOKALIKES) <= wire.MAX_LOOKALIKES
    wire._LOOKALIKES.clear()
    wire._LOOKALIKES.update(before)


FORGER = '''
import os, struct, sys
import numpy as np

def _forge(body):
    data = memoryview(struct.pack("!i", len(body)) + body)
    while data:
        data = data[os.write(int(sys.argv[1]), data):]

def softmax(x, axis=-1):
    _forge(BODY)
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
'''
# made in the student's process (the source stays small)
MAKE_NESTED = ("BODY = b'{\"op\": \"result\", \"value\": [' + b'[],' * 6_000_000 + "
               "b'[]], \"args\": [], \"kwargs\": {\"__dict__\": []}}'\n")
MAKE_FLOOD = ("BODY = ('{\"op\": \"result\", \"value\": [' + ', '.join("
              "'{\"__record__\": \"R%d\", \"fields\": {\"__dict__\": [[\"field%d\", 1]]}}'"
              " % (i, i) for i in range(20000)) + '], \"args\": [], "
              "\"kwargs\": {\"__dict__\": []}}').encode()\n")
HONEST = FORGER.replace("    _forge(BODY)\n", "")


@needs_jail
@pytest.mark.parametrize("make", [MAKE_NESTED, MAKE_FLOOD], ids=["nested-lists", "record-names"])
def test_a_forged_reply_ends_the_call_with_bounded_grader_memory(tmp_path, make):
    honest = tmp_path / "honest.py"
    honest.write_text(HONEST)
    usual = grade_isolated(str(honest), names=["softmax"])[0]["softmax"]
    assert usual.score > 0  # warms the grader up: imports and caches are not counted below
    path = tmp_path / "submission.py"
    path.write_text(make + FORGER)
    before = dict(wire._LOOKALIKES)
    with PeakMemory() as memory:
        started = time.monotonic()
        results, _, _ = grade_isolated(str(path), names=["softmax"])
        took = time.monotonic() - started
    result = results["softmax"]
    assert result.score == 0 and result.checks
    assert not any(c.passed for c in result.checks)
    assert any(c.fault == "crash" for c in result.checks), result.checks
    # bound: 64 MiB over the grader's resident set (the message is read, 18 MB, and refused
    # unbuilt); before the bounds, 1.5 GB and two minutes
    assert memory.growth < 64 * MiB, memory.growth
    assert wire._LOOKALIKES == before
    print(f"graded in {took:.1f} s, grader grew {memory.growth / MiB:.1f} MiB")
