//! A caller's host memory lent to a server for one read ([`HostSlice`]).
//!
//! `ComputeClient::read_into` lets the bytes of a read land in a slice the caller owns. The
//! slice is borrowed by the client call, which blocks until the read is done, while the
//! server that fills it runs on another thread: so the server gets the slice as a raw
//! pointer and a length, valid as the unsafe [`crate::server::ComputeServer::read_into`]
//! contract says.

/// A caller's slice, as a server sees it during a read.
#[derive(Debug)]
pub struct HostSlice {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a HostSlice is only written through `as_mut_slice`, whose contract gives the
// writer exclusive use of the memory until the read is done; it is plain bytes.
unsafe impl Send for HostSlice {}

impl HostSlice {
    /// Lends `slice`.
    pub fn new(slice: &mut [u8]) -> Self {
        Self {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
        }
    }

    /// Bytes of the slice.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slice.
    ///
    /// # Safety
    /// The memory lent with [`Self::new`] must still be borrowed by the caller that lent it
    /// (its owner waits for the read), and nothing else may access it meanwhile.
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the caller's contract: the lent slice is alive and exclusively ours.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}
