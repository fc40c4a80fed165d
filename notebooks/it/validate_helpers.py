## Il testo italiano di notebooks/validate_helpers.py (gli aiuti di Validate della cella di
## setup del notebook attention e del cancello del notebook training): lo stesso codice e le
## stesse stringhe, commenti e docstring in italiano. La build lo confronta con quello inglese
## (authoring/notebook_language.py, translated_code): modificateli insieme.
# I messaggi di queste celle nella lingua del corso: il catalogo kit_messages.mo che il kit
# mette accanto al notebook in un corso non in inglese (senza catalogo, i messaggi restano
# come sono scritti qui).
try:
    with open({{ kernel_catalogue }}, "rb") as _catalogue:
        MESSAGES = gettext.GNUTranslations(_catalogue)
except Exception:  # noqa: BLE001 (catalogo assente o non valido)
    MESSAGES = gettext.NullTranslations()


def tr(message, **fields):
    """``message`` nella lingua del corso, con i segnaposto ``{field}`` riempiti da ``fields``."""
    return MESSAGES.gettext(message).format(**fields)


# Com'è finita l'ultima esecuzione dei test visibili di ogni parte valutata, per nome: None
# se sono passati, altrimenti il messaggio con cui si sono fermati. Le celle di verifica
# (prima dei controlli nascosti) lo leggono, così Validate fallisce dove fallisce un test
# visibile.
VISIBLE_CHECKS = {}
# Il tipo di eccezione con cui si sono fermati, per nome (il NotImplementedError di uno stub,
# il NotAnswered di un esercizio), così il riepilogo distingue una parte non ancora scritta
# da una che fallisce.
VISIBLE_STOPPED_BY = {}
GRADED_PARTS = {{ graded_parts }}  # tutte le parti valutate, nell'ordine del notebook
# I moduli con cui il tuo notebook viene valutato: la libreria standard di Python e questi.
GRADING_MODULES = {{ grading_modules }}


# Le versioni di Python su cui i notebook sono provati e valutati (requirements-student.txt).
STUDENT_PYTHON = {{ student_python }}
_running = "%d.%d" % sys.version_info[:2]
if sys.version_info[:2] < tuple(int(part) for part in STUDENT_PYTHON[0].split(".")):
    raise RuntimeError(tr(
        "This kernel runs Python {running}; the course's notebooks need Python {supported}. "
        "Install requirements-student.txt in a Python {supported} environment and choose its "
        "kernel (Kernel > Change Kernel).", running=_running, supported=", ".join(STUDENT_PYTHON)))
if _running not in STUDENT_PYTHON:
    print(tr("Note: this kernel runs Python {running}, and your notebook is graded with Python "
             "{supported}: code that only a newer Python accepts (for example an f-string that "
             "reuses its own quotes, new in 3.12) is a syntax error when graded.",
             running=_running, supported=", ".join(STUDENT_PYTHON)), file=sys.stderr)


@contextlib.contextmanager
def time_limit(seconds, lesson=False):
    """Ferma il codice dentro il blocco ``with`` quando ha usato ``seconds`` di tempo di processore.

    Il tempo di processore del thread principale (dove il kernel del notebook esegue le tue
    celle), non quello dell'orologio: una macchina carica (altri programmi, gli altri utenti
    di un JupyterHub) rallenta il codice corretto senza fargli usare più tempo di
    processore, quindi non lo ferma per questo, mentre un ciclo che non finisce mai usa
    tempo di processore per tutto il tempo. Oltre il limite solleva TimeoutError; con
    ``lesson=True`` (le celle di *La lezione, dal vivo*, che non danno punti) stampa lo
    stesso messaggio e la cella finisce lì, così Run All arriva agli esercizi sotto. Agisce
    nel thread principale di un processo POSIX; altrove non fa nulla.
    """
    main = threading.main_thread()
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not main:
        yield
        return
    try:
        clock = time.pthread_getcpuclockid(main.ident)
    except (AttributeError, OSError):
        clock = time.CLOCK_PROCESS_CPUTIME_ID  # nessun orologio di un solo thread (macOS): quello del processo
    started = time.clock_gettime(clock)
    state = {"active": True, "fired": False}
    done = threading.Event()

    def watch():
        while not done.wait(0.05):
            if time.clock_gettime(clock) - started > seconds:
                state["fired"] = True
                signal.pthread_kill(main.ident, signal.SIGALRM)
                return

    def on_limit(signum, frame):
        if state["fired"] and state["active"]:
            state["active"] = False
            raise TimeoutError(tr(
                "this code used more than {seconds} s of processor time. If the machine is "
                "busy, run the cell again later; if it stops again, is there a loop that "
                "never ends?", seconds=seconds))
        if callable(previous):
            previous(signum, frame)  # l'allarme di un time_limit esterno

    previous = signal.signal(signal.SIGALRM, on_limit)
    watcher = threading.Thread(target=watch, name="time_limit", daemon=True)
    watcher.start()
    try:
        yield
    except TimeoutError as exc:
        if not (lesson and state["fired"]):
            raise
        print(tr("{error}\nThis lesson cell stopped there (it carries no points); the cells "
                 "below run as usual.", error=exc), file=sys.stderr)
    finally:
        state["active"] = False
        done.set()
        watcher.join()
        signal.signal(signal.SIGALRM, previous)


