"""Le docstring in italiano delle funzioni valutate dei due compiti (attention, training).

Il notebook italiano copia ogni funzione valutata da ``solutions/attention.py`` o
``solutions/training.py`` (firma e corpo) e al posto della sua docstring inglese mette
quella scritta qui, sotto la stessa firma (``tools.notebook_language.with_docstring``).
Una funzione valutata senza docstring qui, con una firma diversa da quella di
``solutions/`` o con la docstring ancora in inglese ferma la build italiana, che la nomina.
Forme e dtype restano scritti come nella docstring inglese. Questo file non si esegue:
lo legge il builder.
"""

# ---------------------------------------------------------------------------------------
# Compito attention (solutions/attention.py)


def softmax(scores, axis=-1):
    """Softmax numericamente stabile lungo un asse.

    ``softmax(s)_j = exp(s_j - m) / sum_k exp(s_k - m)`` con ``m = max_k s_k``: sottrarre
    il massimo non cambia nulla in matematica e impedisce a ``exp`` di andare in overflow
    (Vaswani et al. 2017, arXiv:1706.03762, eq. 1 usa la softmax sulle chiavi).

    Argomenti:
        scores: array float di forma qualsiasi ``(...)``; i valori possono essere ``-inf``
            (mascherati).
        axis: int, l'asse su cui normalizzare (predefinito: l'ultimo, le chiavi).

    Restituisce:
        array float, stessa forma di ``scores``; il suo dtype è quello di ``scores`` se è
        un dtype in virgola mobile (float16, float32, float64 conservati), altrimenti
        float64 (interi e booleani diventano float64). Ogni fetta lungo ``axis`` somma a 1,
        i valori uguali a ``-inf`` ricevono peso esattamente 0, e una fetta tutta ``-inf``
        dà tutti zeri (mai NaN).

    Eccezioni:
        numpy.exceptions.AxisError: se ``axis`` è fuori dagli assi di ``scores``.
        ValueError: se ``scores`` ha lunghezza 0 lungo ``axis`` (e valori sugli altri
            assi), o contiene valori che non sono numeri (stringhe).
    """


def causal_mask(T):
    """Maschera causale (look-ahead): la posizione ``i`` può guardare le posizioni ``j <= i``.

    Argomenti:
        T: int, lunghezza della sequenza, ``T >= 0``.

    Restituisce:
        array bool ``(T, T)``, ``[i, j]`` True se e solo se ``j <= i`` (query ``i``,
        chiave ``j``).

    Eccezioni:
        ValueError: se ``T < 0``.
        TypeError: se ``T`` non è un intero.
    """


def padding_mask(lengths, T):
    """Maschera di padding dalla lunghezza vera di ogni sequenza di un batch.

    Argomenti:
        lengths: interi ``(B,)``, lista o array, ``0 <= lengths[b] <= T``.
        T: int, lunghezza della sequenza con il padding.

    Restituisce:
        array bool ``(B, T)``, ``[b, t]`` True se e solo se ``t < lengths[b]`` (un token
        vero).

    Eccezioni:
        TypeError: se ``lengths`` contiene valori non confrontabili con gli interi
            (stringhe).
    """


def combine_masks(causal, padding):
    """Combina una maschera causale e una maschera di padding con un AND; il padding agisce
    sulle chiavi.

    Argomenti:
        causal: bool ``(T, T)``, ``[i, j]`` per la query ``i`` e la chiave ``j``.
        padding: bool ``(B, T)``, ``[b, t]`` True per un token vero.

    Restituisce:
        array bool ``(B, T, T)``: ``[b, i, j] = causal[i, j] and padding[b, j]``.

    Eccezioni:
        IndexError: se ``causal`` o ``padding`` ha meno di due assi.
        ValueError: se le due maschere hanno ``T`` diversi (le forme non fanno broadcast).
    """


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    """Attenzione a prodotto scalare scalato (Vaswani et al. 2017, arXiv:1706.03762, eq. 1).

    ``S = Q K^T / sqrt(d_k)``, ``P = softmax(S)`` sulle chiavi (ultimo asse),
    ``out = P V``. Dove ``mask`` è False il punteggio diventa ``-inf`` *prima* della
    softmax.

    Argomenti:
        Q: float ``(..., T_q, d_k)``, le query.
        K: float ``(..., T_k, d_k)``, le chiavi.
        V: float ``(..., T_k, d_v)``, i valori.
        mask: bool facoltativa, con broadcast a ``(..., T_q, T_k)``; True = può guardare.
        scale: bool; False toglie il fattore ``1/sqrt(d_k)``.

    Restituisce:
        ``(out, weights)``: ``out`` float ``(..., T_q, d_v)``, ``weights`` float
        ``(..., T_q, T_k)`` con le righe che sommano a 1 (le righe del tutto mascherate
        sono tutte 0).

    Eccezioni:
        ValueError: se le forme non tornano (il ``d_k`` di ``K`` diverso da quello di
            ``Q``, il ``T_k`` di ``V`` da quello di ``K``, assi iniziali senza broadcast)
            o ``mask`` non fa broadcast a ``(..., T_q, T_k)``.
    """


