//! Profiling records, the per-kernel summary and Chrome traces.
//!
//! Each device has a [`ServerLogger`]. When profiling is enabled (`[profiling] level`), the
//! client times every launch and hands the duration to the logger; the logger aggregates
//! durations per kernel name and prints a summary table on the next `sync` (only if something
//! new was recorded). The same records can be written as a Chrome trace (`chrome://tracing`,
//! Perfetto).
//!
//! Log events and spans are separate from profiling: cubert emits them through `tracing`
//! (see the crate docs), and the program's subscriber decides where they go.

use crate::config::{LogOutput, ProfileLevel, ProfilingConfig};
use crate::profile::{ProfileDuration, ProfileTicks};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Aggregated timings of one kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelProfile {
    /// Kernel name.
    pub name: String,
    /// Profiled launches.
    pub launches: u64,
    /// Sum of durations.
    pub total: Duration,
    /// Shortest launch.
    pub min: Duration,
    /// Longest launch.
    pub max: Duration,
}

impl KernelProfile {
    /// Mean duration.
    pub fn mean(&self) -> Duration {
        if self.launches == 0 {
            Duration::ZERO
        } else {
            self.total / self.launches as u32
        }
    }
}

/// Everything recorded so far, sorted by total time (longest first).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProfileSummary {
    /// Timed kernels.
    pub kernels: Vec<KernelProfile>,
    /// Launch counts of untimed kernels (execution-only level).
    pub executions: Vec<(String, u64)>,
    /// Profiles that failed to resolve.
    pub failures: u64,
}

/// A duration in the unit that keeps it short: `850.0 ns`, `12.3 µs`, `148.8 ms`, `2.50 s`.
fn human_duration(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 1e-3 {
        format!("{:.1} ms", seconds * 1e3)
    } else if seconds >= 1e-6 {
        format!("{:.1} µs", seconds * 1e6)
    } else {
        format!("{:.1} ns", seconds * 1e9)
    }
}

impl fmt::Display for ProfileSummary {
    /// The summary as text tables (laid out by `comfy-table`): timed kernels with their
    /// launches, total, mean, min, max and share of the total time; then the launch counts
    /// of untimed kernels; then the number of profiles that failed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let grand_total: Duration = self.kernels.iter().map(|k| k.total).sum();
        if !self.kernels.is_empty() {
            let rows = self.kernels.iter().map(|kernel| {
                let share = if grand_total.is_zero() {
                    0.0
                } else {
                    kernel.total.as_secs_f64() / grand_total.as_secs_f64() * 100.0
                };
                vec![
                    kernel.name.clone(),
                    kernel.launches.to_string(),
                    human_duration(kernel.total),
                    human_duration(kernel.mean()),
                    human_duration(kernel.min),
                    human_duration(kernel.max),
                    format!("{share:.1}%"),
                ]
            });
            let headers = ["kernel", "launches", "total", "mean", "min", "max", "share"];
            writeln!(f, "{}", text_table(&headers, rows))?;
        }
        if !self.executions.is_empty() {
            let rows = self
                .executions
                .iter()
                .map(|(name, count)| vec![name.clone(), count.to_string()]);
            writeln!(f, "{}", text_table(&["kernel", "launches"], rows))?;
        }
        if self.failures > 0 {
            writeln!(f, "{} profile(s) failed to resolve", self.failures)?;
        }
        Ok(())
    }
}

