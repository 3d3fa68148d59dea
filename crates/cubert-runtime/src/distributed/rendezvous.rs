//! A TCP rendezvous: rank 0 hands a blob (an NCCL unique id) to every rank of a world.
//!
//! Rank 0 listens on the world's address; every other rank connects (retrying while rank 0
//! isn't listening yet) and sends a hello: magic, world size, rank and the session key. Once
//! every rank has said hello, rank 0 answers each with the payload. So when any rank returns,
//! every rank had arrived: a broadcast is also a barrier, and [`Rendezvous::barrier`] is a
//! broadcast of nothing. Rank 0 binds its listener at the first session (or at
//! [`Rendezvous::listen`]) and keeps it, shared by every clone, for the sessions that follow:
//! the port is never released between sessions, so nothing else on the host (another
//! program, a test binding port 0, an outgoing connection's ephemeral port) can take it in
//! between. A rank that connects early for the next session waits in the listener's backlog.
//!
//! Nothing waits forever: every step runs against one deadline (the rendezvous timeout),
//! and a failure names the address, the session and what was missing ("ranks [2, 3] of 4
//! never connected"). When rank 0 refuses a hello (another world size, another session, a
//! rank claimed twice) it tells the ranks already connected why, so every process fails
//! with the same explanation.
//!
//! The wire format is little-endian:
//!
//! ```text
//! hello:  "CBRTRDV1" | world_size u32 | rank u32 | key_len u32 | key
//! answer: status u8 (0 ok, 1 refused) | len u32 | payload (ok) or reason (refused)
//! ```

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"CBRTRDV1";
/// Largest payload or key accepted (the NCCL unique id is 128 bytes).
const MAX_FRAME: u32 = 1 << 20;
/// How long one attempt to connect, or one idle poll, may take.
const POLL: Duration = Duration::from_millis(20);

/// Why a rendezvous failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RendezvousError {
    /// The deadline passed.
    #[error("rendezvous `{key}` at {address}: timed out after {waited:?}: {what}")]
    Timeout {
        /// The session.
        key: String,
        /// Rank 0's address.
        address: String,
        /// How long it waited.
        waited: Duration,
        /// What was missing.
        what: String,
    },
    /// The address can't be resolved or listened on.
    #[error("rendezvous `{key}` at {address}: {reason}")]
    Address {
        /// The session.
        key: String,
        /// The address.
        address: String,
        /// What went wrong.
        reason: String,
    },
    /// Rank 0 refused this rank, or another rank broke the session.
    #[error("rendezvous `{key}` at {address}: {reason}")]
    Refused {
        /// The session.
        key: String,
        /// Rank 0's address.
        address: String,
        /// Rank 0's explanation.
        reason: String,
    },
    /// The arguments can't form a world.
    #[error("rendezvous: {0}")]
    Invalid(String),
}

/// One process's place in a world that meets at an address. See the module docs.
///
/// Clones share rank 0's listener; two rendezvous are equal when they describe the same
/// place (rank, world size, address, timeout).
#[derive(Clone, Debug)]
pub struct Rendezvous {
    rank: u32,
    world_size: u32,
    address: String,
    timeout: Duration,
    /// Rank 0's listener, bound at the first session and kept for the next ones.
    listener: Arc<Mutex<Option<TcpListener>>>,
}

impl PartialEq for Rendezvous {
    fn eq(&self, other: &Self) -> bool {
        (self.rank, self.world_size, &self.address, self.timeout)
            == (other.rank, other.world_size, &other.address, other.timeout)
    }
}

impl Eq for Rendezvous {}

/// A rank's hello as rank 0 reads it.
struct Hello {
    world_size: u32,
    rank: u32,
    key: String,
}

impl Rendezvous {
    /// Rank `rank` of a world of `world_size` processes meeting at `address` (`host:port`,
    /// where rank 0 listens), giving up after `timeout`.
    ///
    /// # Errors
    /// [`RendezvousError::Invalid`] if `rank` is not below `world_size`.
    pub fn new(
        rank: u32,
        world_size: u32,
        address: impl Into<String>,
        timeout: Duration,
    ) -> Result<Self, RendezvousError> {
        if rank >= world_size {
            return Err(RendezvousError::Invalid(format!(
                "rank {rank} is not below the world size {world_size}"
            )));
        }
        Ok(Self {
            rank,
            world_size,
            address: address.into(),
            timeout,
            listener: Arc::default(),
        })
    }

