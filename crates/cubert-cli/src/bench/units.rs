//! Size labels and number formatting shared by the benchmarks.
//!
//! Figure names carry sizes the way the anchors write them: bytes with binary units
//! (`4KiB`, `64MiB`, `1GiB`) and element counts in units of 2^20 (`16M`, `256M`).

/// Bytes in a KiB.
pub const KIB: usize = 1 << 10;
/// Bytes in a MiB.
pub const MIB: usize = 1 << 20;
/// Bytes in a GiB.
pub const GIB: usize = 1 << 30;

/// `4KiB`, `64MiB`, `1GiB`: the largest binary unit that divides `bytes`, else bytes.
pub fn size_label(bytes: usize) -> String {
    for (unit, name) in [(GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

/// Why a figure whose buffer of `bytes` exceeds the device's largest buffer, `largest`
/// bytes (wgpu on Mesa's lavapipe allows 128 MiB), is not measured.
pub fn too_big(bytes: usize, largest: u64) -> String {
    format!(
        "needs a buffer of {}; the device's largest is {}",
        size_label(bytes),
        size_label(usize::try_from(largest).unwrap_or(usize::MAX))
    )
}

/// `bytes` halved until it fits in a buffer of `largest` bytes, but not below `floor`: the
/// size a figure measures on a device with small buffers.
pub fn fit(bytes: usize, largest: u64, floor: usize) -> usize {
    let mut size = bytes;
    while size > floor && size as u64 > largest {
        size /= 2;
    }
    size
}

/// `16M`, `256M` (units of 2^20 elements), `4K`, or the plain count.
pub fn count_label(count: usize) -> String {
    if count >= MIB && count.is_multiple_of(MIB) {
        format!("{}M", count / MIB)
    } else if count >= KIB && count.is_multiple_of(KIB) {
        format!("{}K", count / KIB)
    } else {
        count.to_string()
    }
}

/// A figure value with 4 significant digits, without exponent for usual magnitudes.
pub fn format_value(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{value:.4e}")
    } else if magnitude >= 1000.0 {
        format!("{value:.0}")
    } else if magnitude >= 100.0 {
        format!("{value:.1}")
    } else if magnitude >= 10.0 {
        format!("{value:.2}")
    } else if magnitude >= 0.01 || magnitude == 0.0 {
        format!("{value:.3}")
    } else {
        format!("{value:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_match_the_anchor_names() {
        assert_eq!(size_label(4 * KIB), "4KiB");
        assert_eq!(size_label(MIB), "1MiB");
        assert_eq!(size_label(64 * MIB), "64MiB");
        assert_eq!(size_label(GIB), "1GiB");
        assert_eq!(size_label(1000), "1000B");
        assert_eq!(count_label(256 * MIB), "256M");
        assert_eq!(count_label(16 * MIB), "16M");
        assert_eq!(count_label(4096), "4K");
        assert_eq!(count_label(1000), "1000");
    }

    #[test]
    fn values_keep_four_significant_digits() {
        assert_eq!(format_value(2.4213), "2.421");
        assert_eq!(format_value(55.55), "55.55");
        assert_eq!(format_value(123.44), "123.4");
        assert_eq!(format_value(21600.2), "21600");
        assert_eq!(format_value(2_350_000.0), "2.3500e6");
    }
}