class NotAnswered(AssertionError):
    """Sollevata dai test visibili di un esercizio finché una delle sue risposte non è assegnata."""


@contextlib.contextmanager
def visible_checks(name, seconds=5):
    """Esegue un blocco di test visibili sotto ``time_limit(seconds)`` e registra in
    ``VISIBLE_CHECKS[name]`` se è passato (il messaggio di un controllo fallito una volta
    sola, con il nome dell'eccezione solo quando non è un AssertionError)."""
    __tracebackhide__ = True
    VISIBLE_CHECKS[name] = tr("they did not finish")
    VISIBLE_STOPPED_BY.pop(name, None)
    try:
        with time_limit(seconds):
            yield
    except BaseException as exc:
        said = str(exc).strip()
        VISIBLE_CHECKS[name] = said if isinstance(exc, AssertionError) and said else \
            f"{type(exc).__name__}: {exc}"
        VISIBLE_STOPPED_BY[name] = type(exc)
        raise
    VISIBLE_CHECKS[name] = None


def returned(value, name, *parts):
    """``value``, ciò che la funzione ``name`` ha restituito, come tupla di ``len(parts)``
    valori (``parts`` li nomina, ad es. ``"Y", "weights"``); solleva AssertionError, dicendo
    quale tupla ci si aspetta, quando è altro (un solo array, una tupla di altra lunghezza)."""
    __tracebackhide__ = True
    if isinstance(value, (tuple, list)) and len(value) == len(parts):
        return tuple(value)
    if isinstance(value, (tuple, list)):
        got = tr("a {kind} of {count} items", kind=type(value).__name__, count=len(value))
    elif isinstance(value, np.ndarray):
        got = tr("one array of shape {shape}", shape=value.shape)
    else:
        got = tr("a value of type {kind}", kind=type(value).__name__)
    raise AssertionError(tr("{name} must return a tuple of {count} items ({parts}), got {got}",
                            name=name, count=len(parts), parts=", ".join(parts), got=got))


def uses_checked(name, user):
    """Solleva AssertionError se i test visibili di ``name``, un'altra funzione valutata che
    i test visibili di ``user`` chiamano, non sono stati eseguiti o non sono passati: una
    differenza trovata attraverso ``name`` potrebbe altrimenti essere colpa sua e non di ``user``.
    Finché ``name`` è ancora lo stub, solleva invece NotImplementedError, come i suoi test."""
    __tracebackhide__ = True
    if name not in VISIBLE_CHECKS:
        raise AssertionError(tr(
            "these checks of {user} use your {name}, whose own visible checks have not run: "
            "run the visible-test cell of {name} first, then this cell again.",
            user=user, name=name))
    if VISIBLE_CHECKS[name] is not None and \
            issubclass(VISIBLE_STOPPED_BY.get(name, type(None)), NotImplementedError):
        raise NotImplementedError(tr(
            "these checks of {user} use your {name}, which is still the stub: write {name} "
            "first, then run this cell again.", user=user, name=name))
    if VISIBLE_CHECKS[name] is not None:
        raise AssertionError(tr(
            "these checks of {user} use your {name}, whose own visible checks fail: fix "
            "{name} first (its visible test says what is wrong), then run this cell again.",
            user=user, name=name))


