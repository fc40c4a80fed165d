"""An Italian course's instructor and students read Italian everywhere the kit's code
speaks: a submission that fails to load (in the grader and in the jailed worker), a grading
that fails, the evidence flags, the batch's summary, the dashboard's notes, the jail's
reasons, and the help and usage errors of the commands. Each test drives the real path in
Italian and checks both the Italian text and that no English sentence of the catalogue is
left in it.

Nothing here imports from ``tools/``: the instructor's tools are run as commands.
"""

import io
import json
import os
import re
import string
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from babel.messages.pofile import read_po

from grader_tests import __main__ as cli
from grader_tests import batch, evidence, i18n, jail, submission
from grader_tests.batch_log import Log
from grader_tests.job import grade_job, zero_report
from grader_tests.report import GradeReport, format_result
from tests.helpers import EXAMPLE, ROOT, kit_env

no_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")

# Three words in a row: prose, not code (``padding_mask(lengths=``, ``batch, bytes``).
PROSE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,} [A-Za-z]{2,}")
ITALIAN_COURSE = "c = get_config()\nc.AttentionKit.language = 'it'\n"


def _catalogue():
    path = Path(i18n.LOCALE_DIR) / "it" / "LC_MESSAGES" / f"{i18n.DOMAIN}.po"
    with open(path, "rb") as f:
        return read_po(f)


def _english_fragments() -> set[str]:
    """The literal text of every msgid of the Italian catalogue whose translation differs
    from it, cut at its placeholders, keeping the pieces that read as a sentence (three
    words in a row) and that the translation does not keep as they are (a command such as
    ``sudo apt-get install bubblewrap`` is the same in both)."""
    fragments = set()
    for m in _catalogue():
        if not m.id or m.string == m.id:
            continue
        translated = " ".join(m.string if isinstance(m.string, tuple) else (m.string,))
        for msgid in (m.id if isinstance(m.id, tuple) else (m.id,)):  # plural forms
            for literal, _field, _spec, _conv in string.Formatter().parse(msgid):
                for piece in literal.split("\n"):
                    piece = piece.strip(" .,;:()")
                    if PROSE.search(piece) and piece not in translated:
                        fragments.add(piece)
    return fragments


ENGLISH = _english_fragments()


def _english_in(text: str) -> list[str]:
    return sorted(f for f in ENGLISH if f in text)


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))
    return path


def _italian_course(folder: Path) -> Path:
    (folder / "nbgrader_config.py").write_text(ITALIAN_COURSE, encoding="utf-8")
    return folder


def test_the_helper_finds_english_and_not_the_italian():
    """The check the other tests rely on: it sees an English sentence of the catalogue and
    none in its Italian translation."""
    english = "the submission folder is empty: nothing to grade"
    assert english in ENGLISH
    assert _english_in(english) == [english]
    with i18n.use_language("it"):
        italian = i18n._(english)
    assert italian == "la cartella della consegna è vuota: niente da valutare"
    assert _english_in(italian) == []


def test_a_submission_that_fails_to_load_reads_in_italian(tmp_path):
    """The grader's own loading (``--in-process``): every cell that fails says so in
    Italian; a file that is no notebook too; English without the language."""
    path = _notebook(tmp_path / "attention.ipynb",
                     "import scipy\nx = 1",
                     "raise NotImplementedError()",
                     "while True:\n    pass",
                     "1 / 0")
    with i18n.use_language("it"):
        loaded = submission.load(str(path), cell_time_limit=0.3)
    errors = loaded.cell_errors
    assert errors[0] == (
        "la cella che inizia con `import scipy`: importa scipy, che l'ambiente di "
        "valutazione non fornisce (fornisce la "
        "libreria standard di Python e numpy, matplotlib): il codice che lo usa fallisce "
        "durante la valutazione [module-unavailable]")
    assert errors[1] == ("la cella che inizia con `raise NotImplementedError()`: è ancora "
                         "lo stub (solleva NotImplementedError)")
    assert errors[2] == ("la cella che inizia con `while True:`: fermata dopo 0.3 s (un ciclo "
                         "che non termina al livello più esterno di una cella?)")
    assert errors[3] == ("la cella che inizia con `1 / 0`: ZeroDivisionError: division by "
                         "zero")  # Python's own
    assert _english_in("\n".join(errors)) == []
    with pytest.raises(ModuleNotFoundError) as unavailable:  # worded as Python's own
        loaded.namespace["scipy"].linalg
    assert str(unavailable.value).startswith("No module named 'scipy' when graded")
    # the same in English: the code's own text
    english = submission.load(str(path), cell_time_limit=0.3).cell_errors
    assert english[1] == ("the cell that starts with `raise NotImplementedError()`: still the "
                          "stub (it raises NotImplementedError)")
    bad = tmp_path / "broken.ipynb"
    bad.write_text('{"cells": 3}', encoding="utf-8")
    with i18n.use_language("it"), pytest.raises(submission.SubmissionError) as exc:
        submission.load(str(bad))
    assert str(exc.value) == f"{bad}: non è un notebook (manca la lista delle celle)"
    bad.write_text('{"cells": [{"cell_type": 3}]}', encoding="utf-8")
    with i18n.use_language("it"), pytest.raises(submission.SubmissionError) as exc:
        submission.load(str(bad))
    assert str(exc.value) == f"{bad}: cella 1: cell_type è un numero, non una stringa"