    /// Rank 0 of a world of `world_size` processes, listening at `address` from now on.
    /// A port of 0 lets the operating system pick a free one; [`Self::address`] then names
    /// the port that was bound, to hand to the other ranks. This is the race-free way to
    /// start a world on one host: the port is never free between choosing and listening.
    ///
    /// # Errors
    /// [`RendezvousError::Invalid`] for a world of size 0; [`RendezvousError::Address`] if
    /// the address can't be resolved or bound.
    pub fn listen(
        world_size: u32,
        address: &str,
        timeout: Duration,
    ) -> Result<Self, RendezvousError> {
        let mut zero = Self::new(0, world_size, address, timeout)?;
        let listener = zero.bind("listen")?;
        zero.address = listener
            .local_addr()
            .map_err(|error| RendezvousError::Address {
                key: "listen".into(),
                address: address.to_string(),
                reason: format!("can't read the bound address: {error}"),
            })?
            .to_string();
        zero.listener = Arc::new(Mutex::new(Some(listener)));
        Ok(zero)
    }

    /// The same place with another timeout (clones keep sharing the listener).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a session waits for the other ranks.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of processes.
    pub fn world_size(&self) -> u32 {
        self.world_size
    }

    /// Rank 0's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Gives `payload` (rank 0's; the others pass anything, it is ignored) to every rank of
    /// the session `key`, and returns it. Returns once every rank has arrived.
    ///
    /// # Errors
    /// A [`RendezvousError`] saying what was missing or refused; never waits past the
    /// timeout.
    pub fn broadcast(&self, key: &str, payload: &[u8]) -> Result<Vec<u8>, RendezvousError> {
        if key.len() > MAX_FRAME as usize || payload.len() > MAX_FRAME as usize {
            return Err(RendezvousError::Invalid(format!(
                "the key and the payload must stay under {MAX_FRAME} bytes"
            )));
        }
        if self.world_size == 1 {
            return Ok(payload.to_vec());
        }
        let deadline = Instant::now() + self.timeout;
        if self.rank == 0 {
            self.serve(key, payload, deadline)
                .map(|()| payload.to_vec())
        } else {
            self.join(key, deadline)
        }
    }

    /// Returns once every rank has called `barrier` with the same `key`.
    ///
    /// # Errors
    /// As [`Self::broadcast`].
    pub fn barrier(&self, key: &str) -> Result<(), RendezvousError> {
        self.broadcast(key, &[]).map(|_| ())
    }

    fn resolve(&self, key: &str) -> Result<SocketAddr, RendezvousError> {
        let fail = |reason: String| RendezvousError::Address {
            key: key.to_string(),
            address: self.address.clone(),
            reason,
        };
        self.address
            .to_socket_addrs()
            .map_err(|error| fail(format!("can't resolve the address: {error}")))?
            .next()
            .ok_or_else(|| fail("the address resolves to nothing".into()))
    }

    fn timeout_error(&self, key: &str, what: String) -> RendezvousError {
        RendezvousError::Timeout {
            key: key.to_string(),
            address: self.address.clone(),
            waited: self.timeout,
            what,
        }
    }

    fn refused(&self, key: &str, reason: String) -> RendezvousError {
        RendezvousError::Refused {
            key: key.to_string(),
            address: self.address.clone(),
            reason,
        }
    }

