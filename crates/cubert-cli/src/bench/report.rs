//! The benchmark report as JSON, in the format of the anchor scripts:
//!
//! ```json
//! {"tool": "cubert", "device": "...", "backend": "cpu", "date": "2026-11-21T10:00:00Z",
//!  "figures": {"cubert_x": {"value": 1.0, "unit": "GB/s", "note": "..."}}, "failures": 0}
//! ```
//!
//! Figures keep the order they were measured in. `failed_checks` lists the messages of the
//! failures; `quick` says whether the sizes were reduced. Measurements of a value per size
//! (the transfer sweep) are kept out of `figures`, in `series`:
//!
//! ```json
//! "series": {"cubert_h2d_pinned_sweep": {"unit": "GB/s", "note": "...",
//!            "points": [{"bytes": 4096, "value": 0.8}, {"bytes": 16384, "value": 2.9}]}}
//! ```

use crate::error::CliResult;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// One measured figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figure {
    /// Name, `cubert_` + the anchor's name.
    #[serde(skip)]
    pub name: String,
    /// The value.
    pub value: f64,
    /// Its unit (`GB/s`, `ops/s`, `us/launch`, `us`).
    pub unit: String,
    /// How it was measured.
    pub note: String,
}

/// One point of a series: the value measured at a size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SeriesPoint {
    /// The size in bytes.
    pub bytes: u64,
    /// The value at that size.
    pub value: f64,
}

/// A value measured at several sizes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    /// Name, `cubert_` + what is measured + `_sweep`.
    #[serde(skip)]
    pub name: String,
    /// Unit of the values.
    pub unit: String,
    /// How it was measured.
    pub note: String,
    /// The points, by increasing size.
    pub points: Vec<SeriesPoint>,
}

/// Series serialized as a JSON object keyed by name, in measurement order.
#[derive(Clone, Debug, Default)]
pub struct SeriesMap(pub Vec<Series>);

impl Serialize for SeriesMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for series in &self.0 {
            map.serialize_entry(&series.name, series)?;
        }
        map.end()
    }
}

/// Figures serialized as a JSON object keyed by name, in measurement order.
#[derive(Clone, Debug, Default)]
pub struct Figures(pub Vec<Figure>);

impl Serialize for Figures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for figure in &self.0 {
            map.serialize_entry(&figure.name, figure)?;
        }
        map.end()
    }
}

/// A whole benchmark run.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Always `cubert`.
    pub tool: &'static str,
    /// Version of the tool.
    pub version: &'static str,
    /// Device name.
    pub device: String,
    /// Backend name.
    pub backend: String,
    /// When the run started (UTC, ISO 8601).
    pub date: String,
    /// Whether `--quick` reduced the sizes.
    pub quick: bool,
    /// The figures.
    pub figures: Figures,
    /// Values measured per size.
    pub series: SeriesMap,
    /// Number of failed checks.
    pub failures: usize,
    /// The failed checks' messages.
    pub failed_checks: Vec<String>,
}

impl BenchReport {
    /// Writes the report as pretty JSON to `path`.
    ///
    /// # Errors
    /// The serialization or I/O error.
    pub fn write(&self, path: &Path) -> CliResult<()> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        std::fs::write(path, text)
            .map_err(|error| anyhow::Error::from(error).context(path.display().to_string()))
    }
}

/// `time` as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds; `humantime`'s RFC 3339). A time
/// before 1970 is the epoch.
pub fn iso8601(time: SystemTime) -> String {
    let time = if time < UNIX_EPOCH { UNIX_EPOCH } else { time };
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_are_utc_iso8601() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let time = UNIX_EPOCH + Duration::from_secs(1_795_219_200 + 3661);
        assert_eq!(iso8601(time), "2026-11-21T01:01:01Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn figures_serialize_in_order_keyed_by_name() {
        let figures = Figures(vec![
            Figure {
                name: "cubert_b".into(),
                value: 2.0,
                unit: "us".into(),
                note: "n".into(),
            },
            Figure {
                name: "cubert_a".into(),
                value: 1.0,
                unit: "GB/s".into(),
                note: String::new(),
            },
        ]);
        let text = serde_json::to_string(&figures).unwrap();
        assert_eq!(
            text,
            r#"{"cubert_b":{"value":2.0,"unit":"us","note":"n"},"cubert_a":{"value":1.0,"unit":"GB/s","note":""}}"#
        );
    }
}
