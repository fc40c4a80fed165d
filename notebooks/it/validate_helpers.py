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
GRADED_PARTS = {{ graded_parts }}  # tutte le parti valutate, nell'ordine del notebook
# I moduli con cui il tuo notebook viene valutato: la libreria standard di Python e questi.
GRADING_MODULES = {{ grading_modules }}


@contextlib.contextmanager
def visible_checks(name, seconds=5):
    """Esegue un blocco di test visibili sotto ``time_limit(seconds)``, registra in
    ``VISIBLE_CHECKS[name]`` se è passato e, in quel caso, lo stampa."""
    __tracebackhide__ = True
    VISIBLE_CHECKS[name] = tr("they did not finish")
    try:
        with time_limit(seconds):
            yield
    except BaseException as exc:
        VISIBLE_CHECKS[name] = f"{type(exc).__name__}: {exc}"
        raise
    VISIBLE_CHECKS[name] = None


def visible_checks_summary():
    """Stampa una riga per ogni parte valutata: test visibili superati, falliti, funzione
    ancora da scrivere, oppure non eseguiti dopo la cella di setup."""
    stubs = [n for n, failure in VISIBLE_CHECKS.items()
             if failure is not None and failure.startswith("NotImplementedError")]
    failed = [n for n, failure in VISIBLE_CHECKS.items()
              if failure is not None and n not in stubs]
    passed = [n for n, failure in VISIBLE_CHECKS.items() if failure is None]
    not_run = [n for n in GRADED_PARTS if n not in VISIBLE_CHECKS]
    for label, names in ((tr("passed"), passed), (tr("fail"), failed),
                         (tr("still stubs"), stubs), (tr("not run"), not_run)):
        print(tr("{label} ({count}): {names}", label=label, count=len(names),
                 names=", ".join(names) if names else "-"))


def _lines(text, width=80):
    """``text`` spezzato in righe di al più ``width`` caratteri (nbgrader validate taglia le
    righe più lunghe)."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=False))


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
