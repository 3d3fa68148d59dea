//! Collectives among the devices of one process: `all_reduce` (sum and mean, every type
//! collectives take), `send`/`recv`, `sync_collective`, and the errors of calls that can't
//! run (`all_gather`, `reduce_scatter` and `broadcast` are in `gather_scatter`, with the
//! helpers here). Every test drives each device through its own client, in both device-handle modes;
//! in inline mode one thread makes every device's call in turn, which must never deadlock.
//!
//! The tests follow the portable protocol: every device makes its calls, then each calls
//! `sync_collective` before reading. They need [`TestBackend::collective_device_count`] ≥ 2
//! and say so (and return) otherwise. Tests of one process share the devices' collective
//! groups, so they take [`collective_lock`] for their whole run.

use crate::backend::{Client, ClientOptions, TestBackend};
use crate::support::{bytes_of, client_with, with_timeout};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::server::{COLLECTIVE_TYPES, ReduceOperation};
use cubert_runtime::{Bytes, DeviceId, ElemType, Handle, IoError, ServerError};
use half::{bf16, f16};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long a collective test may take before it counts as a deadlock.
pub(crate) const LIMIT: Duration = Duration::from_secs(120);

/// Serializes the collective tests of a process (they share the devices' groups).
pub fn collective_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `count` fresh clients on devices 0.. in `mode`, or `None` (said on standard error) when
/// the backend can't form a group of that many.
pub(crate) fn group<B: TestBackend>(count: u32, mode: DeviceHandleMode) -> Option<Vec<Client<B>>> {
    if B::collective_device_count() < count {
        eprintln!(
            "skipped: this test needs {count} devices that can form a collective group, the \
             backend has {}",
            B::collective_device_count()
        );
        return None;
    }
    Some(
        (0..count)
            .map(|index| client_with::<B>(&ClientOptions::new().with_device(index).with_mode(mode)))
            .collect(),
    )
}

pub(crate) fn ids<B: TestBackend>(clients: &[Client<B>]) -> Vec<DeviceId> {
    clients.iter().map(|client| client.device_id()).collect()
}

/// A small integer for element `index` of `rank`: sums over 4 ranks stay exact in every
/// collective type (|sum| <= 60, below i8's and bf16's exact range); unsigned types get
/// non-negative values.
pub(crate) fn value(rank: usize, index: usize, dtype: ElemType) -> i64 {
    let raw = ((index * 7 + rank * 13) % 31) as i64 - 15;
    match dtype {
        ElemType::U8 | ElemType::U32 | ElemType::U64 => raw + 15,
        _ => raw,
    }
}

/// Little-endian bytes of `values` as `dtype`.
pub(crate) fn encode(values: &[f64], dtype: ElemType) -> Vec<u8> {
    match dtype {
        ElemType::F16 => bytes_of(&values.iter().map(|v| f16::from_f64(*v)).collect::<Vec<_>>()),
        ElemType::BF16 => bytes_of(
            &values
                .iter()
                .map(|v| bf16::from_f64(*v))
                .collect::<Vec<_>>(),
        ),
        ElemType::F32 => bytes_of(&values.iter().map(|v| *v as f32).collect::<Vec<_>>()),
        ElemType::F64 => bytes_of(values),
        ElemType::I8 => bytes_of(&values.iter().map(|v| *v as i8).collect::<Vec<_>>()),
        ElemType::I32 => bytes_of(&values.iter().map(|v| *v as i32).collect::<Vec<_>>()),
        ElemType::I64 => bytes_of(&values.iter().map(|v| *v as i64).collect::<Vec<_>>()),
        ElemType::U8 => bytes_of(&values.iter().map(|v| *v as u8).collect::<Vec<_>>()),
        ElemType::U32 => bytes_of(&values.iter().map(|v| *v as u32).collect::<Vec<_>>()),
        ElemType::U64 => bytes_of(&values.iter().map(|v| *v as u64).collect::<Vec<_>>()),
        other => panic!("{other} is not a collective type"),
    }
}

