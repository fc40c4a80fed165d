# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Compito `attention`: attenzione a prodotto scalare scalato e blocco Transformer, in NumPy
#
# In questo compito scrivi, in NumPy puro, ogni pezzo del percorso dell'attenzione di un
# Transformer: una softmax che non può andare in overflow, la maschera causale e quella di
# padding, l'attenzione a prodotto scalare scalato, la divisione e la riunione delle teste,
# l'attenzione multi-testa, le posizioni sinusoidali, la layer norm in avanti e all'indietro,
# uno strato di self-attention con la passata all'indietro scritta a mano, e le due formule
# che dimensionano un modello (parametri per blocco, memoria della cache chiave-valore). Due
# esercizi carta e penna trasformano le formule in numeri. Superato questo compito si apre il
# compito `training`: allenerai un piccolo decoder costruito con queste funzioni a copiare e a
# ordinare sequenze.
#
# Il compito segue la lezione 95 di un corso italiano di machine learning, *L'attenzione,
# derivata per intero: query, chiave, valore e il blocco Transformer scritto da zero*
# ([federicocalo.dev](https://federicocalo.dev)): quando una cella dice "la lezione", intende
# quell'articolo, le sue figure e la sua notazione.
#
# **Prima di cominciare** installa ciò che usano questo notebook e i suoi controlli,
# nell'ambiente in cui gira Jupyter: {{ student_install }} (JupyterLab, NumPy, matplotlib,
# nbgrader e rich, nelle versioni usate dai correttori; il `requirements-student.txt` del corso
# dice lo stesso), poi avvia `jupyter lab`. nbgrader ti dà la scheda *Assignments* e il pulsante
# **Validate**.
#
# ### Convenzioni
#
# Le lettere delle forme, usate in ogni docstring e commento:
#
# | lettera | significato |
# |---|---|
# | `B` | dimensione del batch (numero di sequenze) |
# | `T` | lunghezza della sequenza; `T_q` query, `T_k` chiavi (e valori) |
# | `d` | larghezza del modello |
# | `h` | numero di teste (`n_heads`) |
# | `d_h` | larghezza di una testa, `d // h` |
# | `d_k`, `d_v` | larghezza di chiavi (e query), larghezza dei valori |
#
# * I vettori sono **righe** e i pesi moltiplicano a destra: una proiezione è `x @ W + b` con
#   `W` di forma `(d_in, d_out)`.
# * Le maschere sono array booleani e **`True` vuol dire "può prestare attenzione" / "token
#   vero"**. È la convenzione dell'`attn_mask` booleana di
#   `torch.nn.functional.scaled_dot_product_attention`; la `key_padding_mask` di
#   `torch.nn.MultiheadAttention` usa quella opposta: attenzione quando confronti con codice
#   PyTorch.
# * Le tue funzioni non modificano mai i loro argomenti, accettano float32 e float64 e
#   restituiscono il tipo risultante dei loro input in virgola mobile (float32 in ingresso,
#   float32 in uscita). Dove una forma comincia con `...`, deve funzionare con un numero
#   qualsiasi di assi di batch iniziali.
# * Bastano NumPy e `math`, importati entrambi dalla cella di setup. Il notebook è corretto
#   con la sola libreria standard di Python e {{ allowed_modules }}: una funzione che usa un
#   altro modulo (SciPy, PyTorch...) fallisce alla correzione, e Validate lo segnala.
#
# ### Come lavorare
#
# 1. Esegui per prima la cella di setup qui sotto. Importa NumPy e definisce `time_limit` (i
#    test la usano perché un ciclo infinito si fermi con un `TimeoutError` invece di bloccare
#    il notebook) e due funzioni per i controlli dei gradienti, `rel_error` e
#    `numerical_gradient`.
# 2. Per ogni funzione: leggi il testo, sostituisci la riga `raise NotImplementedError()` nella
#    cella della funzione con il tuo codice (lascia firma e docstring), esegui la cella, poi
#    esegui la cella del test visibile sotto di essa. Stampa `<name>: controlli visibili superati`,
#    oppure si ferma con un messaggio che dice quale proprietà è fallita, su quale input, che
#    cosa ci si aspettava e a quale trappola somiglia.
# 3. I test visibili sono un campione. Quando il notebook viene corretto, i controlli nascosti
#    verificano di più: forme casuali, input float32, argomenti lasciati intatti, le trappole
#    elencate sotto, e un limite di tempo di pochi secondi per controllo. Un errore costa solo
#    i punti della funzione che lo contiene: quando una funzione corretta ne chiama un'altra
#    (l'attenzione chiama la softmax), i correttori le passano la versione di riferimento
#    della funzione chiamata. Ogni controllo fallito nomina un difetto (per esempio
#    `mask-after-softmax`) e lo spiega nel feedback.
# 4. Le celle intitolate *La lezione, dal vivo* eseguono le tue funzioni per misurare ciò che
#    il testo afferma. Non danno punti, e si fermano con `NotImplementedError` finché le
#    funzioni che usano non sono scritte.
# 5. Non modificare le celle bloccate (vengono comunque corrette nella loro forma originale) e
#    non rinominare le funzioni. Prima di consegnare: *Kernel → Restart Kernel and Run All
#    Cells*, controlla che ogni test visibile passi, poi premi **Validate** (oppure esegui
#    `nbgrader validate attention.ipynb`).
#
# ### Le trappole
#
# Nessuna solleva un'eccezione; ognuna produce numeri plausibili. I test visibili e i
# correttori le nominano quando le riconoscono.
#
# 1. Niente $1/\sqrt{d_k}$: la softmax si satura e i gradienti svaniscono per $d_k$ grande.
# 2. Maschera applicata dopo la softmax: le righe dei pesi non sommano più a 1.
# 3. Reshape e trasposizione nell'ordine sbagliato quando si dividono o riuniscono le teste: forma giusta, teste mescolate.
# 4. Padding lasciato fuori dalla softmax: i risultati dipendono da come il batch è stato riempito o ordinato.
# 5. Maschera causale e maschera di padding scambiate, trasposte o combinate sull'asse sbagliato.
# 6. Softmax sull'asse delle query (`axis=-2`) invece che sulle chiavi.
# 7. Nessuna informazione di posizione: un modello non sa dove si trova un token (nel compito training, l'accuratezza per sequenza sul compito di copia scende da 1.000 a 0.204).
# 8. Un controllo del gradiente con un $\varepsilon$ troppo grande: il controllo peggiora al crescere di $\varepsilon$.
# 9. Mappe di attenzione lette come spiegazioni: i pesi sono una variabile interna del modello, non il resoconto del perché ha risposto così.
#
# ### Punti
#
# {{ points_table }}

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false} tags=["setup"]
"""Setup: gli import e gli aiuti usati dai test. Esegui per prima questa cella."""
import contextlib
import dis
import gettext
import io
import math
import signal
import sys
import textwrap
import threading
import time
import types
import warnings

import numpy as np


def rel_error(analytic, numeric, floor=1e-6):
    """Il peggior errore relativo ``|a - n| / max(|a|, |n|)`` sulle coordinate in cui
    ``max(|a|, |n|) > floor``; 0.0 se non ce n'è nessuna, inf se ``analytic`` non è finito."""
    a = np.asarray(analytic, dtype=np.float64)
    n = np.asarray(numeric, dtype=np.float64)
    if a.shape != n.shape:
        raise ValueError(f"gradient of shape {a.shape}, expected {n.shape}")
    if not np.all(np.isfinite(a)):
        return math.inf
    size = np.maximum(np.abs(a), np.abs(n))
    keep = size > floor
    if not np.any(keep):
        return 0.0
    return float(np.max(np.abs(a - n)[keep] / size[keep]))


# {{ validate_helpers }}


