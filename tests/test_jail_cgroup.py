"""A fair share of the machine for each submission: each jail in a control group of its
own (``grader_tests/cgroup.py``), with one memory limit for all its processes and its
``/tmp``, a CPU weight, a process limit; the group gone after the jail, a killed grader's
groups swept by the next one; a clear refusal where no group can be made, and the one
opt-out (``jail.CGROUPS_ENV``).

Each case is a small submission of the catalogue's kind (the reference, with ``softmax``
replaced by what the case tries), graded through ``grade_isolated`` as a class is; what
is asserted is the grade, the report's words, and what the kernel's counters say."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from grader_tests import cgroup, jail
from grader_tests.sandbox import grade_isolated
from tests.catalogue import REFERENCE_SOURCE

needs_jail = pytest.mark.skipif(jail.problem() is not None or not jail.cgroups_wanted(),
                                reason="no jail with a cgroup here")
GRADED = ["softmax", "causal_mask"]
MIB = 2**20

# Past the jail's memory limit across processes and /tmp: 48 MiB in the jail's tmpfs,
# three children holding 48 MiB each, then the worker itself growing until the kernel
# stops it (the address-space cap of each process alone would allow all of it).
MEMORY_HOG = '''
import os, time
def softmax(scores, axis=-1):
    with open("/tmp/hog", "wb") as f:
        for _ in range(48):
            f.write(os.urandom(2**20))
    for _ in range(3):
        if os.fork() == 0:
            held = bytearray(48 * 2**20)
            for i in range(0, len(held), 4096):
                held[i] = 1
            time.sleep(60)
            os._exit(0)
    held = []
    for _ in range(60):
        block = bytearray(16 * 2**20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        held.append(block)
    return scores
'''

# Many processes burning CPU for as long as the check lets them, then a wrong answer.
CPU_BURNER = '''
import os, time
def softmax(scores, axis=-1):
    for _ in range(8):
        if os.fork() == 0:
            end = time.monotonic() + 20
            while time.monotonic() < end:
                pass
            os._exit(0)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        pass
    return scores
'''

# Forks until the kernel refuses, each child holding on; reports how many it made.
FORK_BOMB = r'''
import os, sys, time
made = 0
while made < 400:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    made += 1
print(made)
sys.stdout.flush()
os._exit(0)
'''


def _submission(tmp_path, name: str, source: str = "") -> str:
    path = tmp_path / name / "attention.py"
    path.parent.mkdir(parents=True)
    path.write_text(REFERENCE_SOURCE + "\n" + source)
    return str(path)


def _own_groups() -> list[str]:
    """Groups of this process still on the machine (``attention-kit-<pid>-<n>``; those of
    commands other tests built and never ran last until the process ends)."""
    try:
        _, bases = cgroup.hierarchy()
    except cgroup.CgroupUnavailable:
        return []
    prefix = f"{cgroup.PREFIX}{os.getpid()}-"
    return sorted(os.path.join(b, n) for b in bases for n in os.listdir(b)
                  if n.startswith(prefix))


def _full(results) -> bool:
    return all(r.score == r.max_score for r in results.values())


@needs_jail
def test_past_the_jails_memory_across_processes_and_tmp_is_stopped_and_reported(tmp_path):
    limits = jail.Limits(memory_bytes=320 * MIB)
    before = _own_groups()
    hog = _submission(tmp_path, "s_hog", MEMORY_HOG)
    results, _, flags = grade_isolated(hog, names=GRADED, limits=limits)
    softmax = results["softmax"]
    assert softmax.score == 0
    messages = [c.message for c in softmax.checks if not c.passed]
    assert any("memory limit (320 MiB" in m and "softmax" in m for m in messages), messages
    assert any("reached the jail's memory limit (320 MiB" in f for f in flags), flags
    assert results["causal_mask"].score == results["causal_mask"].max_score
    assert _own_groups() == before
    # the classmate graded next, in a jail of the same size: as usual
    honest = _submission(tmp_path, "s_honest")
    results, cell_errors, flags = grade_isolated(honest, names=GRADED, limits=limits)
    assert _full(results) and flags == [] and cell_errors == []


@needs_jail
def test_a_fork_bomb_stops_at_the_jails_process_limit():
    """The process limit of the jail's group holds by itself: with a per-user limit
    (``RLIMIT_NPROC``) far above it, the bomb ends at the group's ``pids.max``."""
    cmd = jail.command([sys.executable, "-I", "-c", FORK_BOMB],
                       limits=jail.Limits(processes=4000))
    assert cmd.group is not None and cmd.group.pids == 4000 + jail.JAIL_OWN_PROCESSES
    limit = 40
    for path in cmd.group.paths:  # the group's own limit, lowered below the per-user one
        if os.path.exists(os.path.join(path, "pids.max")):
            with open(os.path.join(path, "pids.max"), "w") as f:
                f.write(str(limit))
    try:
        done = subprocess.run(cmd.argv, preexec_fn=cmd.preexec, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        made = int(done.stdout.split()[-1])
        assert 0 < made < limit, done.stdout
        assert cmd.group.observations()["pids_limit_hits"] >= 1
        assert len(cmd.group.processes()) <= limit
    finally:
        jail.reap(cmd.uid, group=cmd.group)
    assert cmd.group.removed and not any(os.path.exists(p) for p in cmd.group.paths)
    if cmd.uid is not None:
        assert jail.processes_of(cmd.uid) == []


@needs_jail
def test_a_fork_bomb_submission_is_contained_and_flagged(tmp_path):
    bomb = _submission(tmp_path, "s_bomb", '''
import os, time
def softmax(scores, axis=-1):
    for _ in range(400):
        try:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
        except OSError:
            break
    return scores
''')
    before = _own_groups()
    results, _, flags = grade_isolated(bomb, names=GRADED)
    assert results["softmax"].score < results["softmax"].max_score
    assert results["causal_mask"].score == results["causal_mask"].max_score
    assert _own_groups() == before
    honest = _submission(tmp_path, "s_honest")
    results, _, flags = grade_isolated(honest, names=GRADED)
    assert _full(results) and flags == []


@needs_jail
def test_a_cpu_burner_graded_beside_an_honest_student_changes_nothing_of_theirs(tmp_path):
    before = _own_groups()
    honest = _submission(tmp_path, "s_honest")
    alone = grade_isolated(honest, names=GRADED)
    burner = _submission(tmp_path, "s_burner", CPU_BURNER)
    beside: dict[str, object] = {}
    thread = threading.Thread(target=lambda: beside.update(
        burner=grade_isolated(burner, names=GRADED)))
    thread.start()
    time.sleep(1.0)  # the burner's processes running
    with_burner = grade_isolated(honest, names=GRADED)
    thread.join()
    assert _full(alone[0]) and alone[2] == []
    assert {n: (r.score, [(c.passed, c.fault) for c in r.checks])
            for n, r in with_burner[0].items()} == \
        {n: (r.score, [(c.passed, c.fault) for c in r.checks]) for n, r in alone[0].items()}
    assert with_burner[1:] == alone[1:]
    burned = beside["burner"][0]["softmax"]
    assert burned.score < burned.max_score
    assert _own_groups() == before


@needs_jail
def test_a_killed_graders_groups_are_swept_with_their_processes():
    gone = subprocess.Popen(["true"])
    gone.wait()
    _, bases = cgroup.hierarchy()
    paths = [os.path.join(b, f"{cgroup.PREFIX}{gone.pid}-0") for b in bases]
    for path in paths:
        os.mkdir(path)
    left = subprocess.Popen(["sleep", "60"])
    try:
        for path in paths:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(left.pid))
        removed = cgroup.sweep_stale()
        assert sorted(removed) == sorted(paths)
        assert left.wait(timeout=10) == -9
    finally:
        left.kill()
        left.wait()
        for path in paths:
            if os.path.isdir(path):
                os.rmdir(path)
    assert not any(os.path.exists(p) for p in paths)