/// The expected result of reducing `ranks` inputs of `len` elements with `op`: integer
/// means round toward zero (NCCL's `ncclAvg`), float means are exact for 2 and 4 ranks.
pub(crate) fn expected(ranks: usize, len: usize, dtype: ElemType, op: ReduceOperation) -> Vec<u8> {
    let values: Vec<f64> = (0..len)
        .map(|index| {
            let sum: i64 = (0..ranks).map(|rank| value(rank, index, dtype)).sum();
            match (op, dtype.is_float()) {
                (ReduceOperation::Sum, _) => sum as f64,
                (ReduceOperation::Mean, true) => sum as f64 / ranks as f64,
                (ReduceOperation::Mean, false) => (sum / ranks as i64) as f64,
            }
        })
        .collect();
    encode(&values, dtype)
}

pub(crate) fn input(rank: usize, len: usize, dtype: ElemType) -> Vec<u8> {
    let values: Vec<f64> = (0..len)
        .map(|index| value(rank, index, dtype) as f64)
        .collect();
    encode(&values, dtype)
}

pub(crate) fn sync_all<B: TestBackend>(clients: &[Client<B>]) {
    for client in clients {
        client
            .sync_collective()
            .unwrap_or_else(|error| panic!("sync_collective on {:?}: {error}", client.device_id()));
    }
}

/// Every device reduces `len` elements of every collective type with `op`, all calls made
/// from this thread, and each result is compared with the host's.
fn reduce_every_type<B: TestBackend>(
    clients: &[Client<B>],
    len: usize,
    op: ReduceOperation,
    in_place: bool,
) {
    let devices = ids::<B>(clients);
    for dtype in COLLECTIVE_TYPES {
        let handles: Vec<(Handle, Handle)> = clients
            .iter()
            .enumerate()
            .map(|(rank, client)| {
                let src = client
                    .create(Bytes::from_bytes_vec(input(rank, len, dtype)))
                    .unwrap();
                let dst = if in_place {
                    src.clone()
                } else {
                    client.empty(src.size() as usize).unwrap()
                };
                (src, dst)
            })
            .collect();
        for (client, (src, dst)) in clients.iter().zip(&handles) {
            client
                .all_reduce(src.clone(), dst.clone(), dtype, devices.clone(), op)
                .unwrap_or_else(|error| panic!("all_reduce of {dtype}: {error}"));
        }
        sync_all::<B>(clients);
        let want = expected(clients.len(), len, dtype, op);
        for (client, (_, dst)) in clients.iter().zip(&handles) {
            let got = client.read_one(dst.clone()).unwrap();
            assert!(
                got[..] == want[..],
                "{op:?} of {len} {dtype} over {} devices is wrong on {:?}",
                clients.len(),
                client.device_id()
            );
        }
    }
}

in_both_modes!(
    /// `all_reduce` over two devices gives the exact sum and mean for every collective type
    /// (f16, bf16, f32, f64, i8, i32, i64, u8, u32, u64), out of place and in place, for one
    /// element and for 100,003 (not a multiple of any vector width).
    all_reduce_sums_and_means_every_collective_type_threaded,
    all_reduce_sums_and_means_every_collective_type_inline => sums_and_means_generic
);

fn sums_and_means_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let _lock = collective_lock();
    let Some(clients) = group::<B>(2, mode) else {
        return;
    };
    with_timeout(LIMIT, "all_reduce of every type", move || {
        for len in [1usize, 100_003] {
            for op in [ReduceOperation::Sum, ReduceOperation::Mean] {
                reduce_every_type::<B>(&clients, len, op, false);
            }
        }
        reduce_every_type::<B>(&clients, 4097, ReduceOperation::Sum, true);
    });
}

in_both_modes!(
    /// `all_reduce` over every device the backend can group (up to 4), chained: each result
    /// feeds the next reduction in place, so results must land before the next call reads
    /// them; 10 rounds multiply the input by the device count 10 times.
    chained_all_reduces_over_all_devices_compound_threaded,
    chained_all_reduces_over_all_devices_compound_inline => chained_generic
);

