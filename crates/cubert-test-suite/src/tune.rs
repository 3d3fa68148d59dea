//! Autotuning: the choice is the fastest measured, failing candidates are skipped, results
//! are shared through disk (by a second process) and in memory (by devices of one kind and
//! concurrent callers), a changed candidate set tunes again, levels, budget, early stop and
//! check mode do what they say, and every standard variant computes the reference.
//!
//! Synthetic candidates differ by a deterministic amount of work (a matmul launched 1, 8
//! or 50 times), never by a timing assumption; assertions compare the choice with the
//! measurements the tuner recorded.

use crate::backend::{Client, TestBackend};
use crate::support::{client, read_elems, two_devices, upload};
use cubert_runtime::config::AutotuneLevel;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::tune::standard::{
    MatmulProblem, ReduceSumProblem, matmul_tuned, matmul_variant, reduce_sum_tuned,
    reduce_sum_variant,
};
use cubert_runtime::tune::{
    Candidate, CandidateSet, Outcome, OutputCheck, Priority, Source, TuneKey, TuneRecord,
    TuneSettings, Tuner,
};
use cubert_runtime::{ElemType, Handle, Runtime, ServerError, ops};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Side of the synthetic candidates' matmul.
const SIDE: usize = 32;

/// Names the child mode of the two-process test: the cache directory to read.
const CHILD_ENV: &str = "CUBERT_TUNE_TEST_CHILD";

/// The synthetic operation's inputs: `out = lhs × rhs` (SIDE × SIDE, f32), and an
/// undersized output for a candidate that must fail.
#[derive(Clone)]
struct Work {
    lhs: Handle,
    rhs: Handle,
    out: Handle,
    small: Handle,
}

type Set<B> = CandidateSet<<B as TestBackend>::R, Work, ()>;

fn work<B: TestBackend>(client: &Client<B>) -> Work {
    work_on(client)
}

fn expected() -> Vec<f32> {
    let values: Vec<f32> = (0..SIDE * SIDE).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut out = vec![0.0f32; SIDE * SIDE];
    for i in 0..SIDE {
        for j in 0..SIDE {
            out[i * SIDE + j] = (0..SIDE)
                .map(|p| values[i * SIDE + p] * values[p * SIDE + j])
                .sum();
        }
    }
    out
}

/// A candidate doing the matmul `times` times (and counting its runs in `runs`).
fn repeated<B: TestBackend>(
    name: &str,
    times: usize,
    runs: Option<&'static AtomicU64>,
) -> Candidate<B::R, Work, ()> {
    Candidate::new(name, move |client, w: &Work| {
        if let Some(runs) = runs {
            runs.fetch_add(1, Ordering::Relaxed);
        }
        for _ in 0..times {
            ops::matmul(
                client,
                &w.lhs,
                &w.rhs,
                &w.out,
                SIDE,
                SIDE,
                SIDE,
                ElemType::F32,
            )?;
        }
        Ok(())
    })
    .with_priority(Priority::High)
}

fn set<B: TestBackend>(name: &str) -> Set<B> {
    CandidateSet::new(
        name,
        |_: &Work| TuneKey::default().with("side", SIDE),
        |client, _key, _w: &Work| Ok(work_on(client)),
    )
}

fn work_on<R: Runtime>(client: &cubert_runtime::ComputeClient<R>) -> Work {
    let values: Vec<f32> = (0..SIDE * SIDE).map(|i| (i % 7) as f32 - 3.0).collect();
    let bytes = cubert_runtime::Bytes::from_slice(&values);
    Work {
        lhs: client.create(bytes.clone()).unwrap(),
        rhs: client.create(bytes).unwrap(),
        out: client.empty(SIDE * SIDE * 4).unwrap(),
        small: client.empty(16).unwrap(),
    }
}

fn settings(level: AutotuneLevel, dir: Option<&Path>) -> TuneSettings {
    TuneSettings {
        level,
        cache_dir: dir.map(Path::to_path_buf),
        budget: Duration::from_secs(60),
        samples: 5,
        early_stop_ratio: f64::INFINITY,
        check: false,
    }
}

fn tuned_record(choice: &cubert_runtime::tune::Choice) -> Arc<TuneRecord> {
    choice.record.clone().expect("a tuned choice has a record")
}

