//! Collects the figures and failures of a benchmark run and shows progress.
//!
//! Each figure prints as `name value unit` when measured (as the anchor scripts print
//! theirs), failures as `FAIL message`, comments as `# text`; figures that can't be
//! measured here (no graphs on the CPU) print `# not measured: names: why` and are no
//! failure.
//! Points of a series (a value per size) print as `name@size value unit`. An indicatif bar
//! on standard error counts the figures and points while standard output is a terminal;
//! otherwise it is hidden.

use super::report::{Figure, Series, SeriesPoint};
use super::units::{format_value, size_label};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Figures, failures and the progress bar of one run.
pub struct Recorder {
    figures: Vec<Figure>,
    series: Vec<Series>,
    failures: Vec<String>,
    progress: ProgressBar,
}

impl Recorder {
    /// A recorder expecting `steps` figures.
    pub fn new(steps: u64) -> Self {
        let progress = if std::io::stdout().is_terminal() {
            let bar = ProgressBar::new(steps);
            if let Ok(style) =
                ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {msg}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        } else {
            ProgressBar::hidden()
        };
        Self {
            figures: Vec::new(),
            series: Vec::new(),
            failures: Vec::new(),
            progress,
        }
    }

    fn print(&self, line: &str) {
        self.progress.suspend(|| outln!("{line}"));
    }

    /// Shows what is being measured now.
    pub fn start(&self, what: &str) {
        self.progress.set_message(what.to_string());
    }

    /// Prints a comment line.
    pub fn info(&self, text: &str) {
        self.print(&format!("# {text}"));
    }

    /// Records a measured and checked figure.
    pub fn emit(&mut self, name: &str, value: f64, unit: &str, note: &str) {
        self.print(&format!("{name} {} {unit}", format_value(value)));
        self.figures.push(Figure {
            name: name.to_string(),
            value,
            unit: unit.to_string(),
            note: note.to_string(),
        });
        self.progress.inc(1);
    }

    /// Records a failed check (its figure is not recorded).
    pub fn fail(&mut self, message: &str) {
        self.print(&format!("FAIL {message}"));
        self.failures.push(message.to_string());
    }

    /// Records a figure that couldn't be measured because its check failed.
    pub fn skip(&mut self, name: &str, reason: &str) {
        self.fail(&format!("{name}: {reason}"));
        self.progress.inc(1);
    }

    /// Records figures that can't be measured here (a backend without graphs, no trace
    /// file): one comment, no failure.
    pub fn not_measured(&mut self, names: &[&str], reason: &str) {
        self.info(&format!("not measured: {}: {reason}", names.join(", ")));
        self.progress.inc(names.len() as u64);
    }

    /// Declares a series (`unit` per point, `note` on how it was measured); points are
    /// added with [`Self::point`]. Declaring a name again keeps the first declaration.
    pub fn series(&mut self, name: &str, unit: &str, note: &str) {
        if self.series.iter().all(|series| series.name != name) {
            self.series.push(Series {
                name: name.to_string(),
                unit: unit.to_string(),
                note: note.to_string(),
                points: Vec::new(),
            });
        }
    }

    /// Records a measured and checked point of the series `name` at `bytes`.
    pub fn point(&mut self, name: &str, bytes: usize, value: f64) {
        let Some(series) = self.series.iter_mut().find(|series| series.name == name) else {
            self.fail(&format!("{name}: a point of an undeclared series"));
            return;
        };
        let line = format!(
            "{name}@{} {} {}",
            size_label(bytes),
            format_value(value),
            series.unit
        );
        series.points.push(SeriesPoint {
            bytes: bytes as u64,
            value,
        });
        self.print(&line);
        self.progress.inc(1);
    }

    /// Counts a step that produced nothing (a point skipped after a failed check).
    pub fn step(&self) {
        self.progress.inc(1);
    }

    /// Removes the progress bar.
    pub fn finish(&self) {
        self.progress.finish_and_clear();
    }

    /// The figures, the series and the failure messages.
    pub fn into_parts(self) -> (Vec<Figure>, Vec<Series>, Vec<String>) {
        (self.figures, self.series, self.failures)
    }
}