/// A borderless text table: the first column left-aligned, the others right-aligned, two
/// spaces between columns, no trailing spaces.
fn text_table(headers: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    use comfy_table::{CellAlignment, ContentArrangement, TableComponent, presets};
    let mut table = comfy_table::Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .remove_style(TableComponent::LeftBorder)
        .remove_style(TableComponent::RightBorder)
        .remove_style(TableComponent::HeaderLines)
        .remove_style(TableComponent::VerticalLines)
        .set_header(headers.to_vec());
    for row in rows {
        table.add_row(row);
    }
    for (index, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        if index > 0 {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
        .to_string()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Default)]
struct LoggerState {
    pending: Vec<(String, ProfileDuration)>,
    kernels: BTreeMap<String, KernelProfile>,
    executions: BTreeMap<String, u64>,
    trace: Vec<TraceEvent>,
    failures: u64,
    changed: bool,
}

#[derive(Clone, Debug, Serialize)]
struct TraceEvent {
    name: String,
    ph: &'static str,
    ts: f64,
    dur: f64,
    pid: u32,
    tid: u32,
}

/// Most trace events kept in memory.
const TRACE_LIMIT: usize = 1_000_000;

/// Profiling records of one device. See the module docs.
pub struct ServerLogger {
    config: ProfilingConfig,
    device_index: u32,
    state: Mutex<LoggerState>,
}

impl fmt::Debug for ServerLogger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerLogger")
            .field("level", &self.config.level)
            .finish()
    }
}

