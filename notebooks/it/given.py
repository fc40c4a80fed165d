"""Il codice dato (non valutato) di ``solutions/training.py`` che mostra il notebook italiano
del compito `training`, con docstring e commenti in italiano.

Il notebook italiano di addestramento prende da qui, al posto di ``solutions/training.py``,
le costanti del modulo (con i commenti che le precedono) e le funzioni e classi date. Il
codice è quello di ``solutions/training.py`` e la build lo controlla: gli alberi sintattici,
tolti commenti e docstring, devono essere uguali, e le stringhe restano quelle inglesi
(sono chiavi gettext o valori stampati). Solo docstring e commenti sono tradotti, e nessuno
può restare quello inglese. Le definizioni seguono l'ordine di ``solutions/training.py``:
chi ne modifica una là modifica anche questo file, nello stesso commit. Questo file non si
esegue (mancano gli import): lo legge il builder.
"""

# ---------------------------------------------------------------------------------------
# I compiti. Una sequenza è [s1 .. sL, SEP, a1 .. aL]: L simboli di un alfabeto di 20, un
# separatore e la risposta (s stessa per `copy`, s ordinata per `sort`).

N_SYMBOLS = 20          # i simboli 0 .. 19
SEP = 20                # il token separatore
VOCAB_SIZE = 21         # 20 simboli + SEP
TASKS = ("copy", "sort")
EVAL_SEED = 999         # il generatore delle sequenze di test, uguale in ogni esecuzione (lezione)

# I nomi contenuti in un namespace ``ops``: le funzioni di attenzione (compito `attention`)
# con cui è costruito il modello, poi i pezzi di questo compito.
ATTENTION_OPS = ("softmax", "causal_mask", "split_heads", "merge_heads",
                 "scaled_dot_product_attention", "layer_norm_forward", "layer_norm_backward",
                 "attention_forward", "attention_backward")
TRAINING_OPS = ("make_batch", "masked_cross_entropy", "block_forward", "block_backward",
                "model_forward", "model_backward", "adam_step", "greedy_generate",
                "answer_accuracy")
OPS_NAMES = ATTENTION_OPS + TRAINING_OPS

# I parametri di un blocco, nell'ordine in cui vengono creati e appiattiti.
BLOCK_KEYS = ("ln1_gamma", "ln1_beta", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V",
              "b_O", "ln2_gamma", "ln2_beta", "W1", "b1", "W2", "b2")
ATTENTION_KEYS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


@dataclass(frozen=True)
class ModelConfig:
    """Iperparametri del decoder (predefiniti: la configurazione di riferimento, L = 6).

    Attributi:
        vocab_size: V, numero di id dei token (20 simboli + SEP).
        d: larghezza del modello.
        n_heads: h; deve dividere ``d``.
        n_layers: numero di blocchi.
        d_ff: larghezza nascosta della FFN.
        max_len: righe della tabella delle posizioni appresa: ``2L + 1``, una per ogni
            posizione della sequenza completa (il modello legge le posizioni
            ``0 .. 2L-1``; l'ultima riga non si usa mai, ma rientra nel conteggio di
            riferimento di 27.253).
        pre_ln: True per blocchi pre-LN, False per blocchi post-LN (``block_forward``).
        scale: divide i punteggi dell'attenzione per ``sqrt(d_h)``.
        positions: somma la tabella delle posizioni appresa (False: l'ablazione senza
            posizioni).
    """

    vocab_size: int = VOCAB_SIZE
    d: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    max_len: int = 13
    pre_ln: bool = True
    scale: bool = True
    positions: bool = True


def make_ops(source, **overrides):
    """Raccoglie in un solo namespace le funzioni con cui è costruito il modello.

    Argomenti:
        source: un dict (i ``globals()`` di un notebook) o un modulo, oppure una lista di
            questi (in caso di doppioni vince l'ultimo), che contiene i nomi di
            ``OPS_NAMES``.
        **overrides: funzioni che sostituiscono singoli nomi (per esempio un correttore
            vi inserisce la ``block_backward`` dello studente).

    Restituisce:
        ``types.SimpleNamespace`` con un attributo per ogni nome di ``OPS_NAMES``. Un nome
        assente ovunque (una cella del notebook non ancora eseguita) riceve una funzione
        che, quando viene chiamata, solleva ``NameError`` e lo segnala.

    Eccezioni:
        Nessuna propria; il segnaposto di un nome assente ovunque solleva ``NameError``
        quando viene chiamato.
    """
    sources = source if isinstance(source, (list, tuple)) else [source]
    found = {}
    for src in sources:
        table = src if isinstance(src, dict) else vars(src)
        found.update({n: table[n] for n in OPS_NAMES if callable(table.get(n))})
    found.update(overrides)

    def missing(name):
        def not_defined(*args, **kwargs):
            raise NameError(f"{name} is not defined yet: run the cell that defines it")
        return not_defined

    return SimpleNamespace(**{n: found.get(n) or missing(n) for n in OPS_NAMES})


# ---------------------------------------------------------------------------------------
# Parametri.