fn samples(record: &TuneRecord, name: &str) -> Vec<f64> {
    match &record.report(name).unwrap().outcome {
        Outcome::Measured { samples, .. } => samples.clone(),
        other => panic!("`{name}` was not measured: {other:?}"),
    }
}

/// The tuner picks the candidate with the lowest measured median, here the one doing 25
/// and 50 times less work than the others; the second call is answered from memory
/// without benchmarking.
pub fn chosen_candidate_is_the_fastest_measured<B: TestBackend>() {
    let client = client::<B>();
    let set = set::<B>("tune_fastest")
        .with(repeated::<B>("x25", 25, None))
        .with(repeated::<B>("x50", 50, None))
        .with(repeated::<B>("x1", 1, None));
    let tuner = Tuner::new(settings(AutotuneLevel::Full, None));
    let w = work::<B>(&client);
    let choice = tuner.choose(&client, &set, &w).unwrap();
    assert_eq!(choice.source, Source::Tuned);
    let record = tuned_record(&choice);
    assert_eq!(record.winner, record.fastest_measured().unwrap().name);
    assert_eq!(record.winner, "x1", "{record:#?}");
    for name in ["x25", "x50", "x1"] {
        assert_eq!(samples(&record, name).len(), 5, "{name}");
    }
    // A warm-up and 5 samples per candidate.
    assert_eq!(record.benchmark_runs, 18);
    assert_eq!(tuner.stats().benchmark_runs, 18);

    tuner.execute(&client, &set, &w).unwrap();
    assert_eq!(read_elems::<B, f32>(&client, &w.out), expected());
    let again = tuner.choose(&client, &set, &w).unwrap();
    assert_eq!((again.source, again.name.as_str()), (Source::Memory, "x1"));
    assert_eq!(
        tuner.stats().benchmark_runs,
        18,
        "nothing is benchmarked twice"
    );
    assert_eq!(tuner.stats().tunes, 1);
}

/// A candidate refused at launch (an unknown kernel variant) and one failing while it runs
/// (an out-of-bounds store) are skipped; the others are tuned and the client keeps working.
pub fn failing_candidate_is_skipped<B: TestBackend>() {
    let client = client::<B>();
    let refused = Candidate::new("refused", |_client, _w: &Work| {
        B::R::standard_kernel_variant(StandardKernel::Matmul(ElemType::F32), "no-such-variant")
            .map(|_| ())
            .map_err(ServerError::from)
    });
    let out_of_bounds = Candidate::new("out_of_bounds", |client, w: &Work| {
        Ok(ops::matmul(
            client,
            &w.lhs,
            &w.rhs,
            &w.small,
            SIDE,
            SIDE,
            SIDE,
            ElemType::F32,
        )?)
    });
    let set = set::<B>("tune_failing")
        .with(refused.with_priority(Priority::High))
        .with(out_of_bounds.with_priority(Priority::High))
        .with(repeated::<B>("ok", 1, None))
        // 64 launches, so that "ok" wins by far more than a sample's timing noise: with 8,
        // "slow" won once on an H200 (2026-11-29), where one 32 x 32 matmul takes a few
        // microseconds.
        .with(repeated::<B>("slow", 64, None));
    let tuner = Tuner::new(settings(AutotuneLevel::Full, None));
    let w = work::<B>(&client);
    tuner.execute(&client, &set, &w).unwrap();
    let record = tuner.cached(&client, &set, &w).unwrap();
    for name in ["refused", "out_of_bounds"] {
        assert!(
            matches!(record.report(name).unwrap().outcome, Outcome::Failed { .. }),
            "{name}: {record:#?}"
        );
    }
    assert_eq!(record.winner, "ok");
    assert_eq!(read_elems::<B, f32>(&client, &w.out), expected());
    client.sync().unwrap();
}

