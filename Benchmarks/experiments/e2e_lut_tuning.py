"""End-to-end tuning of a compressed MiniLM's palette LUTs, biases and LayerNorms (an experiment
for issue 20's 3-bit row, not part of Shrink): every per-tensor palette keeps its indices and
rotation, its LUT entries become parameters, and Adam minimises 1 - cos(pooled embedding, fp32
pooled embedding) over the calibration sentences (plus EXTRA, a text file of more STS-B *train*
sentences). Prints the mean cosine to fp32 over the 2,552 unique STS-B test sentences before and
after each epoch, with the LUTs as trained and rounded back to their int8 grids.

    python3 e2e_lut_tuning.py <compressed.safetensors> <unique test sentences, one per line>
    env: EPOCHS (6), LR (3e-4, relative to each tensor's mean magnitude), EXTRA, SMALL (1: tune biases and norms),
         OUTPUT (a copy of the compressed file with the tuned LUTs, on their int8 grid, and biases and norms)

Needs jax, numpy, safetensors, tokenizers (PyPI) and the model in ~/.cache/shrink/models.
"""
import json, os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../Tests/Python'))
import compressed_crosscheck as cc
import jax, jax.numpy as jnp
from jax.scipy.special import erf
from tokenizers import Tokenizer
from safetensors.numpy import load_file

M = '/root/.cache/shrink/models/all-MiniLM-L6-v2/'
tok = Tokenizer.from_file(M + 'tokenizer.json'); tok.no_padding(); tok.no_truncation()
OPS = ['attention.self.query', 'attention.self.key', 'attention.self.value', 'attention.output.dense', 'intermediate.dense', 'output.dense']

fp = {k: v.astype(np.float32) for k, v in load_file(M + 'model.safetensors').items()}
stored, meta = cc.load(sys.argv[1])
desc = json.loads(meta['shrink.tensors'])

# Per compressed linear: trainable LUT (palette) or fixed dense; fixed indices and rotation.
lut_params, fixed, consts = {}, {}, {}
for name, info in desc.items():
    shape, enc = info['shape'], info['encoding']
    parts = {p: stored[f'{name}#{p}'] for p in info['parts']}
    R = None
    if enc['kind'] == 'rotated':
        signs = 1 - 2 * cc.unpack(parts['rotation_signs'], 1, shape[-1]).astype(np.float64)
        R, enc = cc.hadamard_rotation(signs, enc['block_size']).astype(np.float32), enc['base']
    total = int(np.prod(shape))
    if enc['kind'] == 'palette' and enc['granularity']['kind'] == 'per_tensor' and not enc['per_channel_scale']:
        bits, width = enc['bits'], enc['vector_size']
        idx = cc.unpack(parts['indices'], bits, total // width)
        lut = parts['lut'].astype(np.float32)
        if enc['lut_dtype'] == 'I8':
            if 'lut_zero_points' in parts:
                lut = lut - parts['lut_zero_points'].astype(np.float32)[:, None, None]
            lut = lut * parts['lut_scales'].astype(np.float32)[:, None, None]
        lut_params[name] = jnp.array(lut[0])
        fixed[name] = ('lut', tuple(shape), enc['lut_dtype'])
        consts[name + '#idx'] = jnp.array(idx)
        if R is not None: consts[name + '#R'] = jnp.array(R)
    else:
        values = cc.decode(enc, parts, shape, np.arange(total)).reshape(shape)
        if R is not None: values = values @ R
        fixed[name] = ('dense',)
        consts[name + '#W'] = jnp.array(values)

def weight(name, luts, c):
    f = fixed[name]
    if f[0] == 'dense': return c[name + '#W']
    w = luts[name][c[name + '#idx']].reshape(f[1])
    return w @ c[name + '#R'] if name + '#R' in c else w

def ln(x, g, b):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-12) * g + b

def forward(luts, small, ids, mask, c, teacher=False):
    x = jnp.take(small['embeddings.word_embeddings.weight'], ids, axis=0) + small['embeddings.position_embeddings.weight'][:ids.shape[1]][None] + small['embeddings.token_type_embeddings.weight'][0]
    x = ln(x, small['embeddings.LayerNorm.weight'], small['embeddings.LayerNorm.bias'])
    B, T, D = x.shape
    bias = (1 - mask)[:, None, None, :] * -1e9
    for l in range(6):
        p = f'encoder.layer.{l}.'
        def lin(op, inp):
            W = c[p + op + '.weight'] if teacher else weight(p + op + '.weight', luts, c)
            return inp @ W.T + small[p + op + '.bias']
        q, k, v = (lin(OPS[i], x).reshape(B, T, 12, 32).transpose(0, 2, 1, 3) for i in range(3))
        a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(32) + bias
        a = jax.nn.softmax(a, -1)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        h = ln(lin(OPS[3], ctx) + x, small[p + 'attention.output.LayerNorm.weight'], small[p + 'attention.output.LayerNorm.bias'])
        i = lin(OPS[4], h); i = 0.5 * i * (1 + erf(i / np.sqrt(2)))
        x = ln(lin(OPS[5], i) + h, small[p + 'output.LayerNorm.weight'], small[p + 'output.LayerNorm.bias'])
    e = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return e / jnp.linalg.norm(e, axis=-1, keepdims=True)

small0 = {k: jnp.array(v) for k, v in fp.items() if not (k.endswith('.weight') and any(o in k for o in OPS) and 'LayerNorm' not in k)}
teacher_w = {k: jnp.array(v) for k, v in fp.items() if k not in small0}