def init_params(config, rng, dtype=np.float64):
    """Estrae i parametri iniziali del decoder (la configurazione di riferimento della
    lezione).

    Pesi ``~ N(0, 1/fan_in)`` (fan_in = righe della matrice), embedding dei token e
    tabella delle posizioni ``~ 0.1 N(0, 1)``, bias e spostamenti delle layer norm a 0,
    scale delle layer norm a 1. Le estrazioni avvengono in float64 nell'ordine della
    lezione: embedding, posizioni, poi per ogni blocco ``W_Q, W_K, W_V, W_O, W1, W2``, poi
    ``W_out``; il risultato viene convertito in ``dtype``. La tabella delle posizioni si
    estrae anche quando ``config.positions`` è False (e poi si scarta), così che gli altri
    pesi siano le stesse estrazioni con e senza posizioni.

    Argomenti:
        config: ``ModelConfig``.
        rng: ``numpy.random.Generator``.
        dtype: dtype float degli array restituiti.

    Restituisce:
        dict nome -> array: ``"embedding"`` ``(V, d)``, ``"positions"`` ``(max_len, d)``
        (solo se ``config.positions``), ``"block{i}.{key}"`` per ``key`` in ``BLOCK_KEYS``
        (``W_*`` ``(d, d)``, ``W1`` ``(d, d_ff)``, ``W2`` ``(d_ff, d)``, vettori ``(d,)``
        o ``(d_ff,)``), ``"ln_f_gamma"``, ``"ln_f_beta"`` ``(d,)``, ``"W_out"`` ``(d, V)``,
        ``"b_out"`` ``(V,)``.

    Eccezioni:
        ValueError: se ``config.d`` non è divisibile per ``config.n_heads``.
    """
    d, V, d_ff = config.d, config.vocab_size, config.d_ff
    if d % config.n_heads:
        raise ValueError(f"d = {d} is not divisible by n_heads = {config.n_heads}")

    def weight(rows, cols):
        return rng.standard_normal((rows, cols)) / math.sqrt(rows)

    params = {"embedding": 0.1 * rng.standard_normal((V, d))}
    positions = 0.1 * rng.standard_normal((config.max_len, d))
    if config.positions:
        params["positions"] = positions
    for i in range(config.n_layers):
        block = {"ln1_gamma": np.ones(d), "ln1_beta": np.zeros(d),
                 "ln2_gamma": np.ones(d), "ln2_beta": np.zeros(d)}
        for name in ("Q", "K", "V", "O"):
            block["W_" + name] = weight(d, d)
            block["b_" + name] = np.zeros(d)
        block["W1"], block["b1"] = weight(d, d_ff), np.zeros(d_ff)
        block["W2"], block["b2"] = weight(d_ff, d), np.zeros(d)
        params.update({f"block{i}.{key}": block[key] for key in BLOCK_KEYS})
    params["ln_f_gamma"], params["ln_f_beta"] = np.ones(d), np.zeros(d)
    params["W_out"], params["b_out"] = weight(d, V), np.zeros(V)
    return {name: value.astype(dtype) for name, value in params.items()}


def block_params(params, i):
    """I parametri del blocco ``i`` in un dict con le chiavi di ``BLOCK_KEYS`` (senza copie).

    Eccezioni:
        KeyError: se ``params`` non ha il blocco ``i`` (manca un ``block{i}.<key>``).
    """
    return {key: params[f"block{i}.{key}"] for key in BLOCK_KEYS}


def flatten(arrays, keys):
    """Concatena ``arrays[k].ravel()`` per ``k`` in ``keys`` in un solo vettore.

    Eccezioni:
        KeyError: se un nome di ``keys`` non è in ``arrays``.
        ValueError: se ``keys`` è vuoto (niente da concatenare).
    """
    return np.concatenate([arrays[k].ravel() for k in keys])


def unflatten(vector, like, keys):
    """Viste su ``vector`` con la forma di ``like[k]`` per ``k`` in ``keys`` (senza copie).

    Eccezioni:
        KeyError: se un nome di ``keys`` non è in ``like``.
        ValueError: se ``vector`` è più corto degli array di ``like`` messi insieme.
    """
    out, start = {}, 0
    for k in keys:
        size = like[k].size
        out[k] = vector[start:start + size].reshape(like[k].shape)
        start += size
    return out


# ---------------------------------------------------------------------------------------
# Un blocco: passata in avanti.


