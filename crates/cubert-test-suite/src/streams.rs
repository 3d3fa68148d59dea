//! The stream keys of `[runtime]`: the policy that gives a client its stream (`per_thread`,
//! `per_task`, `single`), the most device queues a server creates (`max_streams`) and their
//! priority (`stream_priority`). Each policy is checked for the streams it hands out and for
//! the work done under it; more streams than device queues, and high-priority queues, must
//! still run every stream's work in order with the right results.

use crate::backend::{Client, ClientOptions, TestBackend};
use crate::support::{bytes_of, client_with};
use cubert_runtime::{
    ElemType, Handle, StreamId, StreamPolicy, StreamPriority, StreamSettings, ops,
};

/// Elements of the buffers the work uses.
const LEN: usize = 4099;

/// Options with the stream keys changed by `change`.
fn options(change: impl FnOnce(&mut StreamSettings)) -> ClientOptions {
    let mut streams = ClientOptions::new().streams;
    change(&mut streams);
    ClientOptions::new().with_streams(streams)
}

/// Uploads `start` (every element), doubles it `rounds` times in place through a second
/// buffer, and returns the buffer and the expected value.
fn doubling_chain<B: TestBackend>(client: &Client<B>, start: f32, rounds: u32) -> (Handle, f32) {
    let x = client
        .create_from_slice(&bytes_of(&vec![start; LEN]))
        .unwrap();
    let y = client.empty(LEN * 4).unwrap();
    for _ in 0..rounds {
        ops::add(client, &x, &x, &y, LEN, ElemType::F32).unwrap();
        ops::add(client, &y, &y, &x, LEN, ElemType::F32).unwrap();
    }
    (x, start * 4f32.powi(rounds as i32))
}

fn assert_all<B: TestBackend>(client: &Client<B>, handle: Handle, want: f32, what: &str) {
    let got = client.read_one(handle).unwrap().to_elems::<f32>();
    assert!(
        got.iter().all(|v| *v == want),
        "{what}: expected {want} everywhere, got {:?}",
        &got[..4]
    );
}

