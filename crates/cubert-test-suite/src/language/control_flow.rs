//! Control flow of the kernel language: `if`/`else` chains and `if` as a value, `for` over
//! exclusive, inclusive and stepped ranges, `while`, `loop` with `break`, `continue`, early
//! `return`, nested loops, and the short-circuit of `&&` and `||`.

use super::{cover, filled, read_scalars, upload_scalars};
use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeCount, CubeDim};

/// Sorts each value into a class through an `if`/`else if`/`else` chain, then a nested
/// `if` without `else`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn classify(x: &Array<i32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        if v < -100 {
            out[i] = 1;
        } else if v < 0 {
            out[i] = 2;
        } else if v == 0 {
            out[i] = 3;
        } else {
            out[i] = 4;
        }
        if v > 50 {
            if v % 2 == 0 {
                out[i] += 10;
            }
        }
    }
}

/// `if` used as a value (with `else if`), a block used as a value, and an `if` value whose
/// branches hold statements.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn if_values(x: &Array<i32>, out: &mut Array<i32>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        let a = if v > 0 {
            v * 2
        } else if v == 0 {
            7
        } else {
            -v
        };
        let b = {
            let t = v + 1;
            t * t
        };
        let c: i32 = if v % 2 == 0 {
            let half = v / 2;
            half + 100
        } else {
            v
        };
        out[i * 3] = a;
        out[i * 3 + 1] = b;
        out[i * 3 + 2] = c;
    }
}

/// Sums over `for` loops on every kind of range, 10 results per input `m`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn ranges(n: &Array<u32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < n.len() {
        let m = n[i];
        let mut exclusive = 0u32;
        for k in 0..m {
            exclusive += k;
        }
        let mut inclusive = 0u32;
        for k in 1..=m {
            inclusive += k;
        }
        let mut stepped = 0u32;
        for k in (3..m).step_by(4) {
            stepped += k;
        }
        let mut stepped_inclusive = 0u32;
        for k in (0..=m).step_by(3) {
            stepped_inclusive += k * k;
        }
        let mut empty = 0u32;
        for _k in m..3 {
            empty += 1;
        }
        let mut to_type_max = 0u32;
        for k in 250u8..=255u8 {
            to_type_max += k as u32;
        }
        for k in (250u8..=255u8).step_by(4) {
            to_type_max += k as u32 * 1000;
        }
        let mut signed = 0i32;
        for k in -3..=3 {
            signed += k * k * k + k * k;
        }
        let mut runtime_step = 0u32;
        for k in (m..m * 3).step_by(i + 1) {
            runtime_step += k;
        }
        // A step of zero or less counts as 1.
        let mut zero_step = 0u32;
        for k in (0..5u32).step_by(m / 100) {
            zero_step += k + 1;
        }
        let mut signed_step = 0i32;
        for k in (-4..4).step_by(m as i32 - 3) {
            signed_step += k + 10;
        }
        let base = i * 10;
        out[base] = exclusive;
        out[base + 1] = inclusive;
        out[base + 2] = stepped;
        out[base + 3] = stepped_inclusive;
        out[base + 4] = empty;
        out[base + 5] = to_type_max;
        out[base + 6] = signed as u32;
        out[base + 7] = runtime_step;
        out[base + 8] = zero_step;
        out[base + 9] = signed_step as u32;
    }
}

/// Collatz steps of each value, counted by a `while` loop.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn collatz(x: &Array<u32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let mut n = x[i];
        let mut steps = 0u32;
        while n > 1 {
            if n % 2 == 0 {
                n /= 2;
            } else {
                n = 3 * n + 1;
            }
            steps += 1;
        }
        out[i] = steps;
    }
}

/// The integer square root of each value, found by a `loop` left by `break`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn integer_sqrt(x: &Array<u32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        let mut k = 0u32;
        loop {
            if (k + 1) * (k + 1) > v {
                break;
            }
            k += 1;
        }
        out[i] = k;
    }
}

