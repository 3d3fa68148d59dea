//! Plots of series (a value per size) as hand-written SVG: size on a log-2 x axis labelled
//! in binary units, the value on a linear y axis from 0, one polyline with markers per
//! series, grid lines, axis titles and a legend. No dependencies; any browser shows it.

use super::report::Series;
use super::units::size_label;
use crate::error::CliResult;
use std::fmt::Write as _;
use std::path::Path;

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 500.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// `text` with the XML special characters escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A tick label for `value` on an axis stepping by `step`: as many decimals as the step has.
fn tick_label(value: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{value:.decimals$}")
}

/// The legend's name of a series: its name without `cubert_` and `_sweep`.
fn legend_name(name: &str) -> &str {
    let name = name.strip_prefix("cubert_").unwrap_or(name);
    name.strip_suffix("_sweep").unwrap_or(name)
}

/// A round step for about `target` intervals up to `max`: 1, 2 or 5 times a power of 10.
fn nice_step(max: f64, target: f64) -> f64 {
    let raw = (max / target).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// The series as an SVG document titled `title`, the values in `unit`.
pub fn svg(series: &[Series], title: &str, unit: &str) -> String {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let sizes: Vec<u64> = {
        let mut sizes: Vec<u64> = points().map(|p| p.bytes.max(1)).collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    };
    let (min_x, max_x) = match (sizes.first(), sizes.last()) {
        (Some(&min), Some(&max)) => ((min as f64).log2(), (max as f64).log2()),
        _ => (0.0, 1.0),
    };
    let span_x = if max_x > min_x { max_x - min_x } else { 1.0 };
    let max_value = points()
        .map(|p| p.value)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let step = nice_step(if max_value > 0.0 { max_value } else { 1.0 }, 5.0);
    let top_value = (max_value / step).ceil().max(1.0) * step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x_of = |bytes: u64| LEFT + ((bytes.max(1) as f64).log2() - min_x) / span_x * plot_w;
    let y_of = |value: f64| TOP + plot_h - value.clamp(0.0, top_value) / top_value * plot_h;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(title)
    );
    // Horizontal grid lines and y labels.
    let mut value = 0.0;
    while value <= top_value * (1.0 + 1e-9) {
        let y = y_of(value);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
            LEFT + plot_w
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            escape(&tick_label(value, step))
        );
        value += step;
    }
    // Vertical grid lines and x labels, one per measured size.
    for &bytes in &sizes {
        let x = x_of(bytes);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/>"##,
            TOP + plot_h
        );
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + plot_h + 18.0,
            escape(&size_label(bytes as usize))
        );
    }
    // Axes and their titles.
    let _ = writeln!(
        out,
        r#"<path d="M{LEFT},{TOP} V{:.1} H{:.1}" fill="none" stroke="black"/>"#,
        TOP + plot_h,
        LEFT + plot_w
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">transfer size (bytes, log scale)</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 15.0
    );
    let _ = writeln!(
        out,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(unit)
    );
    // One polyline with markers per series, and the legend.
    for (index, s) in series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let coordinates: Vec<String> = s
            .points
            .iter()
            .filter(|p| p.value.is_finite())
            .map(|p| format!("{:.1},{:.1}", x_of(p.bytes), y_of(p.value)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            coordinates.join(" ")
        );
        for point in coordinates {
            let (x, y) = point.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(out, r#"<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>"#);
        }
        let legend_y = TOP + 10.0 + index as f64 * 20.0;
        let legend_x = LEFT + plot_w + 15.0;
        let _ = writeln!(
            out,
            r#"<line x1="{legend_x}" y1="{legend_y}" x2="{:.1}" y2="{legend_y}" stroke="{color}" stroke-width="2"/>"#,
            legend_x + 20.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            legend_x + 26.0,
            legend_y + 4.0,
            escape(legend_name(&s.name))
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Writes [`svg`] of `series` to `path`.
///
/// # Errors
/// The I/O error.
pub fn write(path: &Path, series: &[Series], title: &str, unit: &str) -> CliResult<()> {
    std::fs::write(path, svg(series, title, unit))
        .map_err(|error| anyhow::Error::from(error).context(path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::SeriesPoint;

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(55.0, 5.0), 20.0);
        assert_eq!(nice_step(4.2, 5.0), 1.0);
        assert_eq!(nice_step(4300.0, 5.0), 1000.0);
        assert_eq!(tick_label(15.0, 5.0), "15");
        assert_eq!(tick_label(0.5, 0.1), "0.5");
        assert_eq!(legend_name("cubert_h2d_pinned_sweep"), "h2d_pinned");
    }

    #[test]
    fn plots_every_series_with_labels() {
        let series = vec![
            Series {
                name: "cubert_h2d_pinned_sweep".into(),
                unit: "GB/s".into(),
                note: String::new(),
                points: vec![
                    SeriesPoint {
                        bytes: 4096,
                        value: 1.0,
                    },
                    SeriesPoint {
                        bytes: 1 << 30,
                        value: 55.0,
                    },
                ],
            },
            Series {
                name: "a<b".into(),
                unit: "GB/s".into(),
                note: String::new(),
                points: vec![SeriesPoint {
                    bytes: 16384,
                    value: 2.0,
                }],
            },
        ];
        let text = svg(&series, "title & more", "GB/s");
        assert!(text.starts_with("<svg") && text.ends_with("</svg>\n"));
        assert_eq!(text.matches("<polyline").count(), 2);
        assert_eq!(text.matches("<circle").count(), 3);
        for label in [
            "4KiB",
            "16KiB",
            "1GiB",
            "title &amp; more",
            "a&lt;b",
            "GB/s",
            ">h2d_pinned<",
        ] {
            assert!(text.contains(label), "missing {label}");
        }
        // An empty plot is still a document.
        assert!(svg(&[], "empty", "GB/s").contains("</svg>"));
    }
}
