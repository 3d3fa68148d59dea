//! NCCL communicators, one set per device set, for the whole process.
//!
//! - **Devices of this process**: the first server of the set to need them creates every
//!   rank's communicator at once with `ncclCommInitAll` (NCCL starts one thread per rank
//!   internally), so no server waits for another to join: it works from a runner thread and
//!   from an inline handle's single thread alike. Rank `r` is GPU `index` of the `r`-th
//!   device id of the sorted set.
//! - **A process group** (one device per process): rank 0 creates the NCCL unique id and
//!   hands it to every rank through the TCP rendezvous; each process then creates its own
//!   rank with `ncclCommInitRank` (which returns once every rank has joined).
//!
//! Communicators live as long as the process: servers come and go (tests create many), the
//! set of devices doesn't. Each set also owns the [`LocalGroup`] where its devices' calls
//! meet.

use super::launch::CudaCall;
use crate::device::CUDA_DEVICE_TYPE;
use crate::driver;
use crate::nccl;
use cubert_runtime::distributed::ProcessGroup;
use cubert_runtime::server::DeviceSet;
use cubert_runtime::server::local_group::LocalGroup;
use cubert_runtime::{DeviceId, ServerError};
use cudarc::nccl::sys::ncclComm_t;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// One NCCL communicator.
#[derive(Clone, Copy, Debug)]
pub struct Comm(pub ncclComm_t);

// SAFETY: a communicator may be used from any thread as long as one thread uses it at a
// time. A rank's communicator is used to launch that rank's calls only, one call at a time:
// by its own server's thread, or by the thread completing an instance under the group's
// lock while the rank's server waits for (or holds) that call (see `launch`).
unsafe impl Send for Comm {}
// SAFETY: as above.
unsafe impl Sync for Comm {}

/// The communicators of one device set, and where its calls meet.
pub struct Communicators {
    /// One per rank; `None` for the ranks of other processes.
    comms: Vec<Option<Comm>>,
    /// The calls of this process's ranks.
    pub group: Arc<LocalGroup<CudaCall>>,
}

impl Communicators {
    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.comms.len()
    }

    /// The communicator of `rank`, if it is a rank of this process.
    pub fn comm(&self, rank: usize) -> Option<Comm> {
        self.comms.get(rank).copied().flatten()
    }
}

type Registry = Mutex<HashMap<u64, Arc<Communicators>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The communicators of `set`, a set of CUDA devices of this process, created on first use.
///
/// # Errors
/// A device that isn't a CUDA device or a GPU of this machine, two devices on one GPU, no
/// NCCL, or NCCL's error.
pub fn local(set: &DeviceSet) -> Result<Arc<Communicators>, ServerError> {
    let mut communicators = registry().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = communicators.get(&set.id().id) {
        return Ok(existing.clone());
    }
    nccl::require()?;
    let gpus = crate::device::device_count();
    let ordinals: Vec<i32> = set
        .devices()
        .iter()
        .map(|device| ordinal_of(*device, gpus))
        .collect::<Result<_, _>>()?;
    i32::try_from(ordinals.len())
        .map_err(|_| ServerError::generic("too many devices for one communicator"))?;
    // NCCL binds each device's primary context itself.
    let comms: Vec<ncclComm_t> = driver::nccl::comm_init_all(&ordinals)?;
    let entry = Arc::new(Communicators {
        comms: comms.into_iter().map(|comm| Some(Comm(comm))).collect(),
        group: Arc::new(LocalGroup::new(vec![true; set.len()])),
    });
    communicators.insert(set.id().id, entry.clone());
    Ok(entry)
}

/// The GPU ordinal of `device`: collectives run device `i` on GPU `i`.
fn ordinal_of(device: DeviceId, gpus: u32) -> Result<i32, ServerError> {
    if device.type_id != CUDA_DEVICE_TYPE {
        return Err(ServerError::generic(format!(
            "{device:?} is not a CUDA device: a collective's devices are all of one backend"
        )));
    }
    if device.index_id >= gpus {
        return Err(ServerError::generic(format!(
            "{device:?}: collectives run device i on GPU i, and this machine has {gpus} GPU(s)"
        )));
    }
    i32::try_from(device.index_id).map_err(|_| ServerError::generic("device index too large"))
}

/// This process's communicator in `group`, its rank running on the GPU whose context is
/// current on the calling thread, created on first use: rank 0 makes the
/// NCCL id, the rendezvous carries it, `ncclCommInitRank` joins.
///
/// # Errors
/// A rendezvous error naming what was missing, no NCCL, or NCCL's error.
pub fn process(group: &ProcessGroup) -> Result<Arc<Communicators>, ServerError> {
    let set = DeviceSet::new(group.members());
    let mut communicators = registry().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = communicators.get(&set.id().id) {
        return Ok(existing.clone());
    }
    nccl::require()?;
    let rendezvous = group.rendezvous()?;
    let key = format!("cubert-nccl-{}", group.world_size());
    let mine = if group.rank() == 0 {
        nccl::unique_id()?
    } else {
        Vec::new()
    };
    let bytes = rendezvous
        .broadcast(&key, &mine)
        .map_err(|error| ServerError::generic(error.to_string()))?;
    let id = nccl::unique_id_from(&bytes)?;
    let world = i32::try_from(group.world_size())
        .map_err(|_| ServerError::generic("world size too large"))?;
    let rank = i32::try_from(group.rank()).map_err(|_| ServerError::generic("rank too large"))?;
    // The id came from rank 0's ncclGetUniqueId through the rendezvous; the caller made the
    // rank's device context current.
    let comm = driver::nccl::comm_init_rank(world, id, rank)?;
    let ranks = group.world_size() as usize;
    let mut comms = vec![None; ranks];
    let mut local = vec![false; ranks];
    let me = group.rank() as usize;
    comms[me] = Some(Comm(comm));
    local[me] = true;
    let entry = Arc::new(Communicators {
        comms,
        group: Arc::new(LocalGroup::new(local)),
    });
    communicators.insert(set.id().id, entry.clone());
    Ok(entry)
}