def numerical_gradient(loss, x, eps=1e-6):
    """Differenze centrali ``(loss() in x + eps e_i - loss() in x - eps e_i) / (2 eps)`` per
    ogni coordinata i dell'array float64 ``x``, che ``loss()`` legge; ``x`` cambia durante la
    chiamata e viene poi ripristinato esattamente."""
    grad = np.zeros(x.shape, dtype=np.float64)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = loss()
        x[i] = old - eps
        down = loss()
        x[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_figures_text", "locked": true, "schema_version": 3, "solution": false}
# ### Figure
#
# Le celle di *La lezione, dal vivo* che disegnano figure usano matplotlib attraverso la
# funzione `show` definita qui sotto. Esegui questa cella una volta, dopo la cella di setup.

# %% nbgrader={"grade": false, "grade_id": "lesson_figures", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: show(figure) disegna una figura matplotlib come immagine PNG sotto la cella."""
import matplotlib

matplotlib.use("Agg")  # disegnate in PNG e mostrate come immagini: uguali in JupyterLab, Validate e feedback
import matplotlib.pyplot as plt
from IPython.display import Image, display


def show(figure):
    """Mostra ``figure`` come immagine PNG sotto la cella, poi la chiude."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    display(Image(data=buffer.getvalue(), format="png"))


# %% [markdown] nbgrader={"grade": false, "grade_id": "softmax_text", "locked": true, "schema_version": 3, "solution": false}
# ## 1. `softmax` ({{ points: softmax }})
#
# L'attenzione confronta una query con ogni chiave, ottiene un punteggio per chiave e
# trasforma la riga di punteggi $s_1, \dots, s_n$ in pesi positivi che sommano a 1:
#
# $$\operatorname{softmax}(s)_j = \frac{e^{s_j}}{\sum_{k=1}^{n} e^{s_k}}.$$
#
# **Stabilità.** Moltiplicare numeratore e denominatore per $e^{-m}$ non cambia nulla, quindi
# per ogni costante $m$
#
# $$\operatorname{softmax}(s)_j = \frac{e^{s_j - m}}{\sum_{k} e^{s_k - m}}.$$
#
# Scegli $m = \max_k s_k$: ogni esponente è allora al più 0, nessun termine va in overflow e il
# denominatore vale almeno 1. Senza questo accorgimento `np.exp(1000.0)` dà `inf` e i pesi
# diventano `inf / inf = nan`, con un semplice avviso e nient'altro.
#
# **Punteggi mascherati.** Una chiave che una query non deve vedere riceve il punteggio
# $-\infty$; poiché $e^{-\infty} = 0$, il suo peso è esattamente 0. Quando un'intera riga vale
# $-\infty$ (una query che non può guardare niente, caso che il padding può produrre), il
# massimo stesso è $-\infty$ e $s_j - m = -\infty - (-\infty)$ è NaN. Il contratto chiede invece
# una riga di zeri: usa 0 al posto di un massimo non finito, e dividi solo dove la somma è
# positiva (`np.divide` accetta `out=` e `where=`).
#
# **L'asse.** I pesi di una query si normalizzano sulle chiavi, cioè sull'ultimo asse di un
# array di punteggi di forma `(..., T_q, T_k)`. Normalizzare su `axis=-2` (le query) gira senza
# errori e dà pesi sbagliati (trappola 6). La tua funzione riceve l'asse come argomento;
# l'attenzione usa quello predefinito, `-1`.
#
# **Contratto.** `softmax(scores, axis=-1)` accetta qualsiasi forma e restituisce la stessa
# forma e lo stesso dtype; punteggi finiti di modulo $10^4$ e oltre non devono andare in
# overflow.

# %% nbgrader={"grade": false, "grade_id": "softmax_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: softmax }}

# %% nbgrader={"grade": false, "grade_id": "softmax_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di softmax: un esempio svolto, punteggi enormi, valori -inf, l'asse, il dtype."""
with visible_checks("softmax", 5):
    p = softmax(np.array([0.0, math.log(3.0)]))
    assert np.shape(p) == (2,), tr("softmax of 2 scores must return 2 weights (shape (2,)), got shape {shape}", shape=np.shape(p))
    assert np.allclose(p, [0.25, 0.75]), (
        tr("softmax([0, ln 3]) should be [0.25, 0.75] (e^0 = 1 and e^ln3 = 3, each divided by 1 + "
            "3), got {p}",
            p=p))

    p = softmax(np.array([1000.0, 1000.0 + math.log(3.0)]))
    assert np.all(np.isfinite(p)) and np.allclose(p, [0.25, 0.75]), (
        tr("softmax([1000, 1000 + ln 3]) should again be [0.25, 0.75], since adding the same number "
            "to every score changes nothing; got {p}. np.exp(1000.0) overflows to inf and inf / inf "
            "is nan: re-read *Stability* above.",
            p=p))

    p = softmax(np.array([0.0, -np.inf, math.log(3.0)]))
    assert np.allclose(p, [0.25, 0.0, 0.75]), (
        tr("softmax([0, -inf, ln 3]) should be [0.25, 0, 0.75]: a score of -inf (a masked key) gets "
            "weight exactly 0 and the others are unchanged; got {p}",
            p=p))

    S = np.array([[0.0, math.log(3.0)], [0.0, 0.0]])
    rows = softmax(S)
    assert np.allclose(rows, [[0.25, 0.75], [0.5, 0.5]]), (
        tr("softmax(S) must normalise each row (the last axis: the keys). For S = [[0, ln 3], [0, "
            "0]] the answer is [[0.25, 0.75], [0.5, 0.5]], got {rows}. If the columns sum to 1 "
            "instead, you normalised over axis 0, the queries (trap 6).",
            rows=np.asarray(rows).tolist()))
    cols = softmax(S, axis=0)
    assert np.allclose(cols, [[0.5, 0.75], [0.5, 0.25]]), (
        tr("softmax(S, axis=0) must normalise each column: for S = [[0, ln 3], [0, 0]] the answer "
            "is [[0.5, 0.75], [0.5, 0.25]], got {cols}. Is the axis argument ignored?",
            cols=np.asarray(cols).tolist()))

    p = softmax(np.array([[-np.inf, -np.inf, -np.inf], [0.0, 0.0, 0.0]]))
    assert not np.any(np.isnan(p)), (
        tr("a row of scores that are all -inf (a query that may attend to nothing) must give "
            "weights 0, not NaN; got {p}. The maximum of that row is -inf, and -inf - (-inf) is nan; "
            "with 0 in its place, the row's sum is 0, and 0 / 0 is nan too: re-read the rule for a "
            "row with no allowed key above.",
            p=p.tolist()))
    assert np.allclose(p, [[0.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]]), (
        tr("softmax([[-inf, -inf, -inf], [0, 0, 0]]) should be [[0, 0, 0], [1/3, 1/3, 1/3]], got {p}", p=p.tolist()))

    p = softmax(np.zeros((2, 3, 4), dtype=np.float32))
    assert p.shape == (2, 3, 4), tr("scores of shape (2, 3, 4) must give weights of shape (2, 3, 4), got {shape}", shape=p.shape)
    assert p.dtype == np.float32, tr("float32 scores must give float32 weights, got {dtype}", dtype=p.dtype)
    assert np.allclose(p, 0.25), tr("equal scores over 4 keys must give weights 0.25 each")
print(tr("{name}: visible checks passed", name='softmax'))

# %% nbgrader={"grade": true, "grade_id": "softmax_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di softmax girano quando il tuo notebook viene valutato.
problem = before_grading("softmax", np.zeros((2, 3)))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("softmax", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "causal_mask_text", "locked": true, "schema_version": 3, "solution": false}
# ## 2. `causal_mask` ({{ points: causal_mask }})
#
# Un decoder predice il token $t + 1$ dai token $0, \dots, t$. In addestramento tutte le
# posizioni si calcolano insieme, quindi qualcosa deve impedire alla posizione $i$ di leggere
# le posizioni che la seguono. È la maschera causale (che non guarda avanti):
#
# $$M_{ij} = \begin{cases} \text{True} & \text{se } j \le i \quad\text{(la chiave } j \text{ è nel passato della query } i \text{ o è } i\text{)}\\ \text{False} & \text{se } j > i. \end{cases}$$
#
# Le righe sono le query, le colonne le chiavi. Per $T = 4$ (1 per True):
#
# $$M = \begin{pmatrix} 1 & 0 & 0 & 0 \\ 1 & 1 & 0 & 0 \\ 1 & 1 & 1 & 0 \\ 1 & 1 & 1 & 1 \end{pmatrix}$$
#
# Dipende solo dalle posizioni, mai dal contenuto, quindi un solo array `(T, T)` serve per
# tutte le sequenze di un batch. La sua trasposta ha la stessa forma e lascia a ogni query la
# vista del futuro e niente del suo passato; nessun errore viene sollevato (trappola 5).
# Restituisci un array booleano.

# %% nbgrader={"grade": false, "grade_id": "causal_mask_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: causal_mask }}

# %% nbgrader={"grade": false, "grade_id": "causal_mask_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di causal_mask: dtype, forma e triangolo inferiore."""
with visible_checks("causal_mask", 5):
    m = causal_mask(3)
    expected = np.array([[True, False, False],
                         [True, True, False],
                         [True, True, True]])
    assert isinstance(m, np.ndarray), tr("causal_mask must return a NumPy array, got {type}", type=type(m).__name__)
    assert m.shape == (3, 3), tr("causal_mask(3) must have shape (3, 3), got {shape}", shape=m.shape)
    assert m.dtype == bool, tr("causal_mask must return a boolean array, got dtype {dtype}", dtype=m.dtype)
    if not np.array_equal(m, expected):
        if np.array_equal(m, expected.T):  # un suggerimento solo per l'output che spiega
            hint = tr("This is the transpose: each query sees the future instead of the past (trap 5).")
        elif np.array_equal(m, ~expected):
            hint = tr("True and False are swapped: the mask was read as True = blocked, while here "
                      "True means 'may attend'.")
        elif np.array_equal(m, np.tril(expected, -1)):
            hint = tr("The diagonal is False: a token must be allowed to attend to itself.")
        else:
            hint = ""
        raise AssertionError(
            tr("causal_mask(3) should be\n{expected}\n(row i = query i may see keys j <= i), got\n{m}",
               expected=expected, m=m) + ("\n" + hint if hint else ""))
    assert causal_mask(1).tolist() == [[True]], tr("causal_mask(1) should be [[True]]: a token sees itself")
print(tr("{name}: visible checks passed", name='causal_mask'))

# %% nbgrader={"grade": true, "grade_id": "causal_mask_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di causal_mask girano quando il tuo notebook viene valutato.
problem = before_grading("causal_mask", 3)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("causal_mask", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "padding_mask_text", "locked": true, "schema_version": 3, "solution": false}
# ## 3. `padding_mask` ({{ points: padding_mask }})
#
# Le sequenze di un batch raramente hanno la stessa lunghezza: le più corte vengono
# riempite fino a una lunghezza comune $T$ con token di riempimento, e il riempimento non deve
# influenzare i token veri. Con $\ell_b$ la lunghezza effettiva della sequenza $b$,
#
# $$M_{bt} = (t < \ell_b), \qquad M \in \{\text{True}, \text{False}\}^{B \times T}.$$
#
# A differenza della maschera causale, dipende dal contenuto del batch (le sue lunghezze), e
# agisce sulle **chiavi**: nessuna query può guardare una chiave di riempimento. Le uscite
# nelle posizioni di riempimento delle query vengono calcolate comunque e la loss le ignora.
# Se il padding resta fuori dalla softmax, l'uscita di un token vero cambia con ciò che
# contiene il riempimento e con il modo in cui il batch è stato riempito (trappola 4).
#
# `lengths` può essere una lista o un array, e una lunghezza può valere 0 (una sequenza senza
# alcun token vero).

# %% nbgrader={"grade": false, "grade_id": "padding_mask_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: padding_mask }}

# %% nbgrader={"grade": false, "grade_id": "padding_mask_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di padding_mask: dtype, forma, lunghezze date come lista o come array."""
with visible_checks("padding_mask", 5):
    m = padding_mask([2, 0, 3], 3)
    expected = np.array([[True, True, False],
                         [False, False, False],
                         [True, True, True]])
    assert isinstance(m, np.ndarray), tr("padding_mask must return a NumPy array, got {type}", type=type(m).__name__)
    assert m.shape == (3, 3), tr("padding_mask([2, 0, 3], T=3) must have shape (B, T) = (3, 3), got {shape}", shape=m.shape)
    assert m.dtype == bool, tr("padding_mask must return a boolean array, got dtype {dtype}", dtype=m.dtype)
    if not np.array_equal(m, expected):
        if np.array_equal(m, ~expected):  # un suggerimento solo per l'output che spiega
            hint = tr("True and False are swapped: the mask was read as True = padded, while here "
                      "True means 'real token'.")
        elif np.array_equal(m, np.arange(3)[None, :] <= np.array([2, 0, 3])[:, None]):
            hint = tr("t <= lengths[b] marks the first padded position as a real token; the real "
                      "tokens are t < lengths[b].")
        else:
            hint = ""
        raise AssertionError(
            tr("padding_mask([2, 0, 3], 3) should be\n{expected}\n([b, t] True iff t < lengths[b]), "
               "got\n{m}", expected=expected, m=m) + ("\n" + hint if hint else ""))
    m = padding_mask(np.array([1, 4]), 4)
    assert np.array_equal(m, [[True, False, False, False], [True, True, True, True]]), (
        tr("padding_mask(np.array([1, 4]), 4) should be [[T, F, F, F], [T, T, T, T]], got\n{m}", m=m))
print(tr("{name}: visible checks passed", name='padding_mask'))

# %% nbgrader={"grade": true, "grade_id": "padding_mask_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di padding_mask girano quando il tuo notebook viene valutato.
problem = before_grading("padding_mask", [1, 2], 3)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("padding_mask", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "combine_masks_text", "locked": true, "schema_version": 3, "solution": false}
# ## 4. `combine_masks` ({{ points: combine_masks }})
#
# Un decoder addestrato su un batch con padding ha bisogno di entrambe le maschere: la query
# $i$ della sequenza $b$ può guardare la chiave $j$ se e solo se $j \le i$ **e** la chiave $j$ è
# un token vero,
#
# $$M_{bij} = C_{ij} \wedge P_{bj}.$$
#
# La maschera causale `(T, T)` e quella di padding `(B, T)` si estendono per broadcasting a
# `(B, T, T)` una volta inseriti gli assi mancanti nei punti giusti: il padding deve allinearsi
# con l'**ultimo** asse, le chiavi. Allinearlo con l'asse centrale (le query) dà la stessa forma
# e blocca le voci sbagliate (trappola 5). Per una sequenza di lunghezza 0 ogni riga della sua
# maschera è False: è lì che serve la regola della softmax per le righe tutte a $-\infty$.

# %% nbgrader={"grade": false, "grade_id": "combine_masks_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: combine_masks }}

# %% nbgrader={"grade": false, "grade_id": "combine_masks_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di combine_masks: forma (B, T, T), AND, padding sulle chiavi."""
with visible_checks("combine_masks", 5):
    causal = np.array([[True, False, False],
                       [True, True, False],
                       [True, True, True]])
    padding = np.array([[True, True, False],     # sequenza 0: lunghezza 2
                        [True, True, True]])     # sequenza 1: lunghezza 3
    m = combine_masks(causal, padding)
    expected = np.array([[[True, False, False],
                          [True, True, False],
                          [True, True, False]],   # la chiave 2 della sequenza 0 è padding: la colonna 2 è False
                         causal])
    assert isinstance(m, np.ndarray) and m.shape == (2, 3, 3), (
        tr("combine_masks of a (3, 3) causal mask and a (2, 3) padding mask must have shape (B, T, "
            "T) = (2, 3, 3), got {shape}",
            shape=np.shape(m)))
    assert m.dtype == bool, tr("combine_masks must return a boolean array, got dtype {dtype}", dtype=m.dtype)
    if np.array_equal(m[0], [[True, False, False], [True, True, False], [False, False, False]]):
        raise AssertionError(
            tr("combine_masks applied the padding to the queries (row 2 of sequence 0 is all False) "
                "instead of the keys (column 2 should be False): insert the new axis so that the padding "
                "lines up with the last axis (trap 5)."))
    assert np.array_equal(m, expected), (
        tr("combine_masks should give, for sequence 0,\n{expected}\nand for sequence 1 the causal "
            "mask; got\n{m}\n[b, i, j] = causal[i, j] and padding[b, j].",
            expected=expected[0], m=m))
print(tr("{name}: visible checks passed", name='combine_masks'))

# %% nbgrader={"grade": true, "grade_id": "combine_masks_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di combine_masks girano quando il tuo notebook viene valutato.
problem = before_grading("combine_masks", np.ones((3, 3), bool), np.ones((2, 3), bool))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("combine_masks", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "scaled_dot_product_attention_text", "locked": true, "schema_version": 3, "solution": false}
# ## 5. `scaled_dot_product_attention` ({{ points: scaled_dot_product_attention }})
#
# Le query $Q \in \mathbb{R}^{T_q \times d_k}$ vengono confrontate con le chiavi
# $K \in \mathbb{R}^{T_k \times d_k}$, e il risultato mescola i valori
# $V \in \mathbb{R}^{T_k \times d_v}$ (Vaswani et al., 2017):
#
# $$S = \frac{Q K^\top}{\sqrt{d_k}}, \qquad P = \operatorname{softmax}(S) \ \text{ riga per riga (sulle chiavi)}, \qquad \text{out} = P V.$$
#
# La riga $i$ di `out` è una media delle righe di $V$, pesata da quanto la query $i$ si accorda
# con ciascuna chiave. Le righe di $P$ sommano a 1.
#
# **Perché dividere per $\sqrt{d_k}$.** Prendi le componenti di $q$ e $k$ indipendenti, di media
# 0 e varianza 1. Il punteggio $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ è una somma di $d_k$ termini
# indipendenti, ciascuno di media $\mathbb{E}[q_i]\,\mathbb{E}[k_i] = 0$ e varianza
# $\mathbb{E}[q_i^2]\,\mathbb{E}[k_i^2] = 1$, quindi
#
# $$\operatorname{Var}(q \cdot k) = d_k .$$
#
# La distanza tipica fra due punteggi cresce come $\sqrt{d_k}$, e il rapporto fra due pesi è
# $p_a / p_b = e^{s_a - s_b}$: con vettori larghi la softmax diventa quasi one-hot, cioè *si
# satura*. Una softmax saturata smette di imparare, perché $\partial p_j / \partial s_j =
# p_j (1 - p_j)$ è vicino a 0 quando $p_j$ è vicino a 0 o a 1. Dividere per $\sqrt{d_k}$ riporta
# la varianza a 1 qualunque sia la larghezza. La lezione ha misurato, su 400 estrazioni di
# $T = 64$ query e chiavi: $\operatorname{Var}(q \cdot k)$ = 7.98, 63.99 e 512.59 per $d_k$ = 8, 64
# e 512. A $d_k = 512$ il peso più grande di una riga valeva in media 0.9303 senza scala e
# 0.1075 con la scala, e la sensibilità della softmax $\sum_j p_j (1 - p_j)$ valeva 0.0998 senza
# scala e 0.9611 con la scala (il massimo possibile è $1 - 1/64 = 0.9844$, per pesi uniformi).
# Dimenticare il fattore non solleva nulla (trappola 1). L'argomento `scale=False` lo toglie;
# il compito training lo usa per un'ablazione.
#
# **Le maschere entrano prima della softmax.** Dove `mask` è False, porta il punteggio a
# $-\infty$, poi calcola la softmax. Azzerare i pesi dopo la softmax lascia righe che sommano a
# meno di 1, e anche questo non solleva nulla (trappola 2).
#
# **Forme.** Devono funzionare assi di batch iniziali `...` qualsiasi. Trasponi solo gli ultimi
# due assi di $K$ (`np.swapaxes(K, -1, -2)`); `K.T` inverte tutti gli assi di un array con
# batch. L'operatore `@` fa il broadcasting degli assi iniziali, e la maschera si estende a
# `(..., T_q, T_k)`.
#
# **Costo.** $S$ ha $T_q \times T_k$ elementi, quindi tempo e memoria crescono come $T^2$. La
# lezione ha misurato pendenze log-log del tempo rispetto a $T$ fra 1.97 e 2.06 per $T$ = 128,
# 512 e 2048 ($d_k = 64$, float64); a $T = 2048$ la matrice $T \times T$ occupa 32 MiB contro i
# 3 MiB di $Q$, $K$ e $V$ insieme.
#
# Restituisci `(out, weights)`.

# %% nbgrader={"grade": false, "grade_id": "scaled_dot_product_attention_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: scaled_dot_product_attention }}

# %% nbgrader={"grade": false, "grade_id": "scaled_dot_product_attention_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di scaled_dot_product_attention: un esempio svolto, scala, maschera, assi del batch, dtype."""
with visible_checks("scaled_dot_product_attention", 5):
    r = math.log(3.0) / 2
    Q = np.array([[1.0, 1.0, 1.0, 1.0]])                 # (T_q, d_k) = (1, 4)
    K = np.array([[0.0, 0.0, 0.0, 0.0], [r, r, r, r]])   # (T_k, d_k) = (2, 4): q.k = 0 e 2 ln 3
    V = np.array([[0.0, 4.0], [4.0, 0.0]])               # (T_k, d_v) = (2, 2)
    out, w = returned(scaled_dot_product_attention(Q, K, V),
                      "scaled_dot_product_attention", "out", "weights")
    assert np.shape(out) == (1, 2) and np.shape(w) == (1, 2), (
        tr("Q (1, 4), K (2, 4), V (2, 2) must give out (T_q, d_v) = (1, 2) and weights (T_q, T_k) = "
            "(1, 2), got {shape} and {shape2}",
            shape=np.shape(out), shape2=np.shape(w)))
    if np.allclose(w, [[1.0, 1.0]]):
        raise AssertionError(
            tr("the weights of the single query are [[1, 1]]: the softmax normalised over the queries "
                "(axis -2) instead of the keys (the last axis), trap 6. Each row of weights must sum to "
                "1."))
    if np.allclose(w, [[0.1, 0.9]]):
        raise AssertionError(
            tr("the weights are [[0.1, 0.9]]: the scores 0 and 2 ln 3 were not divided by sqrt(d_k) = 2 "
                "(trap 1: missing 1/sqrt(d_k)). Scaled, they are 0 and ln 3, giving [[0.25, 0.75]]."))
    assert np.allclose(w, [[0.25, 0.75]]), (
        tr("the scores are q.k / sqrt(4) = [0, ln 3], so the weights should be [[0.25, 0.75]]; got "
            "{w}",
            w=w))
    assert np.allclose(out, [[3.0, 1.0]]), (
        tr("out = weights @ V = 0.25 * [0, 4] + 0.75 * [4, 0] = [[3, 1]]; got {out}", out=out))

    _, w = returned(scaled_dot_product_attention(Q, K, V, scale=False),
                    "scaled_dot_product_attention", "out", "weights")
    assert np.allclose(w, [[0.1, 0.9]]), (
        tr("with scale=False the scores are [0, 2 ln 3] and the weights [[0.1, 0.9]]; got {w}", w=w))

    out, w = returned(scaled_dot_product_attention(Q, K, V, mask=np.array([[True, False]])),
                      "scaled_dot_product_attention", "out", "weights")
    if np.allclose(w, [[0.25, 0.0]]):
        raise AssertionError(
            tr("with mask [[True, False]] the weights are [[0.25, 0]]: the masked weight was zeroed "
                "after the softmax, so the row sums to 0.25 (trap 2 of the introduction)."))
    if np.allclose(w, [[0.0, 1.0]]):
        raise AssertionError(
            tr("with mask [[True, False]] the weights are [[0, 1]]: the mask was read as True = "
                "blocked. Here True means 'may attend', so key 0 keeps all the weight."))
    assert np.allclose(w, [[1.0, 0.0]]) and np.allclose(out, [[0.0, 4.0]]), (
        tr("with mask [[True, False]] only key 0 may be attended: weights [[1, 0]], out [[0, 4]]; "
            "got {w} and {out}",
            w=w, out=out))

    rng = np.random.default_rng(0)
    Q = rng.standard_normal((2, 3, 4, 8))                # (B, h, T_q, d_k)
    K = rng.standard_normal((2, 3, 5, 8))                # (B, h, T_k, d_k)
    V = rng.standard_normal((2, 3, 5, 6))                # (B, h, T_k, d_v)
    out, w = returned(scaled_dot_product_attention(Q, K, V),
                      "scaled_dot_product_attention", "out", "weights")
    assert out.shape == (2, 3, 4, 6) and w.shape == (2, 3, 4, 5), (
        tr("Q (2, 3, 4, 8), K (2, 3, 5, 8), V (2, 3, 5, 6) must give out (2, 3, 4, 6) and weights "
            "(2, 3, 4, 5), got {shape} and {shape2}. With batch axes, K.T reverses every axis, not "
            "only the last two (re-read *Shapes* above).",
            shape=out.shape, shape2=w.shape))
    assert np.allclose(w.sum(axis=-1), 1.0), (
        tr("every row of weights (over the keys, the last axis) must sum to 1; got row sums {w}. "
            "Sums over the queries equal to 1 mean trap 6 (softmax over axis -2).",
            w=np.round(w.sum(axis=-1)[0, 0], 4)))

    causal = np.tril(np.ones((5, 5), dtype=bool))
    _, w = returned(scaled_dot_product_attention(K, K, V, mask=causal),
                    "scaled_dot_product_attention", "out", "weights")   # T_q = T_k = 5
    assert np.all(w[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0), (
        tr("with a causal mask, weights above the diagonal (keys in the future) must be exactly 0"))
    sums = w.sum(axis=-1)
    assert np.allclose(sums, 1.0), (
        tr("with a causal mask every row must still sum to 1; got row sums {w}.",
           w=np.round(sums.reshape(-1, 5)[0], 4)))

    out, w = returned(scaled_dot_product_attention(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32)),
                      "scaled_dot_product_attention", "out", "weights")
    assert out.dtype == np.float32 and w.dtype == np.float32, (
        tr("float32 inputs must give float32 outputs, got {dtype} and {dtype2}", dtype=out.dtype, dtype2=w.dtype))
print(tr("{name}: visible checks passed", name='scaled_dot_product_attention'))

# %% nbgrader={"grade": true, "grade_id": "scaled_dot_product_attention_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di scaled_dot_product_attention girano quando il tuo notebook viene valutato.
problem = before_grading("scaled_dot_product_attention", np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 2)))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("scaled_dot_product_attention", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_scaling_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: che cosa fa $1/\sqrt{d_k}$
#
# La cella seguente estrae 400 insiemi casuali di $T = 64$ query e chiavi con componenti
# normali standard (un generatore con seme fisso) e misura $\operatorname{Var}(q \cdot k)$ per tre
# larghezze (le larghezze minori usano le prime $d_k$ componenti delle stesse estrazioni). Poi
# applica la tua `softmax` ai punteggi con $d_k = 512$, con e senza il fattore $1/\sqrt{d_k}$. Le
# sue estrazioni casuali non sono quelle della lezione: aspettati un accordo con le cifre della
# lezione entro qualche punto percentuale, non cifra per cifra.

# %% nbgrader={"grade": false, "grade_id": "lesson_scaling", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: Var(q.k) = d_k, e la saturazione della softmax a d_k = 512 con e senza scala."""
with time_limit(30, lesson=True):
    rng = np.random.default_rng(0)
    n_draws, T = 400, 64
    Q = rng.standard_normal((n_draws, T, 512))                  # (estrazioni, T, d_k): le prime d_k colonne
    K = rng.standard_normal((n_draws, T, 512))                  # servono per ciascuna delle tre larghezze
    lesson_var = {8: 7.98, 64: 63.99, 512: 512.59}
    print("  d_k     Var(q.k) qui  lezione")
    for d_k in (8, 64, 512):
        S = np.einsum("bqd,bkd->bqk", Q[..., :d_k], K[..., :d_k])   # tutti i q.k di un'estrazione: (400, T, T)
        print(f"{d_k:5d}   {S.var():13.2f}   {lesson_var[d_k]:6.2f}")

    # Ora S contiene i punteggi non scalati per d_k = 512.
    print(f"\nd_k = 512, T = {T}: media sulle righe di")
    print("                        peso più grande      sum p(1 - p)")
    print("                        qui      lezione     qui      lezione")
    lesson_sat = {False: (0.9303, 0.0998), True: (0.1075, 0.9611)}
    for scale in (False, True):
        P = softmax(S / math.sqrt(512) if scale else S)
        top = P.max(axis=-1).mean()
        sensitivity = (P * (1 - P)).sum(axis=-1).mean()
        label = "con 1/sqrt(d_k)    " if scale else "senza scala        "
        print(f"{label}     {top:.4f}   {lesson_sat[scale][0]:.4f}      {sensitivity:.4f}   {lesson_sat[scale][1]:.4f}")
    print(f"pesi uniformi (il massimo possibile di sum p(1 - p)):     {1 - 1 / T:.4f}")
    del Q, K, S, P

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_saturation_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: la saturazione al crescere di $d_k$
#
# La stessa misura per ogni larghezza da $d_k = 4$ a $512$, in una figura: il peso più grande di
# una riga e la sensibilità $\sum_j p_j (1 - p_j)$, in media su 100 estrazioni di $T = 64$ query e
# chiavi, con e senza il fattore $1/\sqrt{d_k}$, calcolati con la tua `softmax`. Senza il
# fattore il peso più grande sale verso 1 e la sensibilità scende verso 0 al crescere di $d_k$;
# con il fattore restano entrambi dove sono a $d_k = 4$.

# %% nbgrader={"grade": false, "grade_id": "lesson_saturation", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: il peso più grande e sum p(1 - p) in funzione di d_k, con e senza 1/sqrt(d_k)."""
with time_limit(8, lesson=True):
    rng = np.random.default_rng(2)
    n_draws, T = 100, 64
    widths = [4, 8, 16, 32, 64, 128, 256, 512]
    Q = rng.standard_normal((n_draws, T, widths[-1]))         # (estrazioni, T, d_k): le prime d_k
    K = rng.standard_normal((n_draws, T, widths[-1]))         # colonne servono per ogni larghezza
    curves = {False: ([], []), True: ([], [])}                # scala -> (peso più grande, sensibilità)
    for d_k in widths:
        S = np.einsum("bqd,bkd->bqk", Q[..., :d_k], K[..., :d_k])   # (estrazioni, T, T)
        for scale in (False, True):
            P = softmax(S / math.sqrt(d_k) if scale else S)
            curves[scale][0].append(P.max(axis=-1).mean())
            curves[scale][1].append((P * (1 - P)).sum(axis=-1).mean())
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    for scale, style, label in ((False, "o-", "punteggi q.k"), (True, "s-", "punteggi q.k / sqrt(d_k)")):
        left.plot(widths, curves[scale][0], style, label=label)
        right.plot(widths, curves[scale][1], style, label=label)
    right.axhline(1 - 1 / T, color="grey", linestyle=":", label="pesi uniformi, 1 - 1/T")
    for axis, title in ((left, "peso più grande di una riga"), (right, "sensibilità: sum p (1 - p)")):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("d_k")
        axis.set_title(title)
        axis.set_ylim(0, 1.02)
        axis.grid(alpha=0.3)
    left.legend(loc="center left")
    figure.suptitle(f"La tua softmax su T = {T} query e chiavi casuali, media di {n_draws} estrazioni")
    show(figure)
    print("  d_k   peso più grande (non scalati, scalati)   sum p(1 - p) (non scalati, scalati)")
    for i, d_k in enumerate(widths):
        print(f"{d_k:5d}        {curves[False][0][i]:.4f}   {curves[True][0][i]:.4f}"
              f"                   {curves[False][1][i]:.4f}   {curves[True][1][i]:.4f}")
    del Q, K, S, P

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_mask_order_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: la maschera prima della softmax, non dopo
#
# Un esempio causale 5×5 con punteggi casuali. La cella confronta i pesi della tua
# `scaled_dot_product_attention` con `causal_mask(5)` con quelli della trappola: la softmax dei
# punteggi non mascherati, con le posizioni future moltiplicate per 0 a cose fatte. Guarda le
# somme delle righe. Nell'esempio della lezione la seconda riga della trappola sommava a 0.031;
# qui i punteggi sono diversi e così le somme, ma lo schema è lo stesso: solo l'ultima riga, che
# non maschera nulla, somma ancora a 1, e non viene sollevato alcun errore.

# %% nbgrader={"grade": false, "grade_id": "lesson_mask_order", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: maschera prima della softmax (-inf) contro pesi azzerati dopo."""
with time_limit(10, lesson=True):
    rng = np.random.default_rng(1)
    Q5 = rng.standard_normal((5, 4))
    K5 = rng.standard_normal((5, 4))
    V5 = rng.standard_normal((5, 3))
    mask5 = causal_mask(5)
    _, before = scaled_dot_product_attention(Q5, K5, V5, mask=mask5)
    after = softmax(Q5 @ K5.T / math.sqrt(4)) * mask5          # trappola 2: azzera il futuro dopo la softmax
    with np.printoptions(precision=3, suppress=True):
        print("pesi, maschera prima della softmax:\n", before)
        print("pesi, azzerati dopo la softmax:\n", after)
        print("somme delle righe, prima:", before.sum(axis=-1))
        print("somme delle righe, dopo: ", after.sum(axis=-1))

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_mask_figure_text", "locked": true, "schema_version": 3, "solution": false}
# Le stesse due matrici di pesi come immagini: ogni riga è una query, ogni colonna una
# chiave, e il numero in una casella è il suo peso. Con la maschera prima della softmax ogni riga
# distribuisce un peso totale pari a 1 sulle chiavi che può vedere; con l'azzeramento dopo, le
# righe perdono la parte che stava sulle chiavi future.

# %% nbgrader={"grade": false, "grade_id": "lesson_mask_figure", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: i pesi dell'esempio causale qui sopra, mascherati prima e azzerati dopo la softmax."""
with time_limit(10, lesson=True):
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for axis, weights, title in ((axes[0], before, "maschera prima della softmax"),
                                 (axes[1], after, "azzerati dopo la softmax (trappola 2)")):
        axis.imshow(weights, cmap="Blues", vmin=0, vmax=1)
        for i in range(weights.shape[0]):
            for j in range(weights.shape[1]):
                axis.text(j, i, f"{weights[i, j]:.2f}", ha="center", va="center",
                          color="white" if weights[i, j] > 0.6 else "black", fontsize=9)
        axis.set_xticks(range(weights.shape[1]))
        axis.set_yticks(range(weights.shape[0]),
                        [f"query {i} (somma {s:.2f})" for i, s in enumerate(weights.sum(axis=-1))])
        axis.set_xlabel("chiave")
        axis.set_title(title)
    show(figure)

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_cost_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: il costo $T^2$
#
# La cella seguente cronometra la tua `scaled_dot_product_attention` con maschera causale, una
# sequenza, $d_k = 64$, float64, per $T$ da 128 a 2048, e tiene la più veloce di alcune
# esecuzioni per ciascuna (il resto del lavoro della macchina può solo rallentare
# un'esecuzione). Adatta una retta a $\log(\text{tempo})$ in funzione di $\log T$: un costo che
# cresce come $T^2$ ha pendenza 2, e ogni raddoppio di $T$ moltiplica il tempo per 4. La lezione
# ha misurato pendenze fra 1.97 e 2.06 su $T$ = 128, 512 e 2048. I tuoi tempi dipendono dalla
# tua macchina, e così può fare la pendenza: quando gli array $T \times T$ non stanno più nella
# cache del processore (8 MiB ciascuno a $T = 1024$), ogni elemento costa più di quando ci
# stavano, e i raddoppi oltre quel punto costano più di 4 volte (una pendenza intorno a 2.5 è
# frequente). Una pendenza molto sotto 2 vuol dire che le dimensioni piccole sono state
# rallentate da altro: la macchina era occupata, oppure NumPy ha eseguito i prodotti su più
# thread; esegui di nuovo la cella.

# %% nbgrader={"grade": false, "grade_id": "lesson_cost", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: il tempo di scaled_dot_product_attention in funzione di T, e la pendenza della retta log-log."""
import time

with time_limit(8, lesson=True):
    rng = np.random.default_rng(3)
    d_k = 64
    lengths, repeats, best = [128, 256, 512, 1024, 2048], [50, 30, 15, 6, 3], []
    print("    T  esec.    minimo (ms)      pesi T x T (MiB)")
    for T, runs in zip(lengths, repeats):
        Q, K, V = (rng.standard_normal((T, d_k)) for _ in range(3))
        mask = causal_mask(T)
        scaled_dot_product_attention(Q, K, V, mask=mask)          # una prima esecuzione, non cronometrata
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            scaled_dot_product_attention(Q, K, V, mask=mask)
            times.append(time.perf_counter() - start)
        best.append(min(times))
        print(f"{T:5d}   {runs:4d}   {1000 * best[-1]:12.2f}   {T * T * 8 / 2**20:19.2f}")
    slope, intercept = np.polyfit(np.log(lengths), np.log(best), 1)
    print(f"pendenza di log(tempo) rispetto a log(T): {slope:.2f}   (T^2: 2; la lezione: da 1.97 a 2.06)")
    for shorter, longer, t0, t1 in zip(lengths, lengths[1:], best, best[1:]):
        print(f"  T {shorter} -> {longer}: tempo x {t1 / t0:.1f}   (T^2: x 4)")
    figure, axis = plt.subplots(figsize=(6, 4), layout="constrained")
    axis.loglog(lengths, [1000 * t for t in best], "o", label="la tua funzione (esecuzione più veloce)")
    fitted = np.exp(intercept) * np.array(lengths, dtype=float) ** slope
    axis.loglog(lengths, 1000 * fitted, "-", label=f"retta adattata, pendenza {slope:.2f}")
    axis.loglog(lengths, 1000 * best[0] * (np.array(lengths) / lengths[0]) ** 2, ":",
                color="grey", label="pendenza 2 (T^2)")
    axis.minorticks_off()
    axis.set_xticks(lengths, [str(T) for T in lengths])
    axis.set_xlabel("T (token)")
    axis.set_ylabel("tempo (ms)")
    axis.set_title(f"scaled_dot_product_attention, maschera causale, d_k = {d_k}, float64")
    axis.legend()
    axis.grid(alpha=0.3, which="both")
    show(figure)
    del Q, K, V, mask

# %% [markdown] nbgrader={"grade": false, "grade_id": "exercise_weight_ratio_text", "locked": true, "schema_version": 3, "solution": false}
# ## Esercizio 1: quanto distano due pesi? ({{ points: exercise_weight_ratio }})
#
# Prendi $d_k = 64$ e $q$, $k$ con componenti indipendenti di media 0 e varianza 1. Due chiavi
# $k_a$ e $k_b$ hanno punteggi $q \cdot k_a$ e $q \cdot k_b$ che differiscono di due deviazioni
# standard della distribuzione dei punteggi (la distribuzione di $q \cdot k$ ricavata sopra).
# Qual è il rapporto fra i loro pesi di attenzione, il maggiore diviso il minore,
#
# 1. senza scala, quando i punteggi sono $q \cdot k$? Assegnalo a `weight_ratio_unscaled`.
# 2. con la scala, quando i punteggi sono $q \cdot k / \sqrt{d_k}$? Assegnalo a `weight_ratio_scaled`.
#
# Le altre chiavi non contano: il rapporto fra due pesi della softmax dipende solo dalla
# differenza dei loro due punteggi. Assegna numeri (usa `math` invece di arrotondare a mano).
# Il feedback mostra la soluzione svolta.

# %% nbgrader={"grade": false, "grade_id": "exercise_weight_ratio_answer", "locked": false, "schema_version": 3, "solution": true}
# Esercizio 1: assegna le tue due risposte (numeri).
# weight_ratio_unscaled = ...
# weight_ratio_scaled = ...
### BEGIN SOLUTION
# Il rapporto tra due pesi della softmax è exp(differenza dei loro punteggi). Senza scala, q.k
# ha varianza d_k = 64, quindi deviazione standard 8, e due deviazioni fanno un divario di 16.
weight_ratio_unscaled = math.exp(16.0)   # 8,886,110.5
# Divisi per sqrt(d_k) = 8, i punteggi hanno deviazione standard 1 e il divario è 2.
weight_ratio_scaled = math.exp(2.0)      # 7.389
### END SOLUTION

# %% nbgrader={"grade": false, "grade_id": "exercise_weight_ratio_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili dell'esercizio 1: le due risposte sono definite e sono numeri (i loro valori si controllano alla valutazione)."""
with visible_checks("exercise_weight_ratio"):
    for name in ("weight_ratio_unscaled", "weight_ratio_scaled"):
        if name not in globals():
            raise NotAnswered(tr("assign your answer to the variable {name} in the cell above", name=name))
        value = globals()[name]
        assert isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool), (
            tr("{name} should be a number (int or float), got {type}", name=name, type=type(value).__name__))
        assert math.isfinite(value) and value > 0, tr("{name} is a ratio of two positive weights: got {value}", name=name, value=value)
    print(tr("exercise_weight_ratio: visible checks passed (the values are checked when graded)"))

