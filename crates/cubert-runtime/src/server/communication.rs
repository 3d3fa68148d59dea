//! Communication between servers: peer copies and collectives.
//!
//! Two families of operations live here.
//!
//! - **Peer copies** (`to_client`): the destination pulls the bytes straight from the source
//!   device. It is a three-step handshake, each step on the server that owns the memory it
//!   touches, so no server ever reaches into another server's state:
//!   1. the source's [`ServerCommunication::peer_source`] checks the source memory, orders
//!      it after earlier work on its stream, and hands out a [`ServerCommunication::PeerSource`]
//!      (for CUDA: address, context and an event recorded on the source stream);
//!   2. the destination's [`ServerCommunication::peer_pull`] makes its stream wait for that
//!      point, queues the copy into the new allocation on the destination stream (so the
//!      allocation and the copy are ordered like any upload) and returns a
//!      [`ServerCommunication::PeerReceipt`] (an event recorded after the copy);
//!   3. the source's [`ServerCommunication::peer_release`] makes the source stream wait for
//!      the receipt, so the source memory is neither rewritten nor reused before the copy
//!      has read it.
//!
//!   [`ServerCommunication::peer_copy_supported`] says, without a round trip, whether two
//!   devices can do this; otherwise `to_client` goes through the host.
//! - **Collectives** (`comm_init`, `all_reduce`, `all_gather`, `reduce_scatter`,
//!   `broadcast`, `send`, `recv`, `sync_collective`) among a
//!   set of devices, named by their [`DeviceId`]s ([`DeviceSet`] sorts them: a device's rank is
//!   its position). Devices of one process are matched by `local_group`; a set of
//!   processes (one device each, possibly on several hosts) is a [`ProcessGroup`] whose
//!   members have the ids [`ProcessGroup::members`] returns.
//!
//! Every default returns [`ServerError::Unsupported`], never panics, so a client can always
//! ask.

use crate::copy::CopyDescriptor;
use crate::device::DeviceId;
use crate::distributed::ProcessGroup;
use crate::elem::ElemType;
use crate::error::{IoError, ServerError};
use crate::handle::{Binding, Handle};
use crate::server::{ComputeServer, ServerUtilities};
use crate::stream::StreamId;
use serde::{Deserialize, Serialize};

/// Identifies a communicator: the same for any ordering of the same set of devices.
#[derive(Clone, Copy, Debug, Hash, Eq, PartialEq, Serialize, Deserialize)]
pub struct CommunicationId {
    /// The id.
    pub id: u64,
}

impl From<Vec<DeviceId>> for CommunicationId {
    fn from(devices: Vec<DeviceId>) -> Self {
        DeviceSet::new(devices).id()
    }
}

impl CommunicationId {
    /// The id of the set of `devices` (any order, duplicates ignored); allocates nothing
    /// when `devices` is already sorted without duplicates (the usual case).
    pub fn of(devices: &[DeviceId]) -> Self {
        if devices.windows(2).all(|pair| pair[0] < pair[1]) {
            return Self {
                id: hash_devices(devices),
            };
        }
        DeviceSet::new(devices.to_vec()).id()
    }
}

/// FNV-1a over each device's type and index (little-endian), without a buffer.
fn hash_devices(devices: &[DeviceId]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    for device in devices {
        hasher.write(&device.type_id.to_le_bytes());
        hasher.write(&device.index_id.to_le_bytes());
    }
    hasher.finish()
}

/// A set of devices taking part in collectives: sorted, without duplicates. A device's
/// rank is its position in the set.
#[derive(Clone, Debug, Hash, Eq, PartialEq)]
pub struct DeviceSet {
    devices: Vec<DeviceId>,
}

impl DeviceSet {
    /// The set of `devices` (any order, duplicates ignored).
    pub fn new(mut devices: Vec<DeviceId>) -> Self {
        devices.sort();
        devices.dedup();
        Self { devices }
    }

    /// The communicator id of this set.
    pub fn id(&self) -> CommunicationId {
        CommunicationId {
            id: hash_devices(&self.devices),
        }
    }

    /// The devices, in rank order.
    pub fn devices(&self) -> &[DeviceId] {
        &self.devices
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// The rank of `device`, if it belongs to the set.
    pub fn rank_of(&self, device: DeviceId) -> Option<usize> {
        self.devices.binary_search(&device).ok()
    }

    /// Whether the set names the members of a process group (see [`ProcessGroup::members`]).
    pub fn is_process_group(&self) -> bool {
        self.devices
            .iter()
            .all(|device| device.type_id == crate::distributed::PROCESS_GROUP_DEVICE_TYPE)
    }

    /// The rank of `device`, or an error saying that it isn't in the set.
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] if `device` is not in the set.
    pub fn require_rank(&self, device: DeviceId, operation: &str) -> Result<usize, ServerError> {
        self.rank_of(device).ok_or_else(|| {
            IoError::invalid(format!(
                "{operation}: {device:?} is not one of the devices {:?}; every device of the \
                 set makes the call with the same set",
                self.devices
            ))
            .into()
        })
    }
}

