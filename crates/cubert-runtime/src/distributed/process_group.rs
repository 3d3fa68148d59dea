//! A process group: several processes, one device each, doing collectives together.
//!
//! A [`ProcessGroup`] says which rank this process is, how many there are, where rank 0
//! listens for the rendezvous, and how long to wait for the others. `cubert launch` (or any
//! launcher, on one host or several) sets the environment [`ProcessGroup::from_env`] reads:
//!
//! | variable | meaning |
//! | --- | --- |
//! | `CUBERT_RANK` | this process's rank, `0..CUBERT_WORLD_SIZE` |
//! | `CUBERT_WORLD_SIZE` | number of processes |
//! | `CUBERT_LOCAL_RANK` | rank among the processes of this host (the device to use); default: `CUBERT_RANK` |
//! | `CUBERT_MASTER_ADDR` | `host:port` where rank 0 listens (reachable from every host) |
//! | `CUBERT_COLLECTIVE_TIMEOUT` | seconds to wait for the other ranks (default 300) |
//!
//! Collectives name the members by the device ids [`ProcessGroup::members`] returns
//! (`ComputeClient::init_process_group` returns them too): member `r` is rank `r`, whatever
//! device it runs on.

use super::rendezvous::Rendezvous;
use crate::device::DeviceId;
use crate::error::ServerError;
use std::time::Duration;

/// The device `type_id` of process-group members (no backend uses it for its devices).
pub const PROCESS_GROUP_DEVICE_TYPE: u16 = u16::MAX;

/// The environment variables the launcher sets (they are not configuration keys).
pub const LAUNCH_VARIABLES: [&str; 5] = [
    "CUBERT_RANK",
    "CUBERT_WORLD_SIZE",
    "CUBERT_LOCAL_RANK",
    "CUBERT_MASTER_ADDR",
    "CUBERT_COLLECTIVE_TIMEOUT",
];

/// Default wait for the other ranks of a rendezvous or a collective.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Longest wait accepted for the other ranks: one week. Longer values are refused, not
/// clamped: a value that large is a typo, and `Duration` can't hold an unbounded float.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// A timeout given in seconds (the `CUBERT_COLLECTIVE_TIMEOUT` value, `cubert launch
/// --timeout`) as a `Duration`.
///
/// # Errors
/// A message naming the allowed range if `seconds` is not a finite number above 0 and at
/// most [`MAX_TIMEOUT`].
pub fn timeout_from_seconds(seconds: f64) -> Result<Duration, String> {
    let max = MAX_TIMEOUT.as_secs_f64();
    if seconds.is_finite() && seconds > 0.0 && seconds <= max {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(format!(
            "{seconds} is not a timeout: give seconds above 0 and at most {max} (one week)"
        ))
    }
}

/// How long a device waits for the other devices of a collective or a rendezvous:
/// `CUBERT_COLLECTIVE_TIMEOUT` seconds, else [`DEFAULT_TIMEOUT`]. A malformed or
/// out-of-range value is logged as a warning and the default is used.
pub fn collective_timeout() -> Duration {
    let Some(raw) = std::env::var_os("CUBERT_COLLECTIVE_TIMEOUT") else {
        return DEFAULT_TIMEOUT;
    };
    let text = raw.to_string_lossy();
    let parsed = text
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("`{text}` is not a number of seconds"))
        .and_then(timeout_from_seconds);
    parsed.unwrap_or_else(|problem| {
        tracing::warn!(
            "CUBERT_COLLECTIVE_TIMEOUT: {problem}; using the default {}s",
            DEFAULT_TIMEOUT.as_secs()
        );
        DEFAULT_TIMEOUT
    })
}

/// This process's place in a group of processes. See the module docs.
///
/// Clones share one [`Rendezvous`], so rank 0 keeps listening on its port between the
/// sessions of every communicator the group creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessGroup {
    local_rank: u32,
    rendezvous: Rendezvous,
}

impl ProcessGroup {
    /// Rank `rank` of `world_size` processes meeting at `address` (`host:port` of rank 0).
    ///
    /// # Errors
    /// [`ServerError::Generic`] if `rank` is not below `world_size`.
    pub fn new(
        rank: u32,
        world_size: u32,
        address: impl Into<String>,
    ) -> Result<Self, ServerError> {
        if rank >= world_size {
            return Err(ServerError::generic(format!(
                "process group: rank {rank} is not below the world size {world_size}"
            )));
        }
        let rendezvous = Rendezvous::new(rank, world_size, address, collective_timeout())
            .map_err(|error| ServerError::generic(error.to_string()))?;
        Ok(Self {
            local_rank: rank,
            rendezvous,
        })
    }

    /// Rank 0 of `world_size` processes, listening at `address` from now on (port 0: the
    /// operating system picks a free port; [`Self::address`] names it for the other ranks).
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the world is empty or the address can't be bound.
    pub fn listen(world_size: u32, address: &str) -> Result<Self, ServerError> {
        let rendezvous = Rendezvous::listen(world_size, address, collective_timeout())
            .map_err(|error| ServerError::generic(error.to_string()))?;
        Ok(Self {
            local_rank: 0,
            rendezvous,
        })
    }

