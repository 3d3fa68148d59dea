//! Tests of `local_group`: matching, launching, abandoning and waiting.

use super::*;

/// Sums the payloads of an all-reduce into every payload; copies a send into its recv.
#[derive(Default)]
struct Adder {
    launched: usize,
    abandoned: usize,
}

impl Launcher<i64> for Adder {
    fn launch(&mut self, calls: &mut [Call<i64>]) -> Result<(), ServerError> {
        self.launched += 1;
        match calls[0].kind {
            CallKind::AllReduce { .. } => {
                let sum: i64 = calls.iter().map(|c| c.payload).sum();
                calls.iter_mut().for_each(|c| c.payload = sum);
            }
            _ if calls.len() == 2 => {
                let sent = calls
                    .iter()
                    .find(|c| matches!(c.kind, CallKind::Send { .. }))
                    .map(|c| c.payload)
                    .unwrap();
                calls.iter_mut().for_each(|c| c.payload = sent);
            }
            _ => {}
        }
        Ok(())
    }

    fn abandon(&mut self, calls: &mut [Call<i64>], _error: &ServerError) {
        self.abandoned += calls.len();
    }
}

const SUM: CallKind = CallKind::AllReduce {
    bytes: 8,
    dtype: ElemType::I64,
    op: ReduceOperation::Sum,
};

#[test]
fn last_arrival_runs_the_instance_for_everyone() {
    let group = LocalGroup::new(vec![true; 3]);
    let mut adder = Adder::default();
    let tickets: Vec<Ticket> = (0..3)
        .map(|rank| {
            let ticket = group
                .arrive(rank, rank, SUM, rank as i64 + 1, true, &mut adder)
                .unwrap();
            assert_eq!(adder.launched, usize::from(rank == 2));
            ticket
        })
        .collect();
    for ticket in tickets {
        let finished = group.take(ticket).unwrap();
        assert_eq!(finished.payload, 6);
        assert!(finished.result.is_ok());
    }
}

#[test]
fn sends_match_receives_in_call_order_and_leave_others_waiting() {
    let group = LocalGroup::new(vec![true; 3]);
    let mut adder = Adder::default();
    let send = |peer| CallKind::Send { peer, bytes: 8 };
    let recv = |peer| CallKind::Recv { peer, bytes: 8 };
    let first = group.arrive(0, 0, send(1), 10, true, &mut adder).unwrap();
    let second = group.arrive(0, 0, send(2), 20, true, &mut adder).unwrap();
    let third = group.arrive(2, 2, recv(0), 0, true, &mut adder).unwrap();
    // Rank 0's second send waits behind its first, which rank 1 hasn't received yet.
    assert_eq!(adder.launched, 0);
    let fourth = group.arrive(1, 1, recv(0), 0, true, &mut adder).unwrap();
    assert_eq!(adder.launched, 2);
    assert_eq!(group.take(first).unwrap().payload, 10);
    assert_eq!(group.take(fourth).unwrap().payload, 10);
    assert_eq!(group.take(second).unwrap().payload, 20);
    assert_eq!(group.take(third).unwrap().payload, 20);
}

#[test]
fn mismatched_calls_are_abandoned_with_an_error_for_each() {
    let group = LocalGroup::new(vec![true; 2]);
    let mut adder = Adder::default();
    let other = CallKind::AllReduce {
        bytes: 16,
        dtype: ElemType::I64,
        op: ReduceOperation::Sum,
    };
    let a = group.arrive(0, 0, SUM, 1, true, &mut adder).unwrap();
    let b = group.arrive(1, 1, other, 1, true, &mut adder).unwrap();
    assert_eq!((adder.launched, adder.abandoned), (0, 2));
    for ticket in [a, b] {
        let error = group.take(ticket).unwrap().result.unwrap_err();
        assert!(error.to_string().contains("don't match"), "{error}");
    }
}

#[test]
fn waiting_rank_times_out_naming_the_missing_rank() {
    let group = LocalGroup::new(vec![true; 3]);
    let mut adder = Adder::default();
    group.arrive(1, 1, SUM, 1, false, &mut adder).unwrap();
    let ticket = group.arrive(0, 0, SUM, 1, true, &mut adder).unwrap();
    let error = group
        .wait(ticket, Duration::from_millis(50), &mut adder)
        .err()
        .unwrap();
    assert!(error.to_string().contains("[2]"), "{error}");
    assert_eq!(group.pending(0), 0);
    assert_eq!(adder.abandoned, 1);
}

#[test]
fn waiting_rank_wakes_when_its_peer_arrives_from_another_thread() {
    let group = Arc::new(LocalGroup::new(vec![true; 2]));
    let mut adder = Adder::default();
    let ticket = group.arrive(0, 0, SUM, 5, true, &mut adder).unwrap();
    let peer = group.clone();
    let thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        peer.arrive(1, 1, SUM, 7, false, &mut Adder::default())
            .unwrap();
    });
    let finished = group
        .wait(ticket, Duration::from_secs(30), &mut adder)
        .unwrap();
    thread.join().unwrap();
    assert_eq!(finished.payload, 12);
}

