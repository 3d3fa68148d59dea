//! `all_gather`, `reduce_scatter` and `broadcast` among the devices of one process: every
//! collective type, one element and 100,003 per device (not a multiple of any vector
//! width), out of place and in place, over every device the backend can group (up to 4),
//! in both device-handle modes; the argument checks; and calls of different kinds that
//! fail on every device instead of running or hanging.
//!
//! The protocol and helpers are those of `collectives`: every device makes its calls, then
//! each calls `sync_collective` before reading.

use crate::backend::{Client, TestBackend};
use crate::collectives::{LIMIT, collective_lock, expected, group, ids, input, sync_all};
use crate::support::with_timeout;
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::server::{COLLECTIVE_TYPES, ReduceOperation};
use cubert_runtime::{Bytes, ElemType, Handle, IoError, ServerError};

/// Element counts per device the tests use.
const LENGTHS: [usize; 2] = [1, 100_003];

/// Every device the backend can group, up to 4 (at least 2, or `None`).
fn every_device<B: TestBackend>(mode: DeviceHandleMode) -> Option<Vec<Client<B>>> {
    group::<B>(B::collective_device_count().clamp(2, 4), mode)
}

/// Writes `bytes` at `at` (a view of the device's larger buffer, or a buffer of its own).
fn upload<B: TestBackend>(client: &Client<B>, at: &Handle, bytes: Vec<u8>) {
    client.write(at, Bytes::from_bytes_vec(bytes)).unwrap();
}

/// Every device gathers `len` elements of `dtype`; each output is every input in rank order.
fn gather_and_check<B: TestBackend>(
    clients: &[Client<B>],
    len: usize,
    dtype: ElemType,
    in_place: bool,
) {
    let devices = ids::<B>(clients);
    let ranks = clients.len();
    let part = len * dtype.size();
    let buffers: Vec<(Handle, Handle)> = clients
        .iter()
        .enumerate()
        .map(|(rank, client)| {
            let dst = client.empty(part * ranks).unwrap();
            let src = if in_place {
                dst.view((rank * part) as u64, part as u64).unwrap()
            } else {
                client.empty(part).unwrap()
            };
            upload::<B>(client, &src, input(rank, len, dtype));
            (src, dst)
        })
        .collect();
    for (client, (src, dst)) in clients.iter().zip(&buffers) {
        client
            .all_gather(src.clone(), dst.clone(), dtype, devices.clone())
            .unwrap_or_else(|error| panic!("all_gather of {dtype}: {error}"));
    }
    sync_all::<B>(clients);
    let want: Vec<u8> = (0..ranks)
        .flat_map(|rank| input(rank, len, dtype))
        .collect();
    for (client, (_, dst)) in clients.iter().zip(&buffers) {
        let got = client.read_one(dst.clone()).unwrap();
        assert!(
            got[..] == want[..],
            "all_gather of {len} {dtype} per device over {ranks} devices (in place: \
             {in_place}) is wrong on {:?}",
            client.device_id()
        );
    }
}

in_both_modes!(
    /// `all_gather` puts each device's part at its rank's place in every device's output,
    /// for every collective type, out of place and in place (the input is the device's own
    /// part of its output).
    all_gather_puts_every_part_at_its_rank_threaded,
    all_gather_puts_every_part_at_its_rank_inline => all_gather_generic
);

fn all_gather_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let _lock = collective_lock();
    let Some(clients) = every_device::<B>(mode) else {
        return;
    };
    with_timeout(LIMIT, "all_gather of every type", move || {
        for len in LENGTHS {
            for dtype in COLLECTIVE_TYPES {
                for in_place in [false, true] {
                    gather_and_check::<B>(&clients, len, dtype, in_place);
                }
            }
        }
    });
}

