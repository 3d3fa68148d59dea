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
    DEFAULT_TIMEOUT, LAUNCH_VARIABLES, MAX_TIMEOUT, PROCESS_GROUP_DEVICE_TYPE, ProcessGroup,
    collective_timeout, timeout_from_seconds,
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

    const TIMEOUT_CHILD: &str = "CUBERT_TEST_TIMEOUT_CHILD";

    /// The child half of `out_of_range_timeout_variable_falls_back_to_the_default`.
    #[test]
    #[ignore = "run as a child process by out_of_range_timeout_variable_falls_back_to_the_default"]
    fn timeout_process() {
        if std::env::var(TIMEOUT_CHILD).is_err() {
            return;
        }
        assert_eq!(collective_timeout(), DEFAULT_TIMEOUT);
        let group = ProcessGroup::new(0, 2, "127.0.0.1:1").unwrap();
        assert_eq!(group.timeout(), DEFAULT_TIMEOUT);
    }

    /// `CUBERT_COLLECTIVE_TIMEOUT=1e300` used to panic converting to a `Duration`.
    #[test]
    fn out_of_range_timeout_variable_falls_back_to_the_default() {
        for value in ["1e300", "inf", "-3", "soon"] {
            let status = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--ignored",
                    "--exact",
                    "distributed::tests::timeout_process",
                ])
                .env(TIMEOUT_CHILD, "1")
                .env("CUBERT_COLLECTIVE_TIMEOUT", value)
                .output()
                .unwrap();
            assert!(status.status.success(), "{value}: {status:?}");
            let stdout = String::from_utf8_lossy(&status.stdout);
            assert!(
                stdout.contains("1 passed"),
                "the child test didn't run: {stdout}"
            );
        }
    }

    #[test]
    fn ranks_in_separate_processes_meet() {
        // Rank 0 (this process) listens before the others start: no port to race for.
        let zero = ProcessGroup::listen(4, "127.0.0.1:0")
            .unwrap()
            .with_timeout(Duration::from_secs(60));
        let address = zero.address().to_string();
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