/// A second process with the same cache directory finds the result on disk: it benchmarks
/// nothing and runs the winner once. The child is this test binary, re-run with
/// `CUBERT_TUNE_TEST_CHILD` naming the directory.
pub fn second_process_finds_the_result_on_disk_and_benchmarks_nothing<B: TestBackend>() {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let make_set = || {
        set::<B>("tune_two_processes")
            .with(repeated::<B>("x8", 8, Some(&RUNS)))
            .with(repeated::<B>("x1", 1, Some(&RUNS)))
    };
    let client = client::<B>();
    let w = work::<B>(&client);
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let tuner = Tuner::new(settings(AutotuneLevel::Full, Some(Path::new(&dir))));
        let choice = tuner.choose(&client, &make_set(), &w).unwrap();
        tuner.execute(&client, &make_set(), &w).unwrap();
        let stats = tuner.stats();
        println!(
            "cubert-tune-child benchmark_runs={} disk_hits={} candidate_runs={} winner={} source={:?}",
            stats.benchmark_runs,
            stats.disk_hits,
            RUNS.load(Ordering::Relaxed),
            choice.name,
            choice.source
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tuner = Tuner::new(settings(AutotuneLevel::Full, Some(dir.path())));
    let choice = tuner.choose(&client, &make_set(), &w).unwrap();
    assert_eq!(choice.source, Source::Tuned);
    assert!(tuner.stats().benchmark_runs > 0);
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new(exe)
        .args([
            "tune::second_process_finds_the_result_on_disk_and_benchmarks_nothing",
            "--exact",
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.split_once("cubert-tune-child ").map(|(_, rest)| rest))
        .unwrap_or_else(|| {
            panic!(
                "the child printed no result (is this test instantiated as `tune::...`?):\n\
                 {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert!(
        output.status.success(),
        "the child printed `{line}` but exited with {}; its standard error:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = format!(
        "benchmark_runs=0 disk_hits=1 candidate_runs=1 winner={} source=Disk",
        choice.name
    );
    assert_eq!(line, expected);
}

/// A tuner with the same disk cache reuses a result of the same candidate set; a set with
/// a candidate added, or a candidate whose identity changed, is tuned again.
pub fn changed_candidate_set_tunes_again<B: TestBackend>() {
    let client = client::<B>();
    let w = work::<B>(&client);
    let dir = tempfile::tempdir().unwrap();
    let fresh_tuner = || Tuner::new(settings(AutotuneLevel::Full, Some(dir.path())));
    let base = || {
        set::<B>("tune_changed")
            .with(repeated::<B>("x8", 8, None))
            .with(repeated::<B>("x1", 1, None))
    };
    assert_eq!(
        fresh_tuner().choose(&client, &base(), &w).unwrap().source,
        Source::Tuned
    );
    let same = fresh_tuner();
    assert_eq!(
        same.choose(&client, &base(), &w).unwrap().source,
        Source::Disk
    );
    assert_eq!(same.stats().benchmark_runs, 0);

    let grown = base().with(repeated::<B>("x2", 2, None));
    assert_ne!(grown.checksum(), base().checksum());
    let tuner = fresh_tuner();
    assert_eq!(
        tuner.choose(&client, &grown, &w).unwrap().source,
        Source::Tuned
    );
    assert!(tuner.stats().benchmark_runs > 0);

    let changed = set::<B>("tune_changed")
        .with(repeated::<B>("x8", 8, None).with_identity("x8, second version"))
        .with(repeated::<B>("x1", 1, None));
    let tuner = fresh_tuner();
    assert_eq!(
        tuner.choose(&client, &changed, &w).unwrap().source,
        Source::Tuned
    );
    assert!(tuner.stats().benchmark_runs > 0);
}

/// Threads on two devices of one kind asking for one key at once tune it once and all get
/// the same answer.
pub fn devices_of_one_kind_and_concurrent_callers_tune_a_key_once<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&Default::default()) else {
        return;
    };
    let tuner = Arc::new(Tuner::new(settings(AutotuneLevel::Full, None)));
    let barrier = Arc::new(Barrier::new(4));
    let threads: Vec<_> = [first.clone(), first, second.clone(), second]
        .into_iter()
        .map(|client| {
            let (tuner, barrier) = (tuner.clone(), barrier.clone());
            std::thread::spawn(move || {
                let set = set::<B>("tune_shared")
                    .with(repeated::<B>("x50", 50, None))
                    .with(repeated::<B>("x1", 1, None));
                let w = work::<B>(&client);
                barrier.wait();
                let choice = tuner.choose(&client, &set, &w).unwrap();
                tuner.execute(&client, &set, &w).unwrap();
                assert_eq!(read_elems::<B, f32>(&client, &w.out), expected());
                choice.name
            })
        })
        .collect();
    let names: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    // Which candidate wins is the single-caller tests' to check: here other tests share the
    // GPU, and a time slice of another context can land in one sample.
    assert!(names.windows(2).all(|pair| pair[0] == pair[1]), "{names:?}");
    let stats = tuner.stats();
    assert_eq!(stats.tunes, 1, "{stats:?}");
    assert_eq!(stats.memory_hits, 7, "{stats:?}");
    assert!(
        (2..=12).contains(&stats.benchmark_runs),
        "one tuning: 2 candidates × at most (1 + 5) runs: {stats:?}"
    );
}

/// `off` runs the default without measuring; `minimal` tries only high-priority candidates.
pub fn levels_select_the_candidates_tried<B: TestBackend>() {
    let client = client::<B>();
    let w = work::<B>(&client);
    let make = || {
        set::<B>("tune_levels")
            .with(repeated::<B>("x50", 50, None))
            .with(repeated::<B>("x8", 8, None))
            .with(repeated::<B>("x1", 1, None).with_priority(Priority::Normal))
    };
    let off = Tuner::new(settings(AutotuneLevel::Off, None));
    let choice = off.choose(&client, &make(), &w).unwrap();
    assert_eq!((choice.source, choice.index), (Source::Untuned, 0));
    off.execute(&client, &make(), &w).unwrap();
    assert_eq!(off.stats().benchmark_runs, 0);

    let minimal = Tuner::new(settings(AutotuneLevel::Minimal, None));
    let record = tuned_record(&minimal.choose(&client, &make(), &w).unwrap());
    assert_eq!(record.winner, "x8");
    assert!(matches!(
        record.report("x1").unwrap().outcome,
        Outcome::Skipped { .. }
    ));
    let balanced = Tuner::new(settings(AutotuneLevel::Balanced, None));
    assert_eq!(balanced.choose(&client, &make(), &w).unwrap().name, "x1");
}

/// A candidate clearly slower than the best so far stops after two samples; with the budget
/// spent, candidates not started yet are skipped (the first always runs).
pub fn early_stop_and_budget_bound_the_cost<B: TestBackend>() {
    let client = client::<B>();
    let w = work::<B>(&client);
    let make = || {
        set::<B>("tune_bounded")
            .with(repeated::<B>("x1", 1, None))
            .with(repeated::<B>("x50", 50, None))
    };
    let tuner = Tuner::new(TuneSettings {
        samples: 5,
        early_stop_ratio: 1.5,
        ..settings(AutotuneLevel::Full, None)
    });
    let record = tuned_record(&tuner.choose(&client, &make(), &w).unwrap());
    assert_eq!(samples(&record, "x1").len(), 5);
    match &record.report("x50").unwrap().outcome {
        Outcome::Measured {
            samples,
            stopped_early,
        } => assert!(*stopped_early && samples.len() == 2, "{samples:?}"),
        other => panic!("x50: {other:?}"),
    }

    let broke = Tuner::new(TuneSettings {
        budget: Duration::ZERO,
        ..settings(AutotuneLevel::Full, None)
    });
    let record = tuned_record(&broke.choose(&client, &make(), &w).unwrap());
    assert_eq!(record.winner, "x1");
    assert_eq!(samples(&record, "x1").len(), 1);
    assert!(matches!(
        record.report("x50").unwrap().outcome,
        Outcome::Skipped { .. }
    ));
}

/// In check mode a candidate whose output differs from the first one's is skipped.
pub fn check_mode_skips_a_candidate_whose_output_differs<B: TestBackend>() {
    let client = client::<B>();
    let w = work::<B>(&client);
    let wrong = Candidate::new("wrong", |client, w: &Work| {
        Ok(ops::fill(client, &w.out, SIDE * SIDE, 1.0f32)?)
    });
    let set = set::<B>("tune_check")
        .with(repeated::<B>("right", 1, None))
        .with(wrong.with_priority(Priority::High))
        .with(repeated::<B>("right_again", 2, None))
        .with_check(OutputCheck::elements(ElemType::F32, |client, w: &Work| {
            client.read_one(w.out.clone())
        }));
    let tuner = Tuner::new(TuneSettings {
        check: true,
        ..settings(AutotuneLevel::Full, None)
    });
    let record = tuned_record(&tuner.choose(&client, &set, &w).unwrap());
    assert!(
        matches!(
            record.report("wrong").unwrap().outcome,
            Outcome::Mismatch { .. }
        ),
        "{record:#?}"
    );
    assert!(record.report("right_again").unwrap().measured());
    assert_ne!(record.winner, "wrong");
}

fn host_matmul(lhs: &[f32], rhs: &[f32], (m, k, n): (usize, usize, usize)) -> Vec<f32> {
    let mut out = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| lhs[i * k + p] * rhs[p * n + j]).sum();
        }
    }
    out
}