/// `continue` in a `for`, a `while` and a `loop`: 3 results per input `m`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn continues(n: &Array<u32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < n.len() {
        let m = n[i];
        let mut not_thirds = 0u32;
        for k in 0..m {
            if k % 3 == 0 {
                continue;
            }
            not_thirds += k;
        }
        let mut j = 0u32;
        let mut odd = 0u32;
        while j < m {
            j += 1;
            if j % 2 == 0 {
                continue;
            }
            odd += j;
        }
        let mut t = 0u32;
        let mut ones_mod_four = 0u32;
        loop {
            t += 1;
            if t > m {
                break;
            }
            if t % 4 != 1 {
                continue;
            }
            ones_mod_four += t;
        }
        out[i * 3] = not_thirds;
        out[i * 3 + 1] = odd;
        out[i * 3 + 2] = ones_mod_four;
    }
}

/// `return` at the top and from inside a loop: units `i % 3 == 0` write nothing; the others
/// write `10 * x[i]` if `x[i] < 10` (found by a loop that returns), else 999.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn early_return(x: &Array<u32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i >= out.len() {
        return;
    }
    if i % 3 == 0 {
        return;
    }
    for k in 0..10u32 {
        if k == x[i] {
            out[i] = k * 10;
            return;
        }
    }
    out[i] = 999;
}

/// Nested loops whose `break` and `continue` act on the innermost loop only.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn nested_loops(n: &Array<u32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < n.len() {
        let m = n[i];
        let mut pairs = 0u32;
        for a in 0..m {
            for b in 0..m {
                if b > a {
                    break;
                }
                if (a + b) % 2 == 1 {
                    continue;
                }
                pairs += 1;
            }
            pairs += 100;
        }
        let mut weighted = 0u32;
        let mut a = 0u32;
        while a < m {
            let mut b = 0u32;
            loop {
                if b >= a {
                    break;
                }
                weighted += a * b;
                b += 1;
            }
            a += 1;
        }
        out[i * 2] = pairs;
        out[i * 2 + 1] = weighted;
    }
}

/// `&&` and `||` whose right side reads `x[i]` only where `i` is in bounds: launched over
/// more units than `x` has elements, none may access `x` out of bounds.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn short_circuit(x: &Array<i32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < out.len() {
        let positive = i < x.len() && x[i] > 0;
        let missing_or_zero = i >= x.len() || x[i] == 0;
        let mut code = 0u32;
        if positive {
            code += 1;
        }
        if missing_or_zero {
            code += 2;
        }
        if i < x.len() && x[i] < 0 || i + 100 < x.len() && x[i + 100] == 0 {
            code += 4;
        }
        if !(i >= x.len() || x[i] != 3) {
            code += 8;
        }
        // Scans to the first zero at or after `i`, or the end, never past it.
        let mut j = i;
        while j < x.len() && x[j] != 0 {
            j += 1;
        }
        out[i] = code + 16 * (j - i);
    }
}

/// A grid-stride loop (every `i < n`, whatever the grid) with `continue` and `break`:
/// doubles each element, skips negative ones, and stops the unit at the first one over
/// 1000. Its end names parameters only, so the CPU runs it as a map where the grid covers
/// `n`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn grid_stride_double(x: &Array<i32>, out: &mut Array<i32>, n: u32) {
    for i in (ABSOLUTE_POS..n.min(out.len())).step_by(CUBE_COUNT * CUBE_DIM) {
        if x[i] < 0 {
            continue;
        }
        if x[i] > 1000 {
            break;
        }
        out[i] = x[i] * 2;
    }
}

/// A specialization of each kernel of this module.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    vec![
        grid_stride_double::definition(),
        classify::definition(),
        if_values::definition(),
        ranges::definition(),
        collatz::definition(),
        integer_sqrt::definition(),
        continues::definition(),
        early_return::definition(),
        nested_loops::definition(),
        short_circuit::definition(),
    ]
}