# %% nbgrader={"grade": true, "grade_id": "exercise_weight_ratio_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di exercise_weight_ratio girano quando il tuo notebook viene valutato.
problem = before_grading("exercise_weight_ratio", answers=("weight_ratio_unscaled", "weight_ratio_scaled"))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("exercise_weight_ratio", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "split_heads_text", "locked": true, "schema_version": 3, "solution": false}
# ## 6. `split_heads` ({{ points: split_heads }})
#
# Un'attenzione dà a ogni coppia di token una sola somiglianza. L'attenzione multi-testa esegue
# $h$ attenzioni affiancate, ciascuna sulla propria fetta di larghezza $d_h = d / h$ delle query,
# chiavi e valori proiettati, così che teste diverse possano guardare posizioni diverse per
# ragioni diverse. Le proiezioni $W_Q, W_K, W_V, W_O$ restano $d \times d$: $h$ teste di
# larghezza $d/h$ costano gli stessi $4d^2$ parametri di proiezione di una sola testa di
# larghezza $d$.
#
# La testa $k$ riceve le colonne $k\,d_h, \dots, (k+1)\,d_h - 1$ di ogni token. Per `M` di forma
# `(B, T, d)`:
#
# 1. reshape a `(B, T, h, d_h)`: taglia l'ultimo asse di ogni token in $h$ fette consecutive;
# 2. scambia gli assi 1 e 2 (`transpose(0, 2, 1, 3)`) per ottenere `(B, h, T, d_h)`, così che
#    l'asse delle teste diventi un asse di batch per `@`.
#
# Un reshape diretto a `(B, h, T, d_h)` dà la stessa forma e il contenuto sbagliato: NumPy
# riempie la nuova forma nell'ordine della memoria, quindi la "testa 0" riceverebbe i primi
# $T \cdot d_h$ numeri della sequenza, che sono token interi e non una fetta di ciascun token
# (trappola 3). Con $h = 1$ i due ordini danno lo stesso array, ed è per questo che ogni test di
# questa parte usa $h > 1$ (e $B > 1$).
#
# Solleva `ValueError` quando $d$ non è divisibile per $h$.