fn small_values(len: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + seed) % 9) as f32 - 4.0)
        .collect()
}

/// Every matmul and reduce-sum variant of the backend computes the host's result (exactly:
/// the inputs are small integers), on shapes that don't divide the tiles.
pub fn every_standard_variant_matches_the_reference<B: TestBackend>() {
    let client = client::<B>();
    for (m, k, n) in [(37, 29, 45), (64, 64, 64), (1, 130, 3), (130, 3, 1)] {
        let (lhs, rhs) = (small_values(m * k, 1), small_values(k * n, 2));
        let expected = host_matmul(&lhs, &rhs, (m, k, n));
        let kernel = StandardKernel::Matmul(ElemType::F32);
        for variant in B::R::standard_variants(kernel, client.properties()) {
            let problem = MatmulProblem {
                lhs: upload::<B, f32>(&client, &lhs),
                rhs: upload::<B, f32>(&client, &rhs),
                out: client.empty(m * n * 4).unwrap(),
                m,
                k,
                n,
                elem: ElemType::F32,
            };
            matmul_variant(&client, &variant, &problem).unwrap();
            let read = read_elems::<B, f32>(&client, &problem.out);
            assert_eq!(read, expected, "matmul {variant} on {m}x{k}x{n}");
        }
    }
    for (rows, cols) in [(37, 129), (1000, 3), (3, 5000), (1, 1)] {
        let input: Vec<i32> = (0..rows * cols).map(|i| (i % 11) as i32 - 5).collect();
        let expected: Vec<i32> = input.chunks(cols).map(|row| row.iter().sum()).collect();
        let kernel = StandardKernel::ReduceSum(ElemType::I32);
        for variant in B::R::standard_variants(kernel, client.properties()) {
            let problem = ReduceSumProblem {
                input: upload::<B, i32>(&client, &input),
                out: client.empty(rows * 4).unwrap(),
                rows,
                cols,
                elem: ElemType::I32,
            };
            reduce_sum_variant(&client, &variant, &problem).unwrap();
            let read = read_elems::<B, i32>(&client, &problem.out);
            assert_eq!(read, expected, "reduce-sum {variant} on {rows}x{cols}");
        }
    }
}

