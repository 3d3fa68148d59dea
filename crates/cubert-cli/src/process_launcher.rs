//! `cubert launch --nproc N -- COMMAND...`: starts the ranks of a process group on this host.
//!
//! Each of the N processes runs COMMAND with the environment a
//! `cubert_runtime::distributed::ProcessGroup` reads: `CUBERT_RANK`, `CUBERT_WORLD_SIZE`,
//! `CUBERT_LOCAL_RANK` (the GPU to use on this host), `CUBERT_MASTER_ADDR` (where rank 0
//! listens: `127.0.0.1` and a free port unless `--master-addr` says otherwise), and
//! `NCCL_NVLS_ENABLE=0` (NVLink multicast stays off). `--timeout` sets
//! `CUBERT_COLLECTIVE_TIMEOUT`.
//!
//! Several hosts: run `cubert launch` on each with the same `--nproc`, `--nnodes` and a
//! `--master-addr` reachable from all, and `--node-rank` 0 (the host of rank 0), 1, ... The
//! ranks of host k are `k * nproc ..`.
//!
//! The launcher waits for its ranks. When one fails (non-zero exit or a signal), the
//! others are killed and the launcher exits with the failed rank's status; when all succeed
//! it exits 0. Output is the ranks' own, interleaved. The rank processes themselves are
//! killed, not processes they started: a wrapper script should `exec` the program.

use crate::error::CliResult;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::Duration;

/// How often the launcher looks at its ranks.
const POLL: Duration = Duration::from_millis(20);

/// The arguments of `cubert launch` (defined with the command line).
pub use crate::args::LaunchArgs;

/// Keeps NCCL's NVLink multicast (NVLS) off in this process unless the environment says
/// otherwise: called first thing in `main`.
pub fn keep_nvlink_multicast_off() {
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        // SAFETY: called at the start of `main`, before any other thread exists, so nothing
        // reads or writes the environment concurrently.
        unsafe { std::env::set_var("NCCL_NVLS_ENABLE", "0") };
    }
}

/// What every rank's environment gets, besides the parent's.
fn rank_environment(args: &LaunchArgs, address: &str, local: u32) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "CUBERT_RANK".to_string(),
            (args.node_rank * args.nproc + local).to_string(),
        ),
        (
            "CUBERT_WORLD_SIZE".to_string(),
            (args.nnodes * args.nproc).to_string(),
        ),
        ("CUBERT_LOCAL_RANK".to_string(), local.to_string()),
        ("CUBERT_MASTER_ADDR".to_string(), address.to_string()),
        ("NCCL_NVLS_ENABLE".to_string(), "0".to_string()),
    ];
    if let Some(seconds) = args.timeout {
        env.push(("CUBERT_COLLECTIVE_TIMEOUT".to_string(), seconds.to_string()));
    }
    env
}

fn check(args: &LaunchArgs) -> CliResult<String> {
    if args.node_rank >= args.nnodes {
        return Err(crate::error::usage(format!(
            "--node-rank {} is not below --nnodes {}",
            args.node_rank, args.nnodes
        )));
    }
    if let Some(seconds) = args.timeout {
        cubert::distributed::timeout_from_seconds(seconds)
            .map_err(|problem| crate::error::usage(format!("--timeout {problem}")))?;
    }
    match &args.master_addr {
        Some(address) => Ok(address.clone()),
        None if args.nnodes > 1 => Err(crate::error::usage(
            "--master-addr HOST:PORT is required with several hosts (rank 0's address, \
             reachable from every host)",
        )),
        None => {
            let port = cubert::distributed::free_local_port()
                .map_err(|error| crate::error::failure(format!("no free local port: {error}")))?;
            Ok(format!("127.0.0.1:{port}"))
        }
    }
}

/// The exit code to forward for a failed rank: its code, or 128 + the signal that ended it.
fn forwarded_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code).unwrap_or(1).max(1);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return u8::try_from(128 + signal).unwrap_or(1);
        }
    }
    1
}