def test_the_worker_table_is_every_message_of_the_loading():
    """What the grader sends the jailed worker: each message of ``submission`` translated,
    and only those (a table from elsewhere changes nothing else)."""
    with i18n.use_language("it"):
        table = submission.message_table(i18n._)
    assert set(table) == set(submission.MESSAGES)
    assert all(table[m] != m for m in table if PROSE.search(m))
    try:
        submission.use_messages({**table, "not a message of the module": "x"})
        assert submission._("{path}: no such file").format(path="p") == "p: il file non esiste"
        assert "not a message of the module" not in submission._TABLE
    finally:
        submission.use_messages(None)
    assert submission._("{path}: no such file") == "{path}: no such file"


@no_jail
def test_the_jailed_worker_loads_in_italian(tmp_path):
    """Isolated grading, as the batch and nbgrader's autograde grade: the cells that failed
    in the jailed worker, the evidence flags and the checks' messages, all Italian."""
    path = _notebook(tmp_path / "attention.ipynb",
                     "import socket\nimport scipy",
                     "import os\nkey = os.environ.get('HOME')",
                     "def softmax(x, axis=-1):\n    raise NotImplementedError()",
                     "raise NotImplementedError()")
    record = grade_job("mario", str(path), "attention", language="it")
    report = GradeReport.from_json(record["report"])
    assert record["cell_errors"][0].startswith(
        "la cella che inizia con `import socket`: importa scipy, che l'ambiente di "
        "valutazione non fornisce")
    assert record["cell_errors"][1] == ("la cella che inizia con `raise NotImplementedError()`"
                                        ": è ancora lo stub (solleva NotImplementedError)")
    assert record["flags"] == [
        "la consegna importa socket (la cella che inizia con `import socket`)",
        "la consegna legge le variabili d'ambiente (la cella che inizia con `import os`)"]
    softmax = report.functions["softmax"]
    assert softmax.score == 0 and softmax.faults == ["not-implemented"]
    with i18n.use_language("it"):
        text = "\n".join([*record["cell_errors"], *record["flags"],
                          *(format_result(f) for f in report.functions.values())])
    assert "softmax: 0.00 / 10 punti" in text
    assert _english_in(text) == []
    # the same submission in English: the code's text, the same grade
    english = grade_job("mario", str(path), "attention", language="en")
    assert english["flags"] == [
        "the submission imports socket (the cell that starts with `import socket`)",
        "the submission reads environment variables (the cell that starts with `import os`)"]
    assert english["report"]["score"] == record["report"]["score"]


@no_jail
def test_a_file_that_is_no_notebook_is_graded_zero_in_italian(tmp_path):
    """The worker cannot read the notebook: the reason, from the worker, in Italian, and
    each graded name's one check (the batch's zero report) in Italian."""
    path = tmp_path / "attention.ipynb"
    path.write_text("{not json", encoding="utf-8")
    record = grade_job("mario", str(path), "attention", language="it")
    assert record["report"]["score"] == 0
    [reason] = record["cell_errors"]
    assert reason.startswith(f"{jail.SUBMISSION_DIR}/attention.ipynb: non è un notebook "
                             "leggibile (JSONDecodeError: ")
    with i18n.use_language("it"):
        zero = GradeReport.from_json(zero_report(reason, "attention"))
        text = format_result(zero.functions["softmax"])
    assert "consegna leggibile" in text and "[other]" in text
    assert _english_in(text) == []


def test_evidence_flags_read_in_italian(tmp_path):
    code = ("import ctypes\nimport os\nos.system('ls')\n__import__('sys')\n"
            "import numpy as np\nnp.allclose = lambda *a, **k: True\n"
            "open('../solutions/attention.py')\n")
    with i18n.use_language("it"):
        found = evidence.findings(code)
    assert sorted(found) == ["chiama __import__", "esegue un comando di shell",
                             "importa ctypes",
                             "nomina il file o la cartella '../solutions/attention.py'",
                             "sostituisce numpy.allclose"]
    # outside the Italian context the same phrases are English again
    assert "imports ctypes" in evidence.findings(code)
    script = tmp_path / "attention.py"
    script.write_text("import subprocess\n", encoding="utf-8")
    with i18n.use_language("it"):
        assert evidence.kit_references(str(script)) == ["importa subprocess (il file)"]
    assert _english_in("\n".join(found)) == []