/// How `all_reduce` combines values.
///
/// For floating-point types `Mean` is the sum divided by the number of devices. For integer
/// types it is the sum in the element type (which wraps on overflow, exactly as `Sum` does)
/// divided by the number of devices, rounded toward zero: NCCL's `ncclAvg`. Widen the data
/// first if the sum can overflow.
#[derive(Clone, Copy, Debug, Hash, Eq, PartialEq, Serialize, Deserialize)]
pub enum ReduceOperation {
    /// Sum.
    Sum,
    /// Arithmetic mean (see the type's docs for integers).
    Mean,
}

/// The element types collectives accept: those NCCL reduces. Others (`i16`, `u16`,
/// `bool`, and the 8-bit floats, which have no arithmetic) are refused with an error on
/// every backend, so code tested on one backend behaves the same on the others.
pub const COLLECTIVE_TYPES: [ElemType; 10] = [
    ElemType::F16,
    ElemType::BF16,
    ElemType::F32,
    ElemType::F64,
    ElemType::I8,
    ElemType::I32,
    ElemType::I64,
    ElemType::U8,
    ElemType::U32,
    ElemType::U64,
];

/// Checks that collectives support `dtype`.
///
/// # Errors
/// [`ServerError::Unsupported`] naming the operation, the type and the backend.
pub fn check_collective_type(
    dtype: ElemType,
    operation: &str,
    backend: &str,
) -> Result<(), ServerError> {
    if COLLECTIVE_TYPES.contains(&dtype) {
        Ok(())
    } else {
        Err(ServerError::unsupported(
            format!(
                "{operation} of {dtype} (collectives take f16, bf16, f32, f64, i8, i32, i64, u8, \
                 u32 and u64, the types NCCL reduces)"
            ),
            backend,
        ))
    }
}

/// Checks the sizes of an all-gather's or reduce-scatter's buffers: `whole` is `part` bytes
/// × the number of devices in `device_ids` (counted as a set), in whole `dtype` elements.
/// Returns the number of devices.
///
/// # Errors
/// [`IoError::InvalidArgument`] naming the operation, the device count and both sizes.
pub fn check_part_sizes(
    operation: &str,
    part: u64,
    whole: u64,
    dtype: ElemType,
    device_ids: &[DeviceId],
) -> Result<usize, ServerError> {
    let devices = DeviceSet::new(device_ids.to_vec()).len();
    let fits = devices > 0 && part.checked_mul(devices as u64) == Some(whole);
    if !fits || !part.is_multiple_of(dtype.size() as u64) {
        return Err(IoError::invalid(format!(
            "{operation} over {devices} devices needs one buffer of {devices} × the other's \
             bytes, in whole {dtype} elements: got {part} and {whole} bytes"
        ))
        .into());
    }
    Ok(devices)
}

/// Checks that `part` and `whole`, the two buffers of a collective call, are either
/// separate memory or exactly in place: `part` at byte `in_place_offset` of `whole`. NCCL
/// leaves any other overlap undefined, so every backend refuses it the same way. For
/// `all_reduce` the two have one size and the offset is 0; for `all_gather` (`part` is the
/// input) and `reduce_scatter` (`part` is the output) it is the rank × the part's size.
///
/// # Errors
/// [`IoError::InvalidArgument`] naming the operation and both ranges.
pub fn check_in_place_or_disjoint(
    operation: &str,
    part: &Binding,
    whole: &Binding,
    in_place_offset: u64,
) -> Result<(), ServerError> {
    if part.id() != whole.id() {
        return Ok(());
    }
    let (part_start, whole_start) = (part.offset(), whole.offset());
    let (part_end, whole_end) = (part_start + part.size(), whole_start + whole.size());
    let disjoint = part_end <= whole_start || whole_end <= part_start;
    if disjoint || part_start == whole_start + in_place_offset {
        return Ok(());
    }
    Err(IoError::invalid(format!(
        "{operation}: its buffers overlap (bytes {part_start}..{part_end} and \
         {whole_start}..{whole_end} of one allocation); they must be separate, or in place \
         with the smaller one at byte {in_place_offset} of the larger"
    ))
    .into())
}

