"""What the jail itself observes becomes a flag: a system call its seccomp filter refused,
as the machine's kernel sent it to the audit system for the jail's own uid (``grader_tests.observed``), is
reported in the kit's words, in the course's language, and honest code is never flagged
for it (the honest catalogue's isolated run asserts no flag at all: ``test_honest``)."""

from __future__ import annotations

import os
import textwrap

import pytest

from grader_tests import jail, observed
from grader_tests.sandbox import grade_isolated
from tests.catalogue.attacks import JAIL_REACHES
from tests.catalogue import REFERENCE_SOURCE


def _audit_readable() -> bool:
    seen = observed.RefusedCalls(0)
    readable = seen._socket is not None
    seen.names()
    return readable


# Observations need a uid per jail (the kit run as root) and the audit system's records.
needs_observation = pytest.mark.skipif(
    jail.problem() is not None or os.geteuid() != 0 or not _audit_readable(),
    reason="no jail, not root, or the audit system's records are not readable here")

FLAG = {"en": "the jail refused system calls the submission's processes made: ",
        "it": "la gabbia ha rifiutato chiamate di sistema fatte dai processi della consegna: "}


@needs_observation
@pytest.mark.parametrize("name", sorted(JAIL_REACHES))
@pytest.mark.parametrize("language", sorted(FLAG))
def test_a_call_the_jail_refused_is_a_flag(name, language, tmp_path):
    path = tmp_path / "attention.py"
    path.write_text(REFERENCE_SOURCE + "\n" + textwrap.dedent(JAIL_REACHES[name]["source"]))
    results, _, flags = grade_isolated(str(path), names=["softmax", "causal_mask"],
                                       language=language)
    observed_flags = [f for f in flags if f.startswith(FLAG[language])]
    assert len(observed_flags) == 1, flags
    calls = observed_flags[0][len(FLAG[language]):].split(", ")
    assert set(JAIL_REACHES[name]["calls"]) <= set(calls), calls
    assert results["causal_mask"].score == results["causal_mask"].max_score


@needs_observation
def test_honest_code_with_threads_forks_and_children_is_not_flagged(tmp_path):
    """The calls an honest program makes through the C library (threads, whose clone3
    fails with ENOSYS on purpose, a fork, a child process) are not refusals to report."""
    path = tmp_path / "attention.py"
    path.write_text(REFERENCE_SOURCE + "\n" + textwrap.dedent('''
        import os, threading
        _box = []
        _t = threading.Thread(target=lambda: _box.append(1)); _t.start(); _t.join()
        os.waitpid(os.posix_spawn("/bin/sh", ["sh", "-c", "exit 0"], {}), 0)
    '''))
    results, _, flags = grade_isolated(str(path), names=["softmax"])
    assert not any(f.startswith(FLAG["en"]) for f in flags), flags
    assert results["softmax"].score == results["softmax"].max_score


def test_a_record_is_read_for_its_uid_its_time_and_the_filters_own_answer():
    seen = observed.RefusedCalls(None)
    seen.uid, seen.started = 2001, 1000.0
    line = ('audit({t}:7): auid=4294967295 uid={uid} gid=0 '
            'ses=4294967295 pid=9 comm="python" exe="/usr/bin/python3" sig=0 arch=c000003e '
            'syscall=272 compat=0 ip=0x7f code={code}')
    refused = hex(observed.SECCOMP_RET_ERRNO)  # the log gives the action, not the error
    assert seen._refused(line.format(t="1001.5", uid=2001, code=refused)) == "unshare"
    assert seen._refused(line.format(t="1001.5", uid=2002, code=refused)) is None  # another jail
    assert seen._refused(line.format(t="999.0", uid=2001, code=refused)) is None  # before it
    assert seen._refused(line.format(t="1001.5", uid=2001, code="0x7ffc0000")) is None  # logged
    clone3 = line.replace("syscall=272", "syscall=435")  # ENOSYS on purpose: C library's
    assert seen._refused(clone3.format(t="1001.5", uid=2001, code=refused)) is None
    assert seen._refused("audit(1001.5:8): op=set audit_pid=0 old=0 res=1") is None