    /// Binds rank 0's listener (non-blocking, polled by [`Self::serve`]).
    fn bind(&self, key: &str) -> Result<TcpListener, RendezvousError> {
        let address = self.resolve(key)?;
        let listener = TcpListener::bind(address).map_err(|error| RendezvousError::Address {
            key: key.to_string(),
            address: self.address.clone(),
            reason: format!(
                "rank 0 can't listen there: {error} (is the port taken, or is the address \
                 not one of this host's?)"
            ),
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|error| self.refused(key, format!("can't poll the listener: {error}")))?;
        Ok(listener)
    }

    /// Rank 0: accept every other rank, then answer them all. The listener is bound at the
    /// first session and kept (sessions of one rank 0 run one at a time under its lock).
    fn serve(&self, key: &str, payload: &[u8], deadline: Instant) -> Result<(), RendezvousError> {
        let mut slot = self.listener.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(self.bind(key)?);
        }
        let Some(listener) = slot.as_ref() else {
            return Err(self.refused(key, "rank 0 lost its listener".into()));
        };
        let others = (self.world_size - 1) as usize;
        let mut joined: Vec<Option<TcpStream>> = (0..self.world_size).map(|_| None).collect();
        let mut count = 0usize;
        while count < others {
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<u32> = (1..self.world_size)
                    .filter(|rank| joined[*rank as usize].is_none())
                    .collect();
                let what = format!(
                    "ranks {missing:?} of {} never connected to rank 0",
                    self.world_size
                );
                refuse_all(&mut joined, &what);
                return Err(self.timeout_error(key, what));
            }
            let mut stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(error) if error.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(POLL);
                    continue;
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) => {
                    let reason = format!("accepting a connection failed: {error}");
                    refuse_all(&mut joined, &reason);
                    return Err(self.refused(key, reason));
                }
            };
            let hello = match read_hello(&mut stream, deadline) {
                Ok(hello) => hello,
                Err(reason) => {
                    // Not a rank of ours (a stray connection, a port scanner): ignore it.
                    tracing::warn!("rendezvous `{key}`: ignored a connection: {reason}");
                    continue;
                }
            };
            let problem = if hello.key != key {
                Some(format!(
                    "rank {} asked for session `{}` but rank 0 serves `{key}` (the ranks run \
                     different programs or steps?)",
                    hello.rank, hello.key
                ))
            } else if hello.world_size != self.world_size {
                Some(format!(
                    "rank {} has world size {} but rank 0 has {}",
                    hello.rank, hello.world_size, self.world_size
                ))
            } else if hello.rank == 0 || hello.rank >= self.world_size {
                Some(format!(
                    "a process claimed rank {} in a world of {} where rank 0 listens",
                    hello.rank, self.world_size
                ))
            } else if joined[hello.rank as usize].is_some() {
                Some(format!("two processes claimed rank {}", hello.rank))
            } else {
                None
            };
            if let Some(reason) = problem {
                let _ = write_answer(&mut stream, 1, reason.as_bytes(), deadline);
                refuse_all(&mut joined, &reason);
                return Err(self.refused(key, reason));
            }
            joined[hello.rank as usize] = Some(stream);
            count += 1;
        }
        for (rank, slot) in joined.iter_mut().enumerate() {
            if let Some(stream) = slot {
                write_answer(stream, 0, payload, deadline).map_err(|reason| {
                    self.refused(key, format!("can't answer rank {rank}: {reason}"))
                })?;
            }
        }
        Ok(())
    }

    /// Ranks 1..: connect to rank 0 (retrying), say hello, read the answer. A connection
    /// closed before any answer is retried too: it was queued at the listener of rank 0's
    /// previous session, which closed it when that session ended.
    fn join(&self, key: &str, deadline: Instant) -> Result<Vec<u8>, RendezvousError> {
        let address = self.resolve(key)?;
        let mut hello = Vec::with_capacity(20 + key.len());
        hello.extend_from_slice(MAGIC);
        hello.extend_from_slice(&self.world_size.to_le_bytes());
        hello.extend_from_slice(&self.rank.to_le_bytes());
        hello.extend_from_slice(&(key.len() as u32).to_le_bytes());
        hello.extend_from_slice(key.as_bytes());
        let mut last_error = String::from("no attempt finished");
        let (mut stream, status) = loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(self.timeout_error(
                    key,
                    format!(
                        "rank {} could not reach rank 0 (last error: {last_error}); is rank 0 \
                         running and listening there?",
                        self.rank
                    ),
                ));
            }
            let attempt = (deadline - now).min(Duration::from_secs(1));
            let mut stream = match TcpStream::connect_timeout(&address, attempt) {
                Ok(stream) => stream,
                Err(error) => {
                    last_error = error.to_string();
                    std::thread::sleep(POLL);
                    continue;
                }
            };
            if let Err(reason) = set_deadline(&stream, deadline)
                .and_then(|()| stream.write_all(&hello).map_err(|e| e.to_string()))
            {
                last_error = format!("can't send the hello: {reason}");
                std::thread::sleep(POLL);
                continue;
            }
            let mut status = [0u8; 1];
            match read_exact_by(&mut stream, &mut status, deadline) {
                Ok(()) => break (stream, status[0]),
                Err(ReadFailure::TimedOut) => {
                    return Err(self.timeout_error(
                        key,
                        format!(
                            "rank {} reached rank 0, which did not answer: other ranks are \
                             missing",
                            self.rank
                        ),
                    ));
                }
                Err(ReadFailure::Other(reason)) => {
                    last_error =
                        format!("rank 0 closed the connection before answering ({reason})");
                    std::thread::sleep(POLL);
                }
            }
        };
        let body = read_frame(&mut stream, deadline).map_err(|failure| match failure {
            ReadFailure::TimedOut => self.timeout_error(key, "rank 0's answer stalled".into()),
            ReadFailure::Other(reason) => {
                self.refused(key, format!("rank 0's answer broke off: {reason}"))
            }
        })?;
        if status == 0 {
            Ok(body)
        } else {
            Err(self.refused(
                key,
                format!(
                    "rank 0 refused rank {}: {}",
                    self.rank,
                    String::from_utf8_lossy(&body)
                ),
            ))
        }
    }
}