impl ServerLogger {
    /// A logger for device number `device_index` with the given settings.
    pub fn new(config: ProfilingConfig, device_index: u32) -> Self {
        Self {
            config,
            device_index,
            state: Mutex::new(LoggerState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LoggerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The profiling level, or `None` when profiling is disabled.
    pub fn profile_level(&self) -> Option<ProfileLevel> {
        match self.config.level {
            ProfileLevel::Disabled => None,
            level => Some(level),
        }
    }

    /// Counts one untimed launch of `name`.
    pub fn register_execution(&self, name: &str) {
        let mut state = self.state();
        *state.executions.entry(name.to_string()).or_default() += 1;
        state.changed = true;
    }

    /// Records the duration of one launch of `name`, resolved at the next summary.
    pub fn register_profiled(&self, name: impl Into<String>, duration: ProfileDuration) {
        let mut state = self.state();
        state.pending.push((name.into(), duration));
        state.changed = true;
    }

    /// Records known ticks of one launch of `name`.
    pub fn record(&self, name: &str, ticks: ProfileTicks) {
        let mut state = self.state();
        self.add(&mut state, name, ticks);
        state.changed = true;
    }

    fn add(&self, state: &mut LoggerState, name: &str, ticks: ProfileTicks) {
        let duration = ticks.duration();
        let entry = state
            .kernels
            .entry(name.to_string())
            .or_insert_with(|| KernelProfile {
                name: name.to_string(),
                launches: 0,
                total: Duration::ZERO,
                min: Duration::MAX,
                max: Duration::ZERO,
            });
        entry.launches += 1;
        entry.total += duration;
        entry.min = entry.min.min(duration);
        entry.max = entry.max.max(duration);
        if state.trace.len() < TRACE_LIMIT {
            state.trace.push(TraceEvent {
                name: name.to_string(),
                ph: "X",
                ts: ticks.start_micros_since_epoch(),
                dur: duration.as_secs_f64() * 1e6,
                pid: 1,
                tid: self.device_index,
            });
        }
    }

    fn resolve_pending(&self) {
        let pending = std::mem::take(&mut self.state().pending);
        // Resolve outside the lock: device timings may take a moment.
        let resolved: Vec<(String, Option<ProfileTicks>)> = pending
            .into_iter()
            .map(|(name, duration)| (name, duration.resolve_blocking().ok()))
            .collect();
        let mut state = self.state();
        for (name, ticks) in resolved {
            match ticks {
                Some(ticks) => self.add(&mut state, &name, ticks),
                None => state.failures += 1,
            }
        }
    }

    /// Everything recorded so far.
    pub fn summary(&self) -> ProfileSummary {
        self.resolve_pending();
        let state = self.state();
        let mut kernels: Vec<KernelProfile> = state.kernels.values().cloned().collect();
        kernels.sort_by(|a, b| b.total.cmp(&a.total).then(a.name.cmp(&b.name)));
        ProfileSummary {
            kernels,
            executions: state
                .executions
                .iter()
                .map(|(name, count)| (name.clone(), *count))
                .collect(),
            failures: state.failures,
        }
    }

    /// Prints the summary to the configured output if profiling is on and something was
    /// recorded since the last print. Called on every `sync`.
    pub fn profile_summary(&self) {
        if self.profile_level().is_none() || !self.state().changed {
            return;
        }
        let summary = self.summary();
        self.state().changed = false;
        let text = format!("cubert profile (device {}):\n{summary}", self.device_index);
        write_output(&self.config.output, &text);
    }

    /// Forgets every record.
    pub fn reset(&self) {
        *self.state() = LoggerState::default();
    }

    /// Writes every timed launch as a Chrome trace (JSON array of complete events).
    ///
    /// # Errors
    /// The I/O error if the file can't be written.
    pub fn write_chrome_trace(&self, path: &Path) -> std::io::Result<()> {
        self.resolve_pending();
        let events = self.state().trace.clone();
        let json = serde_json::to_vec(&events).map_err(std::io::Error::other)?;
        std::fs::write(path, json)
    }

    /// Writes the trace to the configured `trace_file`, if one is set.
    ///
    /// # Errors
    /// The I/O error if the file can't be written.
    pub fn write_configured_trace(&self) -> std::io::Result<bool> {
        match &self.config.trace_file {
            Some(path) => self.write_chrome_trace(path).map(|()| true),
            None => Ok(false),
        }
    }
}

fn write_output(output: &LogOutput, text: &str) {
    let result = match output {
        LogOutput::Stdout => writeln!(std::io::stdout().lock(), "{text}"),
        LogOutput::Stderr => writeln!(std::io::stderr().lock(), "{text}"),
        LogOutput::File(path) => append_line(path, text),
    };
    if let Err(error) = result {
        tracing::warn!("can't write the profile summary to {output:?}: {error}");
    }
}

fn append_line(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| writeln!(file, "{text}"))
}

#[cfg(test)]
mod tests {

    #[test]
    fn durations_print_in_the_unit_that_keeps_them_short() {
        assert_eq!(human_duration(Duration::from_nanos(850)), "850.0 ns");
        assert_eq!(human_duration(Duration::from_micros(12)), "12.0 µs");
        assert_eq!(human_duration(Duration::from_micros(148_758)), "148.8 ms");
        assert_eq!(human_duration(Duration::from_millis(2_500)), "2.50 s");
    }

    use super::*;
    use crate::properties::TimingMethod;
    use std::time::Instant;

    #[test]
    fn summary_aggregates_per_kernel() {
        let logger = ServerLogger::new(
            ProfilingConfig {
                level: ProfileLevel::Basic,
                ..Default::default()
            },
            0,
        );
        let start = Instant::now();
        for micros in [10, 30] {
            let ticks = ProfileTicks::from_duration(start, Duration::from_micros(micros));
            logger.register_profiled(
                "add",
                ProfileDuration::from_ticks(ticks, TimingMethod::System),
            );
        }
        logger.record(
            "mul",
            ProfileTicks::from_duration(start, Duration::from_micros(5)),
        );
        let summary = logger.summary();
        assert_eq!(summary.kernels[0].name, "add");
        assert_eq!(summary.kernels[0].launches, 2);
        assert_eq!(summary.kernels[0].mean(), Duration::from_micros(20));
        assert_eq!(summary.kernels[0].max, Duration::from_micros(30));
        assert_eq!(summary.kernels[1].name, "mul");
        let text = summary.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("kernel") && lines[0].ends_with("share"));
        assert!(
            lines[1].starts_with("add ") && lines[1].ends_with("88.9%"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("mul ") && lines[2].ends_with("11.1%"),
            "{text}"
        );
        // Right-aligned numbers: every row ends at the header's last column.
        let width = |line: &str| line.chars().count();
        assert!(
            lines.iter().all(|line| width(line) == width(lines[0])),
            "{text}"
        );
    }

    #[test]
    fn chrome_trace_lists_every_timed_launch() {
        let logger = ServerLogger::new(ProfilingConfig::default(), 2);
        logger.record(
            "fill",
            ProfileTicks::from_duration(Instant::now(), Duration::from_micros(3)),
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        logger.write_chrome_trace(file.path()).unwrap();
        let events: serde_json::Value =
            serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap();
        assert_eq!(events[0]["name"], "fill");
        assert_eq!(events[0]["tid"], 2);
        assert_eq!(events[0]["ph"], "X");
    }
}
