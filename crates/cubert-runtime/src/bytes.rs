//! Host byte buffers that know how they were allocated.
//!
//! [`Bytes`] is what the client uploads and what reads return. Its [`AllocationProperty`]
//! tells a backend how to move it: `Pinned` memory can be DMA'd directly, `Native` (heap)
//! and `File` (memory-mapped) bytes go through pinned staging on backends that have it.
//!
//! The storage behind a `Bytes` is an [`AllocationController`]: a heap `Vec` of any plain
//! element type (so `Vec<f32>` converts without a copy), a private copy-on-write memory map
//! of a file, or a backend's buffer (pinned host memory) that is returned to its pool on drop.

use crate::backtrace::BackTrace;
use crate::error::IoError;
use bytemuck::Pod;
use std::fmt;
use std::fs::File;
use std::ops::{Deref, DerefMut};
use std::path::Path;

/// How the memory behind a [`Bytes`] was allocated.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AllocationProperty {
    /// Regular (pageable) heap memory.
    Native,
    /// Page-locked host memory a device can DMA from directly.
    Pinned,
    /// A memory map of a file.
    File,
    /// Anything else.
    Other,
}

/// Owns the memory behind a [`Bytes`].
///
/// Implementations must return the same memory region from every call of `memory` and
/// `memory_mut` for as long as they live.
pub trait AllocationController: Send + Sync {
    /// How the memory was allocated.
    fn property(&self) -> AllocationProperty;
    /// The whole region.
    fn memory(&self) -> &[u8];
    /// The whole region, writable.
    fn memory_mut(&mut self) -> &mut [u8];
}

struct VecController<T: Pod + Send + Sync> {
    data: Vec<T>,
}

impl<T: Pod + Send + Sync> AllocationController for VecController<T> {
    fn property(&self) -> AllocationProperty {
        AllocationProperty::Native
    }
    fn memory(&self) -> &[u8] {
        bytemuck::cast_slice(&self.data)
    }
    fn memory_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.data)
    }
}

struct MmapController {
    map: memmap2::MmapMut,
}

impl AllocationController for MmapController {
    fn property(&self) -> AllocationProperty {
        AllocationProperty::File
    }
    fn memory(&self) -> &[u8] {
        &self.map
    }
    fn memory_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// An owned, contiguous host buffer with a known [`AllocationProperty`]: what
/// [`ComputeClient::create`](crate::ComputeClient::create) uploads and what reads return.
/// It dereferences to `[u8]`.
///
/// ```
/// use cubert_runtime::Bytes;
///
/// let bytes = Bytes::from_elems(vec![1.0f32, -2.0]); // takes the vector, no copy
/// assert_eq!(bytes.len(), 8);
/// assert_eq!(&bytes[..4], &1.0f32.to_ne_bytes()); // the bytes in native order
/// assert_eq!(bytes.to_elems::<f32>(), vec![1.0, -2.0]);
/// assert_eq!(bytes.as_elems::<f32>(), Some(&[1.0f32, -2.0][..]));
/// ```
pub struct Bytes {
    controller: Box<dyn AllocationController>,
    len: usize,
}

impl Bytes {
    /// Wraps a heap vector of bytes (no copy).
    pub fn from_bytes_vec(data: Vec<u8>) -> Self {
        Self::from_elems(data)
    }

    /// Wraps a heap vector of plain elements (no copy).
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// let bytes = Bytes::from_elems(vec![1.0f32; 4]);
    /// assert_eq!(bytes.len(), 16);
    /// assert_eq!(Bytes::from_elems(vec![1u16, 2, 3]).len(), 6);
    /// ```
    pub fn from_elems<T: Pod + Send + Sync>(data: Vec<T>) -> Self {
        let len = std::mem::size_of_val(data.as_slice());
        Self {
            controller: Box::new(VecController { data }),
            len,
        }
    }

    /// Copies a slice of plain elements into a new heap buffer.
    pub fn from_slice<T: Pod + Send + Sync>(data: &[T]) -> Self {
        Self::from_elems(data.to_vec())
    }

