## Il testo italiano di notebooks/gate.py, la prima cella del notebook training (il
## cancello): lo stesso codice e le stesse stringhe, commenti e docstring in italiano. La
## build lo confronta con quello inglese (authoring/notebook_language.py, translated_code):
## modificateli insieme.
"""IL CANCELLO. Esegui per prima questa cella e non modificarla (quando il notebook viene
valutato, la cella torna quella originale).

Questo compito addestra un modello costruito con le funzioni che hai scritto nel compito
`attention`. Una passata all'indietro sbagliata non farebbe fallire l'addestramento: darebbe
in silenzio un modello peggiore. Per questo il docente te lo distribuisce quando il tuo
notebook attention è stato valutato.

La cella carica le tue funzioni dal tuo notebook attention, per default
`../attention/attention.ipynb` (la cartella `attention` accanto a questa cartella
`training`; per un altro percorso imposta la variabile d'ambiente ATTENTION_NOTEBOOK) ed
esegue su di esse i controlli visibili di quel notebook. Se il docente te lo ha distribuito
(il file released.json accanto a questo notebook), il cancello si apre ed elenca i controlli
visibili che ancora falliscono; senza quella decisione si apre solo quando tutti i controlli
visibili passano, altrimenti si ferma con l'elenco delle funzioni da correggere. Ogni cella
successiva che usa le tue funzioni comincia con `require_gate()`.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # un thread BLAS per processo: gli addestramenti usano un processo per core

import contextlib
import dis
import gettext
import hashlib
import io
import json
import math
import signal
import sys
import textwrap
import threading
import time
import types
import warnings
from pathlib import Path

import numpy as np

NOTEBOOK_STARTED = time.perf_counter()  # l'ultima cella dice quanto tempo ha richiesto il notebook
ATTENTION_FUNCTIONS = __FUNCTIONS__
# SHA-256 della cella di setup e delle celle di test visibili distribuite del notebook attention.
_RELEASED_CELLS = __HASHES__


class GateClosed(Exception):
    """Sollevata finché le funzioni di attenzione non hanno superato i loro controlli visibili."""


# La decisione del docente, scritta accanto a questo notebook quando ti viene distribuito
# training (la scrive con questo nome il passo di sblocco del corso).
RELEASE_DECISION = "released.json"


def release_decision():
    """La decisione del docente registrata quando ti è stato distribuito training (un dict con
    la soglia e il tuo punteggio di attention), oppure None dove non c'è (il notebook del
    docente, o una cartella training distribuita in altro modo)."""
    try:
        decision = json.loads(Path(RELEASE_DECISION).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return decision if isinstance(decision, dict) and decision.get("released") is True else None


def require_implemented(fn, *args):
    """Solleva NotImplementedError finché ``fn`` è ancora da scrivere; tutto il resto che fa
    su ``args`` lo giudicano i controlli nascosti."""
    quiet = io.StringIO()
    try:
        with time_limit(2), contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), \
                warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            fn(*args)
    except NotImplementedError:
        raise
    except BaseException:
        pass


def _gate_run():
    """Carica, controlla e riferisce; restituisce (aperto, resoconto, funzioni)."""
    def fingerprint(source):
        return hashlib.sha256(source.strip().replace("\r\n", "\n").encode("utf-8")).hexdigest()

    def first_line(exc):
        text = f"{type(exc).__name__}: {exc}".strip()
        return text if len(text) <= 400 else text[:400] + " ..."

    where = os.environ.get("ATTENTION_NOTEBOOK", "").strip()
    path = Path(where).expanduser() if where else Path("..") / "attention" / "attention.ipynb"
    if not path.is_file():
        # Mai le funzioni di qualcun altro (nemmeno la soluzione del kit, dove è installata):
        # il cancello si apre sul notebook attention dello studente, o resta chiuso.
        told = (tr("the path in ATTENTION_NOTEBOOK") if where
                else tr("the attention folder next to this training folder"))
        return False, tr(
            "The gate is closed: it could not find your attention notebook ({told}):\n"
            "  {path}\n"
            "Fetch or put your attention folder next to this training folder (the two assignments side\n"
            "by side: attention/attention.ipynb and training/training.ipynb, as nbgrader fetches them),\n"
            "or tell the gate where your attention.ipynb is: run, in a new cell,\n"
            "    %env ATTENTION_NOTEBOOK=/path/to/your/attention.ipynb\n"
            "then run this cell again.", told=told, path=path.resolve()), {}

    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = {}
        for cell in notebook.get("cells", []):
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            source = cell.get("source", "")
            if grade_id and cell.get("cell_type") == "code":
                cells[grade_id] = "".join(source) if isinstance(source, list) else source
    except (OSError, ValueError, AttributeError) as exc:
        return False, tr("The gate could not read {path}: {error}", path=path,
                         error=first_line(exc)), {}

    tampered = [grade_id for grade_id, digest in _RELEASED_CELLS.items()
                if grade_id not in cells or fingerprint(cells[grade_id]) != digest]
    if tampered:
        return False, tr(
            "In {path}, these locked cells are missing or differ from the released notebook:\n  {cells}\n"
            "The gate runs the visible checks exactly as they were released. Restore those cells\n"
            "(copy them from a fresh copy of the released attention notebook), save, and run this cell again.",
            path=path, cells=", ".join(tampered)), {}

    namespace = {"__name__": "attention_notebook"}
    failures = {}
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with time_limit(60):
                exec(compile(cells["setup"], f"{path.name}: setup", "exec"), namespace)
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            return False, tr("The setup cell of {path} failed: {error}", path=path,
                             error=first_line(exc)), {}
        for name in ATTENTION_FUNCTIONS:
            source = cells.get(f"{name}_solution")
            if source is None:
                failures[name] = tr("its cell ({cell}) is missing from the notebook",
                                    cell=name + "_solution")
                continue
            try:
                with time_limit(30):
                    exec(compile(source, f"{path.name}: {name}_solution", "exec"), namespace)
            except (Exception, SystemExit) as exc:  # noqa: BLE001
                failures[name] = tr("running its cell raised {error}", error=first_line(exc))
        for name in ATTENTION_FUNCTIONS:
            if name in failures:
                continue
            try:
                with time_limit(60):
                    exec(compile(cells[f"{name}_visible_test"], f"{path.name}: {name}_visible_test",
                                 "exec"), dict(namespace))
            except (Exception, SystemExit) as exc:  # noqa: BLE001
                failures[name] = first_line(exc)
    # Distribuito dal docente, il cancello è la decisione del docente: un controllo visibile
    # che ancora fallisce viene segnalato e l'addestramento usa le funzioni così come sono (una
    # funzione non definita affatto lo tiene chiuso: non c'è niente con cui addestrare).
    decision = release_decision()
    lines = [f"  - {name}: {message}" for name, message in failures.items()]
    if failures and (decision is None or any(name not in namespace for name in failures)):
        return False, tr(
            "The training assignment opens when your attention functions pass their visible checks.\n"
            "In {path}, {failed} of {total} do not:\n{lines}\n"
            "Fix them in your attention notebook (the visible test under each function explains what\n"
            "is wrong), save it, and run this cell again.", path=path, failed=len(failures),
            total=len(ATTENTION_FUNCTIONS), lines="\n".join(lines)), {}
    functions = {name: namespace[name] for name in ATTENTION_FUNCTIONS}
    marker = "### BEGIN " + "SOLUTION"
    whose = (tr("the instructor's source notebook (the reference solution)")
             if any(marker in cells.get(f"{n}_solution", "") for n in ATTENTION_FUNCTIONS)
             else tr("your notebook"))
    if decision is None:
        return True, tr("Gate open: the {count} attention functions of {whose}, {path},\n"
                        "pass their visible checks and are now defined here.", count=len(functions),
                        whose=whose, path=path), functions
    report = tr("Gate open: the instructor released training to {student} (attention at {threshold}).\n"
                "The {count} attention functions of {whose}, {path}, are now defined here.",
                student=decision.get("student", "?"), threshold=decision.get("threshold", "?"),
                count=len(functions), whose=whose, path=path)
    if failures:
        report += "\n" + tr("These still fail a visible check, and the training uses them as they are:\n"
                            "{lines}", lines="\n".join(lines))
    return True, report, functions


__VALIDATE_HELPERS__


_gate = types.SimpleNamespace(open=False, report=tr("the gate cell has not finished"), functions={})
_gate.open, _gate.report, _gate.functions = _gate_run()
globals().update(_gate.functions)


def require_gate():
    """Solleva GateClosed a meno che la cella del cancello sia stata eseguita e superata, e
    le funzioni di attenzione che ha controllato siano ancora quelle definite in questo
    notebook."""
    if not _gate.open:
        raise GateClosed(tr("run the first cell of this notebook (the gate) and make it pass:")
                         + "\n" + _gate.report)
    changed = [name for name, fn in _gate.functions.items() if globals().get(name) is not fn]
    if changed:
        raise GateClosed(tr("{names} changed after the gate checked them: fix them in your "
                            "attention notebook, not here, and run the gate cell again.",
                            names=", ".join(changed)))


# Chiuso, il rapporto è il messaggio dell'eccezione, mostrato una volta sola (non anche stampato).
if not _gate.open:
    raise GateClosed(_gate.report)
print(_gate.report)