/// Direct communication between servers. See the module docs. Every default returns
/// [`ServerError::Unsupported`] (or says "no direct path").
pub trait ServerCommunication {
    /// Whether this backend implements collectives (`comm_init`, `all_reduce`,
    /// `all_gather`, `reduce_scatter`, `broadcast`, `send`, `recv`, `sync_collective`).
    const SERVER_COMM_ENABLED: bool;

    /// What the source of a peer copy hands the destination (step 1).
    type PeerSource: Send + 'static;

    /// What the destination of a peer copy hands back to the source (step 2).
    type PeerReceipt: Send + 'static;

    /// Whether `to_client` can copy directly from the device of `src` to the device of `dst`
    /// (answered from the utilities alone, without a round trip). `false` makes `to_client`
    /// go through the host.
    fn peer_copy_supported(_src: &ServerUtilities<Self>, _dst: &ServerUtilities<Self>) -> bool
    where
        Self: ComputeServer + Sized,
    {
        false
    }

    /// Step 1 of a peer copy, on the source: checks `descriptor`, orders its memory after the
    /// work queued before on `stream`, makes it readable by device `reader` (the
    /// destination: a backend whose memory is granted per device grants it here), and
    /// returns what the destination needs to pull it. `Ok(None)` means this copy can't be
    /// done directly (an unusual layout): the caller goes through the host instead.
    ///
    /// # Errors
    /// The errors queued on `stream` (as a read returns them), [`IoError::NotFound`] for
    /// memory that isn't bound here, or the backend's refusal to let `reader` read it.
    fn peer_source(
        &mut self,
        _descriptor: CopyDescriptor,
        _stream: StreamId,
        _reader: DeviceId,
    ) -> Result<Option<Self::PeerSource>, ServerError> {
        Ok(None)
    }

    /// Step 2 of a peer copy, on the destination: queues on `stream` the copy of `source`
    /// into `target` (a whole allocation initialized on `stream` just before, as large as the
    /// dense source), after the point `source` was taken at.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default; the backend's error otherwise.
    fn peer_pull(
        &mut self,
        _source: Self::PeerSource,
        _target: Binding,
        _stream: StreamId,
    ) -> Result<Self::PeerReceipt, ServerError> {
        Err(ServerError::unsupported("peer copies", "this"))
    }

    /// Step 3 of a peer copy, on the source: later work on `stream` waits until the copy of
    /// `receipt` has read the source memory. Failures are queued on `stream`.
    fn peer_release(&mut self, _receipt: Self::PeerReceipt, _stream: StreamId) {}

    /// Makes later work on `stream` wait (on the device) for every collective this server
    /// took part in, and reports the errors of those that failed.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default; the first collective error otherwise.
    fn sync_collective(&mut self, _stream: StreamId) -> Result<(), ServerError> {
        Err(ServerError::unsupported("sync_collective", "this"))
    }