/// A non-default variant given an undersized output is refused at the call, naming the
/// argument, like the default kernel: nothing is queued, the stream stays clean.
pub fn variant_with_an_undersized_output_is_refused_at_the_call<B: TestBackend>() {
    let client = client::<B>();
    let kernel = StandardKernel::Matmul(ElemType::F32);
    let variants = B::R::standard_variants(kernel, client.properties());
    for variant in &variants {
        let problem = MatmulProblem {
            lhs: upload::<B, f32>(&client, &small_values(40 * 40, 1)),
            rhs: upload::<B, f32>(&client, &small_values(40 * 40, 2)),
            out: client.empty(40 * 4).unwrap(),
            m: 40,
            k: 40,
            n: 40,
            elem: ElemType::F32,
        };
        let error = matmul_variant(&client, variant, &problem).unwrap_err();
        assert!(error.to_string().contains("`out`"), "{variant}: {error}");
        client.sync().unwrap();
    }
}

/// The tuned standard matmul and reduce-sum compute the reference on every call, choose
/// once per key, and check mode finds every variant consistent.
pub fn tuned_standard_ops_compute_the_reference<B: TestBackend>() {
    let client = client::<B>();
    let tuner = Tuner::new(TuneSettings {
        budget: Duration::from_millis(500),
        check: true,
        ..settings(AutotuneLevel::Full, None)
    });
    let (m, k, n) = (48, 40, 56);
    let (lhs, rhs) = (small_values(m * k, 3), small_values(k * n, 4));
    let problem = MatmulProblem {
        lhs: upload::<B, f32>(&client, &lhs),
        rhs: upload::<B, f32>(&client, &rhs),
        out: client.empty(m * n * 4).unwrap(),
        m,
        k,
        n,
        elem: ElemType::F32,
    };
    for _ in 0..2 {
        matmul_tuned(&tuner, &client, &problem).unwrap();
        let read = read_elems::<B, f32>(&client, &problem.out);
        assert_eq!(read, host_matmul(&lhs, &rhs, (m, k, n)));
    }
    let (rows, cols) = (100, 300);
    let input = small_values(rows * cols, 5);
    let reduce = ReduceSumProblem {
        input: upload::<B, f32>(&client, &input),
        out: client.empty(rows * 4).unwrap(),
        rows,
        cols,
        elem: ElemType::F32,
    };
    reduce_sum_tuned(&tuner, &client, &reduce).unwrap();
    let expected: Vec<f32> = input.chunks(cols).map(|row| row.iter().sum()).collect();
    assert_eq!(read_elems::<B, f32>(&client, &reduce.out), expected);
    let stats = tuner.stats();
    assert_eq!((stats.tunes, stats.memory_hits), (2, 1), "{stats:?}");
    let set = cubert_runtime::tune::standard::matmul_candidates(&client, ElemType::F32).unwrap();
    let record = tuner.cached(&client, &set, &problem).unwrap();
    assert!(
        record
            .candidates
            .iter()
            .all(|c| !matches!(c.outcome, Outcome::Mismatch { .. } | Outcome::Failed { .. })),
        "{record:#?}"
    );
}