def visible_checks_summary():
    """Stampa una riga per ogni parte valutata: test visibili superati, falliti, funzione
    ancora da scrivere, esercizio ancora senza risposta, oppure non eseguiti dopo la cella
    di setup."""
    def stopped_by(name, kind):
        return VISIBLE_CHECKS[name] is not None and \
            issubclass(VISIBLE_STOPPED_BY.get(name, type(None)), kind)

    stubs = [n for n in VISIBLE_CHECKS if stopped_by(n, NotImplementedError)]
    unanswered = [n for n in VISIBLE_CHECKS if stopped_by(n, NotAnswered)]
    failed = [n for n, failure in VISIBLE_CHECKS.items()
              if failure is not None and n not in stubs and n not in unanswered]
    passed = [n for n, failure in VISIBLE_CHECKS.items() if failure is None]
    not_run = [n for n in GRADED_PARTS if n not in VISIBLE_CHECKS]
    for label, names in ((tr("passed"), passed), (tr("fail"), failed),
                         (tr("still stubs"), stubs), (tr("not answered yet"), unanswered),
                         (tr("not run"), not_run)):
        print(tr("{label} ({count}): {names}", label=label, count=len(names),
                 names=", ".join(names) if names else "-"))


def _lines(text, width=80):
    """``text`` spezzato in righe di al più ``width`` caratteri (nbgrader validate taglia le
    righe più lunghe), ciascuna delle sue righe a capo per conto suo: le righe di una
    matrice stampata, più corte di ``width``, restano righe così come sono."""
    return "\n".join(part for line in str(text).splitlines() for part in (
        [line] if len(line) <= width else textwrap.wrap(line, width, break_long_words=False)))


def unavailable_modules(fn):
    """I moduli usati da ``fn`` (attraverso le variabili globali del notebook o un import nel
    suo corpo) che l'ambiente di valutazione non fornisce, in ordine alfabetico (la
    soluzione di riferimento del kit, che il cancello di training collega dal lato del
    docente, non conta)."""
    found, codes, seen = set(), [fn.__code__], set()
    while codes:
        code = codes.pop()
        if code in seen:
            continue
        seen.add(code)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        modules = [i.argval for i in dis.get_instructions(code) if i.opname == "IMPORT_NAME"]
        for global_name in code.co_names:
            value = globals().get(global_name)
            module = value.__name__ if isinstance(value, types.ModuleType) else \
                getattr(value, "__module__", None)
            # (una funzione il cui modulo non è mai stato importato è definita dal codice
            # di un notebook: così il cancello di training carica le funzioni di attention)
            if isinstance(module, str) and (isinstance(value, types.ModuleType)
                                            or module in sys.modules):
                modules.append(module)
        for module in modules:
            top = str(module).split(".")[0]
            if top and top not in sys.stdlib_module_names and top not in GRADING_MODULES \
                    and top not in ("__main__", "builtins", "solutions"):
                found.add(top)
    return sorted(found)


def before_grading(name, *args, answers=()):
    """Perché la parte ``name`` non può ancora passare, oppure None: una funzione mancante o
    ancora da scrivere, una che usa un modulo assente nell'ambiente di valutazione, una
    risposta di un esercizio non assegnata, oppure test visibili falliti (o non eseguiti)
    dopo la cella di setup.

    Per una funzione, ``args`` sono piccoli argomenti con cui chiamarla (è ancora da
    scrivere se solleva NotImplementedError; tutto il resto lo giudicano i controlli
    nascosti). Per un esercizio, ``answers`` elenca le sue variabili di risposta.
    """
    if not answers:
        fn = globals().get(name)
        if not callable(fn):
            return tr("{name} is not defined:", name=name) + "\n" + _lines(tr(
                "the notebook has no function named {name} (deleted or renamed?); names "
                "are case-sensitive.", name=name))
        quiet = io.StringIO()
        try:
            with time_limit(2), contextlib.redirect_stdout(quiet), \
                    contextlib.redirect_stderr(quiet), warnings.catch_warnings(), \
                    np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                fn(*args)
        except NotImplementedError:
            return tr("{name} is still the stub.", name=name)
        except BaseException:
            pass
        missing = unavailable_modules(fn)
        if missing:
            return (tr("{name} uses {modules}, missing when graded:", name=name,
                       modules=", ".join(missing)) + "\n" + _lines(tr(
                "the grading environment provides Python's standard library and "
                "{modules} only, so {name} would fail there.",
                modules=", ".join(GRADING_MODULES), name=name)))
    else:
        missing = [v for v in answers if v not in globals()]
        if missing:
            return tr("{name}: not answered yet.", name=name) + "\n" + _lines(
                tr("Assign {names} in the answer cell.", names=", ".join(missing)))
    if name not in VISIBLE_CHECKS:
        return tr("the visible checks of {name} have not run:", name=name) + "\n" + _lines(
            tr("run the notebook from the top (Kernel > Restart Kernel and Run All Cells)."))
    if VISIBLE_CHECKS[name] is not None:
        return (tr("the visible checks of {name} fail:", name=name) + "\n"
                + _lines(VISIBLE_CHECKS[name]))
    return None