    /// Sets up communication among `device_ids` (devices of this process, or the members of
    /// the process group this server joined). Idempotent.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn comm_init(&mut self, _device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        Err(ServerError::unsupported("comm_init", "this"))
    }

    /// Joins `group` (one device per process, the processes meeting at the group's
    /// rendezvous address): blocks until every rank has joined or the group's timeout.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default; a rendezvous or backend error otherwise.
    fn comm_init_process_group(&mut self, _group: ProcessGroup) -> Result<(), ServerError> {
        Err(ServerError::unsupported("process groups", "this"))
    }

    /// Reduces `src` over every device of `device_ids` into `dst` on each of them, ordered
    /// after earlier work on `stream` and before later work there.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn all_reduce(
        &mut self,
        _src: Binding,
        _dst: Binding,
        _dtype: ElemType,
        _stream: StreamId,
        _op: ReduceOperation,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("all_reduce", "this"))
    }

    /// Gathers `src` from every device of `device_ids` into `dst` on each of them: rank
    /// `r`'s `src` lands at byte `r × src.size()` of `dst` (which holds `src.size()` × the
    /// number of devices). Ordered like [`Self::all_reduce`].
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn all_gather(
        &mut self,
        _src: Binding,
        _dst: Binding,
        _dtype: ElemType,
        _stream: StreamId,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("all_gather", "this"))
    }

    /// Reduces `src` (`dst.size()` × the number of devices) over every device of
    /// `device_ids` and leaves part `r` of the result in `dst` of rank `r`. Ordered like
    /// [`Self::all_reduce`].
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn reduce_scatter(
        &mut self,
        _src: Binding,
        _dst: Binding,
        _dtype: ElemType,
        _stream: StreamId,
        _op: ReduceOperation,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("reduce_scatter", "this"))
    }

    /// Copies `buffer` of device `root` into `buffer` of every other device of
    /// `device_ids` (in place). Ordered like [`Self::all_reduce`].
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn broadcast(
        &mut self,
        _buffer: Binding,
        _dtype: ElemType,
        _stream: StreamId,
        _root: DeviceId,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("broadcast", "this"))
    }

    /// Sends the described (contiguous) data to `device_id_dst`, which makes the matching
    /// `recv`; both use the communicator of `device_ids`.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn send(
        &mut self,
        _desc: CopyDescriptor,
        _dtype: ElemType,
        _stream: StreamId,
        _device_id_dst: DeviceId,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("send", "this"))
    }

    /// Receives from `device_id_src` into `handle` (as many bytes as it holds).
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn recv(
        &mut self,
        _handle: Handle,
        _dtype: ElemType,
        _stream: StreamId,
        _device_id_src: DeviceId,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("recv", "this"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn communication_id_ignores_device_order() {
        let a = DeviceId::new(0, 0);
        let b = DeviceId::new(0, 1);
        assert_eq!(
            CommunicationId::from(vec![a, b]),
            CommunicationId::from(vec![b, a])
        );
        assert_ne!(
            CommunicationId::from(vec![a, b]),
            CommunicationId::from(vec![a])
        );
    }

    #[test]
    fn communication_id_hashes_like_fnv1a_of_the_device_bytes() {
        let devices = [DeviceId::new(1, 0), DeviceId::new(1, 7)];
        let mut bytes = Vec::new();
        for device in devices {
            bytes.extend_from_slice(&device.type_id.to_le_bytes());
            bytes.extend_from_slice(&device.index_id.to_le_bytes());
        }
        let expected = crate::properties::fnv1a(&bytes);
        assert_eq!(CommunicationId::of(&devices).id, expected);
        assert_eq!(CommunicationId::of(&[devices[1], devices[0]]).id, expected);
    }

    #[test]
    fn ranks_follow_device_order_and_duplicates_count_once() {
        let set = DeviceSet::new(vec![
            DeviceId::new(1, 3),
            DeviceId::new(1, 0),
            DeviceId::new(1, 3),
        ]);
        assert_eq!(set.len(), 2);
        assert_eq!(set.rank_of(DeviceId::new(1, 0)), Some(0));
        assert_eq!(set.rank_of(DeviceId::new(1, 3)), Some(1));
        assert_eq!(set.rank_of(DeviceId::new(1, 1)), None);
        assert!(set.require_rank(DeviceId::new(1, 1), "all_reduce").is_err());
    }

    #[test]
    fn overlapping_buffers_are_refused_unless_exactly_in_place() {
        use crate::handle::{HandleFactory, ReleaseQueue};
        let factory = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new());
        let whole = factory.mint(StreamId::new(0), 256);
        let other = factory.mint(StreamId::new(0), 64);
        let part = |offset| whole.view(offset, 64).unwrap().binding();
        let whole_binding = whole.to_binding();
        // Separate allocations, and disjoint views of one.
        assert!(
            check_in_place_or_disjoint("all_gather", &other.binding(), &whole_binding, 0).is_ok()
        );
        let (head, tail) = (whole.view(0, 128).unwrap(), whole.view(128, 128).unwrap());
        assert!(
            check_in_place_or_disjoint("all_reduce", &head.binding(), &tail.binding(), 0).is_ok()
        );
        // In place at rank 2's part, and not.
        assert!(check_in_place_or_disjoint("all_gather", &part(128), &whole_binding, 128).is_ok());
        let error =
            check_in_place_or_disjoint("all_gather", &part(64), &whole_binding, 128).unwrap_err();
        assert!(
            matches!(error, ServerError::Io(IoError::InvalidArgument { .. })),
            "{error}"
        );
        assert!(error.to_string().contains("overlap"), "{error}");
        // An all-reduce of two views shifted by half.
        let error = check_in_place_or_disjoint("all_reduce", &part(0), &part(32), 0).unwrap_err();
        assert!(error.to_string().contains("all_reduce"), "{error}");
    }

    #[test]
    fn collective_types_are_those_nccl_reduces() {
        for dtype in ElemType::ALL {
            let accepted = check_collective_type(dtype, "all_reduce", "cpu").is_ok();
            let expected = !matches!(dtype, ElemType::I16 | ElemType::U16 | ElemType::Bool)
                && dtype.has_arithmetic();
            assert_eq!(accepted, expected, "{dtype}");
        }
        let error = check_collective_type(ElemType::I16, "all_reduce", "cuda").unwrap_err();
        assert!(matches!(error, ServerError::Unsupported { .. }), "{error}");
        assert!(error.to_string().contains("i16"));
    }
}