def test_no_cgroup_is_a_one_line_refusal_unless_opted_out(monkeypatch):
    if jail.bwrap_path() is None:
        pytest.skip("no bubblewrap here")

    def nowhere():
        raise cgroup.CgroupUnavailable("no writable cgroup here (test)")

    monkeypatch.setattr(cgroup, "hierarchy", nowhere)
    monkeypatch.delenv(jail.CGROUPS_ENV, raising=False)
    jail.problem.cache_clear()
    try:
        said = jail.problem()
        assert said is not None and "\n" not in said
        assert "no writable cgroup here (test)" in said and "ATTENTION_KIT_CGROUPS=off" in said
        with pytest.raises(jail.JailUnavailable, match="ATTENTION_KIT_CGROUPS=off"):
            jail.require()
        with pytest.raises(jail.JailUnavailable, match="no writable cgroup"):
            jail.command(["true"])
        monkeypatch.setenv(jail.CGROUPS_ENV, "off")
        jail.problem.cache_clear()
        assert jail.command(["true"]).group is None
    finally:
        jail.problem.cache_clear()


@needs_jail
def test_a_kernel_past_the_jails_memory_is_stopped_and_its_cell_says_memory(tmp_path,
                                                                            monkeypatch):
    """nbgrader's path: the kernel's jail has the same cgroup; the cell that ran it past
    the limit is reported with the limit, the cells after it are not run, and the next
    student's kernel runs as usual."""
    import dataclasses

    import nbformat

    from grader_tests.autograde import JailedExecute, JailedKernelManager

    monkeypatch.setattr(JailedKernelManager, "LIMITS", dataclasses.replace(
        JailedKernelManager.LIMITS, memory_bytes=320 * MIB))
    body = MEMORY_HOG.replace("def softmax(scores, axis=-1):", "if True:").replace(
        "    return scores\n", "")

    def run(cells: list[str], name: str):
        folder = tmp_path / name / "attention"
        folder.mkdir(parents=True)
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
        nbformat.write(nb, folder / "attention.ipynb")
        execute = JailedExecute(timeout=60, startup_timeout=120, interrupt_on_timeout=True)
        out, _ = execute.preprocess(nb, {"metadata": {"path": str(folder)}})
        return out

    before = _own_groups()
    out = run(["print(6 * 7)", body, "print('after')"], "s_hog")
    assert "42" in out.cells[0].outputs[0]["text"]
    errors = [o for o in out.cells[1].outputs if o.get("output_type") == "error"]
    assert errors and "memory limit (320 MiB" in errors[-1]["evalue"], out.cells[1].outputs
    assert "not run" in out.cells[2].outputs[0]["text"]
    assert _own_groups() == before
    out = run(["print(6 * 7)", "print('after')"], "s_honest")
    assert "42" in out.cells[0].outputs[0]["text"]
    assert "after" in out.cells[1].outputs[0]["text"]
