//! Autotuning on a real GPU: every CUDA variant of matmul and reduce-sum computes the
//! reference for several element types (vector paths on and off), and tuning a large
//! matmul runs every variant without a failure and picks the fastest measured one. The
//! generic tuner tests (two processes, changed sets, shared devices...) run on CUDA through
//! the behaviour suite.
//!
//! Every test needs a CUDA device: `#[ignore = "needs a CUDA device"]`; scripts/gpu-test
//! runs them on the GPU machine with `--include-ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cuda::{CudaDevice, CudaRuntime, CudaServer};
use cubert_runtime::config::{AutotuneLevel, CubertConfig, DeviceHandleMode};
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::tune::standard::{
    MatmulProblem, ReduceSumProblem, matmul_candidates, matmul_variant, pattern, reduce_sum_variant,
};
use cubert_runtime::tune::{Outcome, Source, TuneSettings, Tuner, compare_elements};
use cubert_runtime::{Bytes, ComputeClient, ElemType, Runtime};
use std::time::Duration;

fn client() -> ComputeClient<CudaRuntime> {
    let server = CudaServer::new(CudaDevice::new(0), &CubertConfig::default()).expect("a GPU");
    ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap()
}

fn upload(
    client: &ComputeClient<CudaRuntime>,
    bytes: Result<Bytes, cubert_runtime::IoError>,
) -> cubert_runtime::Handle {
    client.create(bytes.unwrap()).unwrap()
}

/// Every variant against the default variant's output (the default is checked against the
/// host by the behaviour suite), for float, half and integer types, on shapes that do and
/// don't allow vector accesses.
#[test]
#[ignore = "needs a CUDA device"]
fn every_variant_matches_the_default_for_several_types() {
    let client = client();
    for elem in [
        ElemType::F32,
        ElemType::F64,
        ElemType::F16,
        ElemType::I32,
        ElemType::U8,
    ] {
        for (m, k, n) in [(67, 45, 39), (128, 64, 256), (1, 300, 4)] {
            let problem = MatmulProblem {
                lhs: upload(&client, pattern(elem, m * k, 1)),
                rhs: upload(&client, pattern(elem, k * n, 2)),
                out: client.empty(m * n * elem.size()).unwrap(),
                m,
                k,
                n,
                elem,
            };
            let variants =
                CudaRuntime::standard_variants(StandardKernel::Matmul(elem), client.properties());
            matmul_variant(&client, &variants[0], &problem).unwrap();
            let reference = client.read_one(problem.out.clone()).unwrap();
            for variant in &variants[1..] {
                let out = client.empty(m * n * elem.size()).unwrap();
                let run = MatmulProblem {
                    out: out.clone(),
                    ..problem.clone()
                };
                matmul_variant(&client, variant, &run).unwrap();
                let output = client.read_one(out).unwrap();
                compare_elements(elem, &reference, &output)
                    .unwrap_or_else(|e| panic!("matmul {variant} {elem} {m}x{k}x{n}: {e}"));
            }
        }
        for (rows, cols) in [(37, 1001), (4096, 8), (3, 100_000)] {
            let problem = ReduceSumProblem {
                input: upload(&client, pattern(elem, rows * cols, 3)),
                out: client.empty(rows * elem.size()).unwrap(),
                rows,
                cols,
                elem,
            };
            let variants = CudaRuntime::standard_variants(
                StandardKernel::ReduceSum(elem),
                client.properties(),
            );
            reduce_sum_variant(&client, &variants[0], &problem).unwrap();
            let reference = client.read_one(problem.out.clone()).unwrap();
            for variant in &variants[1..] {
                let out = client.empty(rows * elem.size()).unwrap();
                let run = ReduceSumProblem {
                    out: out.clone(),
                    ..problem.clone()
                };
                reduce_sum_variant(&client, variant, &run).unwrap();
                let output = client.read_one(out).unwrap();
                compare_elements(elem, &reference, &output)
                    .unwrap_or_else(|e| panic!("reduce {variant} {elem} {rows}x{cols}: {e}"));
            }
        }
    }
}

/// Tuning a 1024³ f32 matmul at level `full` runs every variant (none fails to compile or
/// launch), chooses the fastest measured one, and the next call is a memory hit.
#[test]
#[ignore = "needs a CUDA device"]
fn tuning_a_large_matmul_runs_every_variant_and_picks_the_fastest() {
    let client = client();
    let n = 1024;
    let problem = MatmulProblem {
        lhs: upload(&client, pattern(ElemType::F32, n * n, 1)),
        rhs: upload(&client, pattern(ElemType::F32, n * n, 2)),
        out: client.empty(n * n * 4).unwrap(),
        m: n,
        k: n,
        n,
        elem: ElemType::F32,
    };
    let tuner = Tuner::new(TuneSettings {
        level: AutotuneLevel::Full,
        cache_dir: None,
        budget: Duration::from_secs(120),
        samples: 5,
        early_stop_ratio: 1.5,
        check: true,
    });
    let set = matmul_candidates(&client, ElemType::F32).unwrap();
    let choice = tuner.choose(&client, &set, &problem).unwrap();
    let record = choice.record.clone().unwrap();
    eprintln!("{record:#?}");
    for report in &record.candidates {
        assert!(
            matches!(report.outcome, Outcome::Measured { .. }),
            "{}: {:?}",
            report.name,
            report.outcome
        );
    }
    assert_eq!(record.winner, record.fastest_measured().unwrap().name);
    assert_eq!(
        tuner.choose(&client, &set, &problem).unwrap().source,
        Source::Memory
    );
}