def split_heads(M, n_heads):
    """Divide l'ultimo asse in teste.

    Reshape ``(B, T, d) -> (B, T, h, d_h)``, poi scambio degli assi 1 e 2 ->
    ``(B, h, T, d_h)``.

    Argomenti:
        M: float ``(B, T, d)``.
        n_heads: int ``h``, deve dividere ``d``.

    Restituisce:
        float ``(B, h, T, d_h)`` con ``d_h = d // h``; la testa ``k`` contiene le colonne
        ``k*d_h .. (k+1)*d_h - 1`` di ``M``.

    Eccezioni:
        ValueError: se ``M`` non è 3-D, o ``n_heads <= 0``, o ``d % n_heads != 0``.
    """


def merge_heads(M):
    """Inversa esatta di ``split_heads``: ``(B, h, T, d_h) -> (B, T, h * d_h)``.

    Prima si riscambiano gli assi 1 e 2, tornando a ``(B, T, h, d_h)``, poi il reshape.

    Argomenti:
        M: float ``(B, h, T, d_h)``.

    Restituisce:
        float ``(B, T, h * d_h)``, con il dtype di ``M``.

    Eccezioni:
        ValueError: se ``M`` non è 4-D.
    """


def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    """Self-attention multi-testa senza bias (Vaswani et al. 2017, sezione 3.2.2).

    ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``, divise in ``h`` teste di larghezza
    ``d_h = d / h``, attenzione a prodotto scalare per ogni testa con scala
    ``1/sqrt(d_h)``, teste riunite, poi ``Y = merge(...) W_O``.

    Argomenti:
        X: float ``(B, T, d)``.
        W_Q, W_K, W_V, W_O: float ``(d, d)``.
        n_heads: int ``h``, deve dividere ``d``.
        mask: bool facoltativa ``(T, T)`` o ``(B, T, T)``; True = può guardare; vale per
            ogni testa.

    Restituisce:
        ``(Y, weights)``: ``Y`` float ``(B, T, d)``, ``weights`` float ``(B, h, T, T)``.

    Eccezioni:
        ValueError: se ``d % n_heads != 0``, o le forme dei pesi o della maschera non
            tornano con ``X``.
    """


def sinusoidal_positions(T, d):
    """Codifiche di posizione sinusoidali (Vaswani et al. 2017, sezione 3.5).

    ``PE[p, 2i] = sin(p / 10000^(2i/d))`` e ``PE[p, 2i+1] = cos(p / 10000^(2i/d))``;
    con ``d`` dispari l'ultima colonna è un seno.

    Argomenti:
        T: int, numero di posizioni ``p = 0 .. T-1``.
        d: int, larghezza.

    Restituisce:
        array float64 ``(T, d)`` (angoli in radianti; valori in ``[-1, 1]``).

    Eccezioni:
        ValueError: se ``T < 0`` o ``d < 0``.
    """


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    """Layer norm sull'ultimo asse (Ba, Kiros, Hinton 2016, arXiv:1607.06450).

    ``y = gamma * (x - mean) / sqrt(var + eps) + beta``, con la media e la varianza
    *distorta* (divisa per ``d``) calcolate sull'ultimo asse di ogni token.

    Argomenti:
        x: float ``(..., d)``.
        gamma, beta: float ``(d,)``.
        eps: float, sommato alla varianza dentro la radice quadrata.

    Restituisce:
        ``(y, cache)``: ``y`` float ``(..., d)``; ``cache`` ciò che serve a
        ``layer_norm_backward``.

    Eccezioni:
        ValueError: se ``gamma`` o ``beta`` non fa broadcast con ``x`` (la sua lunghezza
            non è ``d``).
    """