# %% nbgrader={"grade": false, "grade_id": "split_heads_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: split_heads }}

# %% nbgrader={"grade": false, "grade_id": "split_heads_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di split_heads: forma, quali colonne riceve ogni testa (h = 2, B = 2), ValueError."""
with visible_checks("split_heads", 5):
    M = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)   # (B, T, d) = (2, 3, 4); M[0, 0] = [0, 1, 2, 3]
    S = split_heads(M, 2)
    assert np.shape(S) == (2, 2, 3, 2), (
        tr("split_heads of (B, T, d) = (2, 3, 4) with h = 2 must have shape (B, h, T, d_h) = (2, 2, "
            "3, 2), got {shape}",
            shape=np.shape(S)))
    if np.array_equal(S[0, 1, 0], [6.0, 7.0]):
        raise AssertionError(
            tr("head 1 of token 0 is [6, 7], numbers that belong to token 1: M was reshaped straight to "
                "(B, h, T, d_h). Reshape to (B, T, h, d_h) first, then swap axes 1 and 2 (trap 3)."))
    assert np.array_equal(S[0, 1, 0], [2.0, 3.0]), (
        tr("head 1 of token 0 of sequence 0 is columns 2..3 of M[0, 0] = [0, 1, 2, 3], i.e. [2, 3]; "
            "got {S}",
            S=S[0, 1, 0]))
    for k in range(2):
        assert np.array_equal(S[:, k], M[:, :, 2 * k: 2 * k + 2]), (
            tr("head {k} must hold columns {k2}..{k3} of every token", k=k, k2=2 * k, k3=2 * k + 1))
    try:
        split_heads(M, 3)
    except ValueError:
        pass
    else:
        raise AssertionError(tr("split_heads(M, 3) with d = 4 must raise ValueError: 4 is not divisible by 3"))
print(tr("{name}: visible checks passed", name='split_heads'))

# %% nbgrader={"grade": true, "grade_id": "split_heads_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di split_heads girano quando il tuo notebook viene valutato.
problem = before_grading("split_heads", np.ones((1, 2, 4)), 2)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("split_heads", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "merge_heads_text", "locked": true, "schema_version": 3, "solution": false}
# ## 7. `merge_heads` ({{ points: merge_heads }})
#
# La strada inversa: da `(B, h, T, d_h)`, riporta gli assi 1 e 2 a `(B, T, h, d_h)`, poi fai il
# reshape a `(B, T, h \cdot d_h)`. Per ogni token le uscite delle teste finiscono affiancate,
# prima la testa 0. L'ordine conta quanto nella divisione: un reshape prima dello scambio
# conserva la forma e mescola i token con le teste (trappola 3). `merge_heads(split_heads(M, h))`
# deve restituire esattamente `M`.

# %% nbgrader={"grade": false, "grade_id": "merge_heads_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: merge_heads }}

# %% nbgrader={"grade": false, "grade_id": "merge_heads_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di merge_heads: forma, dove finisce ogni testa (h = 2, B = 2), andata e ritorno."""
with visible_checks("merge_heads", 5):
    H = np.arange(2 * 2 * 3 * 2, dtype=np.float64).reshape(2, 2, 3, 2)   # (B, h, T, d_h)
    # H[0, 0, 0] = [0, 1] (testa 0 del token 0) e H[0, 1, 0] = [6, 7] (testa 1 del token 0)
    out = merge_heads(H)
    assert np.shape(out) == (2, 3, 4), (
        tr("merge_heads of (B, h, T, d_h) = (2, 2, 3, 2) must have shape (B, T, h * d_h) = (2, 3, "
            "4), got {shape}",
            shape=np.shape(out)))
    if np.array_equal(out[0, 0], [0.0, 1.0, 2.0, 3.0]):
        raise AssertionError(
            tr("token 0 of sequence 0 is [0, 1, 2, 3]: the reshape ran before the transpose, so token 0 "
                "got tokens 0 and 1 of head 0. Swap axes 1 and 2 back first, then reshape (trap 3)."))
    assert np.array_equal(out[0, 0], [0.0, 1.0, 6.0, 7.0]), (
        tr("token 0 of sequence 0 is head 0 of token 0, [0, 1], then head 1 of token 0, [6, 7]: [0, "
            "1, 6, 7]; got {out}",
            out=out[0, 0]))
    M = np.random.default_rng(0).standard_normal((2, 5, 6))
    uses_checked("split_heads", "merge_heads")
    back = merge_heads(split_heads(M, 3))
    assert back.shape == M.shape and np.array_equal(back, M), (
        tr("merge_heads(split_heads(M, 3)) must give back M exactly (this uses your split_heads too)"))
print(tr("{name}: visible checks passed", name='merge_heads'))

# %% nbgrader={"grade": true, "grade_id": "merge_heads_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di merge_heads girano quando il tuo notebook viene valutato.
problem = before_grading("merge_heads", np.ones((1, 2, 3, 2)))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("merge_heads", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "multi_head_attention_text", "locked": true, "schema_version": 3, "solution": false}
# ## 8. `multi_head_attention` ({{ points: multi_head_attention }})
#
# Metti insieme i pezzi. Con $X$ di forma `(B, T, d)`:
#
# $$Q = X W_Q, \quad K = X W_K, \quad V = X W_V \qquad \text{(ciascuna } (B, T, d)\text{, divisa in teste } (B, h, T, d_h)\text{)},$$
#
# $$\text{head}_k = \operatorname{softmax}\!\left(\frac{Q_k K_k^\top}{\sqrt{d_h}}\right) V_k, \qquad Y = \operatorname{merge}(\text{head}_1, \dots, \text{head}_h)\, W_O .$$
#
# Qui niente bias (arrivano con `attention_forward`). Restituisci $Y$ `(B, T, d)` e i pesi
# `(B, h, T, T)`. Riusa `split_heads`, `scaled_dot_product_attention` e `merge_heads`.
#
# Scala per $\sqrt{d_h}$, la larghezza dei vettori di cui si fanno i prodotti scalari, non per
# $\sqrt{d}$: quest'ultimo è il difetto che i correttori chiamano `missing-scale`.
#
# La maschera vale per ogni testa. Una maschera `(T, T)` si estende da sola contro punteggi di
# forma `(B, h, T, T)`. Una maschera `(B, T, T)` ha bisogno dell'asse delle teste inserito,
# `mask[:, None]` di forma `(B, 1, T, T)`. Senza, NumPy allinea le forme da destra, e l'asse di
# batch della maschera incontra l'asse delle teste dei punteggi: un errore quando $B \ne h$, e
# peggio, uno scambio silenzioso (la maschera della sequenza $b$ applicata alla testa $b$)
# quando $B = h$.