/// The tensor-core matmul through the tuner (`tune::tensor_cores`), for bf16 and for f32
/// as TF32: with the check on, every tiling that fits the device runs on the tuning inputs
/// and is compared with the default; the chosen one computes the exact product of integer
/// inputs, and the same shape class is then answered from memory. Where the device has no
/// tensor cores the call is `Unsupported`.
pub fn tuned_tensor_core_matmul_computes_the_exact_product<B: TestBackend>() {
    use cubert_runtime::lang::prelude::bf16;
    tuned_tensor_core_matmul_is_exact::<B, bf16>();
    tuned_tensor_core_matmul_is_exact::<B, f32>();
}

fn tuned_tensor_core_matmul_is_exact<B: TestBackend, T>()
where
    T: cubert_runtime::lang::MmaInput + cubert_runtime::lang::Float + bytemuck::Pod + Send + Sync,
{
    use cubert_runtime::LaunchError;
    use cubert_runtime::tune::tensor_cores;
    let client = client::<B>();
    let (m, k, n) = (96usize, 80usize, 72usize);
    let value = |i: usize| T::new(((i * 29 + 3) % 7) as f64 - 3.0);
    let lhs: Vec<T> = (0..m * k).map(value).collect();
    let rhs: Vec<T> = (0..k * n).map(|i| value(i + 5)).collect();
    let a = upload::<B, _>(&client, &lhs);
    let b = upload::<B, _>(&client, &rhs);
    let out = upload::<B, _>(&client, &vec![T::new(0.0); m * n]);
    let elem = <T as cubert_runtime::lang::Scalar>::ELEM;
    let problem = MatmulProblem {
        lhs: a,
        rhs: b,
        out: out.clone(),
        m,
        k,
        n,
        elem,
    };
    let tuner = Tuner::new(TuneSettings {
        check: true,
        samples: 2,
        ..settings(AutotuneLevel::Full, None)
    });
    let result = tensor_cores::matmul_tuned(&tuner, &client, &problem);
    if !client.features().plane_mma {
        assert!(
            matches!(
                result,
                Err(ServerError::Launch(LaunchError::Unsupported { .. }))
            ),
            "no tensor cores: {result:?}"
        );
        return;
    }
    result.unwrap();
    let got = read_elems::<B, T>(&client, &out);
    let want = crate::language::host_product(&lhs, &rhs, (m, k, n));
    for (index, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{elem}: out[{}][{}]",
            index / n,
            index % n
        );
    }
    let set = tensor_cores::matmul_candidates(&client, elem).unwrap();
    let choice = tuner.choose(&client, &set, &problem).unwrap();
    assert_eq!(
        choice.source,
        Source::Memory,
        "the shape class was tuned once"
    );
    // An empty inner dimension: zeros, from the first tiling that fits the device, untuned.
    let filled = upload::<B, _>(&client, &vec![T::new(5.0); m * n]);
    let empty = MatmulProblem {
        out: filled.clone(),
        k: 0,
        ..problem
    };
    tensor_cores::matmul_tuned(&tuner, &client, &empty).unwrap();
    let zeros = read_elems::<B, T>(&client, &filled);
    assert!(
        zeros.iter().all(|v| v.to_bits() == T::new(0.0).to_bits()),
        "{elem}: k = 0"
    );
    assert_eq!(tuner.stats().tunes, 1);
}
