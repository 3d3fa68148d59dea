#!/usr/bin/env python3
"""The coefficients of wgpu's f32 tanh below ln(3)/2 (crates/cubert-wgpu/src/lang/float32.rs).

tanh(x) = x + x z P(z), z = x^2: P is mpmath's Chebyshev fit of degree 5 to
(tanh(sqrt(z)) / sqrt(z) - 1) / z on [0, (ln(3)/2)^2], its coefficients rounded to f32.
Prints them (highest degree first) and the largest relative error of tanh with them over
2,000 points, in 40-digit arithmetic.

    python3 scripts/math/fit-tanh-f32.py      # needs mpmath (pip install mpmath)
"""
import struct

import mpmath as mp

mp.mp.dps = 40


def f32(value):
    return struct.unpack("f", struct.pack("f", float(value)))[0]


Z_MAX = (mp.log(3) / 2) ** 2


def p(z):
    if z == 0:
        return mp.mpf(-1) / 3
    x = mp.sqrt(z)
    return (mp.tanh(x) / x - 1) / z


poly = mp.chebyfit(p, [0, Z_MAX], 6)
coefficients = [f32(c) for c in poly]
worst = 0
for i in range(1, 2001):
    x = mp.sqrt(Z_MAX) * i / 2000
    z = x * x
    value = 0
    for c in coefficients:
        value = value * z + mp.mpf(c)
    worst = max(worst, abs((x + x * z * value) / mp.tanh(x) - 1))
print("coefficients:", ", ".join("%.9ef" % c for c in coefficients))
print("largest relative error of tanh:", mp.nstr(worst, 5))
