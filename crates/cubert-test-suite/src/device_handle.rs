//! Device handle modes and `exclusive`: sections that keep other threads' work out, panics
//! inside them, nesting, and clients shared across threads.

use crate::backend::TestBackend;
use crate::support::{SeededRng, client_in, read_elems, upload, with_timeout};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::{ElemType, ServerError, ops};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

fn exclusive_runs_work_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let values = SeededRng::new(90).f32s(2000, 4.0);
    let result = client
        .exclusive(|| {
            let handle = upload::<B, f32>(&client, &values);
            let out = client.empty(2000 * 4).unwrap();
            ops::add(&client, &handle, &handle, &out, 2000, ElemType::F32).unwrap();
            client.sync().unwrap();
            read_elems::<B, f32>(&client, &out)
        })
        .unwrap();
    let expected: Vec<f32> = values.iter().map(|v| v + v).collect();
    assert_eq!(result, expected, "{mode:?}");
}

in_both_modes!(
    /// Work issued inside `exclusive` runs (inline, without deadlock) and the section's
    /// value is returned.
    exclusive_runs_the_section_work_and_returns_its_value_threaded,
    exclusive_runs_the_section_work_and_returns_its_value_inline => exclusive_runs_work_in
);

fn exclusive_blocks_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let handle = upload::<B, u32>(&client, &[11, 22, 33]);
    client.sync().unwrap();
    let (held_back, after) =
        with_timeout(Duration::from_secs(60), "exclusive section", move || {
            let (started_sender, started) = mpsc::channel();
            let (done_sender, done) = mpsc::channel();
            let other = client.clone();
            let other_handle = handle.clone();
            let held_back = client
                .exclusive(|| {
                    std::thread::spawn(move || {
                        let _ = started_sender.send(());
                        let read = other.read_one(other_handle).map(|b| b.to_elems::<u32>());
                        let _ = done_sender.send(read);
                    });
                    started.recv().unwrap();
                    std::thread::sleep(Duration::from_millis(300));
                    // The other thread's read must still be waiting for the section to end.
                    matches!(done.try_recv(), Err(mpsc::TryRecvError::Empty))
                })
                .unwrap();
            let after = done.recv_timeout(Duration::from_secs(30));
            (held_back, after)
        });
    assert!(
        held_back,
        "{mode:?}: another thread's read ran during the exclusive section"
    );
    let after = after.expect("the read completes once the section ends");
    assert_eq!(after.unwrap(), vec![11, 22, 33], "{mode:?}");
}

in_both_modes!(
    /// `exclusive` keeps other threads' work out: a read another thread issues during the
    /// section completes only after the section ends.
    exclusive_blocks_other_threads_until_it_ends_threaded,
    exclusive_blocks_other_threads_until_it_ends_inline => exclusive_blocks_in
);

fn exclusive_panic_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let result = client.exclusive(|| -> u8 { panic!("exclusive section failed on purpose") });
    assert!(
        matches!(&result, Err(ServerError::Generic { reason, .. }) if reason.contains("on purpose")),
        "{mode:?}: expected a Generic error naming the panic, got {result:?}"
    );
    // The device still serves, from this thread and from others.
    let handle = upload::<B, i64>(&client, &[-1, 2, -3]);
    assert_eq!(read_elems::<B, i64>(&client, &handle), vec![-1, 2, -3]);
    let other = client.clone();
    let from_thread = with_timeout(Duration::from_secs(60), "read after a panic", move || {
        read_elems::<B, i64>(&other, &handle)
    });
    assert_eq!(from_thread, vec![-1, 2, -3]);
    client.sync().unwrap();
    assert_eq!(client.exclusive(|| 5).unwrap(), 5);
}

in_both_modes!(
    /// A panic inside `exclusive` is returned as an error; the client keeps working (on this
    /// thread and others) and later sections run.
    panic_inside_exclusive_is_an_error_and_client_keeps_working_threaded,
    panic_inside_exclusive_is_an_error_and_client_keeps_working_inline => exclusive_panic_in
);

fn exclusive_sections_exclude_each_other_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = with_timeout(Duration::from_secs(60), "concurrent exclusive sections", {
        let client = client.clone();
        move || {
            let workers: Vec<_> = (0..3)
                .map(|_| {
                    let (client, inside) = (client.clone(), inside.clone());
                    std::thread::spawn(move || {
                        let mut overlaps = 0;
                        for _ in 0..5 {
                            client
                                .exclusive(|| {
                                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                                        overlaps += 1;
                                    }
                                    std::thread::sleep(Duration::from_millis(5));
                                    let handle = upload::<B, u8>(&client, &[1, 2]);
                                    assert_eq!(read_elems::<B, u8>(&client, &handle), vec![1, 2]);
                                    inside.fetch_sub(1, Ordering::SeqCst);
                                })
                                .unwrap();
                        }
                        overlaps
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().unwrap())
                .sum::<usize>()
        }
    });
    assert_eq!(
        overlaps, 0,
        "{mode:?}: exclusive sections of two threads overlapped"
    );
}

in_both_modes!(
    /// `exclusive` sections of different threads never overlap.
    exclusive_sections_of_different_threads_never_overlap_threaded,
    exclusive_sections_of_different_threads_never_overlap_inline => exclusive_sections_exclude_each_other_in
);

fn nested_exclusive_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let inner = with_timeout(Duration::from_secs(60), "nested exclusive", move || {
        client
            .exclusive(|| {
                client
                    .exclusive(|| {
                        let handle = upload::<B, u16>(&client, &[9, 8, 7]);
                        read_elems::<B, u16>(&client, &handle)
                    })
                    .unwrap()
            })
            .unwrap()
    });
    assert_eq!(inner, vec![9, 8, 7], "{mode:?}");
}

in_both_modes!(
    /// `exclusive` sections nest without deadlocking.
    nested_exclusive_sections_do_not_deadlock_threaded,
    nested_exclusive_sections_do_not_deadlock_inline => nested_exclusive_in
);

fn cross_thread_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let values = SeededRng::new(91).i32s(1000, 100);
    let handle = upload::<B, i32>(&client, &values);
    let out = client.empty(1000 * 4).unwrap();
    let read = with_timeout(Duration::from_secs(60), "cross-thread use", {
        let client = client.clone();
        let (handle, out) = (handle.clone(), out.clone());
        move || {
            std::thread::spawn(move || {
                ops::mul(&client, &handle, &handle, &out, 1000, ElemType::I32).unwrap();
                read_elems::<B, i32>(&client, &out)
            })
            .join()
            .unwrap()
        }
    });
    let expected: Vec<i32> = values.iter().map(|v| v * v).collect();
    assert_eq!(read, expected, "{mode:?}");
    assert_eq!(read_elems::<B, i32>(&client, &out), expected, "{mode:?}");
}

in_both_modes!(
    /// A client cloned to another thread uses handles created on this thread, and this
    /// thread sees its results.
    cloned_client_on_another_thread_shares_the_device_threaded,
    cloned_client_on_another_thread_shares_the_device_inline => cross_thread_in
);