/// Four threads, each with its own clone, run doubling chains; each checks its result, and
/// the first thread's result is also read through the others' clones (across streams).
fn tasks_work<B: TestBackend>(client: &Client<B>) -> Vec<StreamId> {
    let results: Vec<(StreamId, Handle, f32)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4u32)
            .map(|task| {
                let client = client.clone();
                scope.spawn(move || {
                    let (handle, want) = doubling_chain::<B>(&client, task as f32 + 1.0, 3);
                    assert_all::<B>(&client, handle.clone(), want, &format!("task {task}"));
                    (client.stream_id(), handle, want)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for (_, handle, want) in &results {
        assert_all::<B>(
            client,
            handle.clone(),
            *want,
            "a task's result read elsewhere",
        );
    }
    results.into_iter().map(|(stream, _, _)| stream).collect()
}

/// Under `per_thread` (the default) a client works on the calling thread's stream: clones
/// on one thread share it, another thread gets another; work from four threads is right.
pub fn per_thread_policy_gives_each_thread_its_own_stream<B: TestBackend>() {
    let client = client_with::<B>(&ClientOptions::new());
    assert_eq!(client.stream_settings().policy, StreamPolicy::PerThread);
    let here = client.stream_id();
    assert_eq!(here, StreamId::current());
    assert_eq!(client.clone().stream_id(), here);
    let elsewhere = {
        let clone = client.clone();
        std::thread::spawn(move || clone.stream_id())
            .join()
            .unwrap()
    };
    assert_ne!(elsewhere, here);
    let streams = tasks_work::<B>(&client);
    assert!(streams.iter().all(|stream| *stream != here));
}

/// Under `per_task` every client value has its own stream, the same on every thread that
/// uses it, and every clone gets a new one (a pinned client's clones keep its stream);
/// four tasks with their own clones work on four streams and get the right results.
pub fn per_task_policy_gives_each_clone_its_own_stream<B: TestBackend>() {
    let client = client_with::<B>(&options(|s| s.policy = StreamPolicy::PerTask));
    assert_eq!(client.stream_settings().policy, StreamPolicy::PerTask);
    let own = client.stream_id();
    assert_ne!(own, StreamId::current());
    let clone = client.clone();
    let cloned = clone.stream_id();
    assert_ne!(cloned, own);
    let seen = std::thread::spawn(move || clone.stream_id())
        .join()
        .unwrap();
    assert_eq!(
        seen, cloned,
        "a task's stream must not change with the thread"
    );
    let pinned = client.with_stream(StreamId::new(7 << 40));
    assert_eq!(pinned.clone().stream_id(), StreamId::new(7 << 40));
    let mut streams = tasks_work::<B>(&client);
    streams.push(own);
    streams.sort();
    streams.dedup();
    assert_eq!(
        streams.len(),
        5,
        "every task and the client have their own stream"
    );
}

/// Under `single` every client of the device, on every thread and every clone, works on
/// one stream; work from four threads is right.
pub fn single_policy_puts_every_client_on_one_stream<B: TestBackend>() {
    let client = client_with::<B>(&options(|s| s.policy = StreamPolicy::Single));
    assert_eq!(client.stream_id(), StreamId::SINGLE);
    assert_eq!(client.clone().stream_id(), StreamId::SINGLE);
    let streams = tasks_work::<B>(&client);
    assert!(streams.iter().all(|stream| *stream == StreamId::SINGLE));
}

/// Runs a doubling chain on each of `streams` streams of `client`, one step of each stream
/// in turn, plus a buffer made on the first stream and used on the last; checks each.
fn interleaved_streams<B: TestBackend>(client: &Client<B>, streams: u64) {
    let clients: Vec<Client<B>> = (0..streams)
        .map(|k| client.with_stream(StreamId::new((9 << 40) + k)))
        .collect();
    let buffers: Vec<(Handle, Handle)> = clients
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let x = c
                .create_from_slice(&bytes_of(&vec![k as f32 + 1.0; LEN]))
                .unwrap();
            (x, c.empty(LEN * 4).unwrap())
        })
        .collect();
    let rounds = 4;
    for _ in 0..rounds {
        for (c, (x, y)) in clients.iter().zip(&buffers) {
            ops::add(c, x, x, y, LEN, ElemType::F32).unwrap();
        }
        for (c, (x, y)) in clients.iter().zip(&buffers) {
            ops::add(c, y, y, x, LEN, ElemType::F32).unwrap();
        }
    }
    // The first stream's result, used on the last stream.
    let last = clients.last().unwrap();
    let shared = last.empty(LEN * 4).unwrap();
    ops::add(
        last,
        &buffers[0].0,
        &buffers[0].0,
        &shared,
        LEN,
        ElemType::F32,
    )
    .unwrap();
    for (k, (c, (x, _))) in clients.iter().zip(&buffers).enumerate() {
        let want = (k as f32 + 1.0) * 4f32.powi(rounds);
        assert_all::<B>(c, x.clone(), want, &format!("stream {k}"));
    }
    assert_all::<B>(last, shared, 2.0 * 4f32.powi(rounds), "across streams");
}

/// With `max_streams = 2`, eight streams share two device queues: each stream's work still
/// runs in order, interleaved with the others', and memory used across streams is ordered.
pub fn more_streams_than_device_queues_keep_every_stream_in_order<B: TestBackend>() {
    let client = client_with::<B>(&options(|s| s.max_streams = 2));
    assert_eq!(client.stream_settings().max_streams, 2);
    interleaved_streams::<B>(&client, 8);
}

/// With `stream_priority = "high"` the device queues run the same work, in order, with the
/// same results.
pub fn high_priority_streams_run_every_stream_in_order<B: TestBackend>() {
    let client = client_with::<B>(&options(|s| {
        s.priority = StreamPriority::High;
        s.max_streams = 4;
    }));
    assert_eq!(client.stream_settings().priority, StreamPriority::High);
    interleaved_streams::<B>(&client, 6);
}
