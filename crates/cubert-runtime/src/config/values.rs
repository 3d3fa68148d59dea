//! How one value of `cubert.toml` (or of a `CUBERT_*` variable) becomes a setting.
//!
//! The functions here are the sections' `deserialize_with` (and `serialize_with`) helpers:
//! each reads the value as TOML, checks its kind and the range the setting accepts, and
//! otherwise fails with a message saying what was expected (`expected 0 to 1024, found
//! 100000`). Sizes accept plain integers or strings with a unit (`"2 MiB"`, `"1GiB"`,
//! `"512"`); integers and booleans may also be strings (environment values are), and every
//! string is trimmed.

use super::schema::LogOutput;
use serde::de::{DeserializeOwned, Deserializer, Error as _, IntoDeserializer};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// One mebibyte.
pub(crate) const MIB: u64 = 1 << 20;
/// One gibibyte.
pub(crate) const GIB: u64 = 1 << 30;
/// Longest duration a `*_ms` key accepts: one week.
pub const MAX_MILLISECONDS: u64 = 7 * 24 * 3600 * 1000;
/// Most worker threads `[cpu] threads` accepts per device.
pub const MAX_CPU_THREADS: u32 = 1024;

/// Parses a size: an integer, or a string with an optional unit (B, KB, KiB, MB, MiB, GB,
/// GiB, TB, TiB; case-insensitive).
///
/// Hand-written rather than `bytesize`'s `FromStr` for exactness: an integer size is
/// multiplied in `u64` with an overflow check (a config value past `u64::MAX` bytes is
/// refused, never rounded or saturated), where `bytesize` parses every number as an
/// `f64`, which rounds sizes above 2^53 bytes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim().replace('_', "");
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => return None,
    };
    if number.contains('.') {
        let value: f64 = number.parse().ok()?;
        let bytes = value * multiplier as f64;
        (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
    } else {
        number.parse::<u64>().ok()?.checked_mul(multiplier)
    }
}

// ---- `deserialize_with` helpers -------------------------------------------------------------

/// Reads the value as TOML, then through `parse`; a refusal becomes the deserializer's error.
fn read<'de, D, T>(
    deserializer: D,
    parse: impl FnOnce(&toml::Value) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let value = toml::Value::deserialize(deserializer)?;
    parse(&value).map_err(D::Error::custom)
}

/// A size in `MIN..=MAX` bytes.
pub(crate) fn size<'de, D, const MIN: u64, const MAX: u64>(deserializer: D) -> Result<u64, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, |value| bytes_in(value, MIN, MAX))
}

/// Any size.
pub(crate) fn any_size<'de, D>(deserializer: D) -> Result<u64, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, bytes)
}

/// A memory limit: `"auto"` (stored as 0) or a size above 0.
pub(crate) fn limit<'de, D>(deserializer: D) -> Result<u64, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, |value| match value {
        toml::Value::String(s) if s.trim() == "auto" => Ok(0),
        _ => positive_bytes(value),
    })
}

/// Writes a memory limit as [`limit`] reads it: 0 as `"auto"`.
pub(crate) fn write_limit<S: Serializer>(limit: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    match limit {
        0 => serializer.serialize_str("auto"),
        bytes => serializer.serialize_u64(*bytes),
    }
}

/// An integer in `MIN..=MAX`.
pub(crate) fn number<'de, D, T, const MIN: u64, const MAX: u64>(
    deserializer: D,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    read(deserializer, |value| {
        let number = integer_in(value, MIN, MAX)?;
        T::try_from(number).map_err(|_| format!("{number} is out of range"))
    })
}

/// `[cpu] devices`: 1 to 64.
pub(crate) fn cpu_devices<'de, D>(deserializer: D) -> Result<u32, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, |value| {
        let devices = integer(value)?;
        u32::try_from(devices)
            .ok()
            .filter(|devices| (1..=64).contains(devices))
            .ok_or_else(|| format!("expected 1 to 64 devices, found {devices}"))
    })
}

