//! What a tuning result is filed under: the input key and the device fingerprint.
//!
//! A [`TuneKey`] is derived by the operation from its inputs: shapes, element types, flags,
//! rounded as the operation chooses ([`anchor`] rounds a size up to a power of two, so one
//! result serves a range of shapes). It is plain text (`m=256,k=256,n=512`), readable in the
//! on-disk cache.
//!
//! A [`DeviceFingerprint`] identifies the kind of device and the software that timings
//! depend on: the runtime, a checksum of the device's properties (without what differs
//! between identical devices) and the driver version. Devices with equal fingerprints share
//! results, so several GPUs of one model tune once.

use crate::properties::fnv1a;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The key of one tuning problem, derived from an operation's inputs.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TuneKey {
    text: String,
}

impl TuneKey {
    /// A key from its text.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into() }
    }

    /// The key with `name=value` appended (comma-separated).
    pub fn with(mut self, name: &str, value: impl fmt::Display) -> Self {
        if !self.text.is_empty() {
            self.text.push(',');
        }
        self.text.push_str(name);
        self.text.push('=');
        self.text.push_str(&value.to_string());
        self
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for TuneKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `size` rounded up to a power of two (0 stays 0; sizes past the largest power of two
/// stay as they are), so one tuning result covers the sizes of a bucket.
pub fn anchor(size: usize) -> usize {
    if size == 0 {
        0
    } else {
        size.checked_next_power_of_two().unwrap_or(size)
    }
}

/// The largest power of two up to `max` dividing `size` (`max` for 0): whether rows of this
/// length allow vector accesses, as a key part.
pub fn alignment(size: usize, max: usize) -> usize {
    let max = max.max(1);
    if size == 0 {
        return max;
    }
    (1usize << size.trailing_zeros().min(usize::BITS - 1)).min(max)
}

/// The kind of a device and the software its timings depend on. See the module docs.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct DeviceFingerprint {
    /// The runtime's name (`cpu`, `cuda`).
    pub runtime: String,
    /// Checksum of the device properties that matter for speed.
    pub properties: u64,
    /// Driver and compiler versions, as the backend describes them (may be empty).
    pub driver: String,
}

impl DeviceFingerprint {
    /// A fingerprint from its parts.
    pub fn new(runtime: impl Into<String>, properties: u64, driver: impl Into<String>) -> Self {
        Self {
            runtime: runtime.into(),
            properties,
            driver: driver.into(),
        }
    }

    /// A short identifier safe in file names: `<runtime>-<properties>-<driver hash>`.
    pub fn id(&self) -> String {
        let runtime: String = self
            .runtime
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!(
            "{runtime}-{:016x}-{:08x}",
            self.properties,
            fnv1a(self.driver.as_bytes()) as u32
        )
    }
}

impl fmt::Display for DeviceFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.id())?;
        if !self.driver.is_empty() {
            write!(f, " ({})", self.driver)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_join_parts_with_commas() {
        let key = TuneKey::default().with("m", 256).with("elem", "f32");
        assert_eq!(key.as_str(), "m=256,elem=f32");
        assert_eq!(TuneKey::new("x=1").with("y", 2).to_string(), "x=1,y=2");
    }

    #[test]
    fn anchor_rounds_up_to_powers_of_two() {
        assert_eq!(anchor(0), 0);
        assert_eq!(anchor(1), 1);
        assert_eq!(anchor(3), 4);
        assert_eq!(anchor(1024), 1024);
        assert_eq!(anchor(1025), 2048);
        assert_eq!(anchor(usize::MAX), usize::MAX);
    }

    #[test]
    fn alignment_is_the_largest_dividing_power_of_two_up_to_max() {
        assert_eq!(alignment(12, 16), 4);
        assert_eq!(alignment(7, 16), 1);
        assert_eq!(alignment(1024, 16), 16);
        assert_eq!(alignment(0, 8), 8);
    }

    #[test]
    fn fingerprint_ids_differ_by_properties_and_driver_and_are_file_safe() {
        let a = DeviceFingerprint::new("cuda", 1, "driver 13.0");
        let b = DeviceFingerprint::new("cuda", 2, "driver 13.0");
        let c = DeviceFingerprint::new("cuda", 1, "driver 12.8");
        assert_ne!(a.id(), b.id());
        assert_ne!(a.id(), c.id());
        assert_eq!(
            a.id(),
            DeviceFingerprint::new("cuda", 1, "driver 13.0").id()
        );
        let odd = DeviceFingerprint::new("a/b c", 1, "");
        assert!(odd.id().starts_with("a_b_c-"), "{}", odd.id());
    }
}