/// Every device reduce-scatters `len` × ranks elements of `dtype` with `op`; each keeps its
/// rank's part of the reduction.
fn scatter_and_check<B: TestBackend>(
    clients: &[Client<B>],
    len: usize,
    dtype: ElemType,
    op: ReduceOperation,
    in_place: bool,
) {
    let devices = ids::<B>(clients);
    let ranks = clients.len();
    let part = len * dtype.size();
    let buffers: Vec<(Handle, Handle)> = clients
        .iter()
        .enumerate()
        .map(|(rank, client)| {
            let src = client
                .create(Bytes::from_bytes_vec(input(rank, len * ranks, dtype)))
                .unwrap();
            let dst = if in_place {
                src.view((rank * part) as u64, part as u64).unwrap()
            } else {
                client.empty(part).unwrap()
            };
            (src, dst)
        })
        .collect();
    for (client, (src, dst)) in clients.iter().zip(&buffers) {
        client
            .reduce_scatter(src.clone(), dst.clone(), dtype, devices.clone(), op)
            .unwrap_or_else(|error| panic!("reduce_scatter of {dtype}: {error}"));
    }
    sync_all::<B>(clients);
    let whole = expected(ranks, len * ranks, dtype, op);
    for (rank, (client, (_, dst))) in clients.iter().zip(&buffers).enumerate() {
        let got = client.read_one(dst.clone()).unwrap();
        assert!(
            got[..] == whole[rank * part..(rank + 1) * part],
            "{op:?} reduce_scatter of {len} {dtype} per device over {ranks} devices (in place: \
             {in_place}) is wrong on {:?}",
            client.device_id()
        );
    }
}

in_both_modes!(
    /// `reduce_scatter` leaves each device its rank's part of the exact sum and mean, for
    /// every collective type, out of place and in place (the output is the device's own
    /// part of its input).
    reduce_scatter_leaves_each_device_its_part_threaded,
    reduce_scatter_leaves_each_device_its_part_inline => reduce_scatter_generic
);

fn reduce_scatter_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let _lock = collective_lock();
    let Some(clients) = every_device::<B>(mode) else {
        return;
    };
    with_timeout(LIMIT, "reduce_scatter of every type", move || {
        for len in LENGTHS {
            for dtype in COLLECTIVE_TYPES {
                for op in [ReduceOperation::Sum, ReduceOperation::Mean] {
                    scatter_and_check::<B>(&clients, len, dtype, op, false);
                }
                scatter_and_check::<B>(&clients, len, dtype, ReduceOperation::Sum, true);
            }
        }
    });
}

in_both_modes!(
    /// `broadcast` from each device in turn leaves the root's bytes in every device's
    /// buffer (and the root's unchanged), for every collective type.
    broadcast_copies_the_roots_buffer_to_every_device_threaded,
    broadcast_copies_the_roots_buffer_to_every_device_inline => broadcast_generic
);

fn broadcast_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let _lock = collective_lock();
    let Some(clients) = every_device::<B>(mode) else {
        return;
    };
    with_timeout(LIMIT, "broadcast of every type", move || {
        let devices = ids::<B>(&clients);
        for len in LENGTHS {
            for dtype in COLLECTIVE_TYPES {
                for (root, root_id) in devices.iter().enumerate() {
                    let buffers: Vec<Handle> = clients
                        .iter()
                        .enumerate()
                        .map(|(rank, client)| {
                            client
                                .create(Bytes::from_bytes_vec(input(rank, len, dtype)))
                                .unwrap()
                        })
                        .collect();
                    for (client, buffer) in clients.iter().zip(&buffers) {
                        client
                            .broadcast(buffer.clone(), dtype, *root_id, devices.clone())
                            .unwrap_or_else(|error| panic!("broadcast of {dtype}: {error}"));
                    }
                    sync_all::<B>(&clients);
                    let want = input(root, len, dtype);
                    for (client, buffer) in clients.iter().zip(&buffers) {
                        let got = client.read_one(buffer.clone()).unwrap();
                        assert!(
                            got[..] == want[..],
                            "broadcast of {len} {dtype} from rank {root} is wrong on {:?}",
                            client.device_id()
                        );
                    }
                }
            }
        }
    });
}

fn is_invalid(error: &ServerError) -> bool {
    matches!(error, ServerError::Io(IoError::InvalidArgument { .. }))
}