/// `[cuda] copy_threads`: 0 to 256.
pub(crate) fn copy_threads<'de, D>(deserializer: D) -> Result<u64, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, |value| {
        let threads = integer(value)?;
        if threads > 256 {
            return Err(format!("expected 0 to 256 threads, found {threads}"));
        }
        Ok(threads)
    })
}

/// A duration in whole milliseconds up to [`MAX_MILLISECONDS`]; 0 is `None` (never).
pub(crate) fn optional_millis<'de, D>(deserializer: D) -> Result<Option<Duration>, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, |value| {
        let millis = integer_in(value, 0, MAX_MILLISECONDS)?;
        Ok((millis > 0).then(|| Duration::from_millis(millis)))
    })
}

/// Writes a duration as [`optional_millis`] reads it: whole milliseconds, `None` as 0.
pub(crate) fn write_optional_millis<S: Serializer>(
    duration: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let millis = duration.map_or(0, |duration| duration.as_millis());
    serializer.serialize_u64(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// `true` or `false` (also `"yes"`, `"on"`, `"1"`, `"no"`, `"off"`, `"0"` as strings).
pub(crate) fn flag<'de, D>(deserializer: D) -> Result<bool, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, boolean)
}

/// One of an enum's spellings (its serde names and aliases).
pub(crate) fn choice<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Serialize,
{
    read(deserializer, |value| spelled(&text(value)?))
}

/// `[runtime] backend`: `cpu`, `cuda`, or `auto` (CUDA when a device is usable, else the
/// CPU).
pub(crate) fn backend<'de, D>(deserializer: D) -> Result<String, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, |value| match text(value)?.as_str() {
        name @ ("cpu" | "cuda" | "wgpu" | "auto") => Ok(name.to_string()),
        other => Err(one_of(other, &["cpu", "cuda", "wgpu", "auto"])),
    })
}

/// `[logging] level`: a `log` level or `off`, in any case (stored in lower case).
pub(crate) fn log_level<'de, D>(deserializer: D) -> Result<String, D::Error>
where
    D: Deserializer<'de>,
{
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    read(deserializer, |value| {
        let level = text(value)?.to_ascii_lowercase();
        if LEVELS.contains(&level.as_str()) {
            Ok(level)
        } else {
            Err(one_of(&level, &LEVELS))
        }
    })
}

/// `stdout`, `stderr` or a file path.
pub(crate) fn output<'de, D>(deserializer: D) -> Result<LogOutput, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, |value| {
        Ok(match text(value)?.as_str() {
            "stdout" => LogOutput::Stdout,
            "stderr" => LogOutput::Stderr,
            "" => return Err("expected stdout, stderr or a file path, found \"\"".into()),
            path => LogOutput::File(PathBuf::from(path)),
        })
    })
}

/// Writes an output as [`output`] reads it.
pub(crate) fn write_output<S: Serializer>(
    output: &LogOutput,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match output {
        LogOutput::Stdout => serializer.serialize_str("stdout"),
        LogOutput::Stderr => serializer.serialize_str("stderr"),
        LogOutput::File(path) => path.serialize(serializer),
    }
}

/// A path; the empty string is `None`.
pub(crate) fn optional_path<'de, D>(deserializer: D) -> Result<Option<PathBuf>, D::Error>
where
    D: Deserializer<'de>,
{
    read(deserializer, |value| {
        let path = text(value)?;
        Ok((!path.is_empty()).then(|| PathBuf::from(path)))
    })
}

// ---- the checks, on TOML values -------------------------------------------------------------

fn text(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.trim().to_string()),
        other => Err(format!(
            "expected a string, found {} {other}",
            other.type_str()
        )),
    }
}

fn one_of(found: &str, allowed: &[&str]) -> String {
    format!("expected one of {}, found \"{found}\"", allowed.join(", "))
}

