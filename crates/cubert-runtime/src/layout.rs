//! Memory layout policies: how tensors are placed in a new allocation.
//!
//! `create_tensors` and `empty_tensors` pack several tensors into one allocation. A
//! [`MemoryLayoutPolicy`] computes each tensor's offset and strides and mints the handles on
//! the caller's thread (no round trip to the device):
//!
//! - [`ContiguousLayoutPolicy`] lays every tensor out row-major, dense;
//! - [`PitchedLayoutPolicy`] pads the rows of `Optimized` tensors of rank 2 or more to the
//!   device's pitch alignment, so every row starts aligned for the widest loads.
//!
//! Tensors inside one allocation start at multiples of the device alignment. A tensor with
//! no elements, an element size of zero, or a total that overflows or exceeds the largest
//! allocation is refused with an error before anything is queued.

use crate::backtrace::BackTrace;
use crate::error::IoError;
use crate::handle::{Handle, HandleFactory};
use crate::memory::block_pool::round_up;
use crate::shape::{Shape, Strides, contiguous_strides};
use crate::stream::StreamId;

/// How a tensor should be laid out.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub enum MemoryLayoutStrategy {
    /// Dense row-major, no padding.
    Contiguous,
    /// Fastest for the device: rows may be padded (pitched).
    Optimized,
}

/// A tensor to place in a new allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLayoutDescriptor {
    /// Layout strategy.
    pub strategy: MemoryLayoutStrategy,
    /// Shape of the tensor.
    pub shape: Shape,
    /// Bytes per element.
    pub elem_size: usize,
}

impl MemoryLayoutDescriptor {
    /// A descriptor.
    pub fn new(strategy: MemoryLayoutStrategy, shape: impl Into<Shape>, elem_size: usize) -> Self {
        Self {
            strategy,
            shape: shape.into(),
            elem_size,
        }
    }

    /// An optimized-layout descriptor.
    pub fn optimized(shape: impl Into<Shape>, elem_size: usize) -> Self {
        Self::new(MemoryLayoutStrategy::Optimized, shape, elem_size)
    }

    /// A contiguous-layout descriptor.
    pub fn contiguous(shape: impl Into<Shape>, elem_size: usize) -> Self {
        Self::new(MemoryLayoutStrategy::Contiguous, shape, elem_size)
    }
}

/// A placed tensor: its handle (a view of the shared allocation) and its strides.
#[derive(Debug, Clone)]
pub struct MemoryLayout {
    /// The tensor's memory.
    pub memory: Handle,
    /// Strides in elements.
    pub strides: Strides,
}

impl MemoryLayout {
    /// A layout.
    pub fn new(memory: Handle, strides: impl Into<Strides>) -> Self {
        Self {
            memory,
            strides: strides.into(),
        }
    }
}

/// Places tensors in a new allocation.
pub trait MemoryLayoutPolicy: Send + Sync + 'static {
    /// Mints one allocation holding every descriptor's tensor. Returns the handle of the
    /// whole allocation and one layout per descriptor, in order.
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] for an empty tensor or a zero element size,
    /// [`IoError::BufferTooBig`] if the allocation can never fit on the device.
    fn apply(
        &self,
        stream: StreamId,
        descriptors: &[MemoryLayoutDescriptor],
    ) -> Result<(Handle, Vec<MemoryLayout>), IoError>;

    /// The factory minting this policy's handles.
    fn handles(&self) -> &HandleFactory;
}

struct Placement {
    offset: u64,
    size: u64,
    strides: Strides,
}