/// Launches a one-input kernel over `x` with `per` outputs per input (initialized to
/// `init`) and returns the outputs.
fn run<B: TestBackend, X: Scalar, O: Scalar>(
    client: &Client<B>,
    x: &[X],
    per: usize,
    init: O,
    launch: impl FnOnce(CubeCount, CubeDim, &cubert_runtime::Handle, &cubert_runtime::Handle),
) -> Vec<O> {
    let xs = upload_scalars::<B, X>(client, x);
    let out = filled::<B, O>(client, init, x.len() * per);
    let (count, dim) = cover(x.len(), 4);
    launch(count, dim, &xs, &out);
    read_scalars::<B, O>(client, &out)
}

/// `if`/`else if`/`else` takes the first branch whose condition holds, and a nested `if`
/// without `else` runs only when both conditions hold.
pub fn if_else_chains_take_the_first_true_branch<B: TestBackend>() {
    let client = client::<B>();
    let x = [
        -1000,
        -101,
        -100,
        -1,
        0,
        1,
        50,
        51,
        52,
        1000,
        i32::MIN,
        i32::MAX,
    ];
    let got = run::<B, i32, u32>(&client, &x, 1, 0, |count, dim, xs, out| {
        classify::launch::<B::R>(&client, count, dim, xs, out).unwrap();
    });
    let want: Vec<u32> = x
        .iter()
        .map(|&v| {
            let class = if v < -100 {
                1
            } else if v < 0 {
                2
            } else if v == 0 {
                3
            } else {
                4
            };
            class + if v > 50 && v % 2 == 0 { 10 } else { 0 }
        })
        .collect();
    assert_eq!(got, want, "inputs {x:?}");
}

/// `if` used as a value gives the taken branch's value (through `else if` and branches
/// with statements), and a block used as a value gives its tail.
pub fn if_used_as_a_value_gives_the_taken_branch<B: TestBackend>() {
    let client = client::<B>();
    let x = [-7, -2, 0, 1, 2, 9, 100, -100];
    let got = run::<B, i32, i32>(&client, &x, 3, i32::MIN, |count, dim, xs, out| {
        if_values::launch::<B::R>(&client, count, dim, xs, out).unwrap();
    });
    let mut want = Vec::new();
    for &v in &x {
        let a = if v > 0 {
            v * 2
        } else if v == 0 {
            7
        } else {
            -v
        };
        let c = if v % 2 == 0 { v / 2 + 100 } else { v };
        want.extend([a, (v + 1) * (v + 1), c]);
    }
    assert_eq!(got, want, "inputs {x:?}");
}

/// `for` runs over `a..b`, `a..=b`, `(a..b).step_by(s)` and `(a..=b).step_by(s)` (with
/// a constant and a runtime step), signed ranges, empty ranges (start past the end),
/// inclusive ranges that end at the type's maximum (no wrap-around, no endless loop), and
/// steps of zero or less, which count as 1.
pub fn for_loops_cover_exclusive_inclusive_and_stepped_ranges<B: TestBackend>() {
    let client = client::<B>();
    let m = [0u32, 1, 2, 3, 4, 7, 10, 33, 200];
    let got = run::<B, u32, u32>(&client, &m, 10, u32::MAX, |count, dim, xs, out| {
        ranges::launch::<B::R>(&client, count, dim, xs, out).unwrap();
    });
    let mut want = Vec::new();
    let to_type_max: u32 =
        (250u32..=255).sum::<u32>() + (250u32..=255).step_by(4).sum::<u32>() * 1000;
    let signed: i32 = (-3i32..=3).map(|k| k * k * k + k * k).sum();
    for (i, &m) in m.iter().enumerate() {
        want.extend([
            (0..m).sum::<u32>(),
            (1..=m).sum::<u32>(),
            (3..m).step_by(4).sum::<u32>(),
            (0..=m).step_by(3).map(|k| k * k).sum::<u32>(),
            (m..3).count() as u32,
            to_type_max,
            signed as u32,
            (m..m * 3).step_by(i + 1).sum::<u32>(),
            (0..5u32)
                .step_by((m as usize / 100).max(1))
                .map(|k| k + 1)
                .sum::<u32>(),
            (-4i32..4)
                .step_by((m as i32 - 3).max(1) as usize)
                .map(|k| k + 10)
                .sum::<i32>() as u32,
        ]);
    }
    assert_eq!(to_type_max, 1515 + 504_000);
    assert_eq!(got, want, "inputs {m:?}");
}