/// Tells every connected rank why the session failed (best effort).
fn refuse_all(joined: &mut [Option<TcpStream>], reason: &str) {
    let soon = Instant::now() + Duration::from_secs(1);
    for stream in joined.iter_mut().flatten() {
        let _ = write_answer(stream, 1, reason.as_bytes(), soon);
    }
}

enum ReadFailure {
    TimedOut,
    Other(String),
}

fn set_deadline(stream: &TcpStream, deadline: Instant) -> Result<(), String> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(left)))
        .and_then(|()| stream.set_write_timeout(Some(left)))
        .map_err(|error| error.to_string())
}

fn read_exact_by(
    stream: &mut TcpStream,
    buffer: &mut [u8],
    deadline: Instant,
) -> Result<(), ReadFailure> {
    set_deadline(stream, deadline).map_err(ReadFailure::Other)?;
    stream
        .read_exact(buffer)
        .map_err(|error| match error.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => ReadFailure::TimedOut,
            _ => ReadFailure::Other(error.to_string()),
        })
}

fn read_u32(stream: &mut TcpStream, deadline: Instant) -> Result<u32, ReadFailure> {
    let mut word = [0u8; 4];
    read_exact_by(stream, &mut word, deadline)?;
    Ok(u32::from_le_bytes(word))
}

fn read_frame(stream: &mut TcpStream, deadline: Instant) -> Result<Vec<u8>, ReadFailure> {
    let len = read_u32(stream, deadline)?;
    if len > MAX_FRAME {
        return Err(ReadFailure::Other(format!(
            "a frame of {len} bytes is too long"
        )));
    }
    let mut body = vec![0u8; len as usize];
    read_exact_by(stream, &mut body, deadline)?;
    Ok(body)
}

fn read_hello(stream: &mut TcpStream, deadline: Instant) -> Result<Hello, String> {
    // A stray connection must not hold the session: give each hello a few seconds at most.
    let deadline = deadline.min(Instant::now() + Duration::from_secs(5));
    let describe = |failure: ReadFailure| match failure {
        ReadFailure::TimedOut => "no hello in time".to_string(),
        ReadFailure::Other(reason) => reason,
    };
    let mut magic = [0u8; 8];
    read_exact_by(stream, &mut magic, deadline).map_err(describe)?;
    if &magic != MAGIC {
        return Err("not a cubert rendezvous hello".into());
    }
    let world_size = read_u32(stream, deadline).map_err(describe)?;
    let rank = read_u32(stream, deadline).map_err(describe)?;
    let key = read_frame(stream, deadline).map_err(describe)?;
    Ok(Hello {
        world_size,
        rank,
        key: String::from_utf8_lossy(&key).into_owned(),
    })
}

fn write_answer(
    stream: &mut TcpStream,
    status: u8,
    body: &[u8],
    deadline: Instant,
) -> Result<(), String> {
    set_deadline(stream, deadline)?;
    let mut frame = Vec::with_capacity(5 + body.len());
    frame.push(status);
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(body);
    stream
        .write_all(&frame)
        .and_then(|()| stream.flush())
        .map_err(|error| error.to_string())
}

