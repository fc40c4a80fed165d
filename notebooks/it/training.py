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

# %% nbgrader={"grade": false, "grade_id": "gate", "locked": true, "schema_version": 3, "solution": false} tags=["gate"]
# {{ gate }}

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Compito `training`: un decoder che impara a copiare e a ordinare
#
# Questo compito segue la seconda metà della lezione 95 di un corso italiano di machine
# learning, *L'attenzione, derivata per intero: query, chiave, valore e il blocco Transformer
# scritto da zero* ([federicocalo.dev](https://federicocalo.dev)); "la lezione", qui sotto, è
# quell'articolo. Oltre a NumPy servono matplotlib e rich ({{ student_install }} installa tutto ciò
# che usa il corso). Tieni questa cartella
# `training` accanto alla tua cartella `attention`: il cancello legge
# `../attention/attention.ipynb`, oppure il notebook indicato da
# `%env ATTENTION_NOTEBOOK=/percorso/di/attention.ipynb` eseguito prima di esso.
#
# La cella qui sopra è **il cancello**. Ha caricato le funzioni di attenzione che hai scritto
# nel compito `attention` e ha eseguito su di esse i controlli visibili di quel notebook; se ha
# stampato *Cancello aperto*, sono definite in questo notebook e il resto gira sul **tuo** codice. Se
# si è fermata, ha elencato le funzioni da correggere: correggile nel notebook attention,
# salva, ed esegui di nuovo il cancello. Ogni cella successiva che usa le tue funzioni comincia
# con `require_gate()`, che si ferma con lo stesso elenco finché il cancello non passa (e anche
# se ridefinisci qui una di quelle funzioni: appartengono al notebook attention).
#
# Perché un cancello: il modello qui sotto impara attraverso le tue `attention_backward` e
# `layer_norm_backward`. Un gradiente sbagliato non fa cadere niente; la loss scende comunque un
# po', e il modello finisce peggiore senza una ragione visibile. Addestrare su codice che non ha
# superato i suoi controlli insegna la lezione sbagliata.
#
# ### Che cosa costruisci
#
# Un Transformer solo decoder, addestrato con la cross-entropy sul token successivo su due
# compiti sintetici, con la configurazione di riferimento della lezione:
#
# * un alfabeto di 20 simboli più un separatore `SEP` (vocabolario $V = 21$). Una sequenza è
#   `[s1 … sL, SEP, a1 … aL]`: per **copia** la risposta $a$ è $s$, per **ordinamento** è $s$
#   ordinata;
# * embedding dei token più una tabella delle posizioni **appresa**, 2 blocchi **pre-LN** di
#   larghezza $d = 32$ con 4 teste ($d_h = 8$) e $d_{ff} = 128$, una layer norm finale, una
#   proiezione d'uscita: **27.253** parametri con $L = 6$;
# * la loss conta solo le $L$ posizioni della risposta; Adam ($\beta_1 = 0.9$, $\beta_2 = 0.999$,
#   $\varepsilon = 10^{-8}$, learning rate $3 \cdot 10^{-3}$, con correzione del bias), batch da
#   32, un batch casuale nuovo a ogni passo, 1500 passi; pesi $\sim \mathcal{N}(0,
#   1/\text{fan\_in})$, embedding e posizioni $\sim 0.1\,\mathcal{N}(0, 1)$;
# * la valutazione è una vera generazione greedy degli $L$ token della risposta per 500
#   sequenze di test, con l'accuratezza per token e per sequenza.
#
# Scrivi i pezzi nuovi di questo compito; il resto è dato, e ogni funzione riceve un namespace
# `ops` (`current_ops()`) che contiene le tue funzioni di attenzione e le tue funzioni di
# addestramento, così che i correttori possano eseguire ciascuna tua funzione con le versioni
# di riferimento delle altre.
#
# ### Convenzioni
#
# Le lettere delle forme come in `attention` (`B` batch, `T` posizioni, `d` larghezza, `h`
# teste, `d_h = d // h`), più `L` (simboli per sequenza; il modello legge `T = 2L` posizioni),
# `V` (vocabolario) e `d_ff` (larghezza della FFN). I vettori sono righe, i pesi moltiplicano a
# destra (`x @ W + b`). I parametri stanno in un dict piatto: `"embedding"` `(V, d)`,
# `"positions"` `(2L+1, d)`, `"block0.W_Q"` … `"block1.b2"`, `"ln_f_gamma"`, `"ln_f_beta"`,
# `"W_out"` `(d, V)`, `"b_out"` `(V,)`. L'addestramento gira in float32 (più veloce di float64
# qui, e su 20 semi altrettanto accurato); i controlli dei gradienti girano in float64. Le tue
# funzioni non devono modificare i loro argomenti.
#
# ### Come lavorare
#
# 1. Esegui il cancello, poi le celle in ordine. Per ogni parte: leggi, sostituisci
#    `raise NotImplementedError()` nella cella della funzione, eseguila, esegui il test visibile
#    sotto di essa.
# 2. I controlli nascosti (alla correzione) verificano di più, sempre con le funzioni di
#    attenzione **di riferimento**: i tuoi punti qui non dipendono mai dal compito
#    `attention`. Ogni controllo fallito nomina un difetto e lo spiega nel feedback.
# 3. Le celle intitolate *La lezione, dal vivo* ripetono gli esperimenti della lezione sul tuo
#    codice: circa due dozzine di addestramenti, qualche minuto su un portatile con un processo
#    per core, con una barra di avanzamento. Non danno punti e vengono saltate mentre nbgrader
#    valida o corregge il notebook.
# 4. Prima di consegnare: *Kernel → Restart Kernel and Run All Cells*, poi **Validate**.
#
# ### Punti
#
# {{ points_table }}

# %% nbgrader={"grade": false, "grade_id": "given_setup", "locked": true, "schema_version": 3, "solution": false} tags=["given"]
"""Dato: gli import, le costanti dei compiti, la configurazione e i parametri del modello, le funzioni di supporto dei test."""
require_gate()
import concurrent.futures
import multiprocessing
from dataclasses import dataclass
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")  # le figure diventano PNG mostrati con display(); nessuna interfaccia grafica
import matplotlib.pyplot as plt
from IPython.display import Image, display

# Gli esperimenti della lezione richiedono minuti e non danno punti: saltali mentre nbgrader
# valida o corregge questo notebook (imposta NBGRADER_EXECUTION).
RUN_EXPERIMENTS = os.environ.get("NBGRADER_EXECUTION") is None
SKIPPED = "saltata: nbgrader sta validando o correggendo questo notebook (gli esperimenti non danno punti)"

# {{ constants: N_SYMBOLS, SEP, VOCAB_SIZE, TASKS, EVAL_SEED, ATTENTION_OPS, TRAINING_OPS, OPS_NAMES, BLOCK_KEYS, ATTENTION_KEYS }}


# {{ given: ModelConfig, make_ops, init_params, block_params, flatten, unflatten }}


