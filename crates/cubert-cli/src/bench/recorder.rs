//! Collects the figures and failures of a benchmark run and shows progress.
//!
//! Each figure prints as `name value unit` when measured (as the anchor scripts print
//! theirs), failures as `FAIL message`, comments as `# text`. An indicatif bar on standard
//! error counts the figures while standard output is a terminal; otherwise it is hidden.

use crate::report::Figure;
use crate::units::format_value;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Figures, failures and the progress bar of one run.
pub struct Recorder {
    figures: Vec<Figure>,
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

    /// Removes the progress bar.
    pub fn finish(&self) {
        self.progress.finish_and_clear();
    }

    /// The figures and the failure messages.
    pub fn into_parts(self) -> (Vec<Figure>, Vec<String>) {
        (self.figures, self.failures)
    }
}