fn pack(
    handles: &HandleFactory,
    alignment: u64,
    max_allocation: u64,
    stream: StreamId,
    descriptors: &[MemoryLayoutDescriptor],
    mut layout_of: impl FnMut(&MemoryLayoutDescriptor, u64) -> Option<(u64, Strides)>,
) -> Result<(Handle, Vec<MemoryLayout>), IoError> {
    if descriptors.is_empty() {
        return Err(IoError::invalid("no tensor to allocate"));
    }
    let too_big = |size: u64| IoError::BufferTooBig {
        size,
        max: max_allocation,
        backtrace: BackTrace::capture(),
    };
    let mut placements = Vec::with_capacity(descriptors.len());
    let mut end = 0u64;
    for descriptor in descriptors {
        if descriptor.elem_size == 0 {
            return Err(IoError::invalid("element size is 0"));
        }
        let elements = descriptor
            .shape
            .num_elements()
            .ok_or_else(|| too_big(u64::MAX))? as u64;
        if elements == 0 {
            return Err(IoError::invalid(format!(
                "shape {:?} has no elements; every allocation needs at least one byte",
                descriptor.shape.as_slice()
            )));
        }
        let dense = elements
            .checked_mul(descriptor.elem_size as u64)
            .ok_or_else(|| too_big(u64::MAX))?;
        let (size, strides) = layout_of(descriptor, dense).ok_or_else(|| too_big(u64::MAX))?;
        let offset = round_up(end, alignment).ok_or_else(|| too_big(u64::MAX))?;
        end = offset.checked_add(size).ok_or_else(|| too_big(u64::MAX))?;
        placements.push(Placement {
            offset,
            size,
            strides,
        });
    }
    if end > max_allocation {
        return Err(too_big(end));
    }
    let base = handles.mint(stream, end);
    let layouts = placements
        .into_iter()
        .map(|placement| {
            base.view(placement.offset, placement.size)
                .map(|memory| MemoryLayout::new(memory, placement.strides))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((base, layouts))
}

/// Lays every tensor out dense and row-major.
#[derive(Debug, Clone)]
pub struct ContiguousLayoutPolicy {
    handles: HandleFactory,
    alignment: u64,
    max_allocation: u64,
}

impl ContiguousLayoutPolicy {
    /// A policy minting from `handles`, aligning tensors to `alignment` bytes, refusing
    /// allocations over `max_allocation` bytes.
    pub fn new(handles: HandleFactory, alignment: u64, max_allocation: u64) -> Self {
        Self {
            handles,
            alignment,
            max_allocation,
        }
    }
}

impl MemoryLayoutPolicy for ContiguousLayoutPolicy {
    fn apply(
        &self,
        stream: StreamId,
        descriptors: &[MemoryLayoutDescriptor],
    ) -> Result<(Handle, Vec<MemoryLayout>), IoError> {
        pack(
            &self.handles,
            self.alignment,
            self.max_allocation,
            stream,
            descriptors,
            |descriptor, dense| Some((dense, contiguous_strides(&descriptor.shape))),
        )
    }

    fn handles(&self) -> &HandleFactory {
        &self.handles
    }
}

/// Pads the rows of optimized tensors to `pitch_alignment` bytes.
#[derive(Debug, Clone)]
pub struct PitchedLayoutPolicy {
    handles: HandleFactory,
    alignment: u64,
    pitch_alignment: u64,
    max_allocation: u64,
}

impl PitchedLayoutPolicy {
    /// A policy minting from `handles`, aligning tensors to `alignment` and rows of optimized
    /// tensors to `pitch_alignment` bytes.
    pub fn new(
        handles: HandleFactory,
        alignment: u64,
        pitch_alignment: u64,
        max_allocation: u64,
    ) -> Self {
        Self {
            handles,
            alignment,
            pitch_alignment,
            max_allocation,
        }
    }
}

/// Size and strides of `shape` with rows padded to `pitch_alignment` bytes; dense when the
/// tensor has fewer than two dimensions or the pitch isn't a whole number of elements.
pub fn pitched_layout(
    shape: &[usize],
    elem_size: usize,
    dense: u64,
    pitch_alignment: u64,
) -> Option<(u64, Strides)> {
    let rank = shape.len();
    if rank < 2 {
        return Some((dense, contiguous_strides(shape)));
    }
    let row_bytes = (shape[rank - 1] as u64).checked_mul(elem_size as u64)?;
    let pitch = round_up(row_bytes, pitch_alignment)?;
    if !pitch.is_multiple_of(elem_size as u64) {
        return Some((dense, contiguous_strides(shape)));
    }
    let rows: u64 = shape[..rank - 1]
        .iter()
        .try_fold(1u64, |acc, &dim| acc.checked_mul(dim as u64))?;
    let size = rows.checked_mul(pitch)?;
    let mut strides = vec![1usize; rank];
    strides[rank - 2] = (pitch / elem_size as u64) as usize;
    for axis in (0..rank - 2).rev() {
        strides[axis] = strides[axis + 1].checked_mul(shape[axis + 1])?;
    }
    Some((size, Strides::new(strides)))
}

impl MemoryLayoutPolicy for PitchedLayoutPolicy {
    fn apply(
        &self,
        stream: StreamId,
        descriptors: &[MemoryLayoutDescriptor],
    ) -> Result<(Handle, Vec<MemoryLayout>), IoError> {
        let pitch_alignment = self.pitch_alignment;
        pack(
            &self.handles,
            self.alignment,
            self.max_allocation,
            stream,
            descriptors,
            |descriptor, dense| match descriptor.strategy {
                MemoryLayoutStrategy::Contiguous => {
                    Some((dense, contiguous_strides(&descriptor.shape)))
                }
                MemoryLayoutStrategy::Optimized => pitched_layout(
                    &descriptor.shape,
                    descriptor.elem_size,
                    dense,
                    pitch_alignment,
                ),
            },
        )
    }

    fn handles(&self) -> &HandleFactory {
        &self.handles
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceId;
    use crate::handle::ReleaseQueue;

    fn factory() -> HandleFactory {
        HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new())
    }

    #[test]
    fn contiguous_policy_packs_tensors_at_aligned_offsets() {
        let policy = ContiguousLayoutPolicy::new(factory(), 256, 1 << 30);
        let (base, layouts) = policy
            .apply(
                StreamId::new(0),
                &[
                    MemoryLayoutDescriptor::contiguous([3, 5], 4),
                    MemoryLayoutDescriptor::contiguous([7], 2),
                ],
            )
            .unwrap();
        assert_eq!(layouts[0].strides.as_slice(), &[5, 1]);
        assert_eq!(layouts[0].memory.offset_start(), 0);
        assert_eq!(layouts[0].memory.size(), 60);
        assert_eq!(layouts[1].memory.offset_start(), 256);
        assert_eq!(base.size(), 256 + 14);
        assert_eq!(layouts[1].memory.id(), base.id());
    }

    #[test]
    fn pitched_policy_pads_rows_of_optimized_tensors() {
        let policy = PitchedLayoutPolicy::new(factory(), 256, 128, 1 << 30);
        let (_, layouts) = policy
            .apply(
                StreamId::new(0),
                &[MemoryLayoutDescriptor::optimized([2, 3, 5], 4)],
            )
            .unwrap();
        // 5 floats = 20 bytes, padded to 128 bytes = 32 floats per row.
        assert_eq!(layouts[0].strides.as_slice(), &[96, 32, 1]);
        assert_eq!(layouts[0].memory.size(), 6 * 128);
    }

    #[test]
    fn empty_tensors_and_overflow_are_refused() {
        let policy = ContiguousLayoutPolicy::new(factory(), 256, 1 << 20);
        let empty = policy.apply(
            StreamId::new(0),
            &[MemoryLayoutDescriptor::contiguous([4, 0], 4)],
        );
        assert!(matches!(empty, Err(IoError::InvalidArgument { .. })));
        let huge = policy.apply(
            StreamId::new(0),
            &[MemoryLayoutDescriptor::contiguous([usize::MAX, 4], 4)],
        );
        assert!(matches!(huge, Err(IoError::BufferTooBig { .. })));
        let too_big = policy.apply(
            StreamId::new(0),
            &[MemoryLayoutDescriptor::contiguous([1 << 20], 4)],
        );
        assert!(matches!(too_big, Err(IoError::BufferTooBig { .. })));
    }
}