def _records(folder: Path) -> Log:
    log = Log(str(folder / "batch_log.jsonl"))
    with i18n.use_language("it"):
        error = i18n._("grading failed: {error}").format(error="RuntimeError: boom")
        empty = batch.find_submission(str(folder / "nobody"), "attention")[1]
        flag = i18n._("the submission {finding}").format(
            finding=evidence.kit_references(str(folder / "anna.py"))[0])
        anna = GradeReport("attention", {}, [], [flag]).to_json()
    log.append({"student": "anna", "report": anna, "cell_errors": [], "flags": [flag],
                "error": None, "seconds": 1.0})
    log.append({"student": "bruno", "report": zero_report(empty), "cell_errors": [],
                "flags": [], "error": empty, "seconds": 0.0})
    log.append({"student": "carla", "report": None, "cell_errors": [], "flags": [],
                "grading_error": True, "error": error, "seconds": 0.0})
    return log


def test_batch_summary_of_a_small_class_in_italian(tmp_path):
    """The summary the batch prints for an Italian course: its headings, flags, errors,
    the students with no submission and the grading errors, in Italian."""
    (tmp_path / "anna.py").write_text("import socket\n", encoding="utf-8")
    log = _records(tmp_path)
    printed = io.StringIO()
    with i18n.use_language("it"):
        summary = batch.summarise(log, ["anna", "bruno", "carla", "dario"], str(tmp_path),
                                  "attention", out=printed, absent={"dario"})
    out = printed.getvalue()
    assert "identificativi di errore / segnalazioni / errori" in out
    assert "SEGNALAZIONE: la consegna importa socket (il file)" in out
    assert ("errore: la cartella " in out and
            "non esiste" in out)  # bruno: no folder
    assert "ERRORE" in out and "errore: valutazione fallita: RuntimeError: boom" in out
    assert "non consegnato (nessuna cartella attention): nulla di registrato" in out
    assert "studenti per identificativo di errore:" in out
    assert ("1 studente con un errore di valutazione, nessun voto scritto (lancia di nuovo lo "
            "stesso comando per valutarlo): carla") in out
    assert summary["grading_errors"] == ["carla"]
    assert _english_in(out) == []


def test_the_jail_refuses_in_italian(tmp_path, monkeypatch, capsys):
    """No jail on this machine: the grader's one line, in the course's language."""
    path = tmp_path / "attention.py"
    path.write_text("def softmax(x, axis=-1):\n    return x\n", encoding="utf-8")
    monkeypatch.setattr(jail, "bwrap_path", lambda: None)
    monkeypatch.chdir(_italian_course(tmp_path))
    jail.problem.cache_clear()
    try:
        assert cli.main(["grade", str(path), "--only", "softmax", "--json"]) == 2
        error = json.loads(capsys.readouterr().out)["error"]
        assert error.startswith("bubblewrap (bwrap) non è installato: installa bubblewrap")
        assert "oppure, per codice di cui ti fidi, consenti la valutazione senza gabbia" in error
        assert _english_in(error) == []
        assert cli.main(["grade", str(path), "--only", "softmax", "--json",
                         "--language", "en"]) == 2
        assert "allow grading without the jail" in json.loads(capsys.readouterr().out)["error"]
    finally:
        jail.problem.cache_clear()