#[test]
fn calls_of_a_replaced_server_are_abandoned_not_matched() {
    let group = LocalGroup::new(vec![true; 2]);
    let mut adder = Adder::default();
    let old = group.arrive(0, 100, SUM, 1, true, &mut adder).unwrap();
    let new = group.arrive(0, 200, SUM, 2, true, &mut adder).unwrap();
    assert_eq!(adder.abandoned, 1);
    assert!(group.take(old).unwrap().result.is_err());
    group.arrive(1, 300, SUM, 3, false, &mut adder).unwrap();
    assert_eq!(group.take(new).unwrap().payload, 5);
}

#[test]
fn dropped_owner_leaves_nothing_behind() {
    let group = LocalGroup::new(vec![true; 2]);
    let mut adder = Adder::default();
    group.arrive(0, 7, SUM, 1, true, &mut adder).unwrap();
    group.abandon_owner(7, &mut adder);
    assert_eq!((group.pending(0), adder.abandoned), (0, 1));
    assert!(group.take_rank(0, 7).is_empty());
}

#[test]
fn remote_peers_make_calls_run_alone() {
    // Rank 1 of 2 is this process; rank 0 is another process.
    let group = LocalGroup::new(vec![false, true]);
    let mut adder = Adder::default();
    group.arrive(1, 1, SUM, 4, false, &mut adder).unwrap();
    group
        .arrive(
            1,
            1,
            CallKind::Send { peer: 0, bytes: 8 },
            4,
            false,
            &mut adder,
        )
        .unwrap();
    assert_eq!(adder.launched, 2);
    assert!(group.arrive(0, 0, SUM, 1, false, &mut adder).is_err());
}

#[test]
fn registry_returns_one_group_per_communicator() {
    let id = CommunicationId { id: 0xfeed_beef };
    let a = local_group::<u8>(id, vec![true; 2]).unwrap();
    let b = local_group::<u8>(id, vec![true; 2]).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert!(local_group::<u8>(id, vec![true; 3]).is_err());
}

#[test]
fn wait_taking_keeps_a_call_queued_on_timeout_and_takes_it_once_a_peer_arrives() {
    let group = Arc::new(LocalGroup::new(vec![true; 2]));
    let mut adder = Adder::default();
    let ticket = group.arrive(0, 0, SUM, 1, true, &mut adder).unwrap();
    assert!(
        group
            .wait_taking(ticket, Duration::from_millis(20))
            .is_none()
    );
    assert_eq!(
        group.pending(0),
        1,
        "a timed-out wait must not abandon the call"
    );
    let peer = {
        let group = group.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            group
                .arrive(1, 1, SUM, 2, true, &mut Adder::default())
                .unwrap()
        })
    };
    let finished = group.wait_taking(ticket, Duration::from_secs(10)).unwrap();
    assert_eq!(finished.payload, 3);
    assert!(finished.result.is_ok());
    let other = peer.join().unwrap();
    assert_eq!(group.take(other).unwrap().payload, 3);
    assert_eq!(adder.abandoned, 0);
}

#[test]
fn group_wide_calls_of_every_kind_run_once_every_rank_made_the_same_one() {
    let group = LocalGroup::new(vec![true; 3]);
    let mut adder = Adder::default();
    let kinds = [
        CallKind::AllGather {
            bytes: 8,
            dtype: ElemType::I64,
        },
        CallKind::ReduceScatter {
            bytes: 8,
            dtype: ElemType::I64,
            op: ReduceOperation::Mean,
        },
        CallKind::Broadcast {
            bytes: 8,
            dtype: ElemType::I64,
            root: 2,
        },
    ];
    for (round, kind) in kinds.into_iter().enumerate() {
        assert!(kind.is_group_wide());
        for rank in 0..3 {
            assert_eq!(
                adder.launched, round,
                "{kind:?} ran before rank {rank} called"
            );
            group
                .arrive(rank, rank, kind, 1, false, &mut adder)
                .unwrap();
        }
        assert_eq!(adder.launched, round + 1, "{kind:?} didn't run");
    }
    assert!(!CallKind::Send { peer: 1, bytes: 8 }.is_group_wide());
}

#[test]
fn group_wide_calls_of_different_kinds_or_roots_are_abandoned() {
    let group = LocalGroup::new(vec![true; 2]);
    let mut adder = Adder::default();
    let broadcast = |root| CallKind::Broadcast {
        bytes: 8,
        dtype: ElemType::I64,
        root,
    };
    let gather = CallKind::AllGather {
        bytes: 8,
        dtype: ElemType::I64,
    };
    let pairs = [
        (broadcast(0), broadcast(1)),
        (gather, SUM),
        (gather, broadcast(0)),
    ];
    for (first, second) in pairs {
        let a = group.arrive(0, 0, first, 1, true, &mut adder).unwrap();
        let b = group.arrive(1, 1, second, 1, true, &mut adder).unwrap();
        for ticket in [a, b] {
            let error = group.take(ticket).unwrap().result.unwrap_err();
            assert!(error.to_string().contains("don't match"), "{error}");
        }
    }
    assert_eq!((adder.launched, adder.abandoned), (0, 6));
}