def layer_norm_backward(dy, cache):
    """Passata all'indietro di ``layer_norm_forward``, in forma chiusa.

    ``dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`` con
    ``dxhat = dy * gamma`` e ``inv = 1 / sqrt(var + eps)``, medie sull'ultimo asse.

    Argomenti:
        dy: float ``(..., d)``, gradiente della loss rispetto a ``y``.
        cache: ciò che ha restituito ``layer_norm_forward`` (non viene modificata).

    Restituisce:
        ``(dx, dgamma, dbeta)``: ``dx`` float ``(..., d)``; ``dgamma`` e ``dbeta`` float
        ``(d,)``, sommati su tutti gli assi iniziali.

    Eccezioni:
        KeyError: se ``cache`` non è ciò che ha restituito ``layer_norm_forward`` (manca
            una voce).
        ValueError: se la forma di ``dy`` non è quella della ``y`` della passata in avanti.
    """


def attention_forward(x, params, n_heads, causal=True, scale=True):
    """Self-attention multi-testa con bias, passata in avanti con una cache.

    ``Q = x W_Q + b_Q``, ``K = x W_K + b_K``, ``V = x W_V + b_V``; per ogni testa
    ``P = softmax(Q_h K_h^T / sqrt(d_h))`` (prima la maschera causale, se ``causal``);
    ``y = merge(P V_h) W_O + b_O``.

    Argomenti:
        x: float ``(B, T, d)``.
        params: dict con ``W_Q, W_K, W_V, W_O`` float ``(d, d)`` e
            ``b_Q, b_K, b_V, b_O`` float ``(d,)``.
        n_heads: int ``h``, deve dividere ``d``.
        causal: bool, applica la maschera causale.
        scale: bool, divide i punteggi per ``sqrt(d_h)``.

    Restituisce:
        ``(y, cache)``: ``y`` float ``(B, T, d)``; ``cache`` ciò che serve a
        ``attention_backward``.

    Eccezioni:
        ValueError: se ``x`` non è 3-D, o ``d % n_heads != 0``, o la forma di un parametro
            non torna con ``d``.
        KeyError: se a ``params`` manca uno degli otto parametri.
    """


def attention_backward(dy, cache):
    """Passata all'indietro di ``attention_forward``.

    All'indietro della softmax ``dS = P * (dP - rowsum(dP * P))``; le posizioni mascherate
    (``P = 0``) hanno gradiente zero; la scala dei punteggi moltiplica ``dS`` come
    moltiplicava ``S``.

    Argomenti:
        dy: float ``(B, T, d)``, gradiente della loss rispetto a ``y``.
        cache: ciò che ha restituito ``attention_forward`` (non viene modificata).

    Restituisce:
        ``(dx, grads)``: ``dx`` float ``(B, T, d)``; ``grads`` un dict con le stesse
        chiavi e forme di ``params``: ``W_Q, W_K, W_V, W_O`` ``(d, d)``,
        ``b_Q, b_K, b_V, b_O`` ``(d,)``.

    Eccezioni:
        KeyError: se ``cache`` non è ciò che ha restituito ``attention_forward`` (manca
            una voce).
        ValueError: se la forma di ``dy`` non è quella della ``y`` della passata in avanti.
    """


def block_param_count(d, d_ff=None):
    """Numero di parametri di un blocco Transformer pre-LN con bias.

    Proiezioni dell'attenzione ``4 (d^2 + d)``, FFN ``d d_ff + d_ff + d_ff d + d``, due
    layer norm ``2 * 2d``. Con ``d_ff = 4d`` fa ``12 d^2 + 13 d``.

    Argomenti:
        d: int, larghezza del modello.
        d_ff: int o None, larghezza nascosta della FFN (predefinita ``4 * d``).

    Restituisce:
        int, numero di parametri scalari.

    Eccezioni:
        TypeError: se ``d`` (o ``d_ff``, quando è dato) non è un numero.
    """


def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
    """Memoria di una cache chiave-valore (Shazeer 2019, arXiv:1911.02150, per il caso
    multi-query).

    ``2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element``: chiavi
    e valori (il 2) per ogni layer, testa, posizione e sequenza.

    Argomenti:
        n_layers, n_kv_heads, d_head, seq_len, batch: interi.
        bytes_per_element: int, per esempio 2 per float16, 4 per float32.

    Restituisce:
        int, byte.

    Eccezioni:
        TypeError: se un argomento non è un numero (``None``).
    """