# %% nbgrader={"grade": false, "grade_id": "multi_head_attention_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: multi_head_attention }}

# %% nbgrader={"grade": false, "grade_id": "multi_head_attention_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di multi_head_attention: un esempio svolto (pesi uniformi), poi testa per testa (h = 2, B = 2)."""
with visible_checks("multi_head_attention", 5):
    uses_checked("scaled_dot_product_attention", "multi_head_attention")
    uses_checked("split_heads", "multi_head_attention")
    uses_checked("merge_heads", "multi_head_attention")
    B, T, d, h = 2, 3, 4, 2
    X = np.arange(B * T * d, dtype=np.float64).reshape(B, T, d)   # X[0] = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    Z, I = np.zeros((d, d)), np.eye(d)
    causal = np.tril(np.ones((T, T), dtype=bool))
    # W_Q = W_K = 0: ogni punteggio è 0, quindi ogni query distribuisce il suo peso in parti uguali sulle chiavi che può vedere.
    # W_V = W_O = I: Y è allora la media dei token che ogni query vede, una media progressiva con la maschera causale.
    Y, w = returned(multi_head_attention(X, Z, Z, I, I, n_heads=h, mask=causal),
                    "multi_head_attention", "Y", "weights")
    assert np.shape(Y) == (B, T, d) and np.shape(w) == (B, h, T, T), (
        tr("X (2, 3, 4) with 2 heads must give Y (B, T, d) = (2, 3, 4) and weights (B, h, T, T) = "
            "(2, 2, 3, 3), got {shape} and {shape2}",
            shape=np.shape(Y), shape2=np.shape(w)))
    assert np.allclose(w[1, 1, 2], [1 / 3, 1 / 3, 1 / 3]) and np.allclose(w[1, 0, 0], [1.0, 0.0, 0.0]), (
        tr("with all scores 0 and a causal mask, query 0 puts weight 1 on key 0 and query 2 puts "
            "1/3 on each of keys 0, 1, 2, in every head; got {w} and {w2}",
            w=w[1, 0, 0], w2=w[1, 1, 2]))
    assert np.allclose(Y[0], [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7]]), (
        tr("with W_Q = W_K = 0, W_V = W_O = I and a causal mask, Y[0] is the running mean of the "
            "tokens of X[0]: [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7]]; got\n{Y}",
            Y=Y[0]))
    Y, _ = returned(multi_head_attention(X, Z, Z, I, I, n_heads=h),
                    "multi_head_attention", "Y", "weights")
    assert np.allclose(Y[0], [[4, 5, 6, 7]] * 3), (
        tr("without a mask every token of Y[0] is the mean of X[0], [4, 5, 6, 7]; got\n{Y}", Y=Y[0]))

    rng = np.random.default_rng(0)
    B, T, d, h = 2, 5, 8, 2
    X = rng.standard_normal((B, T, d))
    W_Q, W_K, W_V, W_O = (rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4))
    lengths = np.array([5, 3])
    padding = np.arange(T)[None, :] < lengths[:, None]                                # (B, T)
    mask = np.tril(np.ones((T, T), dtype=bool))[None] & padding[:, None, :]            # (B, T, T)
    Y, w = returned(multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads=h, mask=mask),
                    "multi_head_attention", "Y", "weights")
    d_h = d // h
    heads = []
    for k in range(h):            # testa k: colonne k*d_h .. (k+1)*d_h - 1 delle proiezioni
        cols = slice(k * d_h, (k + 1) * d_h)
        out_k, _ = returned(scaled_dot_product_attention((X @ W_Q)[..., cols], (X @ W_K)[..., cols], (X @ W_V)[..., cols],
                                                         mask=mask),
                            "scaled_dot_product_attention", "out", "weights")
        heads.append(out_k)
    expected = np.concatenate(heads, axis=-1) @ W_O
    assert np.allclose(Y, expected), (
        tr("with random weights, 2 heads and a (B, T, T) mask, Y differs from running "
            "scaled_dot_product_attention head by head (largest difference {Y:.3g}). Likely causes: "
            "reshape/transpose in the wrong order (trap 3), sqrt(d) instead of sqrt(d_h), or a (B, "
            "T, T) mask used without inserting the head axis.",
            Y=np.max(np.abs(Y - expected))))
print(tr("{name}: visible checks passed", name='multi_head_attention'))

# %% nbgrader={"grade": true, "grade_id": "multi_head_attention_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di multi_head_attention girano quando il tuo notebook viene valutato.
problem = before_grading("multi_head_attention", np.ones((1, 2, 4)), np.eye(4), np.eye(4), np.eye(4), np.eye(4), 2)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("multi_head_attention", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_permutation_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: l'attenzione non conosce l'ordine
#
# Niente nelle formule qui sopra guarda le posizioni. Riordina i token con una matrice di
# permutazione $\Pi$: le proiezioni seguono ($(\Pi X) W = \Pi (X W)$), i punteggi vengono
# permutati su entrambi gli assi ($\Pi S \Pi^\top$), la softmax di ogni riga si sposta con la sua
# riga, e poiché $\Pi^\top \Pi = I$ le uscite escono permutate allo stesso modo:
#
# $$\operatorname{attn}(\Pi X) = \Pi \operatorname{softmax}(S) \Pi^\top \Pi V = \Pi \operatorname{attn}(X).$$
#
# La self-attention è *equivariante per permutazioni* (la lezione ha misurato l'identità a
# 4.4e-16 in float64), mentre $\operatorname{attn}(\Pi X) \ne \operatorname{attn}(X)$: una sequenza e
# un suo qualsiasi rimescolamento danno lo stesso insieme di uscite, in ordine rimescolato. Una
# maschera causale rompe la simmetria, perché ciò che una query può vedere dipende allora dalla
# sua posizione; ma un modello ha comunque bisogno di sapere dove si trova ogni token, ed è
# l'argomento della parte seguente. La cella misura entrambe le cose con la tua
# `multi_head_attention`.

# %% nbgrader={"grade": false, "grade_id": "lesson_permutation", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: attn(Pi X) = Pi attn(X) senza maschera; una maschera causale la rompe."""
with time_limit(10, lesson=True):
    rng = np.random.default_rng(2)
    B, T, d, h = 2, 6, 8, 2
    X = rng.standard_normal((B, T, d))
    W = [rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4)]   # W_Q, W_K, W_V, W_O
    perm = np.array([3, 0, 5, 1, 4, 2])                                   # Pi X = X[:, perm]
    Y, _ = multi_head_attention(X, *W, n_heads=h)
    Y_perm, _ = multi_head_attention(X[:, perm], *W, n_heads=h)
    print(f"senza maschera:   max |attn(Pi X) - Pi attn(X)| = {np.max(np.abs(Y_perm - Y[:, perm])):.1e}")
    print(f"                  max |attn(Pi X) - attn(X)|    = {np.max(np.abs(Y_perm - Y)):.1e}")
    mask = causal_mask(T)
    Y, _ = multi_head_attention(X, *W, n_heads=h, mask=mask)
    Y_perm, _ = multi_head_attention(X[:, perm], *W, n_heads=h, mask=mask)
    print(f"maschera causale: max |attn(Pi X) - Pi attn(X)| = {np.max(np.abs(Y_perm - Y[:, perm])):.1e}")

# %% [markdown] nbgrader={"grade": false, "grade_id": "sinusoidal_positions_text", "locked": true, "schema_version": 3, "solution": false}
# ## 9. `sinusoidal_positions` ({{ points: sinusoidal_positions }})
#
# Per distinguere le posizioni, somma al vettore di ogni token un vettore che dipende solo dalla
# sua posizione $p$. Vaswani et al. usano seni e coseni a frequenze in progressione geometrica:
#
# $$PE_{p,\,2i} = \sin\!\left(\frac{p}{10000^{2i/d}}\right), \qquad PE_{p,\,2i+1} = \cos\!\left(\frac{p}{10000^{2i/d}}\right).$$
#
# La coppia di colonne $(2i, 2i+1)$ ruota con frequenza angolare $\omega_i = 10000^{-2i/d}$: la
# prima coppia avanza di un radiante intero per posizione, le ultime molto lentamente
# (lunghezze d'onda da $2\pi$ a quasi $2\pi \cdot 10000$). Poiché $(\sin \omega(p+k), \cos
# \omega(p+k))$ è $(\sin \omega p, \cos \omega p)$ ruotato dell'angolo $\omega k$, uno spostamento
# di $k$ posizioni è la stessa mappa lineare per ogni $p$, e
#
# $$PE_p \cdot PE_{p+k} = \sum_i \cos(\omega_i k)$$
#
# (per $d$ pari) dipende solo dalla distanza $k$.
#
# Questi vettori non richiedono parametri ed esistono per ogni posizione, anche oltre la
# sequenza di addestramento più lunga; una tabella appresa di forma `(T_max, d)` non ha righe
# per $p \ge T_{\max}$. RoPE (Su et al., 2021) fa un passo in più: invece di sommare un vettore
# al token, ruota ogni coppia di componenti di $q$ e $k$ di un angolo proporzionale alla
# posizione, così che $q_m \cdot k_n$ dipenda solo da $m - n$.
#
# Alterna: le colonne pari contengono i seni, le dispari i coseni (non tutti i seni e poi tutti
# i coseni). Per $d$ dispari l'ultima colonna, di indice $d - 1$, è pari e contiene un seno.
# Restituisci float64.

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_positions_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: sinusoidal_positions }}

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_positions_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di sinusoidal_positions: forma, dtype, un esempio svolto, d dispari."""
with visible_checks("sinusoidal_positions", 5):
    PE = sinusoidal_positions(3, 4)
    assert np.shape(PE) == (3, 4), tr("sinusoidal_positions(3, 4) must have shape (T, d) = (3, 4), got {shape}", shape=np.shape(PE))
    assert PE.dtype == np.float64, tr("sinusoidal_positions must return float64, got {dtype}", dtype=PE.dtype)
    # d = 4: le frequenze sono 1 / 10000^(0/4) = 1 e 1 / 10000^(2/4) = 1/100.
    expected = [0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004]   # sin 1, cos 1, sin 0.01, cos 0.01
    halves = [expected[0], expected[2], expected[1], expected[3]]                # prima tutti i seni, poi i coseni
    if np.allclose(PE[0], [0.0, 0.0, 1.0, 1.0]) or np.allclose(PE[1], halves):
        raise AssertionError(
            tr("position 0 is [0, 0, 1, 1] or position 1 is [sin 1, sin 0.01, cos 1, cos 0.01]: the "
                "sines fill the first half of the columns and the cosines the second. They alternate: "
                "column 2i holds a sine, column 2i + 1 the cosine of the same angle."))
    assert np.allclose(PE[0], [0.0, 1.0, 0.0, 1.0]), (
        tr("position 0: sin 0 = 0 and cos 0 = 1 alternate, [0, 1, 0, 1]; got {PE}", PE=PE[0]))
    assert np.allclose(PE[1], expected), (
        tr("position 1 with d = 4 should be [sin 1, cos 1, sin 0.01, cos 0.01] = {expected}; got "
            "{PE}. The angle of columns 2i and 2i + 1 is p / 10000^(2i / d).",
            expected=expected, PE=PE[1]))
    assert np.allclose(PE[2], [0.9092974268, -0.4161468365, 0.0199986667, 0.9998000067]), (
        tr("position 2 with d = 4 should be [sin 2, cos 2, sin 0.02, cos 0.02]; got {PE}", PE=PE[2]))
    PE = sinusoidal_positions(2, 3)
    assert np.shape(PE) == (2, 3), tr("sinusoidal_positions(2, 3) must have shape (2, 3), got {shape}", shape=np.shape(PE))
    assert np.allclose(PE[1], [0.8414709848, 0.5403023059, 0.0021544330]), (
        tr("with odd d = 3 the last column is a sine: position 1 is [sin 1, cos 1, sin(1 / "
            "10000^(2/3))] = [0.8415, 0.5403, 0.0021544]; got {PE}",
            PE=PE[1]))
print(tr("{name}: visible checks passed", name='sinusoidal_positions'))

# %% nbgrader={"grade": true, "grade_id": "sinusoidal_positions_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di sinusoidal_positions girano quando il tuo notebook viene valutato.
problem = before_grading("sinusoidal_positions", 3, 4)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("sinusoidal_positions", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_positions_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: le posizioni rompono la simmetria
#
# La cella ripete il test della permutazione dopo aver sommato ai token le tue
# `sinusoidal_positions`, poi stampa $PE_p \cdot PE_{p+k}$ a distanza fissa $k$ per diversi
# valori di $p$.

# %% nbgrader={"grade": false, "grade_id": "lesson_positions", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: con le posizioni sommate l'attenzione vede l'ordine; PE_p . PE_(p+k) dipende solo da k."""
with time_limit(10, lesson=True):
    rng = np.random.default_rng(2)
    B, T, d, h = 2, 6, 8, 2
    X = rng.standard_normal((B, T, d))
    W = [rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4)]
    perm = np.array([3, 0, 5, 1, 4, 2])
    PE = sinusoidal_positions(T, d)
    Y, _ = multi_head_attention(X + PE, *W, n_heads=h)
    Y_perm, _ = multi_head_attention(X[:, perm] + PE, *W, n_heads=h)   # i token si spostano, le posizioni restano
    print(f"con le posizioni: max |attn(Pi X + PE) - Pi attn(X + PE)| = {np.max(np.abs(Y_perm - Y[:, perm])):.1e}")
    PE = sinusoidal_positions(40, 16)
    k = 3
    dots = [PE[p] @ PE[p + k] for p in (0, 5, 17, 30)]
    print(f"PE_p . PE_(p+{k}) per p = 0, 5, 17, 30 (d = 16):", np.round(dots, 12))