def batches(texts, size):
    enc = [tok.encode(t).ids[:128] for t in texts]
    order = np.argsort([len(e) for e in enc])
    out = []
    for s in range(0, len(enc), size):
        sel = order[s:s + size]; T = max(len(enc[i]) for i in sel); T = -(-T // 16) * 16
        ids = np.zeros((len(sel), T), np.int32); mask = np.zeros((len(sel), T), np.float32)
        for r, i in enumerate(sel): ids[r, :len(enc[i])] = enc[i]; mask[r, :len(enc[i])] = 1
        out.append((sel, jnp.array(ids), jnp.array(mask)))
    return out

def lines(path, limit=None):
    L = [l for l in open(path).read().split('\n') if l.strip()]
    return L[:limit] if limit else L

train_texts = lines(os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../data/calibration/minilm-calibration.txt'))
extra = os.environ.get('EXTRA')
if extra:
    train_texts += lines(extra)
test_texts = lines(sys.argv[2])
train = batches(train_texts, 32); test = batches(test_texts, 64)
_fwd_t = jax.jit(lambda ids, mask, c, small: forward(None, small, ids, mask, c, teacher=True))
fwd_t = lambda ids, mask: _fwd_t(ids, mask, teacher_w, small0)
_fwd = jax.jit(lambda luts, small, ids, mask, c: forward(luts, small, ids, mask, c))
fwd = lambda luts, small, ids, mask: _fwd(luts, small, ids, mask, consts)
teach_train = [fwd_t(ids, mask) for _, ids, mask in train]
teach_test = [fwd_t(ids, mask) for _, ids, mask in test]

def evaluate(luts, small):
    c = [float((fwd(luts, small, ids, mask) * t).sum(-1).sum()) for (_, ids, mask), t in zip(test, teach_test)]
    return sum(c) / len(test_texts)

def quantize_luts(luts):
    out = {}
    for n, l in luts.items():
        if fixed[n][2] == 'I8':
            lo, hi = min(float(l.min()), 0.0), max(float(l.max()), 0.0)
            scale = (hi - lo) / 255; zero = np.round(-lo / scale) - 128
            q = jnp.clip(jnp.round(l / scale + zero), -128, 127)
            out[n] = (q - zero) * scale
        else:
            out[n] = l.astype(jnp.float16).astype(jnp.float32)
    return out

train_small = os.environ.get('SMALL', '1') == '1'
trainable_small = {k: v for k, v in small0.items() if k.endswith('.bias') or 'LayerNorm' in k} if train_small else {}
params = {'luts': lut_params, 'small': trainable_small}

def loss_fn(params, ids, mask, t, c, base):
    small = dict(base); small.update(params['small'])
    s = forward(params['luts'], small, ids, mask, c)
    return (1 - (s * t).sum(-1)).mean()

grad = jax.jit(jax.value_and_grad(loss_fn))
lr = float(os.environ.get('LR', '3e-4')); epochs = int(os.environ.get('EPOCHS', '6'))
# Adam, step relative to each tensor's scale.
scales = jax.tree_util.tree_map(lambda p: jnp.maximum(jnp.abs(p).mean(), 1e-3), params)
m = jax.tree_util.tree_map(jnp.zeros_like, params); v = jax.tree_util.tree_map(jnp.zeros_like, params)
print('before', evaluate(lut_params, small0), flush=True)
step = 0; rng = np.random.default_rng(0)
for epoch in range(epochs):
    t0 = time.time(); total = 0
    for b in rng.permutation(len(train)):
        _, ids, mask = train[b]
        val, g = grad(params, ids, mask, teach_train[b], consts, small0); total += float(val)
        step += 1
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
        cur = lr * (0.5 * (1 + np.cos(np.pi * step / (epochs * len(train)))))
        params = jax.tree_util.tree_map(lambda p, a, b, s: p - cur * s * (a / (1 - 0.9 ** step)) / (jnp.sqrt(b / (1 - 0.999 ** step)) + 1e-12), params, m, v, scales)
    small = dict(small0); small.update(params['small'])
    print(f'epoch {epoch} train loss {total / len(train):.5f} test {evaluate(params["luts"], small):.4f} quantized {evaluate(quantize_luts(params["luts"]), small):.4f} ({time.time() - t0:.0f} s)', flush=True)

output = os.environ.get('OUTPUT')
if output:
    from safetensors.numpy import save_file
    import safetensors
    with safetensors.safe_open(sys.argv[1], framework='numpy') as opened:
        tensors = {k: opened.get_tensor(k) for k in opened.keys()}
    for name, lut in params['luts'].items():
        lut = np.asarray(lut, np.float32)
        lo, hi = min(float(lut.min()), 0.0), max(float(lut.max()), 0.0)
        scale = np.float32((hi - lo) / 255)
        zero = np.float32(np.round(-lo / scale) - 128)
        q = np.clip(np.round(lut / scale + zero), -128, 127)
        old = tensors[name + '#lut']
        tensors[name + '#lut'] = q.astype(old.dtype).reshape(old.shape)
        tensors[name + '#lut_scales'] = np.array([scale]).astype(tensors[name + '#lut_scales'].dtype)
        if name + '#lut_zero_points' in tensors:
            tensors[name + '#lut_zero_points'] = np.array([zero]).astype(tensors[name + '#lut_zero_points'].dtype)
    for name, value in params['small'].items():
        tensors[name] = np.asarray(value, np.float32).astype(tensors[name].dtype)
    save_file(tensors, output, metadata=meta)
    print('wrote', output)