# ---------------------------------------------------------------------------------------
# Compito training (solutions/training.py)


def make_batch(task, L, batch_size, rng):
    """Un batch casuale nuovo di un compito, disposto per la predizione del token seguente.

    Ogni riga è una sequenza ``[s1 .. sL, SEP, a1 .. aL]`` di lunghezza ``2L + 1``: ``L``
    simboli estratti indipendenti e uniformi da ``0 .. N_SYMBOLS-1`` (ripetizioni
    ammesse), il separatore ``SEP``, poi la risposta: ``s`` per ``copy``, ``s`` in ordine
    crescente per ``sort``. Il modello legge le posizioni ``0 .. 2L-1`` e predice, in ogni
    posizione, il token che la segue (posizioni ``1 .. 2L``); nella loss contano solo le
    ``L`` predizioni dei token della risposta.

    Argomenti:
        task: ``"copy"`` o ``"sort"``.
        L: int >= 1, numero di simboli.
        batch_size: int >= 1, ``B``.
        rng: ``numpy.random.Generator``; i simboli si estraggono con
            ``rng.integers(0, N_SYMBOLS, size=(B, L))``, una chiamata per batch.

    Restituisce:
        ``(inputs, targets, loss_mask)``: ``inputs`` int64 ``(B, 2L)`` = posizioni
        ``0 .. 2L-1`` della sequenza; ``targets`` int64 ``(B, 2L)`` = posizioni
        ``1 .. 2L``; ``loss_mask`` bool ``(B, 2L)``, True esattamente sulle ``L``
        predizioni della risposta (posizioni di input ``L .. 2L-1``, i cui target sono
        ``a1 .. aL``).

    Eccezioni:
        ValueError: se ``task`` non è ``"copy"`` o ``"sort"``, o ``L`` o ``batch_size``
            è minore di 1.
    """


def model_param_count(vocab_size, d, n_layers, max_len, d_ff=None):
    """Numero di parametri scalari del decoder di ``init_params`` (con le posizioni).

    Embedding dei token ``V d``, tabella delle posizioni ``max_len d``, ``n_layers``
    blocchi pre-LN di ``4(d^2 + d) + 2 d d_ff + d_ff + d + 4d`` ciascuno
    (``12 d^2 + 13 d`` quando ``d_ff = 4d``), layer norm finale ``2d``, proiezione di
    uscita ``d V + V``. La configurazione di riferimento (``V = 21, d = 32``, 2 layer,
    ``max_len = 13``, ``d_ff = 128``) ne ha 27.253.

    Argomenti:
        vocab_size: int, ``V``.
        d: int, larghezza del modello.
        n_layers: int, numero di blocchi.
        max_len: int, righe della tabella delle posizioni.
        d_ff: int o None, larghezza nascosta della FFN (predefinita ``4 d``).

    Restituisce:
        int.
    """


def masked_cross_entropy(logits, targets, loss_mask):
    """Cross-entropy media del token seguente sulle posizioni dove ``loss_mask`` è True.

    ``loss = -(1/N) sum_{(b,t): mask} log softmax(logits[b, t])[targets[b, t]]`` con ``N``
    il numero di valori True, calcolata in modo stabile come
    ``log softmax(z)_k = z_k - m - log sum_j exp(z_j - m)``, ``m = max_j z_j``. Il suo
    gradiente è ``(softmax(logits) - onehot(targets)) / N`` nelle posizioni della maschera
    e 0 altrove (il gradiente di softmax più cross-entropy; Goodfellow, Bengio, Courville,
    *Deep Learning*, sezione 6.2.2.3).

    Argomenti:
        logits: float ``(B, T, V)``.
        targets: interi ``(B, T)`` in ``0 .. V-1``.
        loss_mask: bool ``(B, T)`` con almeno un True.

    Restituisce:
        ``(loss, dlogits)``: ``loss`` un float di Python; ``dlogits`` float ``(B, T, V)``,
        stesso dtype di ``logits``.

    Eccezioni:
        ValueError: se ``loss_mask`` non ha alcun valore True.
    """