# %% [markdown] nbgrader={"grade": false, "grade_id": "layer_norm_forward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 10. `layer_norm_forward` ({{ points: layer_norm_forward }})
#
# La layer norm (Ba, Kiros e Hinton, 2016) riscala ogni vettore di token per conto suo, sulle
# sue $d$ componenti:
#
# $$\mu = \frac{1}{d} \sum_{j} x_j, \qquad \sigma^2 = \frac{1}{d} \sum_{j} (x_j - \mu)^2, \qquad \hat x_j = \frac{x_j - \mu}{\sqrt{\sigma^2 + \varepsilon}}, \qquad y_j = \gamma_j \hat x_j + \beta_j .$$
#
# La varianza è quella distorta (si divide per $d$: `np.var` con il suo `ddof=0` predefinito), e
# $\varepsilon$ sta dentro la radice quadrata. Entrambi gli errori (la varianza corretta, o
# $\sqrt{\sigma^2} + \varepsilon$) danno numeri vicini a quelli giusti; i correttori li cercano
# (difetto `layer-norm-variance`).
#
# In un blocco Transformer la layer norm compare due volte. Questo kit usa il blocco pre-LN:
#
# $$x_1 = x + \operatorname{MHA}(\operatorname{LN}_1(x)), \qquad x_2 = x_1 + \operatorname{FFN}(\operatorname{LN}_2(x_1)), \qquad \operatorname{FFN}(x) = \operatorname{ReLU}(x W_1 + b_1) W_2 + b_2,$$
#
# con $d_{ff} = 4d$. Il blocco post-LN originale normalizza invece dopo ogni somma residua:
# $x_1 = \operatorname{LN}_1(x + \operatorname{MHA}(x))$, $x_2 = \operatorname{LN}_2(x_1 + \operatorname{FFN}(x_1))$. Nel
# blocco pre-LN il percorso residuo dall'ingresso all'uscita non attraversa alcuna
# normalizzazione (Xiong et al., 2020 confrontano i due).
#
# Restituisci `(y, cache)`. La cache contiene ciò che servirà alla tua passata all'indietro (per
# esempio $\hat x$, $1/\sqrt{\sigma^2 + \varepsilon}$ e $\gamma$): il contenuto lo scegli tu.

# %% nbgrader={"grade": false, "grade_id": "layer_norm_forward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: layer_norm_forward }}

# %% nbgrader={"grade": false, "grade_id": "layer_norm_forward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di layer_norm_forward: un esempio svolto, gamma e beta, assi del batch, float32."""
with visible_checks("layer_norm_forward", 5):
    x = np.array([[1.0, 2.0, 3.0, 4.0]])   # media 2.5, varianza distorta 1.25
    y, cache = returned(layer_norm_forward(x, np.ones(4), np.zeros(4), eps=0.0),
                        "layer_norm_forward", "y", "cache")
    assert np.shape(y) == (1, 4), tr("x of shape (1, 4) must give y of shape (1, 4), got {shape}", shape=np.shape(y))
    expected = np.array([[-1.3416407865, -0.4472135955, 0.4472135955, 1.3416407865]])   # (x - 2.5) / sqrt(1.25)
    if np.allclose(y, [[-1.1618950039, -0.3872983346, 0.3872983346, 1.1618950039]]):
        raise AssertionError(
            tr("layer_norm_forward([[1, 2, 3, 4]]) matches the unbiased variance 5/3 (a division by d - "
                "1); the variance in the definition above is 1.25."))
    assert np.allclose(y, expected), (
        tr("layer_norm_forward([[1, 2, 3, 4]], gamma = 1, beta = 0, eps = 0) should be (x - 2.5) / "
            "sqrt(1.25) = {expected}; got {y}",
            expected=expected, y=y))
    y, _ = returned(layer_norm_forward(x, np.full(4, 2.0), np.full(4, 1.0), eps=0.0),
                    "layer_norm_forward", "y", "cache")
    assert np.allclose(y, 2 * expected + 1), (
        tr("with gamma = 2 and beta = 1, y = 2 x_hat + 1 = {expected}; got {y}", expected=2 * expected + 1, y=y))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)   # (B, T, d)
    y, _ = returned(layer_norm_forward(x, np.ones(5, dtype=np.float32), np.zeros(5, dtype=np.float32)),
                    "layer_norm_forward", "y", "cache")
    assert y.shape == (2, 3, 5), tr("x of shape (2, 3, 5) must give y of shape (2, 3, 5), got {shape}", shape=y.shape)
    assert y.dtype == np.float32, tr("float32 inputs must give a float32 output, got {dtype}", dtype=y.dtype)
    assert np.allclose(y.mean(axis=-1), 0, atol=1e-5) and np.allclose(y.var(axis=-1), 1, atol=1e-3), (
        tr("with gamma = 1 and beta = 0 every token of y must have mean 0 and variance about 1 over "
            "its last axis (normalise each token over its d features, not over the batch)"))
    y, _ = returned(layer_norm_forward(np.full((1, 4), 5.0), np.ones(4), np.zeros(4)),
                    "layer_norm_forward", "y", "cache")
    assert np.all(np.isfinite(y)) and np.allclose(y, 0), (
        tr("a constant token has variance 0: with eps = 1e-5 inside the square root y must be 0, "
            "got {y}",
            y=y))
print(tr("{name}: visible checks passed", name='layer_norm_forward'))

# %% nbgrader={"grade": true, "grade_id": "layer_norm_forward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di layer_norm_forward girano quando il tuo notebook viene valutato.
problem = before_grading("layer_norm_forward", np.ones((2, 4)), np.ones(4), np.zeros(4))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("layer_norm_forward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "layer_norm_backward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 11. `layer_norm_backward` ({{ points: layer_norm_backward }})
#
# Dato $dy = \partial L / \partial y$, trova $dx$, $d\gamma$ e $d\beta$. Prima i parametri:
# $y = \gamma \odot \hat x + \beta$ per ogni token, e gli stessi $\gamma$, $\beta$ servono tutti i
# token, quindi i loro gradienti si sommano su tutti i token, cioè su **ogni** asse iniziale
# (non solo il primo):
#
# $$d\gamma = \sum_{\text{token}} dy \odot \hat x, \qquad d\beta = \sum_{\text{token}} dy .$$
#
# Per $x$, lavora su un token. Scrivi $g = dy \odot \gamma$ (il gradiente rispetto a $\hat x$)
# e $r = 1/\sqrt{\sigma^2 + \varepsilon}$, così che $\hat x_j = (x_j - \mu)\, r$. Poiché
# $\sum_j (x_j - \mu) = 0$,
#
# $$\frac{\partial \mu}{\partial x_k} = \frac{1}{d}, \qquad \frac{\partial \sigma^2}{\partial x_k} = \frac{2 (x_k - \mu)}{d}, \qquad \frac{\partial r}{\partial x_k} = -\frac{1}{2} (\sigma^2 + \varepsilon)^{-3/2} \frac{2 (x_k - \mu)}{d} = -\frac{r^2 \hat x_k}{d},$$
#
# $$\frac{\partial \hat x_j}{\partial x_k} = r \left(\delta_{jk} - \frac{1}{d}\right) + (x_j - \mu) \frac{\partial r}{\partial x_k} = r \left(\delta_{jk} - \frac{1}{d} - \frac{\hat x_j \hat x_k}{d}\right).$$
#
# Sommando $g_j\, \partial \hat x_j / \partial x_k$ su $j$:
#
# $$dx = r \,\big(g - \operatorname{mean}(g) - \hat x \odot \operatorname{mean}(g \odot \hat x)\big),$$
#
# con le medie sull'ultimo asse. I tre termini sono il percorso diretto, il percorso attraverso
# la media e quello attraverso la varianza. Tralasciarne uno dà comunque un array della forma
# giusta (difetto `layer-norm-backward-terms`), ma due proprietà lo tradiscono: per ogni token
# $\sum_j dx_j = 0$ (sommare una costante a un token non cambia il suo valore normalizzato) e,
# quando $\varepsilon = 0$, $\sum_j dx_j \hat x_j = 0$ (né lo cambia riscalarlo).
#
# Non modificare la cache: un ciclo di addestramento potrebbe riusarla.

# %% nbgrader={"grade": false, "grade_id": "layer_norm_backward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: layer_norm_backward }}

# %% nbgrader={"grade": false, "grade_id": "layer_norm_backward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di layer_norm_backward: un esempio svolto, somme su tutti gli assi iniziali, un controllo del gradiente."""
with visible_checks("layer_norm_backward", 5):
    uses_checked("layer_norm_forward", "layer_norm_backward")
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    xhat = (x - 2.5) / math.sqrt(1.25)                     # media 2.5, varianza distorta 1.25
    _, cache = returned(layer_norm_forward(x, np.ones(4), np.zeros(4), eps=0.0),
                        "layer_norm_forward", "y", "cache")
    dx, dgamma, dbeta = returned(layer_norm_backward(np.array([[1.0, 0.0, 0.0, 0.0]]), cache),
                                 "layer_norm_backward", "dx", "dgamma", "dbeta")
    assert np.shape(dx) == (1, 4) and np.shape(dgamma) == (4,) and np.shape(dbeta) == (4,), (
        tr("dy of shape (1, 4) must give dx (1, 4), dgamma (4,), dbeta (4,); got {shape}, {shape2}, "
            "{shape3}",
            shape=np.shape(dx), shape2=np.shape(dgamma), shape3=np.shape(dbeta)))
    expected = [0.2683281573, -0.3577708764, -0.0894427191, 0.1788854382]
    assert np.allclose(dx, [expected]), (
        tr("for x = [[1, 2, 3, 4]], gamma = 1, eps = 0 and dy = [[1, 0, 0, 0]], dx should be "
            "{expected}; got {dx}. Two sums are 0 for the true dx here: the row sum of dx (yours: "
            "{dx2:.3g}), because shifting x does not change y, and the sum of dx * x_hat (yours: "
            "{dx3:.3g}), because scaling x does not change y at eps = 0. Re-read the derivation "
            "above for the term that carries each.",
            expected=expected, dx=dx, dx2=np.sum(dx), dx3=np.sum(dx * xhat)))
    assert np.allclose(dgamma, [-1.3416407865, 0, 0, 0]) and np.allclose(dbeta, [1.0, 0, 0, 0]), (
        tr("with dy = [[1, 0, 0, 0]], dgamma should be [-1.3416, 0, 0, 0] and dbeta [1, 0, 0, 0]; "
            "got {dgamma} and {dbeta}",
            dgamma=dgamma, dbeta=dbeta))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5))                     # (B, T, d)
    gamma = 1 + 0.1 * rng.standard_normal(5)
    beta = 0.1 * rng.standard_normal(5)
    G = rng.standard_normal((2, 3, 5))                     # la loss è L = sum(G * y), quindi dy = G
    _, cache = returned(layer_norm_forward(x, gamma, beta),
                        "layer_norm_forward", "y", "cache")
    dx, dgamma, dbeta = returned(layer_norm_backward(G, cache),
                                 "layer_norm_backward", "dx", "dgamma", "dbeta")
    assert np.shape(dx) == (2, 3, 5) and np.shape(dgamma) == (5,) and np.shape(dbeta) == (5,), (
        tr("dy of shape (2, 3, 5) must give dx (2, 3, 5), dgamma (5,) and dbeta (5,), summed over "
            "both leading axes; got {shape}, {shape2}, {shape3}",
            shape=np.shape(dx), shape2=np.shape(dgamma), shape3=np.shape(dbeta)))

    def ln_loss():
        return float(np.sum(G * layer_norm_forward(x, gamma, beta)[0]))

    for label, analytic, wrt in (("dx", dx, x), ("dgamma", dgamma, gamma), ("dbeta", dbeta, beta)):
        numeric = numerical_gradient(ln_loss, wrt, eps=1e-6)
        err = rel_error(analytic, numeric)
        if not err < 1e-5:
            i = tuple(int(j) for j in np.unravel_index(np.argmax(np.abs(analytic - numeric)), numeric.shape))
            raise AssertionError(
                tr("{label} disagrees with central differences (eps = 1e-6): worst relative error {err:.2e} "
                    "(expected below 1e-5); at index {i} yours is {analytic:.6g}, the numerical gradient "
                    "{numeric:.6g}. For dgamma and dbeta sum over every leading axis; for dx keep all three "
                    "terms.",
                    label=label, err=err, i=i, analytic=analytic[i], numeric=numeric[i]))
print(tr("{name}: visible checks passed", name='layer_norm_backward'))