    /// The same group with another timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.rendezvous = self.rendezvous.with_timeout(timeout);
        self
    }

    /// The same group with another local rank.
    pub fn with_local_rank(mut self, local_rank: u32) -> Self {
        self.local_rank = local_rank;
        self
    }

    /// The group the launcher described in the environment, or `None` when
    /// `CUBERT_WORLD_SIZE` and `CUBERT_RANK` are not set.
    ///
    /// # Errors
    /// [`ServerError::Generic`] naming the variable that is malformed or missing.
    pub fn from_env() -> Result<Option<Self>, ServerError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`Self::from_env`], reading the variables through `var`.
    ///
    /// # Errors
    /// As [`Self::from_env`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ServerError> {
        let number = |name: &str| -> Result<Option<u32>, ServerError> {
            match var(name) {
                None => Ok(None),
                Some(text) => text.trim().parse::<u32>().map(Some).map_err(|_| {
                    ServerError::generic(format!("{name}={text} is not a non-negative integer"))
                }),
            }
        };
        let (rank, world_size) = match (number("CUBERT_RANK")?, number("CUBERT_WORLD_SIZE")?) {
            (None, None) => return Ok(None),
            (Some(rank), Some(world_size)) => (rank, world_size),
            _ => {
                return Err(ServerError::generic(
                    "CUBERT_RANK and CUBERT_WORLD_SIZE go together: set both (`cubert launch` \
                     does) or neither",
                ));
            }
        };
        let address = var("CUBERT_MASTER_ADDR").ok_or_else(|| {
            ServerError::generic(
                "CUBERT_MASTER_ADDR is not set: it names host:port where rank 0 listens",
            )
        })?;
        let local_rank = number("CUBERT_LOCAL_RANK")?.unwrap_or(rank);
        Self::new(rank, world_size, address).map(|group| Some(group.with_local_rank(local_rank)))
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rendezvous.rank()
    }

    /// Number of processes.
    pub fn world_size(&self) -> u32 {
        self.rendezvous.world_size()
    }

    /// Rank among the processes of this host: the index of the device to use.
    pub fn local_rank(&self) -> u32 {
        self.local_rank
    }

    /// Where rank 0 listens.
    pub fn address(&self) -> &str {
        self.rendezvous.address()
    }

    /// How long to wait for the other ranks.
    pub fn timeout(&self) -> Duration {
        self.rendezvous.timeout()
    }

    /// The id naming member `rank` in collectives.
    pub fn member(rank: u32) -> DeviceId {
        DeviceId::new(PROCESS_GROUP_DEVICE_TYPE, rank)
    }

    /// The ids naming every member, in rank order: the device set of collectives over the
    /// whole group.
    pub fn members(&self) -> Vec<DeviceId> {
        (0..self.world_size()).map(Self::member).collect()
    }

    /// The rendezvous of this group (a clone sharing rank 0's listener).
    ///
    /// # Errors
    /// Never: the rank was checked when the group was made. The `Result` stays for
    /// callers written against earlier versions.
    pub fn rendezvous(&self) -> Result<Rendezvous, ServerError> {
        Ok(self.rendezvous.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn launcher_variables_describe_the_group() {
        let group = ProcessGroup::from_vars(vars(&[
            ("CUBERT_RANK", "3"),
            ("CUBERT_WORLD_SIZE", "4"),
            ("CUBERT_LOCAL_RANK", "1"),
            ("CUBERT_MASTER_ADDR", "10.0.0.1:29500"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((group.rank(), group.world_size()), (3, 4));
        assert_eq!(group.local_rank(), 1);
        assert_eq!(group.address(), "10.0.0.1:29500");
        assert_eq!(group.members().len(), 4);
        assert_eq!(group.members()[3], ProcessGroup::member(3));
    }

    #[test]
    fn timeouts_outside_the_range_are_refused_naming_it() {
        assert_eq!(timeout_from_seconds(2.5), Ok(Duration::from_millis(2500)));
        assert_eq!(
            timeout_from_seconds(MAX_TIMEOUT.as_secs_f64()),
            Ok(MAX_TIMEOUT)
        );
        for bad in [1e300, f64::INFINITY, f64::NAN, 0.0, -1.0, 604_801.0] {
            let problem = timeout_from_seconds(bad).unwrap_err();
            assert!(problem.contains("one week"), "{problem}");
        }
    }

    #[test]
    fn no_variables_means_no_group() {
        assert_eq!(ProcessGroup::from_vars(vars(&[])).unwrap(), None);
    }

    #[test]
    fn incomplete_or_malformed_variables_are_errors_naming_them() {
        let half = ProcessGroup::from_vars(vars(&[("CUBERT_RANK", "0")])).unwrap_err();
        assert!(half.to_string().contains("CUBERT_WORLD_SIZE"), "{half}");
        let no_address =
            ProcessGroup::from_vars(vars(&[("CUBERT_RANK", "0"), ("CUBERT_WORLD_SIZE", "2")]))
                .unwrap_err();
        assert!(no_address.to_string().contains("CUBERT_MASTER_ADDR"));
        let bad =
            ProcessGroup::from_vars(vars(&[("CUBERT_RANK", "two"), ("CUBERT_WORLD_SIZE", "2")]))
                .unwrap_err();
        assert!(bad.to_string().contains("CUBERT_RANK=two"), "{bad}");
        let outside = ProcessGroup::from_vars(vars(&[
            ("CUBERT_RANK", "2"),
            ("CUBERT_WORLD_SIZE", "2"),
            ("CUBERT_MASTER_ADDR", "127.0.0.1:1"),
        ]))
        .unwrap_err();
        assert!(outside.to_string().contains("rank 2"), "{outside}");
    }
}