def block_backward(dy, cache, ops):
    """Passata all'indietro di ``block_forward``, per entrambe le posizioni delle layer
    norm.

    Si percorre la passata in avanti al contrario. Una somma residua ``x1 + f`` passa il
    suo gradiente invariato a entrambi i termini, e un valore usato due volte (``x1``
    entra nella FFN e nella connessione residua) riceve la somma dei due gradienti. La
    FFN: ``dW2 = hidden^T df``, ``db2 = sum df``, ``d pre = (df W2^T) * (pre > 0)`` (la
    ReLU lascia passare il gradiente dove il suo input era positivo),
    ``dW1 = u^T d pre``, ``db1 = sum d pre``, ``du = d pre W1^T``, con le somme su tutti
    i token (tutti gli assi iniziali). Layer norm e attenzione passano per
    ``ops.layer_norm_backward`` e ``ops.attention_backward`` con le cache contenute in
    ``cache``.

    Argomenti:
        dy: float ``(B, T, d)``, gradiente della loss rispetto all'uscita del blocco.
        cache: ciò che ha restituito ``block_forward`` (non viene modificata).
        ops: namespace con ``layer_norm_backward`` e ``attention_backward``.

    Restituisce:
        ``(dx, grads)``: ``dx`` float ``(B, T, d)``; ``grads`` un dict con le chiavi di
        ``BLOCK_KEYS`` e le forme dei parametri del blocco.

    Eccezioni:
        KeyError: se ``cache`` non è ciò che ha restituito ``block_forward`` (manca una
            voce).
        ValueError: se la forma di ``dy`` non è quella dell'uscita del blocco.
    """


def adam_step(params, grads, state, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """Un passo di Adam con la correzione del bias (Kingma & Ba 2014, arXiv:1412.6980,
    Alg. 1).

    Con ``t = state["t"] + 1``, per ogni parametro ``p`` con gradiente ``g``:
    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
    ``m_hat = m / (1 - beta1^t)``, ``v_hat = v / (1 - beta2^t)``,
    ``p = p - lr m_hat / (sqrt(v_hat) + eps)``.

    Argomenti:
        params: dict nome -> array float.
        grads: dict con le stesse chiavi e forme.
        state: ``{"t": int, "m": dict, "v": dict}`` (da ``adam_init`` o da un passo
            precedente); non viene modificato.
        lr, beta1, beta2, eps: float.

    Restituisce:
        ``(new_params, new_state)``: dict nuovi di array nuovi (gli input restano
        intatti), dtype come in ``params``; ``new_state["t"] = state["t"] + 1``.

    Eccezioni:
        KeyError: se a ``grads``, ``state["m"]`` o ``state["v"]`` manca un nome di
            ``params``, o a ``state`` manca ``"t"``, ``"m"`` o ``"v"``.
        ValueError: se la forma di un gradiente non fa broadcast con quella del suo
            parametro.
    """


def greedy_generate(params, prompts, n_new, config, ops):
    """Decodifica greedy senza cache: ``n_new`` token, una passata in avanti completa per
    ciascuno.

    A ogni passo si esegue ``ops.model_forward`` sull'intera sequenza fin qui (prompt più
    i token generati finora), si prendono i logits dell'**ultima** posizione, si aggiunge
    il loro argmax (a parità: l'id più basso, come ``np.argmax``) e si prosegue dalla
    sequenza allungata: il modello legge le proprie predizioni, mai la risposta vera.

    Argomenti:
        params: dict di ``init_params``.
        prompts: interi ``(B, T0)`` (per i compiti, ``[s1 .. sL, SEP]``, ``T0 = L + 1``);
            non vengono modificati.
        n_new: int >= 1, token da generare; ``T0 + n_new - 1 <= config.max_len``.
        config: ``ModelConfig``.
        ops: namespace con ``model_forward``.

    Restituisce:
        ``(tokens, logits)``: ``tokens`` int64 ``(B, n_new)``, i token generati;
        ``logits`` float ``(B, n_new, V)``, i logits da cui è stato scelto ogni token.

    Eccezioni:
        ValueError: se ``n_new < 1`` (nessun token da impilare), o la sequenza supera
            ``config.max_len`` con le posizioni (``ops.model_forward`` la rifiuta).
    """


def answer_accuracy(generated, expected):
    """Accuratezza per token e per sequenza delle risposte generate.

    Argomenti:
        generated: interi ``(B, L)``, le risposte del modello.
        expected: interi ``(B, L)``, le risposte vere.

    Restituisce:
        ``(token_accuracy, sequence_accuracy)``: float di Python in ``[0, 1]``; la quota
        di token della risposta uguali a quelli attesi, e la quota di sequenze i cui
        ``L`` token sono tutti giusti.

    Eccezioni:
        ValueError: se le forme sono diverse.
    """