# %% nbgrader={"grade": true, "grade_id": "layer_norm_backward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di layer_norm_backward girano quando il tuo notebook viene valutato.
problem = before_grading("layer_norm_backward", np.ones((2, 4)), None)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("layer_norm_backward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "attention_forward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 12. `attention_forward` ({{ points: attention_forward }})
#
# Lo strato di self-attention di un blocco, ora con i bias e con una cache per la passata
# all'indietro. Con $x$ di forma `(B, T, d)`:
#
# $$Q = x W_Q + b_Q, \qquad K = x W_K + b_K, \qquad V = x W_V + b_V \qquad \text{(divise in } h \text{ teste)},$$
#
# $$P_k = \operatorname{softmax}\!\left(\frac{Q_k K_k^\top}{\sqrt{d_h}} \ \text{con } -\infty \text{ sopra la diagonale}\right), \qquad O = \operatorname{merge}(P_1 V_1, \dots, P_h V_h), \qquad y = O W_O + b_O .$$
#
# `params` è un dict con le chiavi `W_Q, W_K, W_V, W_O` (ciascuna `(d, d)`) e
# `b_Q, b_K, b_V, b_O` (ciascuna `(d,)`). `causal=False` toglie la maschera; `scale=False` toglie
# $1/\sqrt{d_h}$. Restituisci `(y, cache)`: la cache contiene ciò che serve alla passata
# all'indietro, per esempio $x$, le $Q$, $K$, $V$ per testa, i pesi $P$, la $O$ riunita, il
# fattore di scala, $h$ e i parametri. Riusa le tue `split_heads`, `merge_heads`, `softmax` e
# `causal_mask`.

# %% nbgrader={"grade": false, "grade_id": "attention_forward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: attention_forward }}

# %% nbgrader={"grade": false, "grade_id": "attention_forward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di attention_forward: un esempio svolto, poi l'accordo con multi_head_attention (h = 2, B = 2)."""
with visible_checks("attention_forward", 5):
    B, T, d, h = 2, 3, 4, 2
    x = np.arange(B * T * d, dtype=np.float64).reshape(B, T, d)   # x[0] = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    params = {"W_Q": np.zeros((d, d)), "W_K": np.zeros((d, d)), "W_V": np.eye(d), "W_O": np.eye(d),
              "b_Q": np.zeros(d), "b_K": np.zeros(d), "b_V": np.zeros(d), "b_O": np.array([0.5, 0.5, 0.5, 0.5])}
    y, cache = returned(attention_forward(x, params, n_heads=h),
                        "attention_forward", "y", "cache")             # causale per impostazione predefinita
    assert np.shape(y) == (B, T, d), tr("x (2, 3, 4) must give y (B, T, d) = (2, 3, 4), got {shape}", shape=np.shape(y))
    assert np.allclose(y[0], [[0.5, 1.5, 2.5, 3.5], [2.5, 3.5, 4.5, 5.5], [4.5, 5.5, 6.5, 7.5]]), (
        tr("with W_Q = W_K = 0 (all scores 0), W_V = W_O = I, the causal mask and b_O = 0.5, y[0] "
            "is the running mean of x[0] plus 0.5: [[0.5, 1.5, 2.5, 3.5], [2.5, 3.5, 4.5, 5.5], "
            "[4.5, 5.5, 6.5, 7.5]]; got\n{y}\nIf every row is [4.5, 5.5, 6.5, 7.5], the causal mask "
            "(on by default, causal=True) was not applied.",
            y=y[0]))
    y, _ = returned(attention_forward(x, params, n_heads=h, causal=False),
                    "attention_forward", "y", "cache")
    assert np.allclose(y[0], [[4.5, 5.5, 6.5, 7.5]] * 3), (
        tr("with causal=False every token of y[0] is the mean of x[0] plus 0.5, [4.5, 5.5, 6.5, "
            "7.5]; got\n{y}",
            y=y[0]))

    rng = np.random.default_rng(0)
    B, T, d, h = 2, 5, 8, 2
    x = rng.standard_normal((B, T, d))
    params = {}
    for name in ("Q", "K", "V", "O"):
        params["W_" + name] = rng.standard_normal((d, d)) / math.sqrt(d)
        params["b_" + name] = np.zeros(d)
    y, _ = returned(attention_forward(x, params, n_heads=h),
                    "attention_forward", "y", "cache")
    uses_checked("multi_head_attention", "attention_forward")
    expected, _ = returned(multi_head_attention(x, params["W_Q"], params["W_K"], params["W_V"], params["W_O"],
                                                n_heads=h, mask=np.tril(np.ones((T, T), dtype=bool))),
                           "multi_head_attention", "Y", "weights")
    assert np.allclose(y, expected), (
        tr("with zero biases attention_forward must agree with your multi_head_attention, which "
            "passes its own visible checks, under a causal mask (largest difference {y:.3g}); check "
            "the scale 1/sqrt(d_h) and the mask of attention_forward",
            y=np.max(np.abs(y - expected))))
    y_unscaled, _ = returned(attention_forward(x, params, n_heads=h, scale=False),
                             "attention_forward", "y", "cache")
    assert not np.allclose(y_unscaled, y), tr("scale=False must drop the 1/sqrt(d_h): the output should change")
print(tr("{name}: visible checks passed", name='attention_forward'))