/// Buffers whose sizes don't fit the number of devices, buffers that overlap other than in
/// place, a root outside the set, and types collectives don't take are refused with an
/// error; nothing is queued, and the devices still gather correctly afterwards.
pub fn gather_scatter_arguments_are_checked<B: TestBackend>() {
    let _lock = collective_lock();
    let Some(clients) = group::<B>(2, DeviceHandleMode::Threaded) else {
        return;
    };
    let devices = ids::<B>(&clients);
    let client = &clients[0];
    let part = client.create_from_slice(&[1u8; 64]).unwrap();
    let wrong = client.empty(64 * 3).unwrap();
    let error = client
        .all_gather(part.clone(), wrong.clone(), ElemType::F32, devices.clone())
        .unwrap_err();
    assert!(is_invalid(&error), "{error}");
    let error = client
        .reduce_scatter(
            wrong,
            part.clone(),
            ElemType::F32,
            devices.clone(),
            ReduceOperation::Sum,
        )
        .unwrap_err();
    assert!(is_invalid(&error), "{error}");
    // Rank 0's part at rank 1's place of its output: overlapping, not in place.
    let whole = client.empty(128).unwrap();
    let misplaced = whole.view(64, 64).unwrap();
    let error = client
        .all_gather(
            misplaced.clone(),
            whole.clone(),
            ElemType::F32,
            devices.clone(),
        )
        .unwrap_err();
    assert!(is_invalid(&error), "{error}");
    assert!(error.to_string().contains("overlap"), "{error}");
    let error = client
        .reduce_scatter(
            whole.clone(),
            misplaced,
            ElemType::F32,
            devices.clone(),
            ReduceOperation::Sum,
        )
        .unwrap_err();
    assert!(is_invalid(&error), "{error}");
    // An all-reduce whose buffers overlap by half.
    let shifted = whole.view(32, 64).unwrap();
    let first = whole.view(0, 64).unwrap();
    let error = client
        .all_reduce(
            first,
            shifted,
            ElemType::F32,
            devices.clone(),
            ReduceOperation::Sum,
        )
        .unwrap_err();
    assert!(is_invalid(&error), "{error}");
    let stranger = cubert_runtime::DeviceId::new(u16::MAX, 7);
    let error = client
        .broadcast(part.clone(), ElemType::F32, stranger, devices.clone())
        .unwrap_err();
    assert!(
        error.to_string().contains("not one of the devices"),
        "{error}"
    );
    for dtype in [ElemType::I16, ElemType::U16, ElemType::Bool] {
        let error = client
            .broadcast(part.clone(), dtype, devices[0], devices.clone())
            .unwrap_err();
        assert!(
            matches!(error, ServerError::Unsupported { .. }),
            "{dtype}: {error}"
        );
        let error = client
            .all_gather(part.clone(), whole.clone(), dtype, devices.clone())
            .unwrap_err();
        assert!(
            matches!(error, ServerError::Unsupported { .. }),
            "{dtype}: {error}"
        );
    }
    // Nothing was queued: a correct all-gather runs.
    with_timeout(LIMIT, "all_gather after refused calls", move || {
        gather_and_check::<B>(&clients, 5, ElemType::U8, false);
    });
}

in_both_modes!(
    /// An all-gather on one device matched with a broadcast on the other (same sizes) fails
    /// on every device instead of running or hanging, and the devices still gather
    /// correctly afterwards.
    collectives_of_different_kinds_fail_on_every_device_threaded,
    collectives_of_different_kinds_fail_on_every_device_inline => different_kinds_generic
);

fn different_kinds_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let _lock = collective_lock();
    let Some(clients) = group::<B>(2, mode) else {
        return;
    };
    with_timeout(LIMIT, "collectives of different kinds", move || {
        let devices = ids::<B>(&clients);
        let (a, b) = (&clients[0], &clients[1]);
        let part = a.create_from_slice(&[1u8; 16]).unwrap();
        let whole = a.empty(32).unwrap();
        a.all_gather(part, whole, ElemType::U8, devices.clone())
            .unwrap();
        let buffer = b.create_from_slice(&[2u8; 16]).unwrap();
        b.broadcast(buffer, ElemType::U8, devices[0], devices.clone())
            .unwrap();
        for client in &clients {
            let outcomes = [client.sync_collective(), client.flush()];
            assert!(
                outcomes.iter().any(Result::is_err),
                "{:?} reported no error for calls of different kinds",
                client.device_id()
            );
        }
        gather_and_check::<B>(&clients, 9, ElemType::I32, true);
    });
}