fn stop_all(ranks: &mut [(u32, Option<Child>)]) {
    for (_, slot) in ranks.iter_mut() {
        if let Some(child) = slot.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        *slot = None;
    }
}

/// Runs `cubert launch`.
///
/// # Errors
/// A usage error for inconsistent arguments; a failure if a rank can't be started or
/// polled. A rank that fails is not an error of the launcher: its status is the exit code.
pub fn run(args: LaunchArgs) -> CliResult<ExitCode> {
    let address = check(&args)?;
    let Some((program, arguments)) = args.command.split_first() else {
        return Err(crate::error::usage(
            "cubert launch needs a command after `--`",
        ));
    };
    let mut ranks: Vec<(u32, Option<Child>)> = Vec::with_capacity(args.nproc as usize);
    for local in 0..args.nproc {
        let rank = args.node_rank * args.nproc + local;
        let spawned = Command::new(program)
            .args(arguments)
            .envs(rank_environment(&args, &address, local))
            .spawn();
        match spawned {
            Ok(child) => ranks.push((rank, Some(child))),
            Err(error) => {
                stop_all(&mut ranks);
                return Err(crate::error::failure(format!(
                    "can't start rank {rank} (`{program}`): {error}"
                )));
            }
        }
    }
    let mut running = ranks.len();
    while running > 0 {
        let mut failed = None;
        for (rank, slot) in ranks.iter_mut() {
            let Some(child) = slot.as_mut() else {
                continue;
            };
            match child.try_wait() {
                Ok(None) => {}
                Ok(Some(status)) => {
                    *slot = None;
                    running -= 1;
                    if !status.success() {
                        failed = Some((*rank, status));
                        break;
                    }
                }
                Err(error) => {
                    let reason = format!("can't wait for rank {rank}: {error}");
                    stop_all(&mut ranks);
                    return Err(crate::error::failure(reason));
                }
            }
        }
        if let Some((rank, status)) = failed {
            crate::output::write_err(format_args!(
                "cubert launch: rank {rank} failed ({status}); stopping the other ranks"
            ));
            stop_all(&mut ranks);
            return Ok(ExitCode::from(forwarded_code(status)));
        }
        if running > 0 {
            std::thread::sleep(POLL);
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(nproc: u32, nnodes: u32, node_rank: u32, address: Option<&str>) -> LaunchArgs {
        LaunchArgs {
            nproc,
            nnodes,
            node_rank,
            master_addr: address.map(str::to_string),
            timeout: Some(30.0),
            command: vec!["true".into()],
        }
    }

    #[test]
    fn ranks_of_later_hosts_follow_those_of_earlier_ones() {
        let launch = args(4, 2, 1, Some("10.0.0.1:29500"));
        let env = rank_environment(&launch, "10.0.0.1:29500", 2);
        let get = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        assert_eq!(get("CUBERT_RANK").as_deref(), Some("6"));
        assert_eq!(get("CUBERT_WORLD_SIZE").as_deref(), Some("8"));
        assert_eq!(get("CUBERT_LOCAL_RANK").as_deref(), Some("2"));
        assert_eq!(get("NCCL_NVLS_ENABLE").as_deref(), Some("0"));
        assert_eq!(get("CUBERT_COLLECTIVE_TIMEOUT").as_deref(), Some("30"));
    }

    #[test]
    fn several_hosts_need_an_address_and_a_valid_node_rank() {
        assert_eq!(
            crate::error::exit_code(&check(&args(2, 2, 0, None)).unwrap_err()),
            2
        );
        assert_eq!(
            crate::error::exit_code(&check(&args(2, 2, 2, Some("h:1"))).unwrap_err()),
            2
        );
        assert_eq!(check(&args(2, 2, 1, Some("h:1"))).unwrap(), "h:1");
        assert!(
            check(&args(2, 1, 0, None))
                .unwrap()
                .starts_with("127.0.0.1:")
        );
    }

    #[cfg(unix)]
    #[test]
    fn signals_and_codes_are_forwarded() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(forwarded_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(forwarded_code(ExitStatus::from_raw(9)), 137);
    }
}