/// The variant of `T` spelled `word`; the error lists each variant once, by the name it is
/// written with (serde's list of spellings has the aliases too).
fn spelled<T: DeserializeOwned + Serialize>(word: &str) -> Result<T, String> {
    let parse = |word: &str| T::deserialize(IntoDeserializer::<Spelling>::into_deserializer(word));
    parse(word).map_err(|error| {
        let written: Vec<&str> = error
            .known
            .iter()
            .copied()
            .filter(|name| {
                parse(name)
                    .ok()
                    .and_then(|choice| toml::Value::try_from(choice).ok())
                    .is_some_and(|written| written.as_str() == Some(*name))
            })
            .collect();
        one_of(word, &written)
    })
}

/// The error of reading an enum from a word: the spellings serde knows.
#[derive(Debug, Default)]
struct Spelling {
    known: &'static [&'static str],
}

impl fmt::Display for Spelling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected one of {}", self.known.join(", "))
    }
}

impl std::error::Error for Spelling {}

impl serde::de::Error for Spelling {
    fn custom<T: fmt::Display>(_message: T) -> Self {
        Self::default()
    }

    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        Self { known: expected }
    }
}

fn integer(value: &toml::Value) -> Result<u64, String> {
    match value {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        toml::Value::String(s) => s
            .trim()
            .replace('_', "")
            .parse::<u64>()
            .map_err(|_| format!("expected a non-negative integer, found \"{s}\"")),
        other => Err(format!(
            "expected a non-negative integer, found {} {other}",
            other.type_str()
        )),
    }
}

fn boolean(value: &toml::Value) -> Result<bool, String> {
    match value {
        toml::Value::Boolean(b) => Ok(*b),
        toml::Value::String(s) => match s.trim() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            other => Err(format!("expected true or false, found \"{other}\"")),
        },
        other => Err(format!(
            "expected true or false, found {} {other}",
            other.type_str()
        )),
    }
}

fn bytes(value: &toml::Value) -> Result<u64, String> {
    match value {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        toml::Value::String(s) => parse_bytes(s)
            .ok_or_else(|| format!("expected a size such as 4096 or \"2 MiB\", found \"{s}\"")),
        other => Err(format!(
            "expected a size such as 4096 or \"2 MiB\", found {} {other}",
            other.type_str()
        )),
    }
}

/// A size in `min..=max` bytes; the error names the range in bytes and with units.
fn bytes_in(value: &toml::Value, min: u64, max: u64) -> Result<u64, String> {
    let size = bytes(value)?;
    if (min..=max).contains(&size) {
        Ok(size)
    } else {
        Err(format!(
            "expected a size from {min} to {max} bytes ({}), found {size}",
            describe_bytes(max)
        ))
    }
}

/// An integer in `min..=max`; the error names the range.
fn integer_in(value: &toml::Value, min: u64, max: u64) -> Result<u64, String> {
    let number = integer(value)?;
    if (min..=max).contains(&number) {
        Ok(number)
    } else {
        Err(format!("expected {min} to {max}, found {number}"))
    }
}

fn describe_bytes(size: u64) -> String {
    match size {
        size if size >= GIB && size.is_multiple_of(GIB) => format!("{} GiB", size / GIB),
        size if size >= MIB && size.is_multiple_of(MIB) => format!("{} MiB", size / MIB),
        size => format!("{size} B"),
    }
}

fn positive_bytes(value: &toml::Value) -> Result<u64, String> {
    match bytes(value)? {
        0 => Err("expected a size above 0".to_string()),
        size => Ok(size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_accept_units() {
        assert_eq!(parse_bytes("2 MiB"), Some(2 << 20));
        assert_eq!(parse_bytes("1GiB"), Some(1 << 30));
        assert_eq!(parse_bytes("512"), Some(512));
        assert_eq!(parse_bytes("1.5 KiB"), Some(1536));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("99999999999999999999 TiB"), None);
    }
}