def test_grade_command_errors_in_italian(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(_italian_course(tmp_path))
    assert cli.main(["grade", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"errore: {tmp_path} è una cartella: indica un notebook o un file .py")
    assert cli.main(["grade", str(tmp_path / "none.ipynb")]) == 2
    assert capsys.readouterr().err == f"errore: {tmp_path / 'none.ipynb'}: il file non esiste\n"
    with pytest.raises(SystemExit) as done:
        cli.main(["grade"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("uso: python -m grader_tests grade [-h]")
    assert "python -m grader_tests grade: errore: " in err
    assert _english_in(err) == []


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=kit_env(), capture_output=True,
                          text=True, timeout=120)


# one command's help in the fast lane, the others (a process each) in the slow one
@pytest.mark.parametrize("command, expected", [
    pytest.param(["-m", "grader_tests", "--help"],
                 "Valuta una consegna di attention o di training.", id="grader_tests"),
    pytest.param(["-m", "grader_tests", "grade", "--help"], "stampa un solo oggetto JSON",
                 id="grade", marks=pytest.mark.slow),
    pytest.param(["-m", "grader_tests", "batch", "--help"], "dimentica il registro: valuta tutti",
                 id="batch", marks=pytest.mark.slow),
    pytest.param(["-m", "grader_tests", "dashboard", "--help"],
                 "la cartella del corso (predefinita: quella corrente)", id="dashboard",
                 marks=pytest.mark.slow),
    pytest.param([str(ROOT / "tools" / "unlock_training.py"), "--help"],
                 "solo il resoconto; non scrive nulla", id="unlock_training",
                 marks=pytest.mark.slow),
    pytest.param(["-m", "grader_tests", "unlock", "--help"],
                 "uso: python -m grader_tests unlock ", id="unlock", marks=pytest.mark.slow),
])
def test_command_help_in_an_italian_course(tmp_path, command, expected):
    """Each command's ``--help`` run from an Italian course folder: argparse's own words
    and every option's help from the catalogue; from an English course, the code's text."""
    done = _run(command, _italian_course(tmp_path))
    assert done.returncode == 0, done.stderr
    help_text = " ".join(done.stdout.split())  # argparse wraps at the terminal's width
    assert help_text.startswith("uso: ")
    assert "opzioni:" in help_text and "mostra questo aiuto ed esce" in help_text
    assert expected in help_text
    assert _english_in(help_text) == []
    english = _run(command, ROOT)
    assert english.returncode == 0 and english.stdout.startswith("usage: ")
    assert "show this help message and exit" in english.stdout


def test_usage_errors_of_the_unlock_command_in_italian(tmp_path):
    done = _run([str(ROOT / "tools" / "unlock_training.py"), "--threshold", "many"],
                _italian_course(tmp_path))
    assert done.returncode == 2
    assert "uso: unlock_training.py" in done.stderr
    assert ("unlock_training.py: errore: la soglia dev'essere 'full', un numero di punti o "
            "una percentuale: 'many'") in done.stderr
    assert _english_in(done.stderr) == []


def test_batch_setup_errors_in_italian(tmp_path):
    done = _run(["-m", "grader_tests", "batch", "submitted"], _italian_course(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("errore: submitted: la cartella non esiste (la cartella "
                                  "delle consegne degli studenti")
    assert _english_in(done.stderr) == []


@pytest.mark.slow  # nbgrader releases the assignment; the batch grades three students
@no_jail
def test_batch_of_an_italian_class(tmp_path):
    """``python -m grader_tests batch`` in an Italian course: a trap student, a student
    whose notebook is no notebook and one whose code reaches for the machine; the summary,
    the log's reports and the dashboard's notes in Italian, the grades as in English."""
    course = tmp_path / "course"
    import shutil

    shutil.copytree(ROOT / "source" / "attention", course / "source" / "attention")
    config = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    (course / "nbgrader_config.py").write_text(config + "\nc.AttentionKit.language = 'it'\n",
                                               encoding="utf-8")
    trap = "student_mask_after_softmax"
    shutil.copytree(EXAMPLE / "submitted" / trap, course / "submitted" / trap)
    broken = course / "submitted" / "rotto" / "attention"
    broken.mkdir(parents=True)
    (broken / "attention.ipynb").write_text("{not json", encoding="utf-8")
    curious = course / "submitted" / "curioso" / "attention"
    curious.mkdir(parents=True)
    nb = nbformat.read(str(EXAMPLE / "submitted" / "student_correct" / "attention" /
                            "attention.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import os\nos.getppid()"))
    nbformat.write(nb, str(curious / "attention.ipynb"))
    env = kit_env()
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment",
                           "attention", "--force"], cwd=course, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "1", "--summary-json", "summary.json"], cwd=course,
                          env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "identificativi di errore / segnalazioni / errori" in out
    # the cell the student added is named by the cell before it and its first line
    assert "SEGNALAZIONE: la consegna cerca il proprio processo padre (la cella dopo la " \
        "cella " in out and "che inizia con `import os`)" in out
    assert "non è un notebook leggibile (JSONDecodeError" in out
    assert "studenti per identificativo di errore:" in out
    assert "mask-after-softmax" in out
    assert "cruscotto: dashboard/attention/index.html" in out
    assert _english_in(out) == []
    summary = json.loads((course / "summary.json").read_text(encoding="utf-8"))
    scores = {r["student"]: r["score"] for r in summary["students"]}
    # an unreadable notebook is not graded (no 0 is recorded in its name), as on
    # nbgrader's own autograde path
    assert scores == {"curioso": pytest.approx(100.0), "rotto": None,
                      trap: pytest.approx(95.2)}
    assert "non valutato" in out
    log = Log(str(course / "batch_log.jsonl"))
    # the unreadable notebook's record keeps no report, only why, in Italian
    record = log.records["rotto"]
    assert record["report"] is None and record.get("unreadable")
    assert "non è un notebook leggibile (JSONDecodeError" in record["error"]
    assert _english_in(record["error"]) == []
    page = (course / "dashboard" / "attention" / "index.html").read_text(encoding="utf-8")
    assert "segnalazione: la consegna cerca il proprio processo padre" in page
    assert os.path.isfile(course / "gradebook.db")
