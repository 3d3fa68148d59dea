"""A model of the wgpu backend's f64 argument reduction below 2^20 pi/2
(`cubert_rem_pio2_medium_f64` in crates/cubert-wgpu/src/lang/float64.rs, msun's
e_rem_pio2.c medium path) in Python floats, which round every operation as the strict
SPIR-V path makes the driver do. It checks y0 + y1 against x - n pi/2 in 300-bit
arithmetic (mpmath: `pip install mpmath`) at 212,018 arguments (uniform and log-uniform
over the range, the doubles next to 30,000 random multiples of pi/2, the first 2,000
multiples), then at the double nearest every multiple n pi/2 below 2^20 pi/2, and prints
the largest relative error of each set. Keep it in step with the WGSL.

    python3 scripts/math/rem_pio2_f64_model.py

2026-11-30, this repository's VM, about 15 s: 2^-70.3, then 2^-87.0 (at 204,551 pi/2).
"""
import mpmath, struct, random, math
mpmath.mp.prec = 300
PIO2 = mpmath.pi/2
def d(h): return struct.unpack('>d', bytes.fromhex(h))[0]
def hi(x): return struct.unpack('>Q', struct.pack('>d', x))[0] >> 32
invpio2 = d('3FE45F306DC9C883'); p1 = d('3FF921FB54400000'); p1t = d('3DD0B4611A626331')
p2 = d('3DD0B4611A600000'); p2t = d('3BA3198A2E037073'); p3 = d('3BA3198A2E000000'); p3t = d('397B839A252049C1')
def rne(v):
    return float(round(v))  # Python round: ties to even
def medium(x):
    ax = abs(x); nf = rne(ax*invpio2)
    r = ax - nf*p1; w = nf*p1t; y0 = r - w
    j = hi(ax) >> 20
    if j - ((hi(y0) >> 20) & 0x7ff) > 16:
        t = r; w = nf*p2; r = t - w; w = nf*p2t - ((t - r) - w); y0 = r - w
        if j - ((hi(y0) >> 20) & 0x7ff) > 49:
            t = r; w = nf*p3; r = t - w; w = nf*p3t - ((t - r) - w); y0 = r - w
    y1 = (r - y0) - w
    return int(nf), y0, y1
def check(x):
    n, y0, y1 = medium(x)
    ref = mpmath.mpf(abs(x)) - n*PIO2
    got = mpmath.mpf(y0) + mpmath.mpf(y1)
    rel = abs((got - ref)/ref)
    assert abs(float(ref)) <= math.pi/4 * (1 + 1e-9), (x, n, float(ref))
    return float(rel)
random.seed(1)
LIMIT = d('413921FB00000000')  # msun: ix < 0x413921fb
xs = []
for _ in range(60000):
    xs.append(random.uniform(math.pi/4, LIMIT))
    xs.append(math.exp(random.uniform(math.log(math.pi/4), math.log(LIMIT))))
# hard: nearest doubles to n pi/2 and neighbours
for _ in range(30000):
    n = random.randint(1, 2**20 - 1)
    c = float(n*PIO2)
    for k in (-1, 0, 1):
        v = struct.unpack('<d', struct.pack('<q', struct.unpack('<q', struct.pack('<d', c))[0] + k))[0]
        if math.pi/4 < v < LIMIT: xs.append(v)
for n in list(range(1, 2000)) + [2**k for k in range(11, 20)] + [2**k - 1 for k in range(11, 21)]:
    c = float(n*PIO2)
    if math.pi/4 < c < LIMIT: xs.append(c)
worst = max((check(x), x) for x in xs)
print(len(xs), "worst rel", worst[0], "log2", math.log2(worst[0]), "at", worst[1])
w2 = (0, 0)
for n in range(1, 2**20):
    c = float(n*PIO2)
    if c < LIMIT:
        r = check(c)
        if r > w2[0]: w2 = (r, c)
print("all n: worst rel", w2[0], math.log2(w2[0]), w2[1])