def show(figure):
    """Mostra una figura matplotlib come immagine PNG, poi la chiude."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    display(Image(data=buffer.getvalue(), format="png"))


def current_ops():
    """Le funzioni con cui è costruito il modello, come sono definite ora in questo notebook:
    le tue funzioni di attenzione (caricate dal cancello) e le tue funzioni di addestramento."""
    return make_ops(globals())


def rel_error(analytic, numeric, floor=1e-6):
    """Worst relative error |a - n| / max(|a|, |n|) over coordinates where max(|a|, |n|) > floor."""
    a, n = np.asarray(analytic, dtype=np.float64), np.asarray(numeric, dtype=np.float64)
    if a.shape != n.shape:
        raise ValueError(f"gradient of shape {a.shape}, expected {n.shape}")
    if not np.all(np.isfinite(a)):
        return math.inf
    size = np.maximum(np.abs(a), np.abs(n))
    keep = size > floor
    return float(np.max(np.abs(a - n)[keep] / size[keep])) if np.any(keep) else 0.0


def numerical_gradient(loss, x, eps=1e-6, indices=None):
    """Differenze centrali (loss() in x + eps e_i - loss() in x - eps e_i) / (2 eps) per ogni
    coordinata i dell'array float64 x (o solo per quelle in ``indices``), che loss() legge;
    x cambia durante la chiamata e viene poi ripristinato esattamente. Le coordinate non
    calcolate valgono NaN."""
    grad = np.full(x.shape, np.nan) if indices is not None else np.zeros(x.shape)
    for i in (np.ndindex(x.shape) if indices is None else indices):
        old = x[i]
        x[i] = old + eps
        up = loss()
        x[i] = old - eps
        down = loss()
        x[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


# %% [markdown] nbgrader={"grade": false, "grade_id": "make_batch_text", "locked": true, "schema_version": 3, "solution": false}
# ## 1. `make_batch` ({{ points: make_batch }})
#
# Un esempio di addestramento è una sequenza di lunghezza $2L + 1$. Per $L = 3$ e il compito di
# ordinamento:
#
# | posizione | 0 | 1 | 2 | 3 | 4 | 5 | 6 |
# |---|---|---|---|---|---|---|---|
# | sequenza | $s_1$ = 7 | $s_2$ = 2 | $s_3$ = 7 | `SEP` | $a_1$ = 2 | $a_2$ = 7 | $a_3$ = 7 |
# | ingresso (posizioni 0..5) | 7 | 2 | 7 | `SEP` | 2 | 7 | |
# | obiettivo (posizioni 1..6) | 2 | 7 | `SEP` | 2 | 7 | 7 | |
# | conta nella loss | no | no | no | **sì** | **sì** | **sì** | |
#
# Un decoder predice tutti i token successivi insieme: la posizione d'ingresso $t$ (che, grazie
# alla maschera causale, vede solo le posizioni $0 \dots t$) viene addestrata a produrre il token
# della posizione $t + 1$. Quindi gli ingressi sono le posizioni $0 \dots 2L-1$ della sequenza e
# gli obiettivi le posizioni $1 \dots 2L$, lo stesso array spostato di uno. Contano solo le
# predizioni di $a_1 \dots a_L$: i simboli sorgente sono casuali e nessun modello può predirli,
# quindi addestrarsi su di essi aggiungerebbe solo rumore. Sono le posizioni d'ingresso
# $L \dots 2L-1$: il separatore predice $a_1$, e $a_{k}$ predice $a_{k+1}$. Nemmeno la predizione
# di `SEP` a partire da $s_L$ (posizione d'ingresso $L - 1$) conta.
#
# Estrai gli $L$ simboli in modo indipendente e uniforme da $0 \dots 19$ (ripetizioni ammesse,
# circa il 44 % delle sequenze di lunghezza 6 non ne ha), con una sola chiamata
# `rng.integers(0, N_SYMBOLS, size=(B, L))` sul generatore che ricevi, così che un seme fissi il
# batch. Ogni chiamata deve dare un batch nuovo. `SEP` è la costante `SEP = 20`. Solleva
# `ValueError` per un compito diverso da `"copy"` o `"sort"`.

# %% nbgrader={"grade": false, "grade_id": "make_batch_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: make_batch }}

# %% nbgrader={"grade": false, "grade_id": "make_batch_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di make_batch: forme e dtype, lo spostamento di uno, SEP, copy e sort, la maschera della loss."""
require_gate()
with visible_checks("make_batch", 10):
    inputs, targets, loss_mask = returned(make_batch("sort", 3, 4, np.random.default_rng(0)),
                                          "make_batch", "inputs", "targets", "loss_mask")
    for label, arr in (("inputs", inputs), ("targets", targets), ("loss_mask", loss_mask)):
        assert np.shape(arr) == (4, 6), (
            tr("make_batch('sort', L=3, batch_size=4, rng): {label} must have shape (B, 2L) = (4, 6), "
                "got {shape}",
                label=label, shape=np.shape(arr)))
    assert inputs.dtype.kind in "iu" and targets.dtype.kind in "iu", (
        tr("token ids must be integers (they index the embedding table), got {dtype} and {dtype2}", dtype=inputs.dtype, dtype2=targets.dtype))
    assert loss_mask.dtype == bool, tr("loss_mask must be boolean, got {dtype}", dtype=loss_mask.dtype)
    assert np.array_equal(inputs[:, 1:], targets[:, :-1]), (
        tr("targets must be the inputs shifted by one (input position t predicts the token at t + "
            "1): inputs[0] = {inputs}, targets[0] = {targets}",
            inputs=inputs[0], targets=targets[0]))
    sequence = np.concatenate([inputs[:, :1], targets], axis=1)       # (B, 2L + 1)
    assert np.all(sequence[:, 3] == SEP), tr("position L = 3 must hold SEP = {SEP}; sequence 0 is {sequence}", SEP=SEP, sequence=sequence[0])
    assert np.all((sequence[:, :3] >= 0) & (sequence[:, :3] < N_SYMBOLS)), (
        tr("the source symbols must lie in 0 .. {N_SYMBOLS}; sequence 0 is {sequence}", N_SYMBOLS=N_SYMBOLS - 1, sequence=sequence[0]))
    assert np.array_equal(sequence[:, 4:], np.sort(sequence[:, :3], axis=1)), (
        tr("for sort the answer is the source sorted increasingly; sequence 0 is {sequence}", sequence=sequence[0]))
    assert loss_mask.tolist() == [[False, False, False, True, True, True]] * 4, (
        tr("the loss counts exactly the L predictions of a1 .. aL, input positions L .. 2L-1: each "
            "row of loss_mask must be [F, F, F, T, T, T], got {loss_mask}",
            loss_mask=loss_mask[0].astype(int)))
    inputs, targets, _ = returned(make_batch("copy", 5, 2, np.random.default_rng(1)),
                                  "make_batch", "inputs", "targets", "loss_mask")
    assert np.array_equal(targets[:, 5:], inputs[:, :5]), (
        tr("for copy the answer repeats the source: inputs[0] = {inputs}, targets[0] = {targets}", inputs=inputs[0], targets=targets[0]))
    again, _, _ = returned(make_batch("copy", 5, 2, np.random.default_rng(1)),
                           "make_batch", "inputs", "targets", "loss_mask")
    assert np.array_equal(again, inputs), tr("the same seed must give the same batch: draw only from the rng argument")
print(tr("make_batch: visible checks passed; a sort sequence with L = 3:"), sequence[0])

# %% nbgrader={"grade": true, "grade_id": "make_batch_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di make_batch girano quando il tuo notebook viene valutato (con le
# funzioni di attenzione di riferimento: questi punti non dipendono mai dal compito `attention`).
require_gate()
problem = before_grading("make_batch", "copy", 2, 1, np.random.default_rng(0))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests.checks_training import grade
grade("make_batch", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "model_param_count_text", "locked": true, "schema_version": 3, "solution": false}
# ## 2. `model_param_count` ({{ points: model_param_count }})
#
# Prima di addestrare qualcosa, conta che cosa verrà addestrato. Il modello di `init_params`
# (la cella qui sopra) ha
#
# * l'embedding dei token, $V \times d$, e la tabella delle posizioni, $(2L+1) \times d$ (una
#   riga per posizione della sequenza completa; il modello legge le posizioni $0 \dots 2L-1$,
#   quindi l'ultima riga non si usa mai, ma è allocata e contata);
# * `n_layers` blocchi pre-LN da $4(d^2 + d) + 2\,d\,d_{ff} + d_{ff} + d + 4d$ parametri
#   ciascuno (la `block_param_count` del compito `attention`: $12 d^2 + 13 d$ quando
#   $d_{ff} = 4d$);
# * la layer norm finale, $2d$, e la proiezione d'uscita, $d\,V + V$.
#
# Per la configurazione di riferimento ($V = 21$, $d = 32$, 2 strati, $2L + 1 = 13$,
# $d_{ff} = 128$) fanno **27.253**. Restituisci un `int` di Python; `d_ff=None` vuol dire
# $4d$.

# %% nbgrader={"grade": false, "grade_id": "model_param_count_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: model_param_count }}

# %% nbgrader={"grade": false, "grade_id": "model_param_count_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di model_param_count: i 27.253 della lezione, e un conteggio dei tensori di init_params."""
require_gate()
with visible_checks("model_param_count", 10):
    n = model_param_count(21, 32, 2, 13, 128)
    assert isinstance(n, (int, np.integer)) and not isinstance(n, bool), tr("return an int, got {type}", type=type(n).__name__)
    assert n == 27_253, (
        tr("model_param_count(21, 32, 2, 13, 128) should be 27,253 (the lesson's reference "
            "configuration); got {n:,}. Count the embedding (V d), the positions (13 d), 2 blocks, "
            "the final LN (2 d) and W_out, b_out (d V + V).",
            n=n))
    config = ModelConfig(vocab_size=7, d=8, n_heads=2, n_layers=3, d_ff=32, max_len=5)
    counted = sum(v.size for v in init_params(config, np.random.default_rng(0)).values())
    assert model_param_count(7, 8, 3, 5) == counted, (
        tr("V = 7, d = 8, 3 layers, 5 positions, d_ff = 4 d = 32: init_params creates {counted:,} "
            "parameters, model_param_count says {model_param_count:,}",
            counted=counted, model_param_count=model_param_count(7, 8, 3, 5)))
print(tr("model_param_count: visible checks passed; {n:,} parameters in the reference configuration", n=n))

# %% nbgrader={"grade": true, "grade_id": "model_param_count_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di model_param_count girano quando il tuo notebook viene valutato (con le
# funzioni di attenzione di riferimento: questi punti non dipendono mai dal compito `attention`).
require_gate()
problem = before_grading("model_param_count", 21, 32, 2, 13)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests.checks_training import grade
grade("model_param_count", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "model_text", "locked": true, "schema_version": 3, "solution": false}
# ## Il modello (dato)
#
# La cella qui sotto contiene la passata in avanti di un blocco, la passata in avanti
# dell'intero modello e la sua passata all'indietro. Leggile: la tua `block_backward` deve
# percorrere `block_forward` al contrario, e `model_backward` la chiama una volta per blocco.
#
# **Il flusso residuo.** Un blocco somma al suo ingresso invece di sostituirlo. Pre-LN (Xiong
# et al., 2020; la scelta predefinita qui):
#
# $$x_1 = x + \operatorname{MHA}(\operatorname{LN}_1(x)), \qquad y = x_1 + \operatorname{FFN}(\operatorname{LN}_2(x_1)), \qquad \operatorname{FFN}(u) = \operatorname{ReLU}(u W_1 + b_1)\, W_2 + b_2 .$$
#
# Post-LN (il Transformer originale; una delle ablazioni) normalizza dopo ogni somma:
# $x_1 = \operatorname{LN}_1(x + \operatorname{MHA}(x))$, $y = \operatorname{LN}_2(x_1 + \operatorname{FFN}(x_1))$.
# MHA è la tua `attention_forward` con la maschera causale; le layer norm sono la tua
# `layer_norm_forward`. `block_forward` restituisce `(y, cache)`; la cache contiene `"pre_ln"`,
# le cache `"ln1"`, `"ln2"`, `"attn"` delle tue funzioni, l'ingresso della FFN `"ffn_in"`
# ($u$), la sua pre-attivazione `"ffn_pre"` ($u W_1 + b_1$), la sua attivazione nascosta
# `"ffn_hidden"` (dopo la ReLU), e i pesi `"W1"`, `"W2"`.
#
# **L'intero modello.** $h_0 = E[\text{inputs}] + P[0{:}T]$ (righe dell'embedding più righe
# delle posizioni), i blocchi, poi $\text{logits} = \operatorname{LN}_f(h)\, W_{out} + b_{out}$.
# `model_backward` lo rispecchia: la proiezione d'uscita, la layer norm finale, la tua
# `block_backward` dall'ultimo blocco al primo, e infine l'embedding, il cui gradiente è una
# somma sparsa (scatter-add) delle righe che erano state raccolte (un prodotto con la matrice
# one-hot degli ingressi), e quello della tabella delle posizioni, sommato sul batch.

# %% nbgrader={"grade": false, "grade_id": "given_model", "locked": true, "schema_version": 3, "solution": false} tags=["given"]
"""Dato: le passate in avanti e all'indietro del modello."""
require_gate()
# {{ given: block_forward, model_forward, model_backward }}