    /// Zero-filled heap buffer of `len` bytes.
    ///
    /// Like `vec![0; len]`, a host allocation that fails aborts the process: use
    /// [`Bytes::try_zeroed`] for any size a caller chose (cubert itself does).
    pub fn zeroed(len: usize) -> Self {
        // u64 storage gives 8-byte alignment, so the bytes can be viewed as any common element.
        let words = len.div_ceil(8);
        Self {
            controller: Box::new(VecController {
                data: vec![0u64; words],
            }),
            len,
        }
    }

    /// Like [`Bytes::zeroed`], but an allocation the host can't make is an error instead of
    /// aborting the process: for buffers whose size comes from a caller (a broadcast read
    /// of a huge shape).
    ///
    /// A request larger than the host's physical memory is refused up front: with memory
    /// overcommit the reservation itself could succeed, and filling it would get the process
    /// killed instead.
    ///
    /// # Errors
    /// [`IoError::OutOfMemory`] if the host memory can't be reserved.
    pub fn try_zeroed(len: usize) -> Result<Self, IoError> {
        if let Some(physical) = physical_memory()
            && len as u64 > physical
        {
            return Err(IoError::OutOfMemory {
                requested: len as u64,
                reserved: 0,
                free: physical,
                reason: format!(
                    "{len} bytes of host memory is more than the host's {physical} bytes of \
                     physical memory"
                ),
                backtrace: BackTrace::capture(),
            });
        }
        let words = len.div_ceil(8);
        let mut data: Vec<u64> = Vec::new();
        data.try_reserve_exact(words)
            .map_err(|error| IoError::OutOfMemory {
                requested: len as u64,
                reserved: 0,
                free: 0,
                reason: format!("host memory for {len} bytes can't be reserved: {error}"),
                backtrace: BackTrace::capture(),
            })?;
        data.resize(words, 0);
        Ok(Self {
            controller: Box::new(VecController { data }),
            len,
        })
    }

    /// Maps `len` bytes of the file at `path`, starting at `offset`, as a private
    /// copy-on-write mapping: the file is read lazily and never modified.
    ///
    /// # Errors
    /// Returns the I/O error if the file can't be opened or mapped, or if the range is
    /// outside the file.
    pub fn from_file(path: impl AsRef<Path>, offset: u64, len: usize) -> std::io::Result<Self> {
        let file = File::open(path.as_ref())?;
        let file_len = file.metadata()?.len();
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > file_len) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "range {offset}..{offset}+{len} is outside the file {} of {file_len} bytes",
                    path.as_ref().display()
                ),
            ));
        }
        if len == 0 {
            return Ok(Self::zeroed(0));
        }
        // SAFETY: the mapping is private (copy-on-write), so writes through it never reach
        // the file; another process truncating the file while mapped would fault, which is
        // the documented hazard of every file mapping.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(len)
                .map_copy(&file)?
        };
        Ok(Self {
            controller: Box::new(MmapController { map }),
            len,
        })
    }

    /// Wraps memory owned by a backend (pinned staging, for example). `len` bytes from the
    /// start of the controller's region are visible.
    ///
    /// # Errors
    /// Returns the controller back if `len` exceeds its region.
    pub fn from_controller(
        controller: Box<dyn AllocationController>,
        len: usize,
    ) -> Result<Self, Box<dyn AllocationController>> {
        if len > controller.memory().len() {
            return Err(controller);
        }
        Ok(Self { controller, len })
    }

    /// How the memory was allocated.
    pub fn property(&self) -> AllocationProperty {
        self.controller.property()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies these bytes into `other`, which must have the same length.
    ///
    /// # Errors
    /// Returns an error message if the lengths differ; nothing is copied then.
    pub fn copy_into(&self, other: &mut Bytes) -> Result<(), String> {
        if self.len != other.len {
            return Err(format!(
                "can't copy {} bytes into a buffer of {} bytes",
                self.len, other.len
            ));
        }
        other.copy_from_slice(self);
        Ok(())
    }

    /// The bytes viewed as elements of `T`, if the length and alignment allow it.
    pub fn as_elems<T: Pod>(&self) -> Option<&[T]> {
        bytemuck::try_cast_slice(self).ok()
    }

    /// Copies the bytes into a vector of `T` (any alignment). Trailing bytes that don't make a
    /// whole element are ignored.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// let bytes = Bytes::from_elems(vec![7u32, 8]);
    /// assert_eq!(bytes.to_elems::<u32>(), vec![7, 8]);
    /// assert_eq!(bytes.to_elems::<u64>().len(), 1); // 8 bytes make one u64
    /// assert_eq!(Bytes::from_elems(vec![0u8; 6]).to_elems::<u32>().len(), 1); // 2 bytes left over
    /// ```
    pub fn to_elems<T: Pod>(&self) -> Vec<T> {
        if let Some(elems) = self.as_elems::<T>() {
            return elems.to_vec();
        }
        let size = std::mem::size_of::<T>().max(1);
        self.chunks_exact(size)
            .map(bytemuck::pod_read_unaligned)
            .collect()
    }

    /// Copies the bytes into a new `Vec<u8>`.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// assert_eq!(Bytes::from_bytes_vec(vec![1, 2, 3]).to_vec(), vec![1u8, 2, 3]);
    /// ```
    pub fn to_vec(&self) -> Vec<u8> {
        self.deref().to_vec()
    }
}