fn chained_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let _lock = collective_lock();
    let count = B::collective_device_count().min(4);
    let Some(clients) = group::<B>(count.max(2), mode) else {
        return;
    };
    with_timeout(LIMIT, "chained all_reduce", move || {
        let devices = ids::<B>(&clients);
        let len = 1000usize;
        let buffers: Vec<Handle> = clients
            .iter()
            .map(|client| {
                client
                    .create_from_slice(&bytes_of(&vec![1i64; len]))
                    .unwrap()
            })
            .collect();
        let rounds = 10u32;
        for _ in 0..rounds {
            for (client, buffer) in clients.iter().zip(&buffers) {
                client
                    .all_reduce(
                        buffer.clone(),
                        buffer.clone(),
                        ElemType::I64,
                        devices.clone(),
                        ReduceOperation::Sum,
                    )
                    .unwrap();
            }
            sync_all::<B>(&clients);
        }
        let want = (clients.len() as i64).pow(rounds);
        for (client, buffer) in clients.iter().zip(&buffers) {
            let got = client.read_one(buffer.clone()).unwrap().to_elems::<i64>();
            assert!(
                got.iter().all(|v| *v == want),
                "expected {want}, got {:?}",
                &got[..4]
            );
        }
    });
}

/// With a threaded device handle each device may be driven by its own thread, as with one
/// thread per GPU: 20 all-reduces per thread, each checked.
pub fn all_reduce_from_one_thread_per_device_is_correct<B: TestBackend>() {
    let _lock = collective_lock();
    let Some(clients) = group::<B>(2, DeviceHandleMode::Threaded) else {
        return;
    };
    with_timeout(LIMIT, "all_reduce from threads", move || {
        let devices = ids::<B>(&clients);
        let threads: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(rank, client)| {
                let devices = devices.clone();
                std::thread::spawn(move || {
                    for round in 0..20i32 {
                        let values = vec![round * 10 + rank as i32; 513];
                        let src = client.create_from_slice(&bytes_of(&values)).unwrap();
                        let dst = client.empty(src.size() as usize).unwrap();
                        client
                            .all_reduce(
                                src,
                                dst.clone(),
                                ElemType::I32,
                                devices.clone(),
                                ReduceOperation::Sum,
                            )
                            .unwrap();
                        client.sync_collective().unwrap();
                        let got = client.read_one(dst).unwrap().to_elems::<i32>();
                        let want = round * 20 + 1;
                        assert!(
                            got.iter().all(|v| *v == want),
                            "round {round}: {:?}",
                            &got[..2]
                        );
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    });
}

in_both_modes!(
    /// `send` on one device and the matching `recv` on another move the bytes; two
    /// exchanges in opposite directions, called in the order a ring would use.
    send_and_recv_move_bytes_between_devices_threaded,
    send_and_recv_move_bytes_between_devices_inline => send_recv_generic
);

fn send_recv_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let _lock = collective_lock();
    let Some(clients) = group::<B>(2, mode) else {
        return;
    };
    with_timeout(LIMIT, "send and recv", move || {
        let devices = ids::<B>(&clients);
        let (a, b) = (&clients[0], &clients[1]);
        let forward: Vec<f32> = (0..10_000).map(|i| i as f32 * 0.5).collect();
        let backward: Vec<f32> = (0..10_000).map(|i| -(i as f32)).collect();
        let on_a = a.create_from_slice(&bytes_of(&forward)).unwrap();
        let on_b = b.create_from_slice(&bytes_of(&backward)).unwrap();
        let into_b = b.empty(40_000).unwrap();
        let into_a = a.empty(40_000).unwrap();
        a.send(on_a, ElemType::F32, b.device_id(), devices.clone())
            .unwrap();
        b.recv(
            into_b.clone(),
            ElemType::F32,
            a.device_id(),
            devices.clone(),
        )
        .unwrap();
        b.send(on_b, ElemType::F32, a.device_id(), devices.clone())
            .unwrap();
        a.recv(into_a.clone(), ElemType::F32, b.device_id(), devices)
            .unwrap();
        sync_all::<B>(&clients);
        assert_eq!(b.read_one(into_b).unwrap().to_elems::<f32>(), forward);
        assert_eq!(a.read_one(into_a).unwrap().to_elems::<f32>(), backward);
    });
}

/// Types collectives don't take (i16, u16, bool), handles of the wrong size or device, and
/// a set without the caller's device are refused with an error before anything is queued.
pub fn collective_arguments_are_checked_before_queuing<B: TestBackend>() {
    let _lock = collective_lock();
    let Some(clients) = group::<B>(2, DeviceHandleMode::Threaded) else {
        return;
    };
    let devices = ids::<B>(&clients);
    let client = &clients[0];
    let handle = client.create_from_slice(&[0u8; 64]).unwrap();
    for dtype in [ElemType::I16, ElemType::U16, ElemType::Bool] {
        let error = client
            .all_reduce(
                handle.clone(),
                handle.clone(),
                dtype,
                devices.clone(),
                ReduceOperation::Sum,
            )
            .unwrap_err();
        assert!(
            matches!(error, ServerError::Unsupported { .. }),
            "{dtype}: {error}"
        );
        let error = client
            .send(handle.clone(), dtype, devices[1], devices.clone())
            .unwrap_err();
        assert!(
            matches!(error, ServerError::Unsupported { .. }),
            "{dtype}: {error}"
        );
    }
    let small = client.create_from_slice(&[0u8; 32]).unwrap();
    let error = client
        .all_reduce(
            handle.clone(),
            small,
            ElemType::F32,
            devices.clone(),
            ReduceOperation::Sum,
        )
        .unwrap_err();
    assert!(
        matches!(error, ServerError::Io(IoError::InvalidArgument { .. })),
        "{error}"
    );
    let odd = client.create_from_slice(&[0u8; 6]).unwrap();
    let error = client
        .all_reduce(
            odd.clone(),
            odd,
            ElemType::F32,
            devices.clone(),
            ReduceOperation::Sum,
        )
        .unwrap_err();
    assert!(
        matches!(error, ServerError::Io(IoError::InvalidArgument { .. })),
        "{error}"
    );
    let foreign = clients[1].create_from_slice(&[0u8; 64]).unwrap();
    let error = client
        .all_reduce(
            foreign.clone(),
            foreign,
            ElemType::F32,
            devices.clone(),
            ReduceOperation::Sum,
        )
        .unwrap_err();
    assert!(
        matches!(error, ServerError::Io(IoError::NotFound { .. })),
        "{error}"
    );
    let error = client
        .all_reduce(
            handle.clone(),
            handle,
            ElemType::F32,
            vec![devices[1]],
            ReduceOperation::Sum,
        )
        .unwrap_err();
    assert!(
        error.to_string().contains("not one of the devices"),
        "{error}"
    );
}

in_both_modes!(
    /// All-reduce calls that don't match (different sizes) fail on every device instead of
    /// running or hanging, and the devices keep working: a matching all-reduce afterwards
    /// is correct.
    mismatched_calls_fail_on_every_device_threaded,
    mismatched_calls_fail_on_every_device_inline => mismatched_generic
);

fn mismatched_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let _lock = collective_lock();
    let Some(clients) = group::<B>(2, mode) else {
        return;
    };
    with_timeout(LIMIT, "mismatched all_reduce", move || {
        let devices = ids::<B>(&clients);
        for (rank, client) in clients.iter().enumerate() {
            let handle = client
                .create_from_slice(&vec![1u8; 64 * (rank + 1)])
                .unwrap();
            client
                .all_reduce(
                    handle.clone(),
                    handle,
                    ElemType::U8,
                    devices.clone(),
                    ReduceOperation::Sum,
                )
                .unwrap();
        }
        for client in &clients {
            let outcomes = [client.sync_collective(), client.flush()];
            assert!(
                outcomes.iter().any(Result::is_err),
                "{:?} reported no error for mismatched calls",
                client.device_id()
            );
        }
        // Both devices still work together.
        let handles: Vec<Handle> = clients
            .iter()
            .map(|client| client.create_from_slice(&[3u8; 16]).unwrap())
            .collect();
        for (client, handle) in clients.iter().zip(&handles) {
            client
                .all_reduce(
                    handle.clone(),
                    handle.clone(),
                    ElemType::U8,
                    devices.clone(),
                    ReduceOperation::Sum,
                )
                .unwrap();
        }
        sync_all::<B>(&clients);
        for (client, handle) in clients.iter().zip(&handles) {
            assert_eq!(
                client.read_one(handle.clone()).unwrap().to_vec(),
                vec![6u8; 16]
            );
        }
    });
}