/// A free TCP port on 127.0.0.1 (bound then released: another process may take it in the
/// meantime, which a caller sees as a rendezvous error, never a hang).
///
/// # Errors
/// The operating system's error if no port can be bound.
pub fn free_local_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A world whose rank 0 already listens on a port the OS picked (no port is ever
    /// released and re-bound, so tests binding ports beside this one can't take it).
    fn world(size: u32, timeout: Duration) -> Vec<Rendezvous> {
        let zero = Rendezvous::listen(size, "127.0.0.1:0", timeout).unwrap();
        let address = zero.address().to_string();
        std::iter::once(zero)
            .chain(
                (1..size)
                    .map(|rank| Rendezvous::new(rank, size, address.clone(), timeout).unwrap()),
            )
            .collect()
    }

    fn run_all<T: Send + 'static>(
        ranks: Vec<Rendezvous>,
        work: impl Fn(Rendezvous) -> T + Send + Sync + Clone + 'static,
    ) -> Vec<T> {
        let threads: Vec<_> = ranks
            .into_iter()
            .map(|rank| {
                let work = work.clone();
                std::thread::spawn(move || work(rank))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    #[test]
    fn every_rank_receives_rank_zeros_payload() {
        let results = run_all(world(5, Duration::from_secs(20)), |rank| {
            let mine = vec![rank.rank() as u8; 128];
            rank.broadcast("nccl-id", &mine)
        });
        for result in results {
            assert_eq!(result.unwrap(), vec![0u8; 128]);
        }
    }

    #[test]
    fn sessions_in_a_row_reuse_the_address() {
        let results = run_all(world(3, Duration::from_secs(20)), |rank| {
            (0..4)
                .map(|session| {
                    let payload = [session as u8, 7];
                    rank.broadcast(&format!("step-{session}"), &payload)
                })
                .collect::<Result<Vec<_>, _>>()
        });
        for result in results {
            let got = result.unwrap();
            assert_eq!(got, (0..4u8).map(|s| vec![s, 7]).collect::<Vec<_>>());
        }
    }

    #[test]
    fn barrier_returns_only_after_the_last_rank_arrived() {
        let started = Instant::now();
        let results = run_all(world(3, Duration::from_secs(20)), move |rank| {
            if rank.rank() == 2 {
                std::thread::sleep(Duration::from_millis(300));
            }
            rank.barrier("sync").map(|()| started.elapsed())
        });
        for result in results {
            assert!(result.unwrap() >= Duration::from_millis(300));
        }
    }

    #[test]
    fn missing_rank_times_out_with_the_missing_ranks_named() {
        let mut ranks = world(3, Duration::from_millis(600));
        ranks.pop();
        let results = run_all(ranks, |rank| rank.barrier("partial"));
        let zero = results[0].clone().unwrap_err();
        assert!(matches!(zero, RendezvousError::Timeout { .. }), "{zero}");
        assert!(zero.to_string().contains("[2]"), "{zero}");
        // Rank 1 is told why by rank 0, or times out itself: never a hang.
        let one = results[1].clone().unwrap_err();
        assert!(one.to_string().contains("partial"), "{one}");
    }

    #[test]
    fn nobody_listening_times_out_naming_the_address() {
        // Port 1 needs root to listen on: nobody is there.
        let one = Rendezvous::new(1, 2, "127.0.0.1:1", Duration::from_millis(300)).unwrap();
        let error = one.barrier("lonely").unwrap_err();
        assert!(matches!(error, RendezvousError::Timeout { .. }), "{error}");
        assert!(error.to_string().contains(one.address()), "{error}");
    }

    #[test]
    fn rank_zero_keeps_its_port_between_sessions() {
        let zero = Rendezvous::listen(2, "127.0.0.1:0", Duration::from_secs(20)).unwrap();
        let address = zero.address().to_string();
        assert!(!address.ends_with(":0"), "{address}");
        let one = Rendezvous::new(1, 2, address.clone(), Duration::from_secs(20)).unwrap();
        let results = run_all(vec![zero.clone(), one], |rank| rank.barrier("first"));
        assert!(results.into_iter().all(|result| result.is_ok()));
        // Between sessions the port is still held: nobody else can bind it.
        assert!(TcpListener::bind(&address).is_err());
        drop(zero);
    }

    #[test]
    fn mismatched_world_size_is_refused_on_both_sides() {
        let zero = Rendezvous::listen(2, "127.0.0.1:0", Duration::from_secs(10)).unwrap();
        let one = Rendezvous::new(1, 3, zero.address(), Duration::from_secs(10)).unwrap();
        let results = run_all(vec![zero, one], |rank| rank.barrier("size"));
        for result in results {
            let error = result.unwrap_err();
            assert!(matches!(error, RendezvousError::Refused { .. }), "{error}");
            assert!(error.to_string().contains("world size 3"), "{error}");
        }
    }

    #[test]
    fn mismatched_session_keys_are_refused() {
        let ranks = world(2, Duration::from_secs(10));
        let results = run_all(ranks, |rank| {
            let key = if rank.rank() == 0 { "init" } else { "step" };
            rank.barrier(key)
        });
        for result in results {
            let error = result.unwrap_err();
            assert!(error.to_string().contains("`step`"), "{error}");
        }
    }

    #[test]
    fn rank_outside_the_world_is_invalid() {
        let error = Rendezvous::new(4, 4, "127.0.0.1:1", Duration::from_secs(1)).unwrap_err();
        assert!(matches!(error, RendezvousError::Invalid(_)), "{error}");
    }

    #[test]
    fn a_world_of_one_needs_no_network() {
        let alone = Rendezvous::new(0, 1, "unresolvable.invalid:1", Duration::ZERO).unwrap();
        assert_eq!(alone.broadcast("id", &[1, 2, 3]).unwrap(), vec![1, 2, 3]);
    }
}
