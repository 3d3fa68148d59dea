//! The kernels of the language a device has built, so a launch builds each once.
//!
//! `ComputeClient::launch_language` looks the kernel up by its [`KernelKey`] (kernel,
//! generic types, compile-time values) and cube dim; on a miss it asks the backend
//! (`Runtime::language_kernel`) and keeps the result. A failed build is not cached: the
//! error goes to the caller each time.

use super::CubeDim;
use crate::memory::FastMap;
use cubert_lang::KernelKey;
use std::sync::Mutex;

/// Built language kernels of one device. See the module docs.
pub struct LanguageKernelCache<K> {
    kernels: Mutex<FastMap<(KernelKey, CubeDim), K>>,
}

impl<K> Default for LanguageKernelCache<K> {
    fn default() -> Self {
        Self {
            kernels: Mutex::new(FastMap::default()),
        }
    }
}

impl<K: Clone> LanguageKernelCache<K> {
    /// The kernel for `key` and `cube_dim`, built by `build` on a miss.
    ///
    /// # Errors
    /// `build`'s error (nothing is cached then).
    pub fn get_or_build<E>(
        &self,
        key: KernelKey,
        cube_dim: CubeDim,
        build: impl FnOnce() -> Result<K, E>,
    ) -> Result<K, E> {
        let entry = (key, cube_dim);
        if let Some(kernel) = self.lock().get(&entry) {
            return Ok(kernel.clone());
        }
        // Built outside the lock: an NVRTC compile can take a while, and two threads
        // building the same kernel at once just build it twice.
        let kernel = build()?;
        self.lock().insert(entry, kernel.clone());
        Ok(kernel)
    }

    /// Number of kernels built.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no kernel was built yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FastMap<(KernelKey, CubeDim), K>> {
        // A panic while holding the lock can't leave the map inconsistent (one insert).
        self.kernels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<K> std::fmt::Debug for LanguageKernelCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LanguageKernelCache")
    }
}