def block_forward(x, params, n_heads, ops, pre_ln=True, scale=True):
    """Un blocco Transformer causale, pre-LN o post-LN.

    Pre-LN (Xiong et al. 2020, arXiv:2002.04745):
    ``x1 = x + MHA(LN1(x))``, ``y = x1 + FFN(LN2(x1))``.
    Post-LN (Vaswani et al. 2017, arXiv:1706.03762):
    ``x1 = LN1(x + MHA(x))``, ``y = LN2(x1 + FFN(x1))``.
    ``FFN(u) = ReLU(u W1 + b1) W2 + b2``; MHA è ``ops.attention_forward`` con la
    maschera causale.

    Argomenti:
        x: float ``(B, T, d)``.
        params: dict con le chiavi di ``BLOCK_KEYS`` (``block_params``).
        n_heads: int ``h``.
        ops: namespace con ``layer_norm_forward`` e ``attention_forward``.
        pre_ln: bool, la collocazione delle layer norm.
        scale: bool, passato a ``attention_forward``.

    Restituisce:
        ``(y, cache)``: ``y`` float ``(B, T, d)``; ``cache`` un dict con
        ``"pre_ln"`` (bool), ``"ln1"``, ``"ln2"``, ``"attn"`` (le cache di
        ``ops.layer_norm_forward`` e di ``ops.attention_forward``), ``"attn_in"``
        (l'ingresso dell'attenzione), ``"ffn_in"`` ``(B, T, d)`` (l'ingresso ``u`` della
        FFN), ``"ffn_pre"`` ``(B, T, d_ff)`` (``u W1 + b1``, prima della ReLU),
        ``"ffn_hidden"`` ``(B, T, d_ff)`` (dopo la ReLU), ``"W1"``, ``"W2"``.

    Eccezioni:
        KeyError: se a ``params`` manca una delle ``BLOCK_KEYS``.
        ValueError: se le forme non tornano (``x`` non è ``(B, T, d)`` con ``d`` la
            larghezza dei parametri, ``d % n_heads != 0``), così come la solleva ``ops``.
    """
    attn_params = {key: params[key] for key in ATTENTION_KEYS}
    cache = {"pre_ln": pre_ln, "W1": params["W1"], "W2": params["W2"]}
    if pre_ln:
        a, cache["ln1"] = ops.layer_norm_forward(x, params["ln1_gamma"], params["ln1_beta"])
        att, cache["attn"] = ops.attention_forward(a, attn_params, n_heads, causal=True,
                                                   scale=scale)
        x1 = x + att
        u, cache["ln2"] = ops.layer_norm_forward(x1, params["ln2_gamma"], params["ln2_beta"])
    else:
        a = x
        att, cache["attn"] = ops.attention_forward(x, attn_params, n_heads, causal=True,
                                                   scale=scale)
        x1, cache["ln1"] = ops.layer_norm_forward(x + att, params["ln1_gamma"],
                                                  params["ln1_beta"])
        u = x1
    pre = u @ params["W1"] + params["b1"]                  # da (B, T, d) a (B, T, d_ff)
    hidden = pre * (pre > 0)                               # la ReLU
    f = hidden @ params["W2"] + params["b2"]               # da (B, T, d_ff) a (B, T, d)
    cache.update(attn_in=a, ffn_in=u, ffn_pre=pre, ffn_hidden=hidden)
    if pre_ln:
        y = x1 + f
    else:
        y, cache["ln2"] = ops.layer_norm_forward(x1 + f, params["ln2_gamma"],
                                                 params["ln2_beta"])
    return y, cache


# ---------------------------------------------------------------------------------------
# Il modello intero.


def model_forward(params, inputs, config, ops):
    """I logits del token seguente in ogni posizione.

    ``h0 = E[inputs] + P[:T]`` (embedding dei token più la tabella delle posizioni
    appresa, oppure ``E[inputs]`` da solo quando ``config.positions`` è False), i blocchi,
    la layer norm finale, poi ``logits = LN_f(h) W_out + b_out``.

    Argomenti:
        params: dict di ``init_params``.
        inputs: interi ``(B, T)`` con ``T <= config.max_len``, valori in ``0 .. V-1``.
        config: ``ModelConfig``.
        ops: namespace (``make_ops``) con ``block_forward``, ``layer_norm_forward`` e
            quanto usa ``block_forward``.

    Restituisce:
        ``(logits, cache)``: ``logits`` float ``(B, T, V)`` nel dtype dei parametri;
        ``cache`` per ``model_backward``.

    Eccezioni:
        ValueError: se ``T > config.max_len`` con le posizioni.
    """
    inputs = np.asarray(inputs)
    T = inputs.shape[1]
    h = params["embedding"][inputs]                          # da (B, T) a (B, T, d)
    if config.positions:
        if T > params["positions"].shape[0]:
            raise ValueError(f"sequence of length {T} is longer than the position table "
                             f"({params['positions'].shape[0]} rows)")
        h = h + params["positions"][:T]                      # (T, d) in broadcast su B
    block_caches = []
    for i in range(config.n_layers):
        h, c = ops.block_forward(h, block_params(params, i), config.n_heads, ops,
                                 pre_ln=config.pre_ln, scale=config.scale)
        block_caches.append(c)
    hf, ln_f = ops.layer_norm_forward(h, params["ln_f_gamma"], params["ln_f_beta"])
    logits = hf @ params["W_out"] + params["b_out"]         # da (B, T, d) a (B, T, V)
    cache = {"inputs": inputs, "blocks": block_caches, "ln_f": ln_f, "hf": hf,
             "config": config, "params": params}
    return logits, cache


def model_backward(dlogits, cache, ops):
    """I gradienti di ogni parametro, dato il gradiente della loss rispetto ai logits.

    Argomenti:
        dlogits: float ``(B, T, V)``.
        cache: ciò che ha restituito ``model_forward``.
        ops: namespace con ``block_backward`` e ``layer_norm_backward``.

    Restituisce:
        dict con le chiavi e le forme di ``cache["params"]``.

    Eccezioni:
        KeyError: se ``cache`` non è ciò che ha restituito ``model_forward`` (manca una
            voce).
        ValueError: se la forma di ``dlogits`` non è quella dei logits.
    """
    params, config = cache["params"], cache["config"]
    V, d = params["W_out"].shape[1], params["W_out"].shape[0]
    hf, inputs = cache["hf"], cache["inputs"]
    g2 = dlogits.reshape(-1, V)                              # forma (B*T, V)
    grads = {"W_out": hf.reshape(-1, d).T @ g2, "b_out": g2.sum(axis=0)}
    dh = dlogits @ params["W_out"].T                         # da (B, T, V) a (B, T, d)
    dh, grads["ln_f_gamma"], grads["ln_f_beta"] = ops.layer_norm_backward(dh, cache["ln_f"])
    for i in reversed(range(config.n_layers)):
        dh, block_grads = ops.block_backward(dh, cache["blocks"][i], ops)
        grads.update({f"block{i}.{key}": block_grads[key] for key in BLOCK_KEYS})
    # Le righe dell'embedding sono raccolte (E[inputs]): il loro gradiente è una somma sparsa
    # (scatter-add) sui token, cioè un prodotto con la one-hot degli ingressi, (V, B*T) x (B*T, d).
    one_hot = np.eye(V, dtype=dh.dtype)[inputs.reshape(-1)]           # forma (B*T, V)
    grads["embedding"] = one_hot.T @ dh.reshape(-1, d)                 # forma (V, d)
    if config.positions:
        positions = np.zeros(params["positions"].shape, dtype=dh.dtype)
        positions[:dh.shape[1]] = dh.sum(axis=0)             # da (B, T, d) a (T, d)
        grads["positions"] = positions
    return {name: grads[name] for name in params}