/// A `while` loop runs while its condition holds (Collatz step counts).
pub fn while_loops_run_until_the_condition_fails<B: TestBackend>() {
    let client = client::<B>();
    let x = [0u32, 1, 2, 3, 6, 7, 27, 97, 871];
    let got = run::<B, u32, u32>(&client, &x, 1, u32::MAX, |count, dim, xs, out| {
        collatz::launch::<B::R>(&client, count, dim, xs, out).unwrap();
    });
    let want: Vec<u32> = x
        .iter()
        .map(|&v| {
            let (mut n, mut steps) = (v, 0);
            while n > 1 {
                n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };
                steps += 1;
            }
            steps
        })
        .collect();
    assert_eq!(want[6], 111);
    assert_eq!(got, want, "inputs {x:?}");
}

/// `loop` runs until `break` (integer square roots).
pub fn loop_with_break_leaves_at_the_break<B: TestBackend>() {
    let client = client::<B>();
    let x = [0u32, 1, 2, 3, 4, 8, 9, 10, 99, 100, 65535, 1_000_000];
    let got = run::<B, u32, u32>(&client, &x, 1, u32::MAX, |count, dim, xs, out| {
        integer_sqrt::launch::<B::R>(&client, count, dim, xs, out).unwrap();
    });
    let want: Vec<u32> = x.iter().map(|&v| v.isqrt()).collect();
    assert_eq!(got, want, "inputs {x:?}");
}

/// `continue` skips the rest of the iteration in `for`, `while` and `loop`.
pub fn continue_skips_the_rest_of_the_iteration<B: TestBackend>() {
    let client = client::<B>();
    let m = [0u32, 1, 2, 5, 9, 10, 31];
    let got = run::<B, u32, u32>(&client, &m, 3, u32::MAX, |count, dim, xs, out| {
        continues::launch::<B::R>(&client, count, dim, xs, out).unwrap();
    });
    let mut want = Vec::new();
    for &m in &m {
        want.extend([
            (0..m).filter(|k| k % 3 != 0).sum::<u32>(),
            (1..=m).filter(|j| j % 2 == 1).sum::<u32>(),
            (1..=m).filter(|t| t % 4 == 1).sum::<u32>(),
        ]);
    }
    assert_eq!(got, want, "inputs {m:?}");
}

/// `return` ends only the unit that returns, at the top level and from inside a loop.
pub fn early_return_ends_only_the_returning_unit<B: TestBackend>() {
    let client = client::<B>();
    let x = [0u32, 3, 9, 10, 4, 200, 1, 7, 11, 5];
    // 3 cubes of 4 units over 10 outputs: units 10 and 11 return at the bounds check.
    let got = run::<B, u32, u32>(&client, &x, 1, 12345, |count, dim, xs, out| {
        early_return::launch::<B::R>(&client, count, dim, xs, out).unwrap();
    });
    let want: Vec<u32> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| match (i % 3, v) {
            (0, _) => 12345,
            (_, v) if v < 10 => v * 10,
            _ => 999,
        })
        .collect();
    assert_eq!(got, want, "inputs {x:?}");
}

