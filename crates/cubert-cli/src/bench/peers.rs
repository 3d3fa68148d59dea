//! Reading figure files in the anchors' JSON format: the peers' (`peers.py`,
//! `native_anchors.cu`) and cubert's own (`cubert bench --json`).
//!
//! ```json
//! {"tool": "native_anchors", "figures": {"native_h2d_pinned_1GiB":
//!     {"value": 55.5, "unit": "GB/s", "note": "..."}}, "failures": 0}
//! ```
//!
//! Only `figures` is required; each figure needs a numeric `value` and a string `unit`
//! (other keys, such as `samples`, are ignored). Figures without a finite value are left
//! out and counted. `failures` may be a count or a list of messages. The file is labelled by
//! its `tool` (cubert, native_anchors) or `script` (peers.py) and its file name.

use crate::error::CliResult;
use serde_json::Value;
use std::path::Path;

/// One figure of a file.
#[derive(Clone, Debug, PartialEq)]
pub struct FileFigure {
    /// Its name (`native_h2d_pinned_1GiB`).
    pub name: String,
    /// Its value.
    pub value: f64,
    /// Its unit (`GB/s`).
    pub unit: String,
}

/// The figures of one file.
#[derive(Clone, Debug, PartialEq)]
pub struct FigureFile {
    /// `tool (file name)`, for messages.
    pub label: String,
    /// The figures, by name (JSON objects are read unordered).
    pub figures: Vec<FileFigure>,
    /// Failed checks the file reports.
    pub failures: usize,
    /// Figures left out because their value isn't a finite number.
    pub skipped: usize,
}

/// Reads the figure file at `path`.
///
/// # Errors
/// The I/O error, or a file that isn't JSON in the anchors' format.
pub fn read(path: &Path) -> CliResult<FigureFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| anyhow::Error::from(error).context(path.display().to_string()))?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    parse(&text, &name).map_err(|error| error.context(path.display().to_string()))
}

/// Parses a figure file's text; `file_name` goes into the label.
///
/// # Errors
/// Text that isn't JSON in the anchors' format.
pub fn parse(text: &str, file_name: &str) -> CliResult<FigureFile> {
    let root: Value = serde_json::from_str(text)?;
    let figures = root
        .get("figures")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            crate::error::failure("no `figures` object (not an anchors' figure file)")
        })?;
    let mut parsed = Vec::with_capacity(figures.len());
    let mut skipped = 0;
    for (name, figure) in figures {
        let value = figure.get("value").and_then(Value::as_f64);
        let unit = figure.get("unit").and_then(Value::as_str);
        match (value, unit) {
            (Some(value), Some(unit)) if value.is_finite() => parsed.push(FileFigure {
                name: name.clone(),
                value,
                unit: unit.to_string(),
            }),
            _ => skipped += 1,
        }
    }
    let tool = ["tool", "script"]
        .iter()
        .find_map(|key| root.get(*key).and_then(Value::as_str));
    let label = match tool {
        Some(tool) => format!("{tool} ({file_name})"),
        None => file_name.to_string(),
    };
    let failures = match root.get("failures") {
        Some(Value::Array(list)) => list.len(),
        Some(count) => count.as_u64().map_or(0, |n| n as usize),
        None => 0,
    };
    Ok(FigureFile {
        label,
        figures: parsed,
        failures,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_figures_labels_and_failures() {
        let file = parse(
            r#"{"script": "anchors/peers.py", "figures": {
                "torch_h2d_pinned_1GiB": {"value": 55.5, "unit": "GB/s", "samples": [1, 2]},
                "broken": {"value": null, "unit": "s"},
                "no_unit": {"value": 1.0}
            }, "failures": ["a", "b"]}"#,
            "peers.json",
        )
        .unwrap();
        assert_eq!(file.label, "anchors/peers.py (peers.json)");
        assert_eq!(file.failures, 2);
        assert_eq!(file.skipped, 2);
        assert_eq!(
            file.figures,
            vec![FileFigure {
                name: "torch_h2d_pinned_1GiB".into(),
                value: 55.5,
                unit: "GB/s".into()
            }]
        );
        let file = parse(
            r#"{"tool": "native_anchors", "figures": {}, "failures": 1}"#,
            "n.json",
        )
        .unwrap();
        assert_eq!(
            (file.label.as_str(), file.failures),
            ("native_anchors (n.json)", 1)
        );
    }

    #[test]
    fn files_without_figures_are_errors() {
        assert!(parse(r#"{"tool": "x"}"#, "x.json").is_err());
        assert!(parse("not json", "x.json").is_err());
    }
}