# %% [markdown] nbgrader={"grade": false, "grade_id": "masked_cross_entropy_text", "locked": true, "schema_version": 3, "solution": false}
# ## 3. `masked_cross_entropy` ({{ points: masked_cross_entropy }})
#
# Il modello produce i logit $z \in \mathbb{R}^V$ in ogni posizione; la probabilità del token $k$
# è $p_k = \operatorname{softmax}(z)_k$. La loss di una posizione con obiettivo $y$ è
# $-\log p_y$, e la loss di addestramento è la sua media sulle $N$ posizioni in cui
# `loss_mask` è True:
#
# $$\mathcal{L} = -\frac{1}{N} \sum_{(b,t):\ \text{mask}_{bt}} \log \operatorname{softmax}(z_{bt})_{y_{bt}} .$$
#
# **In modo stabile.** $\log \operatorname{softmax}(z)_k = z_k - m - \log \sum_j e^{z_j - m}$ con
# $m = \max_j z_j$: non prendere mai il logaritmo di una softmax arrotondata a 0.
#
# **Il gradiente.** Per una posizione, $-\log p_y = -z_y + \log \sum_j e^{z_j}$, quindi
# $\partial / \partial z_k = -[k = y] + e^{z_k} / \sum_j e^{z_j} = p_k - [k = y]$: la softmax meno
# l'obiettivo one-hot. Con la media sulle $N$ posizioni,
#
# $$\frac{\partial \mathcal{L}}{\partial z_{bt}} = \frac{\operatorname{softmax}(z_{bt}) - \operatorname{onehot}(y_{bt})}{N} \ \text{ dove la maschera è True}, \qquad 0 \ \text{altrove}.$$
#
# Dividi per $N$, il numero di voci True, non per $B \cdot T$. Restituisci `(loss, dlogits)`:
# `loss` un float di Python, `dlogits` con la forma e il dtype dei logit. Solleva `ValueError`
# se la maschera non seleziona niente.

# %% nbgrader={"grade": false, "grade_id": "masked_cross_entropy_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: masked_cross_entropy }}

# %% nbgrader={"grade": false, "grade_id": "masked_cross_entropy_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di masked_cross_entropy: un esempio svolto, la maschera, il gradiente per differenze centrali."""
require_gate()
with visible_checks("masked_cross_entropy", 10):
    logits = np.zeros((1, 2, 4))                     # ogni posizione: uniforme sui V = 4 token
    targets = np.array([[1, 3]])
    mask = np.array([[False, True]])
    loss, dlogits = returned(masked_cross_entropy(logits, targets, mask),
                             "masked_cross_entropy", "loss", "dlogits")
    assert np.isclose(loss, math.log(4)), (
        tr("uniform logits over 4 tokens give -log(1/4) = log 4 = 1.3863 at the one counted "
            "position; got {loss}",
            loss=loss))
    assert np.shape(dlogits) == (1, 2, 4), tr("dlogits must have the shape of the logits, (1, 2, 4); got {shape}", shape=np.shape(dlogits))
    assert np.allclose(dlogits[0, 1], [0.25, 0.25, 0.25, -0.75]), (
        tr("at the counted position dlogits = softmax - onehot(3) = [0.25, 0.25, 0.25, -0.75] (N = "
            "1); got {dlogits}",
            dlogits=dlogits[0, 1]))
    assert np.all(dlogits[0, 0] == 0), tr("a position that does not count gets gradient 0; got {dlogits}", dlogits=dlogits[0, 0])

    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 3, 5))
    targets = rng.integers(0, 5, size=(2, 3))
    mask = np.array([[True, False, True], [False, True, True]])
    loss, dlogits = returned(masked_cross_entropy(logits, targets, mask),
                             "masked_cross_entropy", "loss", "dlogits")
    numeric = numerical_gradient(lambda: masked_cross_entropy(logits, targets, mask)[0], logits)
    error = rel_error(dlogits, numeric)
    assert error < 1e-6, tr("dlogits disagrees with central differences of your loss: relative error {error:.2e} "
        "(threshold 1e-6)",
        error=error)
    _, dlogits32 = returned(masked_cross_entropy(logits.astype(np.float32), targets, mask),
                            "masked_cross_entropy", "loss", "dlogits")
    assert dlogits32.dtype == np.float32, tr("float32 logits must give float32 dlogits, got {dtype}", dtype=dlogits32.dtype)
    loss, _ = returned(masked_cross_entropy(logits * 1e4, targets, mask),
                       "masked_cross_entropy", "loss", "dlogits")
    assert math.isfinite(loss), tr("logits of size 1e4 must not overflow: subtract the row maximum first")
print(tr("{name}: visible checks passed", name='masked_cross_entropy'))