# ---------------------------------------------------------------------------------------
# L'ottimizzatore Adam.


def adam_init(params):
    """Lo stato di Adam per ``params``: passo 0 e momenti nulli.

    Restituisce:
        ``{"t": 0, "m": {name: zeros}, "v": {name: zeros}}``, momenti con la forma e il
        dtype di ``params``.

    Eccezioni:
        AttributeError: se ``params`` non è un mapping (non ha ``items``).
    """
    return {"t": 0, "m": {k: np.zeros_like(v) for k, v in params.items()},
            "v": {k: np.zeros_like(v) for k, v in params.items()}}


# ---------------------------------------------------------------------------------------
# Generazione e valutazione.


def generate_with_cache(params, prompts, n_new, config, ops):
    """Decodifica greedy con una cache chiave-valore (KV cache); dà gli stessi token e gli
    stessi logits di ``greedy_generate``.

    Chiavi e valori delle posizioni passate non cambiano mai (la maschera causale: la
    posizione ``j`` dipende solo dai token ``0 .. j``), perciò ogni layer li conserva in una
    cache, allocata in anticipo per l'intera generazione (``(B, h, T0 + n_new, d_h)`` per
    layer, riempita da sinistra a destra). Il prompt passa nel modello una volta sola
    (prefill: attenzione causale su ``T0`` posizioni); poi ogni token nuovo costa una sola
    riga di query per layer: ``q`` ``(B, h, 1, d_h)`` contro le chiavi e i valori in cache
    ``(B, h, t, d_h)`` con ``ops.scaled_dot_product_attention`` (senza maschera: ogni
    posizione in cache sta nel passato). Le tre proiezioni di un layer sono un unico
    prodotto con ``[W_Q | W_K | W_V]`` ``(d, 3d)``, concatenate una volta sola. Costruita
    con ``ops.split_heads``, ``ops.merge_heads``, ``ops.scaled_dot_product_attention``,
    ``ops.causal_mask`` e ``ops.layer_norm_forward``; l'aritmetica di un blocco è quella
    di ``block_forward``.

    Argomenti:
        params, prompts, n_new, config: come per ``greedy_generate``.
        ops: namespace (``make_ops``).

    Restituisce:
        ``(tokens, logits)`` come ``greedy_generate``.

    Eccezioni:
        ValueError: se ``n_new < 1`` (nessun token da impilare), o se la sequenza cresce
            oltre ``config.max_len`` con le posizioni (le righe delle posizioni non fanno
            broadcast); qualunque eccezione sollevi una funzione di ``ops``.
    """
    h, d = config.n_heads, config.d
    sequence = np.array(prompts, dtype=np.int64)
    B, T0 = sequence.shape
    dtype = params["embedding"].dtype
    blocks = [block_params(params, i) for i in range(config.n_layers)]
    fused = [(np.concatenate([p["W_Q"], p["W_K"], p["W_V"]], axis=1),       # forma (d, 3d)
              np.concatenate([p["b_Q"], p["b_K"], p["b_V"]])) for p in blocks]
    shape = (B, h, T0 + n_new, d // h)
    keys = [np.zeros(shape, dtype=dtype) for _ in blocks]
    values = [np.zeros(shape, dtype=dtype) for _ in blocks]

    def attend(i, a, first):
        """Attenzione del layer ``i`` per le righe nuove ``a`` (B, n, d) nelle posizioni
        ``first .. first+n-1``; scrive le loro chiavi e i loro valori nella cache."""
        W, b = fused[i]
        qkv = a @ W + b                                                # forma (B, n, 3d)
        q = ops.split_heads(qkv[..., :d], h)                           # forma (B, h, n, d_h)
        n = a.shape[1]
        keys[i][:, :, first:first + n] = ops.split_heads(qkv[..., d:2 * d], h)
        values[i][:, :, first:first + n] = ops.split_heads(qkv[..., 2 * d:], h)
        t = first + n                                                  # posizioni in cache
        mask = ops.causal_mask(t)[first:t] if n > 1 else None          # righe (n, t)
        out, _ = ops.scaled_dot_product_attention(q, keys[i][:, :, :t], values[i][:, :, :t],
                                                  mask=mask, scale=config.scale)
        return ops.merge_heads(out) @ blocks[i]["W_O"] + blocks[i]["b_O"]   # forma (B, n, d)

    def step(tokens, first):
        """Logits dell'ultimo dei ``tokens`` (B, n), che occupano le posizioni da ``first``
        in poi."""
        x = params["embedding"][tokens]
        if config.positions:
            x = x + params["positions"][first:first + tokens.shape[1]]
        for i, p in enumerate(blocks):
            if config.pre_ln:
                a, _ = ops.layer_norm_forward(x, p["ln1_gamma"], p["ln1_beta"])
                x1 = x + attend(i, a, first)
                u, _ = ops.layer_norm_forward(x1, p["ln2_gamma"], p["ln2_beta"])
            else:
                x1, _ = ops.layer_norm_forward(x + attend(i, x, first), p["ln1_gamma"],
                                               p["ln1_beta"])
                u = x1
            f = np.maximum(u @ p["W1"] + p["b1"], 0) @ p["W2"] + p["b2"]
            if config.pre_ln:
                x = x1 + f
            else:
                x, _ = ops.layer_norm_forward(x1 + f, p["ln2_gamma"], p["ln2_beta"])
        hf, _ = ops.layer_norm_forward(x[:, -1:], params["ln_f_gamma"], params["ln_f_beta"])
        return (hf @ params["W_out"] + params["b_out"])[:, 0]             # forma (B, V)

    chosen_logits, generated = [], []
    last = step(sequence, 0)                                              # il prefill
    for n in range(n_new):
        chosen_logits.append(last)
        next_token = np.argmax(last, axis=-1).astype(np.int64)
        generated.append(next_token)
        if n + 1 < n_new:
            last = step(next_token[:, None], T0 + n)
    return np.stack(generated, axis=1), np.stack(chosen_logits, axis=1)


def evaluate(params, config, task, L, n_sequences, rng, ops):
    """Vera generazione greedy degli ``L`` token della risposta di ``n_sequences``
    sequenze di test.

    Le sequenze di test vengono da ``ops.make_batch(task, L, n_sequences, rng)``; il
    prompt è ``[s1 .. sL, SEP]`` (posizioni di input ``0 .. L``), la risposta attesa sono
    i target delle posizioni ``L .. 2L-1``.

    Restituisce:
        dict: ``token_acc``, ``seq_acc`` (float), ``source`` interi ``(n, L)``,
        ``expected`` e ``generated`` interi ``(n, L)``, ``correct`` bool ``(n,)``.

    Eccezioni:
        ValueError: da ``ops.make_batch`` (``task`` sconosciuto, ``L`` o ``n_sequences``
            minore di 1) o da ``ops.greedy_generate``; qualunque eccezione sollevi una
            funzione di ``ops``.
    """
    inputs, targets, _ = ops.make_batch(task, L, n_sequences, rng)
    prompts, expected = inputs[:, :L + 1], targets[:, L:]
    generated, _ = ops.greedy_generate(params, prompts, L, config, ops)
    token_acc, seq_acc = ops.answer_accuracy(generated, expected)
    return {"token_acc": token_acc, "seq_acc": seq_acc, "source": inputs[:, :L],
            "expected": expected, "generated": generated,
            "correct": np.all(generated == expected, axis=1)}


# ---------------------------------------------------------------------------------------
# L'addestramento.


def train(task, L, seed, ops, steps=1500, batch_size=32, lr=3e-3, d=32, n_heads=4,
          n_layers=2, d_ff=128, pre_ln=True, scale=True, positions=True, eval_size=500,
          dtype=np.float32, progress=None):
    """Addestra il decoder su ``task`` con sequenze di ``L`` simboli, poi lo valuta.

    I numeri casuali sono disposti come nella lezione, così che un seme indichi la stessa
    esecuzione là e qui: ``np.random.default_rng(seed)`` estrae i pesi iniziali
    (``init_params``) e poi i batch di addestramento (un batch nuovo a ogni passo, con
    un'estrazione ciascuno), e le ``eval_size`` sequenze di test vengono da
    ``np.random.default_rng(EVAL_SEED)``, uguale per ogni seme. Adam agisce elemento per
    elemento, quindi una chiamata di ``ops.adam_step`` sulla concatenazione di tutti i
    parametri fa lo stesso passo di una chiamata per tensore; il ciclo tiene i parametri in
    un unico vettore piatto (``flatten``/``unflatten``) e risparmia qualche centinaio di
    piccole chiamate NumPy a ogni passo. Quando ``ops`` ha ``adam_in_place`` (``fast_ops``,
    il cui ``adam_step`` è ``fast_adam_step``) quel passo si fa sul posto, nel vettore
    stesso (gli stessi numeri, nessun vettore nuovo, i parametri sono viste del vettore).
    Per prima cosa chiama ``keep_freed_memory``, perché gli array temporanei liberati a
    ogni passo siano riusati invece di essere ricaricati con nuovi page fault (glibc;
    altrove non cambia nulla).

    Argomenti:
        task: ``"copy"`` o ``"sort"``.
        L: int, simboli per sequenza (il modello vede ``2L`` posizioni).
        seed: int.
        ops: namespace (``make_ops``) di tutte le funzioni con cui è costruito il modello.
            Se ha un attributo ``loss_and_grads`` (``fast_ops``), ogni passo chiama
            ``ops.loss_and_grads(params, inputs, targets, loss_mask, config, ops)`` ->
            ``(loss, grads)`` al posto di ``model_forward``, ``masked_cross_entropy`` e
            ``model_backward``. Se ha ``adam_in_place`` (``fast_ops``), ogni passo di Adam
            è ``ops.adam_in_place(theta, gradient, m, v, t, work, lr=lr)`` -> ``t`` sui
            vettori piatti, al posto di ``ops.adam_step``.
        steps, batch_size, lr: durata dell'addestramento in passi, sequenze per batch,
            passo di Adam (learning rate).
        d, n_heads, n_layers, d_ff, pre_ln, scale, positions: il modello
            (``ModelConfig``; ``max_len = 2L + 1``).
        eval_size: int, sequenze di test.
        dtype: dtype float dei parametri e dell'aritmetica. float32 è più veloce; su 20
            semi la sua accuratezza non si distingue da quella di float64
            (``bench/training_accuracy.py``), anche se un dato seme arriva altrove:
            l'addestramento è caotico, e le differenze di arrotondamento ne cambiano il
            corso dopo qualche centinaio di passi, anche in float64.
        progress: None o una funzione ``progress(steps_done)`` chiamata ogni 50 passi e
            alla fine.

    Restituisce:
        dict: ``losses`` float64 ``(steps,)`` (la loss del batch di ogni passo),
        ``final_loss`` (media delle ultime 50 loss dei batch), ``token_acc``, ``seq_acc``,
        ``evaluation`` (il dict di ``evaluate``), ``params`` (i parametri addestrati),
        ``config``, ``seconds`` (tempo reale di addestramento e valutazione), ``task``,
        ``L``, ``seed``, ``lr``.

    Eccezioni:
        ValueError: se ``task`` è sconosciuto o ``L``/``batch_size`` è minore di 1
            (``ops.make_batch``), o se ``d`` non è divisibile per ``n_heads``
            (``init_params``); qualunque eccezione sollevi una funzione di ``ops``
            (``NameError`` per una cella del notebook non eseguita,
            ``NotImplementedError`` per una funzione ancora da scrivere).
    """
    started = time.perf_counter()
    keep_freed_memory()                                  # niente page fault a ogni passo
    config = ModelConfig(d=d, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff,
                         max_len=2 * L + 1, pre_ln=pre_ln, scale=scale, positions=positions)
    rng = np.random.default_rng(seed)                    # prima i pesi, poi i batch
    params = init_params(config, rng, dtype=dtype)
    keys = list(params)
    theta = flatten(params, keys)                        # tutti i parametri in un vettore
    state = adam_init({"theta": theta})
    adam_in_place = getattr(ops, "adam_in_place", None)  # lo stesso passo, sul posto
    in_place = adam_in_place is not None
    if in_place:
        params = unflatten(theta, params, keys)          # viste, aggiornate con theta
        gradient, work = np.empty_like(theta), np.empty_like(theta)
        gradient_views = unflatten(gradient, params, keys)
    losses = np.empty(steps)
    loss_and_grads = getattr(ops, "loss_and_grads", None)   # una via più rapida per le 3 chiamate
    for step in range(steps):
        inputs, targets, loss_mask = ops.make_batch(task, L, batch_size, rng)
        if loss_and_grads is None:
            logits, cache = ops.model_forward(params, inputs, config, ops)
            loss, dlogits = ops.masked_cross_entropy(logits, targets, loss_mask)
            grads = ops.model_backward(dlogits, cache, ops)
        else:
            loss, grads = loss_and_grads(params, inputs, targets, loss_mask, config, ops)
        if in_place:
            for k in keys:                                   # flatten(grads, keys), senza copie
                gradient_views[k][...] = grads[k]
            state["t"] = adam_in_place(theta, gradient, state["m"]["theta"],
                                       state["v"]["theta"], state["t"], work, lr=lr)
        else:
            new, state = ops.adam_step({"theta": theta}, {"theta": flatten(grads, keys)},
                                       state, lr=lr)
            theta = new["theta"]
            params = unflatten(theta, params, keys)
        losses[step] = loss
        if progress is not None and ((step + 1) % 50 == 0 or step + 1 == steps):
            progress(step + 1)
    evaluation = evaluate(params, config, task, L, eval_size, np.random.default_rng(EVAL_SEED),
                          ops)
    return {"task": task, "L": L, "seed": seed, "lr": lr, "config": config,
            "losses": losses, "final_loss": float(losses[-50:].mean()),
            "token_acc": evaluation["token_acc"], "seq_acc": evaluation["seq_acc"],
            "evaluation": evaluation, "params": params,
            "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------------------
# Uno sguardo all'interno: le mappe di attenzione, il costo dell'attenzione.


def attention_maps(params, inputs, config, ops):
    """I pesi di attenzione di ogni layer del modello su ``inputs``.

    Ricalcolati dall'ingresso dell'attenzione di ogni blocco (``cache["attn_in"]`` di
    ``block_forward``) con ``ops.split_heads`` e ``ops.scaled_dot_product_attention``
    (maschera causale, la scala del modello), così da non dipendere da ciò che la
    ``attention_forward`` di uno studente conserva nella sua cache.

    Argomenti:
        params, config, ops: il modello.
        inputs: interi ``(B, T)``.

    Restituisce:
        lista, un elemento per layer, di array float ``(B, h, T, T)``; ``[l][b, k, i, j]``
        è il peso che la query ``i`` della testa ``k`` del layer ``l + 1`` dà alla chiave
        ``j``.

    Eccezioni:
        ValueError: se ``T > config.max_len`` con le posizioni (``ops.model_forward``);
            qualunque eccezione sollevi una funzione di ``ops``.
    """
    _, cache = ops.model_forward(params, inputs, config, ops)
    maps = []
    for i, block_cache in enumerate(cache["blocks"]):
        p, a = block_params(params, i), block_cache["attn_in"]
        q = ops.split_heads(a @ p["W_Q"] + p["b_Q"], config.n_heads)     # forma (B, h, T, d_h)
        k = ops.split_heads(a @ p["W_K"] + p["b_K"], config.n_heads)
        v = ops.split_heads(a @ p["W_V"] + p["b_V"], config.n_heads)
        mask = ops.causal_mask(inputs.shape[1])
        _, weights = ops.scaled_dot_product_attention(q, k, v, mask=mask, scale=config.scale)
        maps.append(weights)
    return maps


def attention_cost(sdpa, causal_mask, T_values=(128, 512, 2048), d_k=64, repeats=5, seed=0):
    """Tempo e picco di memoria della self-attention causale al crescere della sequenza.

    Per ogni ``T``: ``Q, K, V`` di forma ``(T, d_k)`` in float64, una chiamata di
    ``sdpa(Q, K, V, mask=causal_mask(T))``; il tempo è il migliore di ``repeats``
    chiamate (``time.perf_counter``), la memoria il picco di allocazione di NumPy durante
    una chiamata (``tracemalloc``, a cui NumPy comunica le sue allocazioni). Le pendenze
    vengono da rette ai minimi quadrati di ``log(time)`` e di ``log(memory)`` rispetto a
    ``log(T)``: 2 significa crescita quadratica.

    Restituisce:
        dict: ``T`` (lista), ``seconds`` (lista), ``peak_bytes`` (lista),
        ``matrix_bytes`` (la matrice T x T in float64), ``qkv_bytes`` (Q, K, V insieme),
        ``time_slope``, ``memory_slope`` (float).

    Eccezioni:
        Qualunque eccezione sollevino ``sdpa`` o ``causal_mask``; nessuna propria.
    """
    import tracemalloc

    rng = np.random.default_rng(seed)
    seconds, peaks = [], []
    for T in T_values:
        Q, K, V = (rng.standard_normal((T, d_k)) for _ in range(3))
        mask = causal_mask(T)
        best = math.inf
        for _ in range(repeats):
            started = time.perf_counter()
            sdpa(Q, K, V, mask=mask)
            best = min(best, time.perf_counter() - started)
        tracemalloc.start()
        sdpa(Q, K, V, mask=mask)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        seconds.append(best)
    logT = np.log(np.asarray(T_values, dtype=np.float64))
    return {"T": list(T_values), "seconds": seconds, "peak_bytes": peaks,
            "matrix_bytes": [T * T * 8 for T in T_values],
            "qkv_bytes": [3 * T * d_k * 8 for T in T_values],
            "time_slope": float(np.polyfit(logT, np.log(seconds), 1)[0]),
            "memory_slope": float(np.polyfit(logT, np.log(peaks), 1)[0])}


# ---------------------------------------------------------------------------------------
# Molti addestramenti: un processo per esecuzione, una barra di avanzamento.


class ProgressBar:
    """Una barra di avanzamento di rich che funziona anche dentro un notebook Jupyter.

    In un terminale è la barra animata di rich stessa (su stderr). In un kernel di notebook
    rich la trasforma in testo e HTML, mostrati con un solo display di IPython aggiornato
    sul posto: non serve alcuna libreria di widget, e il notebook salvato conserva il suo
    stato finale.

    Argomenti:
        total: int, unità di lavoro (passi di addestramento).
        description: str, mostrata a sinistra della barra.
    """

    def __init__(self, total, description):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                         TextColumn("steps"), TimeElapsedColumn(), TextColumn("left"),
                         TimeRemainingColumn())
        self._handle = None
        self._last = 0.0
        try:
            from IPython import get_ipython

            in_kernel = get_ipython() is not None and hasattr(get_ipython(), "kernel")
        except ImportError:
            in_kernel = False
        if in_kernel:
            from IPython.display import display

            self._progress = Progress(*self._columns, auto_refresh=False,
                                      console=Console(file=io.StringIO(), width=110,
                                                      force_jupyter=False))
            self._task = self._progress.add_task(description, total=total)
            self._handle = display(self._bundle(), raw=True, display_id=True)
        else:
            self._progress = Progress(*self._columns, console=Console(stderr=True))
            self._task = self._progress.add_task(description, total=total)
            self._progress.start()

    def _bundle(self):
        from rich.console import Console

        console = Console(record=True, file=io.StringIO(), width=110, force_terminal=True,
                          force_jupyter=False, color_system="truecolor")
        console.print(self._progress.get_renderable())
        text = console.export_text(clear=False)
        html = console.export_html(inline_styles=True, code_format="<pre style=\"margin:0; "
                                   "font-family:monospace\">{code}</pre>")
        return {"text/plain": text.rstrip(), "text/html": html}

    def update(self, completed, force=False):
        """Imposta il numero di unità svolte; la visualizzazione viene ridisegnata al più 4
        volte al secondo.

        Eccezioni:
            Nessuna propria; un errore della visualizzazione (``rich``, IPython) si propaga.
        """
        self._progress.update(self._task, completed=completed)
        now = time.monotonic()
        if self._handle is not None and (force or now - self._last > 0.25):
            self._handle.update(self._bundle(), raw=True)
            self._last = now

    def close(self):
        """Disegna lo stato finale e si ferma.

        Eccezioni:
            Nessuna propria; un errore della visualizzazione (``rich``, IPython) si propaga.
        """
        if self._handle is not None:
            self.update(self._progress.tasks[0].completed, force=True)
        else:
            self._progress.stop()


def limit_blas_threads(n=1):
    """Chiede all'OpenBLAS caricato da NumPy di usare d'ora in poi ``n`` thread.

    Le matrici di questo modello sono troppo piccole per guadagnare qualcosa da più thread
    BLAS, e quando ogni core è occupato (un processo di addestramento per core, o altro
    lavoro sulla macchina) i thread di OpenBLAS si aspettano a vicenda e un addestramento
    diventa molte volte più lento. Impostare ``OPENBLAS_NUM_THREADS=1`` prima di importare
    NumPy ha lo stesso effetto; questa funzione serve ai processi in cui NumPy è già
    caricato. Cerca la libreria tra i file mappati in memoria dal processo (Linux) e ne
    chiama la funzione ``*set_num_threads*``: le wheel di NumPy includono OpenBLAS come
    ``libscipy_openblas64_``, con il simbolo ``scipy_openblas_set_num_threads64_``.

    Restituisce:
        bool, True se una libreria ha accettato l'impostazione.

    Eccezioni:
        Nessuna: senza ``/proc/self/maps`` o senza una libreria caricabile restituisce
        False.
    """
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
    except OSError:
        return False
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                       "openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(library, symbol, None)
            if setter is not None:
                setter(ctypes.c_int(n))
                return True
    return False


def keep_freed_memory(limit=32 * 2**20):
    """Chiede all'allocatore della libreria C (il ``malloc`` di glibc) di tenere la memoria
    liberata, fino a ``limit`` byte, per le allocazioni successive invece di restituirla
    al kernel.

    Un passo di addestramento alloca e libera gli stessi array temporanei a ogni passo. Di
    norma glibc mappa a parte ogni blocco sopra una soglia mobile (all'inizio 128 KiB) e
    lo smappa quando viene liberato, e accorcia la cima del suo heap quando vi restano
    liberi più del doppio di quella soglia; ogni volta che la memoria torna, il kernel deve
    di nuovo caricarla pagina per pagina (page fault) e azzerarla. Nell'addestramento del
    kit (``fast_ops``, float32, copy, L = 6) erano circa 36 page fault per passo e circa
    un decimo del suo tempo di CPU; con queste impostazioni nessuno. Imposta
    ``M_TRIM_THRESHOLD`` e ``M_MMAP_THRESHOLD`` con ``mallopt(3)``: i blocchi fino a
    ``limit`` vengono dallo heap, e lo heap tiene fino a ``limit`` byte liberi. Il processo
    trattiene al più quella memoria inutilizzata; i blocchi più grandi di ``limit`` sono
    ancora mappati e smappati a parte.

    Argomenti:
        limit: int, byte. glibc rifiuta una soglia di mmap sopra il suo massimo (32 MiB a
            64 bit secondo la sua documentazione): allora non imposta nulla.

    Restituisce:
        bool, True se l'allocatore ha accettato entrambe le impostazioni (glibc); False
        altrove (un'altra libreria C, o Windows), dove non cambia nulla.

    Eccezioni:
        Nessuna.
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3                       # <malloc.h>
    return bool(mallopt(m_mmap_threshold, limit)) and bool(mallopt(m_trim_threshold, limit))



def _experiment_worker_init(queue):
    global _QUEUE
    _QUEUE = queue
    limit_blas_threads(1)  # un processo per core: un thread BLAS per processo


def _experiment_run(index, job, ops_factory):
    def report(steps_done):
        _QUEUE.put((index, steps_done))

    return train(ops=ops_factory(), progress=report, **job)


def run_experiments(jobs, ops_factory, workers=None, description="training", progress=True):
    """Esegue ``train(**job, ops=ops_factory())`` per ogni elemento di ``jobs``, un processo
    per esecuzione.

    I processi vengono creati con fork (contesto ``"fork"`` di ``multiprocessing``), quindi
    ogni funzione che serve alle esecuzioni, comprese quelle di un notebook, viene ereditata
    invece che serializzata con pickle; ciascuno usa un solo thread BLAS
    (``limit_blas_threads``) e comunica i suoi passi, attraverso una coda, a un'unica barra
    di avanzamento. Dove i processi non si possono creare con fork (Windows), o con
    ``workers=1``, le esecuzioni avvengono una dopo l'altra in questo processo, con gli
    stessi risultati.

    Argomenti:
        jobs: lista di dict di argomenti per nome di ``train`` (senza ``ops``).
        ops_factory: funzione che restituisce il namespace ``ops``, chiamata in ogni
            processo.
        workers: int, processi contemporanei (predefinito: il numero di core della CPU).
        description: str, l'etichetta della barra di avanzamento.
        progress: bool, mostra una barra di avanzamento.

    Restituisce:
        lista dei risultati di ``train``, nell'ordine di ``jobs``.

    Eccezioni:
        Qualunque eccezione sollevi ``train`` in un'esecuzione (in un processo figlio,
        sollevata di nuovo qui da ``Future.result``);
        ``concurrent.futures.process.BrokenProcessPool`` se un processo figlio muore.
    """
    workers = workers or os.cpu_count() or 1
    total = sum(job.get("steps", 1500) for job in jobs)
    done = [0] * len(jobs)
    bar = ProgressBar(total, description) if progress else None
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        results = []
        for i, job in enumerate(jobs):
            def report(steps_done, i=i):
                done[i] = steps_done
                if bar is not None:
                    bar.update(sum(done))
            results.append(train(ops=ops_factory(), progress=report, **job))
        if bar is not None:
            bar.close()
        return results
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context,
                                                initializer=_experiment_worker_init,
                                                initargs=(queue,)) as pool:
        futures = [pool.submit(_experiment_run, i, job, ops_factory)
                   for i, job in enumerate(jobs)]
        pending = set(futures)
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=0.2)
            while not queue.empty():
                index, steps_done = queue.get()
                done[index] = steps_done
            if bar is not None:
                bar.update(sum(done))
        results = [f.result() for f in futures]
    if bar is not None:
        bar.update(total, force=True)
        bar.close()
    return results