/// The host's physical memory in bytes, where the platform says.
fn physical_memory() -> Option<u64> {
    #[cfg(unix)]
    {
        // SAFETY: `sysconf` only reads system configuration; it has no preconditions.
        let (pages, page_size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && page_size > 0 {
            return Some((pages as u64).saturating_mul(page_size as u64));
        }
    }
    None
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // The constructors guarantee `len <= memory().len()`.
        self.controller.memory().get(..self.len).unwrap_or(&[])
    }
}

impl DerefMut for Bytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        self.controller
            .memory_mut()
            .get_mut(..len)
            .unwrap_or(&mut [])
    }
}

impl Clone for Bytes {
    /// A deep copy into heap memory.
    fn clone(&self) -> Self {
        let mut copy = Bytes::zeroed(self.len);
        copy.copy_from_slice(self);
        copy
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bytes")
            .field("len", &self.len)
            .field("property", &self.property())
            .finish()
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Self) -> bool {
        self.deref() == other.deref()
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(value: Vec<u8>) -> Self {
        Bytes::from_bytes_vec(value)
    }
}

/// Copies `src` into `dst` (equal lengths; a shorter one bounds the copy), on several
/// threads for large copies: one thread copies host memory at well under the machine's
/// bandwidth, so a read landing in the caller's memory would be bound by it.
pub fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    const PER_THREAD: usize = 16 << 20;
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(8)
        .min(len / PER_THREAD)
        .max(1);
    if threads == 1 {
        dst.copy_from_slice(src);
        return;
    }
    let chunk = len.div_ceil(threads);
    std::thread::scope(|scope| {
        for (d, s) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            scope.spawn(move || d.copy_from_slice(s));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn vec_of_floats_is_viewed_without_copy() {
        let bytes = Bytes::from_elems(vec![1.0f32, 2.0, 3.0]);
        assert_eq!(bytes.len(), 12);
        assert_eq!(bytes.property(), AllocationProperty::Native);
        assert_eq!(bytes.as_elems::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn unaligned_bytes_still_convert_to_elements() {
        let bytes = Bytes::from_bytes_vec(1.5f32.to_le_bytes().repeat(3));
        assert_eq!(bytes.to_elems::<f32>(), vec![1.5, 1.5, 1.5]);
    }

    #[test]
    fn file_backed_bytes_read_the_file_and_never_write_it() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&[1, 2, 3, 4, 5, 6]).unwrap();
        let mut bytes = Bytes::from_file(file.path(), 2, 3).unwrap();
        assert_eq!(bytes.property(), AllocationProperty::File);
        assert_eq!(&bytes[..], &[3, 4, 5]);
        bytes[0] = 99;
        assert_eq!(std::fs::read(file.path()).unwrap(), vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn file_range_outside_file_is_an_error() {
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(Bytes::from_file(file.path(), 0, 10).is_err());
    }

    #[test]
    fn copy_into_refuses_different_lengths() {
        let source = Bytes::from_bytes_vec(vec![1, 2, 3]);
        let mut short = Bytes::zeroed(2);
        assert!(source.copy_into(&mut short).is_err());
        assert_eq!(&short[..], &[0, 0]);
    }
}