# %% nbgrader={"grade": true, "grade_id": "attention_forward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di attention_forward girano quando il tuo notebook viene valutato.
problem = before_grading("attention_forward", np.ones((1, 2, 4)), {}, 2)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("attention_forward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "attention_backward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 13. `attention_backward` ({{ points: attention_backward }})
#
# Percorri la passata in avanti al contrario. Appiattisci i token del batch in righe,
# `(B·T, d)`, ovunque entri in gioco un peso.
#
# * **Proiezione d'uscita.** $y = O W_O + b_O$ dà $dW_O = O^\top dy$, $db_O = \sum dy$ (su batch
#   e tempo) e $dO = dy\, W_O^\top$. $dW_O$ ha la forma di $W_O$, `(d, d)`; anche il prodotto
#   trasposto $dy^\top O$ ha quella forma ed è sbagliato (difetto `weight-grad-wrong`).
# * **Valori e pesi, testa per testa.** Dividi $dO$ in teste. $O_k = P_k V_k$ dà
#   $dP = dO\, V^\top$ e $dV = P^\top dO$.
# * **Softmax, riga per riga.** Da $\partial p_j / \partial s_l = p_j (\delta_{jl} - p_l)$,
#
#   $$dS_l = \sum_j dP_j\, p_j (\delta_{jl} - p_l) = p_l \Big(dP_l - \sum_j dP_j\, p_j\Big), \qquad dS = P \odot \big(dP - \operatorname{rowsum}(dP \odot P)\big).$$
#
#   Le posizioni mascherate hanno $P = 0$ e ricevono gradiente nullo senza passi aggiuntivi.
#   Senza il termine della somma di riga il risultato ha la forma giusta ed è sbagliato
#   (difetto `softmax-backward`).
# * **Punteggi.** $S = c\, Q K^\top$ con $c = 1/\sqrt{d_h}$ (o 1 quando `scale=False`) dà
#   $dQ = c\, dS\, K$ e $dK = c\, dS^\top Q$. Il fattore che scalava la passata in avanti scala
#   anche quella all'indietro (difetto `backward-missing-scale`).
# * **Proiezioni d'ingresso.** Riunisci $dQ$, $dK$, $dV$ in `(B, T, d)`. Per ogni
#   $Z \in \{Q, K, V\}$: $dW_Z = x^\top dZ$, $db_Z = \sum dZ$, e $x$ riceve da tutte e tre,
#   $dx = dQ\, W_Q^\top + dK\, W_K^\top + dV\, W_V^\top$.
#
# Restituisci `(dx, grads)`, dove `grads` ha le stesse chiavi e forme di `params`. I gradienti
# dei bias si sommano su batch e tempo (altrimenti difetto `param-grad-axes`). Non modificare
# la cache.

# %% nbgrader={"grade": false, "grade_id": "attention_backward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: attention_backward }}

# %% nbgrader={"grade": false, "grade_id": "attention_backward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di attention_backward: forme e chiavi, db_O, un controllo del gradiente di ogni tensore (h = 2, B = 2)."""
with visible_checks("attention_backward", 5):
    uses_checked("attention_forward", "attention_backward")
    rng = np.random.default_rng(0)
    B, T, d, h = 2, 3, 4, 2
    x = rng.standard_normal((B, T, d))
    params = {}
    for name in ("Q", "K", "V", "O"):
        params["W_" + name] = rng.standard_normal((d, d)) / math.sqrt(d)
        params["b_" + name] = 0.1 * rng.standard_normal(d)
    _, cache = returned(attention_forward(x, params, n_heads=h),
                        "attention_forward", "y", "cache")
    dx, grads = returned(attention_backward(np.ones((B, T, d)), cache),
                         "attention_backward", "dx", "grads")
    assert np.shape(dx) == (B, T, d), tr("dy of shape (2, 3, 4) must give dx of shape (2, 3, 4), got {shape}", shape=np.shape(dx))
    assert isinstance(grads, dict) and set(grads) == set(params), (
        tr("grads must be a dict with the keys of params, {params}; got {isinstance}", params=sorted(params), isinstance=sorted(grads) if isinstance(grads, dict) else type(grads).__name__))
    for key in params:
        assert np.shape(grads[key]) == params[key].shape, (
            tr("grads['{key}'] must have the shape of params['{key}'], {shape}; got {shape2}", key=key, shape=params[key].shape, shape2=np.shape(grads[key])))
    assert np.allclose(grads["b_O"], [6.0, 6.0, 6.0, 6.0]), (
        tr("with dy = ones of shape (2, 3, 4), grads['b_O'] is dy summed over batch and time, [6, "
            "6, 6, 6]; got {grads}",
            grads=grads['b_O']))

    G = rng.standard_normal((B, T, d))                     # la loss è L = sum(G * y), quindi dy = G
    _, cache = returned(attention_forward(x, params, n_heads=h),
                        "attention_forward", "y", "cache")
    dx, grads = returned(attention_backward(G, cache),
                         "attention_backward", "dx", "grads")

    def attention_loss():
        return float(np.sum(G * attention_forward(x, params, n_heads=h)[0]))

    hints = {"W_O": tr("the output projection, the first step back; compare the shapes of the product"),
             "b_O": tr("a bias is added at every position of every sequence"),
             "W_V": tr("the path through the values and the weights P, head by head"),
             "b_V": tr("a bias is added at every position of every sequence"),
             "W_Q": tr("the path through the softmax and the scale (re-read its backward above, and trap 1)"),
             "W_K": tr("the path through the softmax and the scale, seen from the keys"),
             "b_Q": tr("a bias is added at every position of every sequence"),
             "b_K": tr("a bias is added at every position of every sequence"),
             "x": tr("x reaches the output through three projections")}
    order = ["W_O", "b_O", "W_V", "b_V", "W_Q", "b_Q", "W_K", "b_K"]    # l'ordine della passata all'indietro
    for key, analytic, wrt in [(k, grads[k], params[k]) for k in order] + [("x", dx, x)]:
        numeric = numerical_gradient(attention_loss, wrt, eps=1e-6)
        err = rel_error(analytic, numeric)
        if not err < 1e-5:
            i = tuple(int(j) for j in np.unravel_index(np.argmax(np.abs(analytic - numeric)), numeric.shape))
            raise AssertionError(
                tr("the gradient of {key} disagrees with central differences (eps = 1e-6): worst relative "
                    "error {err:.2e} (expected below 1e-5); at index {i} yours is {analytic:.6g}, the "
                    "numerical gradient {numeric:.6g}. Hint: {hints}.",
                    key=key, err=err, i=i, analytic=analytic[i], numeric=numeric[i], hints=hints[key]))
print(tr("{name}: visible checks passed", name='attention_backward'))

# %% nbgrader={"grade": true, "grade_id": "attention_backward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di attention_backward girano quando il tuo notebook viene valutato.
problem = before_grading("attention_backward", np.ones((1, 2, 4)), None)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("attention_backward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_gradient_check_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: controllare i gradienti, e che cosa fa $\varepsilon$
#
# Un controllo del gradiente confronta il gradiente analitico $a$ con le differenze centrali
#
# $$n_i = \frac{L(\theta + \varepsilon e_i) - L(\theta - \varepsilon e_i)}{2 \varepsilon}$$
#
# attraverso l'errore relativo $|a - n| / \max(|a|, |n|)$, sulle coordinate dove il gradiente
# supera 1e-6, in float64 (`rel_error` e `numerical_gradient` della cella di setup). La cella
# controlla le tue due passate all'indietro sulla loss $L = \sum G \odot y$ per una $G$ casuale
# fissata, con $\varepsilon$ = 1e-6 e con un $\varepsilon$ grande, 1e-2.
#
# Come leggere la tabella: le differenze centrali commettono un errore dell'ordine di
# $\varepsilon^2$ per una derivata terza, più un errore di arrotondamento dell'ordine di
# (epsilon di macchina)$/\varepsilon$. Dove l'uscita dipende da un tensore in modo non lineare
# (l'ingresso $x$ di entrambe le funzioni, e $W_Q$, $W_K$, $b_Q$ attraverso la softmax),
# l'$\varepsilon$ grande dà l'errore maggiore. È lo schema da riconoscere: un controllo che
# peggiora al crescere di $\varepsilon$ ti sta parlando di $\varepsilon$, non della tua passata
# all'indietro, mentre una passata all'indietro sbagliata è sbagliata per ogni $\varepsilon$. Dove
# l'uscita è lineare nel tensore ($\gamma$, $\beta$, $W_V$, $b_V$, $W_O$, $b_O$), la derivata
# terza è 0, resta solo l'arrotondamento, e l'$\varepsilon$ grande fa altrettanto bene o meglio.
# La riga di $b_K$ dovrebbe indicare 0 perché non c'è niente da confrontare: sommare $b_K$ a ogni
# chiave aggiunge lo stesso $q \cdot b_K$ a ogni punteggio di una riga, cosa che la softmax
# ignora, quindi quel gradiente è esattamente 0 e ogni coordinata cade sotto la soglia di 1e-6.
#
# La lezione ha incontrato una versione più netta della storia di $\varepsilon$ su un minuscolo
# modello a 2 strati ($d = 16$, 3 sequenze): il peggior errore relativo era 2.56e-6 (pre-LN) e
# 4.90e-5 (post-LN) con $\varepsilon$ = 1e-6, ma 9.94e-2 e 6.60e-3 con $\varepsilon$ = 1e-4, perché
# passi di quella ampiezza attraversano i punti angolosi della ReLU, dove la loss non ha
# derivata (trappola 8).

# %% nbgrader={"grade": false, "grade_id": "lesson_gradient_check", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: controlli del gradiente di layer_norm_backward e attention_backward con eps = 1e-6 e 1e-2."""
with time_limit(30, lesson=True):
    rng = np.random.default_rng(4)
    x_ln = rng.standard_normal((2, 3, 6))
    ln_params = {"gamma": 1 + 0.1 * rng.standard_normal(6), "beta": 0.1 * rng.standard_normal(6)}
    G_ln = rng.standard_normal(x_ln.shape)
    _, cache = layer_norm_forward(x_ln, ln_params["gamma"], ln_params["beta"])
    dx, dgamma, dbeta = layer_norm_backward(G_ln, cache)
    ln_analytic = {"x": (dx, x_ln), "gamma": (dgamma, ln_params["gamma"]), "beta": (dbeta, ln_params["beta"])}

    def ln_loss():
        return float(np.sum(G_ln * layer_norm_forward(x_ln, ln_params["gamma"], ln_params["beta"])[0]))

    B, T, d, h = 2, 4, 8, 2
    x_att = rng.standard_normal((B, T, d))
    att_params = {}
    for name in ("Q", "K", "V", "O"):
        att_params["W_" + name] = rng.standard_normal((d, d)) / math.sqrt(d)
        att_params["b_" + name] = 0.1 * rng.standard_normal(d)
    G_att = rng.standard_normal((B, T, d))
    _, cache = attention_forward(x_att, att_params, n_heads=h)
    dx, grads = attention_backward(G_att, cache)
    att_analytic = {"x": (dx, x_att)}
    att_analytic.update({k: (grads[k], att_params[k]) for k in att_params})

    def att_loss():
        return float(np.sum(G_att * attention_forward(x_att, att_params, n_heads=h)[0]))

    print("peggior errore relativo          eps = 1e-6    eps = 1e-2")
    for label, loss, analytic in (("layer_norm_backward", ln_loss, ln_analytic),
                                  ("attention_backward", att_loss, att_analytic)):
        for key, (a, wrt) in analytic.items():
            errors = [rel_error(a, numerical_gradient(loss, wrt, eps)) for eps in (1e-6, 1e-2)]
            print(f"{label:20s} {key:8s}   {errors[0]:10.2e}    {errors[1]:10.2e}")

# %% [markdown] nbgrader={"grade": false, "grade_id": "block_param_count_text", "locked": true, "schema_version": 3, "solution": false}
# ## 14. `block_param_count` ({{ points: block_param_count }})
#
# Conta i parametri di un blocco pre-LN con i bias:
#
# * attenzione: quattro proiezioni $d \times d$, ciascuna con un bias: $4(d^2 + d)$;
# * FFN: $W_1$ `(d, d_ff)`, $b_1$ `(d_ff,)`, $W_2$ `(d_ff, d)`, $b_2$ `(d,)`: $2\, d\, d_{ff} + d_{ff} + d$;
# * due layer norm, ciascuna con $\gamma$ e $\beta$: $4d$.
#
# Con $d_{ff} = 4d$ il totale è $4d^2 + 4d + 8d^2 + 5d + 4d = 12d^2 + 13d$. Non dipende dal
# numero di teste. Le cifre della lezione: 49.984 per $d = 64$, 789.760 per $d = 256$,
# 3.152.384 per $d = 512$. A $d = 512$ tre gruppi da 1.048.576 parametri (le quattro
# proiezioni dell'attenzione, $W_1$, $W_2$) ne fanno quasi tutto: i bias e i parametri delle
# layer norm sono 6.656, lo 0,21 %. `d_ff=None` vuol dire $4d$. Restituisci un `int` di Python.

# %% nbgrader={"grade": false, "grade_id": "block_param_count_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: block_param_count }}

# %% nbgrader={"grade": false, "grade_id": "block_param_count_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di block_param_count: il conto della lezione per d = 64 e un d_ff esplicito."""
with visible_checks("block_param_count", 5):
    n = block_param_count(64)
    assert isinstance(n, (int, np.integer)) and not isinstance(n, bool), (
        tr("block_param_count must return an int, got {type}", type=type(n).__name__))
    assert n == 49_984, (
        tr("block_param_count(64) = 12 * 64^2 + 13 * 64 = 49,984; got {n:,}. Count 4 (d^2 + d) for "
            "attention, 2 d d_ff + d_ff + d for the FFN and 4 d for the two layer norms.",
            n=n))
    n = block_param_count(4, d_ff=8)
    assert n == 172, (
        tr("block_param_count(4, d_ff=8) = 4 (16 + 4) + (4*8 + 8 + 8*4 + 4) + 4*4 = 80 + 76 + 16 = "
            "172; got {n:,}. Is d_ff ignored, or used in place of 4 d only in one of the two FFN "
            "matrices?",
            n=n))
print(tr("{name}: visible checks passed", name='block_param_count'))

# %% nbgrader={"grade": true, "grade_id": "block_param_count_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di block_param_count girano quando il tuo notebook viene valutato.
problem = before_grading("block_param_count", 8)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("block_param_count", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_param_count_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: $12d^2 + 13d$, tensore per tensore
#
# La cella scrive in un dict la forma di ogni tensore di un blocco pre-LN, li conta uno per uno
# e mette il totale accanto alla formula, alla tua `block_param_count` e alle cifre della
# lezione.

# %% nbgrader={"grade": false, "grade_id": "lesson_param_count", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: i parametri di un blocco pre-LN, contati tensore per tensore."""
with time_limit(10, lesson=True):
    def block_shapes(d, d_ff):
        """La forma di ogni tensore di parametri di un blocco pre-LN con i bias."""
        shapes = {"ln1.gamma": (d,), "ln1.beta": (d,)}
        for name in ("Q", "K", "V", "O"):
            shapes["W_" + name] = (d, d)
            shapes["b_" + name] = (d,)
        shapes.update({"ln2.gamma": (d,), "ln2.beta": (d,),
                       "W1": (d, d_ff), "b1": (d_ff,), "W2": (d_ff, d), "b2": (d,)})
        return shapes

    lesson_counts = {64: 49_984, 256: 789_760, 512: 3_152_384}
    print("    d   tensore per tensore   12d^2 + 13d       la tua      lezione")
    for d in (64, 256, 512):
        counted = sum(math.prod(shape) for shape in block_shapes(d, 4 * d).values())
        print(f"{d:5d}   {counted:19,d}   {12 * d * d + 13 * d:11,d}   {block_param_count(d):10,d}   {lesson_counts[d]:10,d}")

    shapes = block_shapes(512, 2048)
    total = sum(math.prod(s) for s in shapes.values())
    projections = sum(math.prod(shapes["W_" + n]) for n in "QKVO")
    small = total - projections - math.prod(shapes["W1"]) - math.prod(shapes["W2"])
    print(f"\nd = 512: proiezioni dell'attenzione {projections:,d}, W1 {math.prod(shapes['W1']):,d}, "
          f"W2 {math.prod(shapes['W2']):,d}, bias e layer norm {small:,d} ({100 * small / total:.2f} %)")

# %% [markdown] nbgrader={"grade": false, "grade_id": "kv_cache_bytes_text", "locked": true, "schema_version": 3, "solution": false}
# ## 15. `kv_cache_bytes` ({{ points: kv_cache_bytes }})
#
# Un decoder genera un token alla volta. A ogni passo solo la query, la chiave e il valore del
# nuovo token sono nuovi: le chiavi e i valori delle posizioni precedenti dipendono solo dai
# token che le precedono (è ciò che garantisce la maschera causale), quindi non cambiano mai.
# Tenerli in una cache trasforma ogni passo da un passaggio sull'intero prefisso in una sola
# riga nuova per strato. Nel decoder NumPy della lezione (4 strati, 8 teste, $d = 256$, un
# prompt di 32 token e 128 generati), la generazione con e senza cache concordava a 6.9e-15, e
# la cache la rendeva da 40 a 110 volte più veloce.
#
# Il prezzo è la memoria: per ogni strato, testa chiave/valore, posizione e sequenza, un
# vettore chiave e un vettore valore di $d_{head}$ numeri,
#
# $$\text{byte} = 2 \cdot n_{\text{strati}} \cdot n_{\text{teste kv}} \cdot d_{\text{head}} \cdot T \cdot B \cdot \text{byte per elemento}.$$
#
# L'esempio della lezione: 32 strati, $d_{head} = 128$, $T = 4096$, float16 (2 byte), batch 1
# occupano 2 GiB con 32 teste KV. L'attenzione multi-query (Shazeer, 2019) condivide una sola
# testa chiave/valore fra tutte le teste delle query: 0,0625 GiB. La cache cresce linearmente
# con $T$ e $B$ mentre i pesi restano della stessa dimensione, quindi con contesti lunghi e
# batch grandi può pesare più del modello (l'Esercizio 2 misura di quanto). Restituisci un
# `int` di Python.

# %% nbgrader={"grade": false, "grade_id": "kv_cache_bytes_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: kv_cache_bytes }}

# %% nbgrader={"grade": false, "grade_id": "kv_cache_bytes_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di kv_cache_bytes: gli esempi della lezione da 2 GiB e da 0.0625 GiB."""
with visible_checks("kv_cache_bytes", 5):
    n = kv_cache_bytes(n_layers=32, n_kv_heads=32, d_head=128, seq_len=4096, batch=1, bytes_per_element=2)
    assert isinstance(n, (int, np.integer)) and not isinstance(n, bool), (
        tr("kv_cache_bytes must return an int, got {type}", type=type(n).__name__))
    assert n == 2_147_483_648, (
        tr("32 layers, 32 KV heads, d_head 128, T = 4096, batch 1, float16: 2 * 32 * 32 * 128 * "
            "4096 * 1 * 2 = 2,147,483,648 bytes (2 GiB); got {n:,}. Did you forget the 2 (keys and "
            "values) or a factor?",
            n=n))
    n = kv_cache_bytes(n_layers=32, n_kv_heads=1, d_head=128, seq_len=4096, batch=1, bytes_per_element=2)
    assert n == 67_108_864, tr("the same with one KV head (multi-query) is 67,108,864 bytes (0.0625 GiB); got {n:,}", n=n)
    n = kv_cache_bytes(2, 3, 5, 7, 11, 4)
    assert n == 2 * 2 * 3 * 5 * 7 * 11 * 4, (
        tr("kv_cache_bytes(2, 3, 5, 7, 11, 4) = 2 * 2 * 3 * 5 * 7 * 11 * 4 = 18,480; got {n:,}", n=n))
print(tr("{name}: visible checks passed", name='kv_cache_bytes'))

# %% nbgrader={"grade": true, "grade_id": "kv_cache_bytes_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di kv_cache_bytes girano quando il tuo notebook viene valutato.
problem = before_grading("kv_cache_bytes", 1, 1, 1, 1, 1, 2)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("kv_cache_bytes", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "exercise_decoder_budget_text", "locked": true, "schema_version": 3, "solution": false}
# ## Esercizio 2: il budget di memoria di un decoder ({{ points: exercise_decoder_budget }})
#
# Un decoder ha 24 blocchi pre-LN con $d = 512$, 8 teste di $d_{head} = 64$ e $d_{ff} = 4d$.
# Conta solo i blocchi (niente embedding, niente layer norm finale) e calcola:
#
# 1. `budget_block_params`: il numero di parametri dei 24 blocchi;
# 2. `budget_weight_bytes_fp16`: i byte necessari a memorizzarli in float16;
# 3. `budget_kv_cache_bytes`: i byte della cache chiave-valore durante la generazione con
#    $T = 8192$, batch 4, in float16, con 8 teste KV per strato (una per testa di query);
# 4. `budget_kv_to_weights`: la cache chiave-valore divisa per i pesi (punto 3 su punto 2);
# 5. `budget_kv_cache_bytes_mqa`: la cache del punto 3 con l'attenzione multi-query (1 testa
#    KV per strato).
#
# I punti 1, 2, 3 e 5 sono interi esatti, il punto 4 un float. Puoi chiamare le tue
# `block_param_count` e `kv_cache_bytes`. Il feedback mostra la soluzione svolta.

# %% nbgrader={"grade": false, "grade_id": "exercise_decoder_budget_answer", "locked": false, "schema_version": 3, "solution": true}
# Esercizio 2: assegna le tue cinque risposte (numeri).
# budget_block_params = ...
# budget_weight_bytes_fp16 = ...
# budget_kv_cache_bytes = ...
# budget_kv_to_weights = ...
# budget_kv_cache_bytes_mqa = ...
### BEGIN SOLUTION
d, n_layers, d_head = 512, 24, 64
budget_block_params = n_layers * (12 * d * d + 13 * d)                        # 24 * 3,152,384 = 75,657,216
budget_weight_bytes_fp16 = 2 * budget_block_params                            # 151,314,432 byte = 144.3 MiB
budget_kv_cache_bytes = 2 * n_layers * 8 * d_head * 8192 * 4 * 2              # 1,610,612,736 byte = 1.5 GiB
budget_kv_to_weights = budget_kv_cache_bytes / budget_weight_bytes_fp16       # circa 10.64
budget_kv_cache_bytes_mqa = 2 * n_layers * 1 * d_head * 8192 * 4 * 2          # 201,326,592 byte = 0.1875 GiB
### END SOLUTION

# %% nbgrader={"grade": false, "grade_id": "exercise_decoder_budget_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili dell'esercizio 2: le cinque risposte sono definite e sono numeri (i valori si controllano alla valutazione)."""
with visible_checks("exercise_decoder_budget"):
    for name in ("budget_block_params", "budget_weight_bytes_fp16", "budget_kv_cache_bytes",
                 "budget_kv_to_weights", "budget_kv_cache_bytes_mqa"):
        if name not in globals():
            raise NotAnswered(tr("assign your answer to the variable {name} in the cell above", name=name))
        value = globals()[name]
        assert isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool), (
            tr("{name} should be a number, got {type}", name=name, type=type(value).__name__))
        assert math.isfinite(value) and value > 0, tr("{name} should be a positive number, got {value}", name=name, value=value)
    print(tr("exercise_decoder_budget: visible checks passed (the values are checked when graded)"))

# %% nbgrader={"grade": true, "grade_id": "exercise_decoder_budget_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di exercise_decoder_budget girano quando il tuo notebook viene valutato.
problem = before_grading("exercise_decoder_budget", answers=("budget_block_params", "budget_weight_bytes_fp16", "budget_kv_cache_bytes", "budget_kv_to_weights", "budget_kv_cache_bytes_mqa"))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("exercise_decoder_budget", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "closing", "locked": true, "schema_version": 3, "solution": false}
# ## Prima di consegnare
#
# * *Kernel → Restart Kernel and Run All Cells*: ogni test visibile dovrebbe stampare
#   `... controlli visibili superati`, e le celle di *La lezione, dal vivo* dovrebbero stampare le
#   loro tabelle. Un test visibile che passa non garantisce il punteggio pieno: i controlli
#   nascosti usano forme casuali, input float32, righe interamente mascherate, e verificano che
#   le tue funzioni lascino intatti i loro argomenti.
# * La cella qui sotto elenca, parte per parte, quali controlli visibili sono passati, quali
#   falliscono, quali parti sono ancora stub, a quali esercizi manca ancora la risposta e quali
#   non sono state eseguite.
# * Premi **Validate** (oppure esegui `nbgrader validate attention.ipynb`). Esegue l'intero
#   notebook ed elenca ogni parte ancora stub o i cui controlli visibili falliscono, con il
#   messaggio del controllo; dice *Success* solo quando ogni parte è scritta e ogni controllo
#   visibile passa.
# * Il feedback elenca, per ogni funzione, ogni controllo eseguito e, per un controllo fallito,
#   il difetto trovato (per esempio `head-order` o `softmax-backward`) con l'input in cui è
#   emerso.

# %% nbgrader={"grade": false, "grade_id": "visible_checks_summary", "locked": true, "schema_version": 3, "solution": false} tags=["summary"]
"""A che punto sei: i test visibili di ogni parte valutata, come sono andati l'ultima volta."""
visible_checks_summary()