/// In nested loops, `break` and `continue` act on the innermost loop only.
pub fn nested_loops_break_and_continue_the_innermost<B: TestBackend>() {
    let client = client::<B>();
    let m = [0u32, 1, 2, 3, 6, 11];
    let got = run::<B, u32, u32>(&client, &m, 2, u32::MAX, |count, dim, xs, out| {
        nested_loops::launch::<B::R>(&client, count, dim, xs, out).unwrap();
    });
    let mut want = Vec::new();
    for &m in &m {
        let mut pairs = 0;
        for a in 0..m {
            pairs += (0..=a).filter(|b| (a + b) % 2 == 0).count() as u32 + 100;
        }
        let weighted: u32 = (0..m).map(|a| (0..a).map(|b| a * b).sum::<u32>()).sum();
        want.extend([pairs, weighted]);
    }
    assert_eq!(got, want, "inputs {m:?}");
}

/// `&&` evaluates its right side only when the left holds, `||` only when it doesn't:
/// guarded reads past the end of an array never happen (the launch over more units than
/// elements syncs without an out-of-bounds error), and the results are the logical ones.
pub fn short_circuit_skips_the_right_side<B: TestBackend>() {
    let client = client::<B>();
    let x = [5, 0, -3, 3, 7, 0, 3, -1, 9, 2];
    let units = 24;
    let xs = upload_scalars::<B, i32>(&client, &x);
    let out = filled::<B, u32>(&client, u32::MAX, units);
    short_circuit::launch::<B::R>(
        &client,
        CubeCount::Static(3, 1, 1),
        CubeDim::new_1d(8),
        &xs,
        &out,
    )
    .unwrap();
    client.sync().expect("guarded reads never go out of bounds");
    let got = read_scalars::<B, u32>(&client, &out);
    let want: Vec<u32> = (0..units)
        .map(|i| {
            let v = x.get(i).copied();
            let mut code = 0;
            if v.is_some_and(|v| v > 0) {
                code += 1;
            }
            if v.is_none_or(|v| v == 0) {
                code += 2;
            }
            if v.is_some_and(|v| v < 0) {
                code += 4;
            }
            if v == Some(3) {
                code += 8;
            }
            let run = x.get(i..).map_or(0, |rest| {
                rest.iter().take_while(|&&value| value != 0).count()
            });
            code + 16 * run as u32
        })
        .collect();
    assert_eq!(got, want, "inputs {x:?}");
}

/// A grid-stride loop visits every `i < n` whatever the grid: one cube, a few, exactly one
/// unit per element, and more units than elements; `continue` skips an element and
/// `break` ends the unit's loop, as the host's per-unit model of the same loop says.
pub fn grid_stride_loops_visit_every_element_whatever_the_grid<B: TestBackend>() {
    let client = client::<B>();
    let n = 1000usize;
    let x: Vec<i32> = (0..n as i32)
        .map(|i| match i % 97 {
            0 => -i,
            13 => 5000 + i,
            _ => i,
        })
        .collect();
    let xs = upload_scalars::<B, i32>(&client, &x);
    for (cubes, dim) in [(1u32, 32u32), (3, 64), (125, 8), (40, 32)] {
        let out = filled::<B, i32>(&client, -7, n);
        grid_stride_double::launch::<B::R>(
            &client,
            CubeCount::new_1d(cubes),
            CubeDim::new_1d(dim),
            &xs,
            &out,
            n as u32,
        )
        .unwrap();
        let got = read_scalars::<B, i32>(&client, &out);
        let units = (cubes * dim) as usize;
        let mut want = vec![-7; n];
        for unit in 0..units {
            for i in (unit..n).step_by(units) {
                if x[i] < 0 {
                    continue;
                }
                if x[i] > 1000 {
                    break;
                }
                want[i] = x[i] * 2;
            }
        }
        assert_eq!(got, want, "{cubes} cubes of {dim}");
    }
}