# %% nbgrader={"grade": true, "grade_id": "masked_cross_entropy_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di masked_cross_entropy girano quando il tuo notebook viene valutato (con le
# funzioni di attenzione di riferimento: questi punti non dipendono mai dal compito `attention`).
require_gate()
problem = before_grading("masked_cross_entropy", np.zeros((1, 1, 2)), np.zeros((1, 1), int), np.ones((1, 1), bool))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests.checks_training import grade
grade("masked_cross_entropy", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "block_backward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 4. `block_backward` ({{ points: block_backward }})
#
# Percorri `block_forward` al contrario. Tre regole fanno tutto il lavoro:
#
# * **Una somma passa il suo gradiente a entrambi i termini, invariato**: per $y = x_1 + f$, $\partial\mathcal{L}/\partial x_1$ e $\partial\mathcal{L}/\partial f$ ricevono entrambi $dy$.
# * **Un valore usato due volte riceve la somma dei due gradienti**: in pre-LN, $x_1$ alimenta $\operatorname{LN}_2$ *e* il residuo, quindi $dx_1 = dy + \operatorname{LN}_2\text{-backward}(du)$; lo stesso vale per $x$ con $\operatorname{LN}_1$. Dimenticare un ramo è l'errore classico: le forme sono giuste e non viene sollevato niente.
# * **Ogni operazione ha la sua passata all'indietro**: le tue `layer_norm_backward` e `attention_backward` (attraverso `ops`, con le cache in `cache`), e la FFN, che scrivi qui. Con $u$ l'ingresso della FFN, $\text{pre} = u W_1 + b_1$, $\text{hidden} = \operatorname{ReLU}(\text{pre})$, $f = \text{hidden}\, W_2 + b_2$ e $df$ il gradiente che arriva a $f$, appiattendo i token in righe:
#
# $$dW_2 = \text{hidden}^\top df, \quad db_2 = \textstyle\sum_\text{token} df, \quad d\text{pre} = (df\, W_2^\top) \odot [\text{pre} > 0], \quad dW_1 = u^\top d\text{pre}, \quad db_1 = \textstyle\sum_\text{token} d\text{pre}, \quad du = d\text{pre}\, W_1^\top .$$
#
# La ReLU lascia passare il gradiente dove il suo ingresso era positivo e lo blocca altrove.
#
# **Pre-LN**, al contrario: $df = dy$; la passata all'indietro della FFN dà $du$; $dx_1 = dy + \operatorname{LN}_2\text{-backward}(du)$; la passata all'indietro dell'attenzione su $dx_1$ dà $da$; $dx = dx_1 + \operatorname{LN}_1\text{-backward}(da)$.
#
# **Post-LN**, al contrario: $ds_2 = \operatorname{LN}_2\text{-backward}(dy)$ (dove $s_2 = x_1 + f$); $dx_1 = ds_2 + \text{FFN-backward}(ds_2)$; $ds_1 = \operatorname{LN}_1\text{-backward}(dx_1)$ (dove $s_1 = x + \text{MHA}(x)$); $dx = ds_1 + \text{attention-backward}(ds_1)$.
#
# Usa `cache["pre_ln"]` per scegliere. Restituisci `(dx, grads)` con `grads` indicizzato da
# `BLOCK_KEYS` (`ln1_gamma`, `ln1_beta`, `W_Q` … `b_O`, `ln2_gamma`, `ln2_beta`, `W1`, `b1`,
# `W2`, `b2`), ciascuno con la forma del suo parametro e il dtype di `dy`. Non modificare `dy`
# né la cache (`dx1 = dy + ...`, non `dy += ...`).
#
# Il test visibile è un **controllo del gradiente**: differenze centrali di
# $\sum(dy \odot \text{block}(x))$ contro i tuoi gradienti, in float64 con $\varepsilon = 10^{-6}$,
# per entrambe le collocazioni della layer norm.

# %% nbgrader={"grade": false, "grade_id": "block_backward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: block_backward }}

# %% nbgrader={"grade": false, "grade_id": "block_backward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di block_backward: ogni gradiente di un blocco pre-LN e di uno post-LN confrontato con le differenze centrali."""
require_gate()
with visible_checks("block_backward", 120):
    ops = current_ops()
    rng = np.random.default_rng(0)
    config = ModelConfig(d=16, n_heads=4, n_layers=1, d_ff=64, max_len=8)
    for pre_ln in (True, False):
        params = block_params(init_params(config, rng), 0)
        params = {k: v + 0.2 * rng.standard_normal(v.shape) if v.ndim == 1 else v for k, v in params.items()}
        x = rng.standard_normal((2, 5, 16))
        dy = rng.standard_normal(x.shape)                                 # un gradiente a monte casuale
        _, cache = block_forward(x, params, config.n_heads, ops, pre_ln=pre_ln)
        dx, grads = returned(block_backward(dy, cache, ops),
                             "block_backward", "dx", "grads")
        placement = "pre-LN" if pre_ln else "post-LN"
        assert isinstance(grads, dict) and all(k in grads for k in BLOCK_KEYS), (
            tr("{placement}: grads must be a dict with one entry per parameter: {BLOCK_KEYS}", placement=placement, BLOCK_KEYS=', '.join(BLOCK_KEYS)))

        def loss():
            return float(np.sum(dy * block_forward(x, params, config.n_heads, ops, pre_ln=pre_ln)[0]))

        errors = {}
        for key in ("dx",) + BLOCK_KEYS:
            value, got = (x, dx) if key == "dx" else (params[key], grads[key])
            assert np.shape(got) == value.shape, tr("{placement}: {key} has shape {shape}, expected {shape2}", placement=placement, key=key, shape=np.shape(got), shape2=value.shape)
            errors[key] = rel_error(got, numerical_gradient(loss, value))
        worst = max(errors, key=errors.get)
        assert errors[worst] < 1e-4, (
            tr("{placement} block: {worst} disagrees with central differences, relative error {error:.2e} "
               "(threshold 1e-4). All errors: {errors}. The first wrong one in backward order (W2, b2, "
               "W1, b1, LN2, attention, LN1, dx) is the clue.", placement=placement, worst=worst,
               error=errors[worst], errors=", ".join(f"{k} {v:.1e}" for k, v in errors.items())))
        print(tr("{placement}: worst relative error {errors:.1e} ({worst}) over {errors2} gradients", placement=placement, errors=errors[worst], worst=worst, errors2=len(errors)))
print(tr("{name}: visible checks passed", name='block_backward'))

# %% nbgrader={"grade": true, "grade_id": "block_backward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di block_backward girano quando il tuo notebook viene valutato (con le
# funzioni di attenzione di riferimento: questi punti non dipendono mai dal compito `attention`).
require_gate()
problem = before_grading("block_backward", np.zeros((1, 1, 4)), {}, None)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests.checks_training import grade
grade("block_backward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_gradient_check_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: il controllo del gradiente dell'intero modello, e che cosa fa $\varepsilon$
#
# La lezione ha controllato l'intero modello a 2 strati ($d = 16$, 3 sequenze) con le
# differenze centrali e ha trovato un peggior errore relativo di 2.56e-6 (pre-LN) e 4.90e-5
# (post-LN) con $\varepsilon = 10^{-6}$, ma 9.94e-2 e 6.60e-3 con $\varepsilon = 10^{-4}$. La
# passata all'indietro non ha niente di sbagliato a $10^{-4}$: la ReLU non è derivabile in 0, e
# quando una pre-attivazione sta entro circa $\varepsilon$ da 0, $\theta + \varepsilon$ e
# $\theta - \varepsilon$ cadono da parti opposte del punto angoloso e il rapporto incrementale
# misura una pendenza che non c'è. Un controllo che *peggiora* al crescere di $\varepsilon$ ti
# parla di $\varepsilon$, non del tuo gradiente (trappola 8).
#
# La cella esegue lo stesso controllo sulla tua `block_backward` (e sulle tue funzioni di
# attenzione) per entrambe le collocazioni e per entrambi i valori di $\varepsilon$, su un
# massimo di 40 coordinate di ogni tensore di parametri (tutte, per quelli piccoli), e conta le
# coordinate controllate le cui due valutazioni mettono qualche ingresso di una ReLU da parti
# opposte dello 0. I suoi ingressi non sono quelli della lezione, quindi i numeri differiscono;
# conta lo schema.

# %% nbgrader={"grade": false, "grade_id": "lesson_gradient_check", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: il controllo del gradiente dell'intero modello con eps = 1e-6 e 1e-4, contando i punti angolosi della ReLU."""
require_gate()
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    ops = current_ops()
    lesson = {("pre-LN", 1e-6): 2.56e-6, ("post-LN", 1e-6): 4.90e-5, ("pre-LN", 1e-4): 9.94e-2, ("post-LN", 1e-4): 6.60e-3}
    print("colloc.    eps     peggior err. rel. qui  (lezione)  coordinate   su un punto ang.  peggiore senza")
    for pre_ln in (True, False):
        config = ModelConfig(d=16, n_heads=4, n_layers=2, d_ff=64, max_len=9, pre_ln=pre_ln)
        rng = np.random.default_rng(1)
        params = init_params(config, rng)
        inputs, targets, loss_mask = make_batch("sort", 4, 3, rng)        # 3 sequenze, L = 4
        logits, cache = model_forward(params, inputs, config, ops)
        _, dlogits = masked_cross_entropy(logits, targets, loss_mask)
        grads = model_backward(dlogits, cache, ops)

        def loss_and_signs():
            """La loss, e il segno di ogni ingresso di una ReLU del modello, con i parametri attuali."""
            out, c = model_forward(params, inputs, config, ops)
            signs = np.concatenate([(b["ffn_pre"] > 0).ravel() for b in c["blocks"]])
            return masked_cross_entropy(out, targets, loss_mask)[0], signs

        placement = "pre-LN" if pre_ln else "post-LN"
        for eps in (1e-6, 1e-4):
            worst, worst_clean, checked, crossing = 0.0, 0.0, 0, 0
            for n, (name, value) in enumerate(params.items()):
                count = min(value.size, 40)
                flat = np.random.default_rng(n).choice(value.size, size=count, replace=False)
                for f in flat:
                    i = np.unravel_index(f, value.shape)
                    old = value[i]
                    value[i] = old + eps
                    up, signs_up = loss_and_signs()
                    value[i] = old - eps
                    down, signs_down = loss_and_signs()
                    value[i] = old
                    numeric = (up - down) / (2 * eps)
                    a = float(grads[name][i])
                    size = max(abs(a), abs(numeric))
                    error = abs(a - numeric) / size if size > 1e-6 else 0.0
                    kink = bool(np.any(signs_up != signs_down))
                    checked += 1
                    crossing += kink
                    worst = max(worst, error)
                    if not kink:
                        worst_clean = max(worst_clean, error)
            print(f"{placement:9s}  {eps:.0e}  {worst:21.2e}  ({lesson[(placement, eps)]:.2e})  "
                  f"{checked:11d}  {crossing:15d}  {worst_clean:18.2e}")

# %% nbgrader={"grade": false, "grade_id": "given_adam_init", "locked": true, "schema_version": 3, "solution": false} tags=["given"]
"""Dato: lo stato iniziale di Adam."""
require_gate()
# {{ given: adam_init }}

# %% [markdown] nbgrader={"grade": false, "grade_id": "adam_step_text", "locked": true, "schema_version": 3, "solution": false}
# ## 5. `adam_step` ({{ points: adam_step }})
#
# La discesa del gradiente semplice sposta ogni parametro dello stesso multiplo del suo
# gradiente. Adam (Kingma & Ba, 2014) tiene, per ogni parametro, medie mobili del gradiente e
# del suo quadrato e si sposta del loro rapporto, così che ogni coordinata faccia un passo di
# circa `lr` qualunque sia la scala del suo gradiente. Con $t$ il numero del passo (a partire da
# 1):
#
# $$m \leftarrow \beta_1 m + (1 - \beta_1) g, \qquad v \leftarrow \beta_2 v + (1 - \beta_2) g^2,$$
#
# $$\hat m = \frac{m}{1 - \beta_1^t}, \qquad \hat v = \frac{v}{1 - \beta_2^t}, \qquad \theta \leftarrow \theta - \text{lr} \cdot \frac{\hat m}{\sqrt{\hat v} + \varepsilon}.$$
#
# **Correzione del bias.** $m$ e $v$ partono da 0, quindi all'inizio sono troppo piccoli: dopo
# il primo passo $m = 0.1\,g$ e $v = 0.001\,g^2$. Dividere per $1 - \beta^t$ annulla esattamente
# questo effetto ($\hat m = g$, $\hat v = g^2$ per $t = 1$), e il primo passo è
# $\text{lr} \cdot g / |g|$. Senza correzione i primi passi sono sbagliati di un fattore
# $0.1 / \sqrt{0.001} \approx 3.2$.
#
# `state` è `{"t": int, "m": dict, "v": dict}` come lo crea `adam_init` (`m` e `v` con le
# stesse chiavi di `params`, con i momenti grezzi, prima della correzione). Restituisci dict
# nuovi `(new_params, new_state)` con `new_state["t"] = state["t"] + 1`; non modificare gli
# argomenti; conserva il dtype di ogni parametro. (`train` passa tutti i parametri come un solo
# vettore piatto, `{"theta": ...}`: Adam lavora coordinata per coordinata, quindi il passo è lo
# stesso.)

# %% nbgrader={"grade": false, "grade_id": "adam_step_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: adam_step }}

# %% nbgrader={"grade": false, "grade_id": "adam_step_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di adam_step: due passi calcolati a mano."""
require_gate()
with visible_checks("adam_step", 10):
    params, state = {"w": np.array([1.0])}, adam_init({"w": np.array([1.0])})
    params1, state1 = returned(adam_step(params, {"w": np.array([0.5])}, state, lr=0.1),
                               "adam_step", "params", "state")
    # t = 1: m = 0.05, v = 0.00025, m_hat = 0.5, v_hat = 0.25: w = 1 - 0.1 * 0.5 / (0.5 + 1e-8), circa 0.9
    w1 = 1 - 0.1 * 0.5 / (0.5 + 1e-8)
    assert np.allclose(params1["w"], [w1], rtol=0, atol=1e-12), (
        tr("first step from w = 1 with g = 0.5, lr = 0.1: m_hat = 0.5, v_hat = 0.25, so w = 0.9; "
            "got {params1}. Without bias correction w would be 1 - 0.1 * 0.05 / sqrt(0.00025) = "
            "0.6838.",
            params1=params1['w']))
    assert state1["t"] == 1 and np.allclose(state1["m"]["w"], [0.05]) and np.allclose(state1["v"]["w"], [0.00025]), (
        tr("after one step the state must hold t = 1, m = 0.05, v = 0.00025 (raw moments); got "
            "{state1}",
            state1=state1))
    assert params["w"][0] == 1.0 and state["t"] == 0, tr("adam_step must not modify its arguments")
    params2, state2 = returned(adam_step(params1, {"w": np.array([-0.5])}, state1, lr=0.1),
                               "adam_step", "params", "state")
    # t = 2: m = 0.9 * 0.05 - 0.05 = -0.005, v = 0.999 * 0.00025 + 0.001 * 0.25 = 0.00049975,
    # m_hat = -0.005 / 0.19, v_hat = 0.00049975 / 0.001999: w = w1 + 0.1 * (0.005 / 0.19) / sqrt(0.00049975 / 0.001999)
    expected = w1 + 0.1 * (0.005 / 0.19) / (math.sqrt(0.00049975 / 0.001999) + 1e-8)
    assert np.allclose(params2["w"], [expected], rtol=0, atol=1e-12), (
        tr("second step with g = -0.5: w should be {expected:.8f}; got {params2}", expected=expected, params2=params2['w']))
    assert state2["t"] == 2, tr("the step counter must be 2 after two steps, got {state2}", state2=state2['t'])
print(tr("adam_step: visible checks passed; two steps from w = 1:"), params1["w"], params2["w"])

# %% nbgrader={"grade": true, "grade_id": "adam_step_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di adam_step girano quando il tuo notebook viene valutato (con le
# funzioni di attenzione di riferimento: questi punti non dipendono mai dal compito `attention`).
require_gate()
problem = before_grading("adam_step", {}, {}, {"t": 0, "m": {}, "v": {}})
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests.checks_training import grade
grade("adam_step", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "given_generate_with_cache", "locked": true, "schema_version": 3, "solution": false} tags=["given"]
"""Dato: la generazione greedy con una cache chiave-valore."""
require_gate()
# {{ given: generate_with_cache }}

# %% [markdown] nbgrader={"grade": false, "grade_id": "greedy_generate_text", "locked": true, "schema_version": 3, "solution": false}
# ## 6. `greedy_generate` ({{ points: greedy_generate }})
#
# In valutazione il modello risponde davvero: vede solo il prompt `[s1 … sL, SEP]` e genera la
# risposta un token alla volta, leggendo ogni volta le proprie uscite precedenti. La decodifica
# greedy prende a ogni passo il token più probabile:
#
# 1. esegui `ops.model_forward(params, sequence, config, ops)` sulla sequenza fin qui;
# 2. prendi i logit dell'**ultima** posizione, `logits[:, -1, :]`, e il loro argmax
#    (`np.argmax`, che a parità sceglie l'indice più basso);
# 3. aggiungi quel token alla sequenza e ripeti, `n_new` volte.
#
# Restituisci `(tokens, logits)`: gli `n_new` token generati `(B, n_new)` e, per ciascuno, i
# logit da cui è stato scelto `(B, n_new, V)`. Fornire la risposta vera invece delle predizioni
# del modello stesso (teacher forcing) misurerebbe un'altra cosa: quanto bene il modello
# predice un token quando tutto ciò che lo precede è giusto.
#
# Questa versione fa passare l'intera sequenza nel modello a ogni passo. La cella dopo i
# controlli nascosti la confronta con la generazione che usa una **cache chiave-valore**, in
# cui ogni passo elabora solo il nuovo token.

# %% nbgrader={"grade": false, "grade_id": "greedy_generate_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: greedy_generate }}

# %% nbgrader={"grade": false, "grade_id": "greedy_generate_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di greedy_generate: forme, prompt lasciati intatti, e gli stessi token del decoder con cache chiave-valore fornito."""
require_gate()
with visible_checks("greedy_generate", 60):
    uses_checked("make_batch", "greedy_generate")
    ops = current_ops()
    for pre_ln in (True, False):
        config = ModelConfig(max_len=13, pre_ln=pre_ln)
        params = init_params(config, np.random.default_rng(2))
        params["W_out"] = params["W_out"] * 4.0                   # logits più netti per un modello non addestrato
        prompts, _, _ = returned(make_batch("copy", 6, 5, np.random.default_rng(3)),
                                 "make_batch", "inputs", "targets", "loss_mask")
        prompts = prompts[:, :7]                                   # [s1 .. s6, SEP]
        before = prompts.copy()
        tokens, logits = returned(greedy_generate(params, prompts, 6, config, ops),
                                  "greedy_generate", "tokens", "logits")
        assert np.shape(tokens) == (5, 6) and np.shape(logits) == (5, 6, VOCAB_SIZE), (
            tr("5 prompts, 6 new tokens: tokens must be (5, 6) and logits (5, 6, {VOCAB_SIZE}); got "
                "{shape} and {shape2}",
                VOCAB_SIZE=VOCAB_SIZE, shape=np.shape(tokens), shape2=np.shape(logits)))
        assert np.array_equal(prompts, before), tr("greedy_generate must not modify the prompts")
        cached_tokens, cached_logits = generate_with_cache(params, prompts, 6, config, ops)
        assert np.array_equal(tokens, cached_tokens), (
            tr("greedy decoding gives {cached_tokens} for prompt {prompts}, yours gives {tokens}. Each "
                "step: model on the whole sequence so far, argmax of the last position's logits, append, "
                "repeat.",
                cached_tokens=cached_tokens[0], prompts=prompts[0], tokens=tokens[0]))
        assert np.allclose(logits, cached_logits, rtol=1e-9, atol=1e-9), (
            tr("the tokens are right but logits[:, k] must be the last position's logits at step k"))
print(tr("{name}: visible checks passed", name='greedy_generate'))

# %% nbgrader={"grade": true, "grade_id": "greedy_generate_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di greedy_generate girano quando il tuo notebook viene valutato (con le
# funzioni di attenzione di riferimento: questi punti non dipendono mai dal compito `attention`).
require_gate()
problem = before_grading("greedy_generate", {}, np.zeros((1, 1), int), 1, None, None)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests.checks_training import grade
grade("greedy_generate", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_kv_cache_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: la generazione con una cache chiave-valore
#
# `greedy_generate` ricalcola ogni posizione a ogni passo, anche se le chiavi e i valori delle
# posizioni passate non cambiano mai: con la maschera causale, la posizione $j$ dipende solo dai
# token $0 \dots j$. La `generate_with_cache` data (nella cella qui sotto) conserva le chiavi e i
# valori di ogni strato e, dopo il prompt, esegue una sola riga di query per strato per ogni
# nuovo token, costruita con le tue `split_heads`, `merge_heads`,
# `scaled_dot_product_attention`, `causal_mask` e `layer_norm_forward`. La lezione ha
# confrontato le due su un modello non addestrato con 4 strati, 8 teste, $d = 256$, un prompt di
# 32 token e 128 generati: token identici, logit uguali a meno di 6.9e-15, e la cache da 40 a
# 110 volte più veloce. La cella ripete quel confronto in float64 con la tua `greedy_generate`
# (pesi casuali, batch 1) e stampa ciò che misura; la dimensione della cache viene dalla tua
# `kv_cache_bytes`.
#
# Quanto guadagna la cache dipende dalla macchina e dal codice da entrambe le parti. Senza
# cache, ogni passo è fatto di pochi grandi prodotti di matrici sull'intera sequenza, che NumPy
# esegue vicino alla velocità aritmetica del processore; con la cache, ogni passo moltiplica
# una riga per ogni matrice di pesi, quindi il suo tempo è limitato dalla velocità con cui i
# pesi si leggono dalla memoria (la cella stampa il ritmo raggiunto). Il guadagno cresce con la
# lunghezza della sequenza: senza cache il costo di generare $n$ token cresce come $n^2$, con la
# cache come $n$.
#
# **Perché il decoder addestrato guadagna molto meno.** La cella poi cronometra le stesse due
# funzioni alla dimensione che questo notebook valuta: 2 strati, $d = 32$, un prompt
# `[s1 … s6, SEP]` di 7 token, 6 generati, 500 sequenze insieme. Ciò che la cache risparmia è
# il ricalcolo del prefisso, e qui il prefisso è corto: senza cache i 6 passi fanno girare il
# modello su $7 + 8 + \dots + 12 = 57$ posizioni, con la cache su $7 + 5 = 12$, quindi al più
# $57 / 12 = 4.75$ volte meno lavoro, contro $32 + 33 + \dots + 159 = 12{,}224$ posizioni per
# $32 + 127 = 159$ nell'impostazione della lezione ($77$ volte meno per le proiezioni e la FFN,
# di più per i punteggi dell'attenzione, che crescono con il quadrato del prefisso). Con 500
# sequenze insieme è l'aritmetica, non il numero di chiamate NumPy, a fissare il tempo, quindi
# il guadagno misurato si avvicina a quel limite, un fattore piccolo, non i 40-110 della
# lezione. Anche l'impostazione della lezione dà qui meno che nella lezione: il modello della
# lezione era solo attenzione, mentre questo ha una FFN di larghezza $4d$ e una proiezione sul
# vocabolario, i cui pesi un passo con la cache legge comunque una volta per token.

# %% nbgrader={"grade": false, "grade_id": "lesson_kv_cache", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: gli stessi token e logit con e senza cache chiave-valore, e l'accelerazione."""
require_gate()
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    ops = current_ops()
    config = ModelConfig(vocab_size=VOCAB_SIZE, d=256, n_heads=8, n_layers=4, d_ff=1024, max_len=32 + 128)
    params = init_params(config, np.random.default_rng(0))
    prompt = np.random.default_rng(1).integers(0, VOCAB_SIZE, size=(1, 32))
    started = time.perf_counter()
    plain_tokens, plain_logits = greedy_generate(params, prompt, 128, config, ops)
    plain_seconds = time.perf_counter() - started
    started = time.perf_counter()
    cached_tokens, cached_logits = generate_with_cache(params, prompt, 128, config, ops)
    cached_seconds = time.perf_counter() - started
    difference = float(np.max(np.abs(plain_logits - cached_logits)))
    print(f"4 strati, 8 teste, d = 256, prompt 32, 128 token generati, float64, batch 1")
    print(f"token identici: {bool(np.array_equal(plain_tokens, cached_tokens))}; "
          f"massima differenza fra i logit: {difference:.1e} (lezione: 6.9e-15)")
    print(f"senza cache {plain_seconds:.2f} s, con la cache {cached_seconds:.2f} s: "
          f"{plain_seconds / cached_seconds:.0f}x più veloce (lezione: 40-110x)")
    weight_bytes = sum(params[f"block{i}.{k}"].nbytes for i in range(4) for k in BLOCK_KEYS)
    per_token = cached_seconds / 128
    print(f"con la cache, un token richiede {per_token * 1e3:.2f} ms e legge una volta i "
          f"{weight_bytes / 2**20:.1f} MiB di pesi dei blocchi: {weight_bytes / per_token / 1e9:.1f} GB/s")
    print(f"la cache alla fine (la tua kv_cache_bytes): "
          f"{kv_cache_bytes(4, 8, 256 // 8, 32 + 128, 1, 8):,} byte in float64")
    assert np.array_equal(plain_tokens, cached_tokens) and difference < 1e-12, (
        "la generazione con e senza cache deve concordare (i token, e i logit a meno di 1e-12)")

    # la dimensione del decoder addestrato: 2 strati, d = 32, prompt [s1 .. s6, SEP], 6 token nuovi, 500 sequenze
    small = ModelConfig(max_len=13)
    small_params = init_params(small, np.random.default_rng(0))
    prompts = np.concatenate([np.random.default_rng(1).integers(0, N_SYMBOLS, size=(500, 6)),
                              np.full((500, 1), SEP)], axis=1)
    timings = {}
    for name, generate in (("without", greedy_generate), ("with", generate_with_cache)):
        best = math.inf
        for _ in range(3):
            started = time.perf_counter()
            tokens, _ = generate(small_params, prompts, 6, small, ops)
            best = min(best, time.perf_counter() - started)
        timings[name] = (best, tokens)
    uncached_positions, cached_positions = sum(range(7, 13)), 7 + 5
    print(f"\nla dimensione del decoder addestrato (2 strati, d = 32, prompt 7, 6 token generati, 500 sequenze):")
    print(f"senza cache {timings['without'][0] * 1e3:.1f} ms, con la cache {timings['with'][0] * 1e3:.1f} ms "
          f"(migliore di 3): {timings['without'][0] / timings['with'][0]:.1f}x più veloce; token identici: "
          f"{bool(np.array_equal(timings['without'][1], timings['with'][1]))}")
    print(f"posizioni passate nel modello: {uncached_positions} senza cache, {cached_positions} con la cache "
          f"(al più {uncached_positions / cached_positions:.2f}x meno lavoro; impostazione della lezione: "
          f"{sum(range(32, 160))} contro {32 + 127}, {sum(range(32, 160)) / (32 + 127):.0f}x)")

# %% [markdown] nbgrader={"grade": false, "grade_id": "answer_accuracy_text", "locked": true, "schema_version": 3, "solution": false}
# ## 7. `answer_accuracy` ({{ points: answer_accuracy }})
#
# Due accuratezze, come nella lezione: **per token**, la frazione dei $B \cdot L$ token di
# risposta giusti, e **per sequenza**, la frazione delle $B$ risposte i cui $L$ token sono tutti
# giusti. L'accuratezza per sequenza è la più severa: con 0.99 per token e $L = 8$, errori
# indipendenti lascerebbero giuste $0.99^8 \approx 0.92$ delle sequenze. Restituisci le due
# come float di Python, prima quella per token; solleva `ValueError` se le forme differiscono.

# %% nbgrader={"grade": false, "grade_id": "answer_accuracy_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: answer_accuracy }}

# %% nbgrader={"grade": false, "grade_id": "answer_accuracy_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Controlli visibili di answer_accuracy: un esempio svolto."""
require_gate()
with visible_checks("answer_accuracy", 10):
    token_acc, seq_acc = returned(answer_accuracy(np.array([[1, 2, 3], [1, 2, 4]]), np.array([[1, 2, 3], [1, 2, 3]])),
                                  "answer_accuracy", "token_acc", "seq_acc")
    assert np.isclose(token_acc, 5 / 6) and np.isclose(seq_acc, 0.5), (
        tr("5 of the 6 tokens are right and 1 of the 2 sequences is entirely right: expected "
            "(0.8333, 0.5), got ({token_acc}, {seq_acc})",
            token_acc=token_acc, seq_acc=seq_acc))
print(tr("{name}: visible checks passed", name='answer_accuracy'))

# %% nbgrader={"grade": true, "grade_id": "answer_accuracy_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# I controlli nascosti di answer_accuracy girano quando il tuo notebook viene valutato (con le
# funzioni di attenzione di riferimento: questi punti non dipendono mai dal compito `attention`).
require_gate()
problem = before_grading("answer_accuracy", np.zeros((1, 1), int), np.zeros((1, 1), int))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests.checks_training import grade
grade("answer_accuracy", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "training_text", "locked": true, "schema_version": 3, "solution": false}
# ## L'addestramento, e gli esperimenti della lezione
#
# `train` (data, qui sotto) collega tutto: un batch nuovo dalla tua `make_batch` a ogni passo,
# la passata in avanti, la tua `masked_cross_entropy`, `model_backward` attraverso la tua
# `block_backward` e le tue funzioni di attenzione, la tua `adam_step`; poi `evaluate` genera le
# risposte di 500 sequenze di test con la tua `greedy_generate` e le valuta con la tua
# `answer_accuracy`. I numeri casuali sono disposti come nella lezione: il generatore del seme
# estrae i pesi iniziali, poi ogni batch, e le 500 sequenze di test vengono dal generatore di
# `EVAL_SEED` (999), lo stesso per ogni seme. Il seme 0 qui parte quindi dai pesi del seme 0
# della lezione e vede i suoi batch e le sue sequenze di test. `run_experiments` esegue molti
# addestramenti in parallelo, un processo per esecuzione e tanti processi quanti sono i core,
# con una barra di avanzamento.

# %% nbgrader={"grade": false, "grade_id": "given_training", "locked": true, "schema_version": 3, "solution": false} tags=["given"]
"""Dato: valutazione, addestramento, uno sguardo all'interno, molti addestramenti in parallelo."""
require_gate()
# {{ given: evaluate, train, attention_maps, attention_cost, ProgressBar, limit_blas_threads, keep_freed_memory, _experiment_worker_init, _experiment_run, run_experiments }}

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_runs_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: 23 addestramenti
#
# La tabella dei risultati della lezione (copia e ordinamento, $L = 4, 6, 8$, semi 0, 1, 2: 18
# esecuzioni) e le sue ablazioni sulla copia, $L = 6$, seme 0 (senza scala, senza posizioni,
# post-LN, learning rate $10^{-2}$ con l'una o l'altra collocazione: 5 esecuzioni). Le celle
# seguenti leggono `RESULTS`.

# %% nbgrader={"grade": false, "grade_id": "lesson_runs", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La lezione, dal vivo: le 18 esecuzioni della tabella dei risultati e le 5 ablazioni, un processo per esecuzione."""
require_gate()
JOBS = [dict(task=task, L=L, seed=seed) for task in TASKS for L in (4, 6, 8) for seed in (0, 1, 2)]
ABLATIONS = {
    "no scaling": dict(scale=False),
    "no positions": dict(positions=False),
    "post-LN": dict(pre_ln=False),
    "lr 1e-2, pre-LN": dict(lr=1e-2),
    "lr 1e-2, post-LN": dict(lr=1e-2, pre_ln=False),
}
JOBS += [dict(task="copy", L=6, seed=0, **change) for change in ABLATIONS.values()]
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    started = time.perf_counter()
    RESULTS = run_experiments(JOBS, current_ops, description=f"{len(JOBS)} addestramenti")
    EXPERIMENT_SECONDS = time.perf_counter() - started
    print(f"{len(JOBS)} addestramenti da 1500 passi in {EXPERIMENT_SECONDS:.0f} s di tempo reale con {os.cpu_count()} processi "
          f"({sum(r['seconds'] for r in RESULTS):.0f} s sommati sulle esecuzioni)")


def result_of(**job):
    """Il risultato dell'esecuzione i cui argomenti sono esattamente ``job``."""
    return RESULTS[JOBS.index(job)]


# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_results_table_text", "locked": true, "schema_version": 3, "solution": false}
# ### La tabella dei risultati
#
# Media sui semi 0, 1, 2 dell'accuratezza della generazione greedy su 500 sequenze di test, con
# il minimo sui semi fra parentesi, accanto alle cifre della lezione per gli stessi semi. I semi
# sono gli stessi in senso forte: `train` dispone i suoi numeri casuali come la lezione, quindi
# il seme 0 qui parte dai pesi del seme 0 della lezione, si addestra sui suoi batch e viene
# provato sulle sue 500 sequenze. Le esecuzioni però si separano. L'addestramento è caotico:
# una differenza nell'ultimo bit di una somma (float32 qui contro il float64 della lezione,
# oppure due implementazioni float64 che sommano in ordine diverso) resta invisibile per
# centinaia di passi, poi cresce finché i due addestramenti diventano addestramenti diversi; da
# lì in poi, quali sequenze di ordinamento un seme sbaglia è questione di caso. Due
# implementazioni float64 della ricetta della lezione, identiche a meno di $10^{-11}$ nella loss
# per 800 passi, chiudono il seme 0 dell'ordinamento, $L = 6$, a 0.922 e 0.992 di accuratezza
# per sequenza. Quindi la cifra di un seme è un'estrazione, e tre semi sono tre estrazioni: la
# cella segna ogni cifra che dista più di $0.01$ da quella della lezione sulla copia e più di
# $0.03$ sull'ordinamento, e la cella seguente mostra l'intervallo che lo spiega.

# %% nbgrader={"grade": false, "grade_id": "lesson_results_table", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""La tabella dei risultati: accuratezza per token e per sequenza, media (minimo) sui semi 0, 1, 2, accanto a quella della lezione."""
require_gate()
LESSON_TABLE = {  # (media token, minimo token, media sequenza, minimo sequenza), la tabella della lezione
    ("copy", 4): (1.000, 1.000, 1.000, 1.000), ("copy", 6): (1.000, 1.000, 1.000, 1.000),
    ("copy", 8): (1.000, 1.000, 1.000, 1.000), ("sort", 4): (0.995, 0.989, 0.981, 0.958),
    ("sort", 6): (0.993, 0.989, 0.970, 0.958), ("sort", 8): (0.987, 0.979, 0.951, 0.918),
}
TOLERANCE = {"copy": 0.01, "sort": 0.03}
FIGURES = ("token mean", "token min", "sequence mean", "sequence min")
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    OUTSIDE = []  # (task, L, figure, here, lesson)
    HERE = {}
    print("comp. L   acc. token: qui (min)  lezione (min)   acc. sequenza: qui (min)  lezione (min)")
    for (task, L), lesson in LESSON_TABLE.items():
        runs = [result_of(task=task, L=L, seed=seed) for seed in (0, 1, 2)]
        token = [r["token_acc"] for r in runs]
        sequence = [r["seq_acc"] for r in runs]
        here = (np.mean(token), np.min(token), np.mean(sequence), np.min(sequence))
        HERE[(task, L)] = here
        flags = []
        for label, value, reference in zip(FIGURES, here, lesson):
            if abs(value - reference) > TOLERANCE[task] + 1e-12:
                OUTSIDE.append((task, L, label, value, reference))
                flags.append("*")
        print(f"{task:4s}  {L}   {here[0]:.3f} ({here[1]:.3f})          {lesson[0]:.3f} ({lesson[1]:.3f})"
              f"    {here[2]:.3f} ({here[3]:.3f})             {lesson[2]:.3f} ({lesson[3]:.3f})  {''.join(flags)}")
    if OUTSIDE:
        print(f"\n{len(OUTSIDE)} cifra/e fuori tolleranza (copia 0.01, ordinamento 0.03), segnate con *:")
        for task, L, label, value, reference in OUTSIDE:
            print(f"  {task} L={L} {label}: {value:.3f} qui, {reference:.3f} nella lezione")
    else:
        print("\nogni cifra dista al più 0.01 da quella della lezione sulla copia e 0.03 sull'ordinamento")

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_results_spread_text", "locked": true, "schema_version": 3, "solution": false}
# **L'intervallo che spiega una differenza.** Quanto possono distare due insiemi onesti di
# tre semi? `bench/training_accuracy.py` ha addestrato la ricetta della lezione, scritta in
# float64 indipendentemente da questo kit, su 20 semi dell'ordinamento per ogni lunghezza (le
# cifre sono nella cella seguente). Dei $\binom{20}{3} = 1140$ modi di scegliere tre di quei
# semi, il 95 % dà una media, e un minimo, dentro l'intervallo che la cella stampa: l'ampiezza
# che produce la sola scelta di tre semi, senza cambiare nient'altro. Una cifra della tabella
# che ci sta dentro, e la cifra della lezione che ci sta dentro, non differiscono più di quanto
# farebbero altri tre semi. Quella ricetta ripete il listato della lezione operazione per
# operazione (gli stessi pesi dopo 400 passi, fino all'ultimo bit), eppure i suoi semi 0, 1, 2,
# eseguiti dove girava il benchmark, non danno nemmeno loro le cifre stampate nella lezione: la
# cella mostra anche quelle. Lo stesso benchmark ha confrontato l'addestramento in float32 con
# quello in float64 su quei 20 semi: l'intervallo al 95 % della differenza delle loro
# accuratezze medie contiene lo 0.

# %% nbgrader={"grade": false, "grade_id": "lesson_results_spread", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""Cifre fuori tolleranza: l'intervallo al 95 % delle cifre su tre semi della ricetta della lezione, da 20 semi misurati."""
require_gate()
import itertools

RECIPE_SEEDS = {  # ricetta della lezione, float64, semi 0-19 (bench/training_accuracy.py)
    ("sort", 4): {"token": [0.9980, 0.9920, 0.9965, 0.9910, 0.9945, 0.9950, 0.9850, 0.9955, 0.9880, 0.9895, 0.9905, 1.0000, 0.9975, 0.9895, 0.9910, 0.9960, 1.0000, 0.9995, 0.9960, 0.9975],
                  "sequence": [0.992, 0.974, 0.988, 0.966, 0.980, 0.986, 0.952, 0.984, 0.960, 0.968, 0.978, 1.000, 0.992, 0.968, 0.972, 0.988, 1.000, 0.998, 0.986, 0.992]},
    ("sort", 6): {"token": [0.9800, 0.9907, 0.9953, 0.9967, 0.9897, 0.9833, 0.9967, 0.9957, 0.9903, 0.9920, 0.9920, 0.9947, 0.9993, 0.9900, 0.9947, 0.9420, 0.9950, 0.9983, 0.9993, 0.9990],
                  "sequence": [0.922, 0.962, 0.974, 0.986, 0.950, 0.940, 0.992, 0.980, 0.970, 0.960, 0.962, 0.978, 0.996, 0.950, 0.972, 0.786, 0.978, 0.990, 0.996, 0.994]},
    ("sort", 8): {"token": [0.9728, 0.9852, 0.9968, 0.9925, 0.9902, 0.9945, 0.9938, 0.9832, 0.9972, 0.9925, 0.9958, 0.9902, 0.9800, 0.9922, 0.9912, 0.9950, 0.9945, 0.9920, 0.9782, 0.9570],
                  "sequence": [0.900, 0.924, 0.988, 0.964, 0.950, 0.982, 0.964, 0.910, 0.980, 0.952, 0.978, 0.964, 0.910, 0.974, 0.974, 0.968, 0.982, 0.968, 0.938, 0.762]},
}
if not RUN_EXPERIMENTS:
    print(SKIPPED)
elif not OUTSIDE:
    print("niente da spiegare: ogni cifra della tabella è entro la tolleranza")
else:
    for task, L, label, value, reference in OUTSIDE:
        measured = RECIPE_SEEDS.get((task, L))
        if measured is None:
            print(f"{task} L={L} {label}: nessun seme misurato della ricetta della lezione per questo compito e lunghezza")
            continue
        kind, statistic = label.split()
        values = np.array(measured[kind])                                   # (20,)
        triples = values[np.array(list(itertools.combinations(range(values.size), 3)))]  # (1140, 3)
        figures = triples.mean(axis=1) if statistic == "mean" else triples.min(axis=1)
        low, high = np.percentile(figures, [2.5, 97.5])
        inside = lambda x: "dentro" if low - 1e-12 <= x <= high + 1e-12 else "FUORI"
        own = values[:3].mean() if statistic == "mean" else values[:3].min()
        print(f"{task} L={L} {label}: qui {value:.3f} ({inside(value)}), lezione {reference:.3f} "
              f"({inside(reference)}); il 95 % delle {len(figures)} terne di {values.size} semi della "
              f"ricetta della lezione dà un valore ({statistic}) in [{low:.3f}, {high:.3f}]; i semi 0, 1, 2 "
              f"della ricetta stessa hanno dato {own:.3f} sulla macchina del benchmark")

# %% nbgrader={"grade": false, "grade_id": "lesson_learning_curves", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""Curve di apprendimento: la loss dei batch di ogni esecuzione della tabella dei risultati (media mobile su 25 passi)."""
require_gate()
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    figure, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    window = np.ones(25) / 25
    for axis, task in zip(axes, TASKS):
        for L, colour in zip((4, 6, 8), ("tab:blue", "tab:orange", "tab:green")):
            for seed in (0, 1, 2):
                losses = result_of(task=task, L=L, seed=seed)["losses"]
                axis.plot(np.arange(len(window), len(losses) + 1), np.convolve(losses, window, mode="valid"),
                          color=colour, lw=1, alpha=0.8, label=f"L = {L}" if seed == 0 else None)
        axis.set_yscale("log")
        axis.set_title(f"{task}: loss sulle posizioni della risposta")
        axis.set_xlabel("passo")
        axis.grid(alpha=0.3)
        axis.legend()
    axes[0].set_ylabel("cross-entropy (media mobile)")
    figure.tight_layout()
    show(figure)

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_ablations_text", "locked": true, "schema_version": 3, "solution": false}
# ### Ablazioni
#
# Copia, $L = 6$, seme 0, un cambiamento alla volta. La lezione ha misurato (loss finale /
# accuratezza per token / per sequenza): modello completo 0.0002 / 1.000 / 1.000; senza scala
# lo stesso; **senza posizioni 0.7342 / 0.656 / 0.204**; post-LN, e learning rate $10^{-2}$ con
# l'una o l'altra collocazione, tutti 1.000. Qui la loss finale è la media delle loss dei batch
# degli ultimi 50 passi.
#
# Senza posizioni il modello ha ancora una fonte d'ordine: la maschera causale (una posizione
# vede solo il suo passato, quindi il numero di posizioni che può guardare cambia da una
# posizione all'altra). Il compito di copia ha bisogno di sapere *quale* posizione sorgente
# copiare, e quel segnale è debole, quindi l'accuratezza crolla. La lezione ha anche diviso le
# sequenze senza posizioni secondo che i loro 6 simboli siano tutti distinti (accuratezza per
# sequenza 0.246) o contengano una ripetizione (0.170), e ha misurato la frazione di sequenze
# tutte distinte a 0.448 contro lo $20 \cdot 19 \cdots 15 / 20^6 = 0.436$ atteso. Quanto scende
# l'accuratezza senza posizioni dipende dall'esecuzione (da ciò che il modello riesce a dedurre
# dalla sola maschera causale); il crollo in sé, dalla copia perfetta alla maggior parte delle
# sequenze sbagliate, è ciò che la lezione vuole mostrare, e la cella ne stampa qui
# l'ampiezza.

# %% nbgrader={"grade": false, "grade_id": "lesson_ablations", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""Ablazioni sulla copia, L = 6, seme 0: loss finale, accuratezza per token e per sequenza, accanto a quelle della lezione."""
require_gate()
LESSON_ABLATIONS = {"full": (0.0002, 1.000, 1.000), "no scaling": (0.0002, 1.000, 1.000),
                    "no positions": (0.7342, 0.656, 0.204), "post-LN": (None, 1.000, 1.000),
                    "lr 1e-2, pre-LN": (None, 1.000, 1.000), "lr 1e-2, post-LN": (None, 1.000, 1.000)}
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    runs = {"full": result_of(task="copy", L=6, seed=0)}
    runs.update({name: result_of(task="copy", L=6, seed=0, **change) for name, change in ABLATIONS.items()})
    print("esecuzione         loss finale token  sequenza   lezione: loss token  sequenza")
    for name, r in runs.items():
        loss, token, sequence = LESSON_ABLATIONS[name]
        lesson_loss = f"{loss:.4f}" if loss is not None else "   -  "
        print(f"{name:17s}  {r['final_loss']:10.4f}  {r['token_acc']:.3f}  {r['seq_acc']:.3f}"
              f"      {lesson_loss}  {token:.3f}  {sequence:.3f}")
    evaluation = runs["no positions"]["evaluation"]
    distinct = np.array([len(set(row)) == len(row) for row in evaluation["source"].tolist()])
    expected_share = math.perm(N_SYMBOLS, 6) / N_SYMBOLS ** 6
    print(f"\nsenza posizioni, accuratezza per sequenza: 6 simboli tutti distinti {evaluation['correct'][distinct].mean():.3f} "
          f"(lezione 0.246), con una ripetizione {evaluation['correct'][~distinct].mean():.3f} (lezione 0.170)")
    print(f"frazione di sequenze di test tutte distinte: {distinct.mean():.3f} qui, 0.448 nella lezione, "
          f"{expected_share:.3f} attesa")
    drop = runs["full"]["seq_acc"] - runs["no positions"]["seq_acc"]
    print(f"togliere le posizioni costa qui {drop:.3f} di accuratezza per sequenza (lezione: 1.000 - 0.204 = 0.796)")

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_null_results_text", "locked": true, "schema_version": 3, "solution": false}
# **Due risultati nulli.** Togliere la scala $1/\sqrt{d_h}$ e spostare le layer norm dopo le
# somme residue (post-LN), con l'uno o l'altro learning rate, non cambia niente di misurabile
# nella lezione, e la tabella qui sopra mostra se lo stesso vale qui. Sono risultati nulli
# onesti, non errori, e la ragione è la dimensione di questo modello. La scala conta quando la
# softmax si satura, e la saturazione cresce con la larghezza dei prodotti scalari: con
# $d_h = 8$ i punteggi di vettori casuali a varianza unitaria hanno varianza 8 invece di 1, il
# che lascia la softmax lontana dal one-hot. La lezione ha misurato la sensibilità della
# softmax $\sum_j p_j (1 - p_j)$ a 0.96 con la scala e 0.72 senza, a questa larghezza (contro
# 0.9611 e 0.0998 a $d_k = 512$); la cella seguente la misura allo stesso modo. E la differenza
# fra pre-LN e post-LN riguarda il gradiente attraverso molte somme residue impilate (Xiong et
# al., 2020): due blocchi sono troppo pochi perché si veda.

# %% nbgrader={"grade": false, "grade_id": "lesson_null_results", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""Sensibilità della softmax sum p (1 - p) con d_h = 8, con e senza scala (400 estrazioni di T = 64, come nel compito attention)."""
require_gate()
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    rng = np.random.default_rng(0)
    Q, K = rng.standard_normal((400, 64, 8)), rng.standard_normal((400, 64, 8))
    S = Q @ np.swapaxes(K, -1, -2)
    for label, scores, lesson in (("con 1/sqrt(d_h)", S / math.sqrt(8), 0.96), ("senza scala", S, 0.72)):
        P = softmax(scores)
        print(f"d_h = 8, {label:17s}: media di sum p(1 - p) = {(P * (1 - P)).sum(axis=-1).mean():.3f} (lezione {lesson:.2f})")

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_attention_maps_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: che cosa guarda lo strato 1
#
# Il modello addestrato sulla copia con $L = 6$ (seme 0) legge
# `[17 3 0 12 7 9 SEP 17 3 0 12 7]`. Le mappe di calore mostrano i pesi di attenzione delle 4
# teste dello strato 1 (righe: query, colonne: chiavi; il triangolo superiore è mascherato).
# Per copiare, la query nella posizione d'ingresso $6 + k$ (il separatore, poi
# $a_1 \dots a_5$) deve andare a prendere il simbolo sorgente $s_{k+1}$ nella posizione $k$:
# esattamente 6 posizioni indietro. Nella lezione tre delle quattro teste dello strato 1
# mettevano il loro peso più grande esattamente 6 posizioni indietro per ogni posizione di
# risposta (peso più grande medio 0.835, 0.996 e 0.767), mentre le teste dello strato 2 erano
# diffuse (da 0.355 a 0.391). La tabella sotto le mappe dice che cosa fanno queste teste.
#
# I pesi di attenzione sono una variabile interna del modello, non una spiegazione della sua
# risposta: schemi di pesi diversi possono produrre la stessa uscita, e i pesi si possono
# cambiare senza cambiare la predizione (Jain & Wallace, 2019; Wiegreffe & Pinter, 2019).
# Leggi le mappe come la descrizione di un meccanismo che il modello ha trovato, da mettere
# alla prova, non come le sue ragioni (trappola 9). Quali teste si prendono la ricerca, e con
# quanta nettezza, varia da un addestramento all'altro; la tabella dice che cosa ha trovato
# questa esecuzione.

# %% nbgrader={"grade": false, "grade_id": "lesson_attention_maps", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""Mappe di attenzione dello strato 1 sulla copia, L = 6, e la tabella per testa: chiave di argmax, distanza, peso più grande medio."""
require_gate()
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    trained = result_of(task="copy", L=6, seed=0)
    tokens = np.array([[17, 3, 0, 12, 7, 9, SEP, 17, 3, 0, 12, 7]])
    maps = attention_maps(trained["params"], tokens, trained["config"], current_ops())
    labels = [str(t) if t != SEP else "SEP" for t in tokens[0]]
    figure, axes = plt.subplots(1, 4, figsize=(15, 4))
    for head, axis in enumerate(axes):
        axis.imshow(maps[0][0, head], cmap="viridis", vmin=0, vmax=1)
        axis.set_title(f"strato 1, testa {head + 1}")
        axis.set_xticks(range(12), labels, fontsize=7, rotation=90)
        axis.set_yticks(range(12), labels, fontsize=7)
        axis.set_xlabel("chiave")
    axes[0].set_ylabel("query")
    figure.tight_layout()
    show(figure)
    answer_queries = range(6, 12)                                   # SEP, a1 .. a5: predicono a1 .. a6
    print("posizioni delle query della risposta:", list(answer_queries))
    for layer in (0, 1):
        print(f"strato {layer + 1}")
        for head in range(maps[layer].shape[1]):
            weights = maps[layer][0, head]
            keys = [int(np.argmax(weights[q])) for q in answer_queries]
            offsets = [q - k for q, k in zip(answer_queries, keys)]
            top = float(np.mean([weights[q].max() for q in answer_queries]))
            exact = sum(o == 6 for o in offsets)
            print(f"  testa {head + 1}: chiavi di argmax {keys}, distanze {offsets}, "
                  f"{exact} su 6 esattamente 6 indietro, peso più grande medio {top:.3f}")
    print("lezione: strato 1, tre teste 6 su 6 esattamente 6 indietro (peso più grande medio 0.835, 0.996, 0.767); "
          "strato 2 diffuso (da 0.355 a 0.391)")

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_attention_cost_text", "locked": true, "schema_version": 3, "solution": false}
# ### La lezione, dal vivo: l'attenzione costa $T^2$
#
# La matrice dei punteggi ha $T \times T$ elementi, quindi il tempo e la memoria
# dell'attenzione crescono come $T^2$ mentre $Q$, $K$, $V$ crescono come $T$. La lezione ha
# misurato pendenze log-log del tempo rispetto a $T$ fra 1.97 e 2.06 per $T = 128, 512, 2048$
# ($d_k = 64$, float64), e a $T = 2048$ una matrice $T \times T$ di 32 MiB contro i 3 MiB di
# $Q$, $K$ e $V$ insieme. La cella cronometra la tua `scaled_dot_product_attention` con la tua
# `causal_mask` (la migliore di 3 chiamate), ne misura il picco di memoria con `tracemalloc`, e
# adatta le pendenze.

# %% nbgrader={"grade": false, "grade_id": "lesson_attention_cost", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""Il costo T^2 dell'attenzione causale: tempo e picco di memoria per T = 128, 512, 2048 (d_k = 64, float64), pendenze log-log."""
require_gate()
if not RUN_EXPERIMENTS:
    print(SKIPPED)
else:
    cost = attention_cost(scaled_dot_product_attention, causal_mask, T_values=(128, 512, 2048), d_k=64)
    print("    T   tempo (s)   picco memoria (MiB)  matrice T x T (MiB)  Q, K, V (MiB)")
    for T, seconds, peak, matrix, qkv in zip(cost["T"], cost["seconds"], cost["peak_bytes"],
                                             cost["matrix_bytes"], cost["qkv_bytes"]):
        print(f"{T:5d}   {seconds:9.5f}   {peak / 2**20:17.2f}   {matrix / 2**20:18.2f}   {qkv / 2**20:13.2f}")
    print(f"pendenza log-log: tempo {cost['time_slope']:.2f} (lezione: da 1.97 a 2.06), memoria {cost['memory_slope']:.2f}")
    figure, axis = plt.subplots(figsize=(5.5, 4))
    T = np.array(cost["T"], dtype=float)
    axis.loglog(T, cost["seconds"], "o-", label=f"tempo, pendenza {cost['time_slope']:.2f}")
    axis.loglog(T, cost["seconds"][0] * (T / T[0]) ** 2, "k--", lw=1, label="T^2 dal primo punto")
    axis.set_xticks(T, [str(int(t)) for t in T])
    axis.minorticks_off()
    axis.set_xlabel("T")
    axis.set_ylabel("secondi")
    axis.set_title("attenzione causale a prodotto scalare scalato, d_k = 64")
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    show(figure)

# %% [markdown] nbgrader={"grade": false, "grade_id": "closing", "locked": true, "schema_version": 3, "solution": false}
# ## Prima di consegnare
#
# * *Kernel → Restart Kernel and Run All Cells*: il cancello stampa *Cancello aperto*, ogni
#   test visibile stampa `... controlli visibili superati`, e gli esperimenti stampano le loro tabelle
#   (qualche minuto).
# * Premi **Validate** (oppure esegui `nbgrader validate training.ipynb`); la validazione
#   salta gli esperimenti.
# * Il feedback elenca ogni controllo di ogni funzione e, per uno fallito, il difetto trovato
#   (per esempio `weight-grad-wrong` per un gradiente della FFN sbagliato) con l'input in cui è
#   emerso.

# %% nbgrader={"grade": false, "grade_id": "notebook_time", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""Quanto è durato questo notebook: tempo reale dall'avvio del cancello, tempo di CPU di questo kernel e dei processi di addestramento."""
require_gate()
try:
    import resource

    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu_seconds = sum(u.ru_utime + u.ru_stime for u in usage)
except ImportError:  # non su Unix
    cpu_seconds = float("nan")
wall_seconds = time.perf_counter() - NOTEBOOK_STARTED
print(f"questo notebook ha girato per {wall_seconds:.0f} s di tempo reale su {os.cpu_count()} core; "
      f"ha usato {cpu_seconds:.0f} s di tempo di CPU ({cpu_seconds / os.cpu_count():.0f} s per core)")
