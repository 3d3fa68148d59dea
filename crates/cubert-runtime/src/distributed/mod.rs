//! Several processes working together: where they meet, and who is who.
//!
//! - [`rendezvous`]: a TCP meeting point where rank 0 hands a blob (an NCCL unique id) to
//!   every rank, with timeouts and errors that name what is missing.
//! - [`process_group`]: [`ProcessGroup`], this process's rank in a world of processes (one
//!   device each), read from the variables `cubert launch` sets.
//!
//! Nothing here knows a backend: the CUDA backend exchanges its NCCL id through the
//! rendezvous; the same works across hosts (rank 0's address must be reachable from all).

pub mod process_group;
pub mod rendezvous;

pub use process_group::{
    DEFAULT_TIMEOUT, LAUNCH_VARIABLES, PROCESS_GROUP_DEVICE_TYPE, ProcessGroup, collective_timeout,
};
pub use rendezvous::{Rendezvous, RendezvousError, free_local_port};

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    const CHILD: &str = "CUBERT_TEST_RENDEZVOUS_CHILD";

    /// The child half of `ranks_in_separate_processes_meet`: run by that test as
    /// `--ignored --exact distributed::tests::rank_process`; does nothing on its own.
    #[test]
    #[ignore = "run as a child process by ranks_in_separate_processes_meet"]
    fn rank_process() {
        if std::env::var(CHILD).is_err() {
            return;
        }
        let group = ProcessGroup::from_env().unwrap().unwrap();
        let rendezvous = group.rendezvous().unwrap();
        let payload = rendezvous.broadcast("processes", b"ignored").unwrap();
        assert_eq!(payload, b"from rank zero".to_vec());
        rendezvous.barrier("done").unwrap();
    }

    #[test]
    fn ranks_in_separate_processes_meet() {
        let address = format!("127.0.0.1:{}", free_local_port().unwrap());
        let exe = std::env::current_exe().unwrap();
        let world = 4u32;
        let children: Vec<_> = (1..world)
            .map(|rank| {
                Command::new(&exe)
                    .args(["--ignored", "--exact", "distributed::tests::rank_process"])
                    .env(CHILD, "1")
                    .env("CUBERT_RANK", rank.to_string())
                    .env("CUBERT_WORLD_SIZE", world.to_string())
                    .env("CUBERT_MASTER_ADDR", &address)
                    .env("CUBERT_COLLECTIVE_TIMEOUT", "60")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let zero = ProcessGroup::new(0, world, address)
            .unwrap()
            .with_timeout(Duration::from_secs(60));
        let rendezvous = zero.rendezvous().unwrap();
        let sent = rendezvous
            .broadcast("processes", b"from rank zero")
            .unwrap();
        assert_eq!(sent, b"from rank zero".to_vec());
        rendezvous.barrier("done").unwrap();
        for mut child in children {
            let status = child.wait().unwrap();
            assert!(status.success(), "a rank process failed: {status}");
        }
    }
}
