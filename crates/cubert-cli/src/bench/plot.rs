//! Plots of series (a value per size) as SVG, drawn by `plotters`: the size on a log-2 x
//! axis labelled in binary units, the value on a linear y axis from 0, a line with markers
//! per series, grid lines, axis titles and a legend. Any browser shows the file.

use super::report::Series;
use super::units::size_label;
use crate::error::CliResult;
use plotters::prelude::*;
use std::path::Path;

const WIDTH: u32 = 860;
const HEIGHT: u32 = 500;
const COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// The legend's name of a series: its name without `cubert_` and `_sweep`.
fn legend_name(name: &str) -> &str {
    let name = name.strip_prefix("cubert_").unwrap_or(name);
    name.strip_suffix("_sweep").unwrap_or(name)
}

/// The x axis' label of `log2(bytes)`: the size in binary units where it is a whole number
/// of bytes, else nothing.
fn x_label(log2_bytes: f64) -> String {
    let bytes = log2_bytes.exp2().round();
    if (bytes.log2() - log2_bytes).abs() < 1e-6 && bytes < usize::MAX as f64 {
        size_label(bytes as usize)
    } else {
        String::new()
    }
}

/// The series as an SVG document titled `title`, the values in `unit`.
///
/// # Errors
/// The drawing library's error, as text.
pub fn svg(series: &[Series], title: &str, unit: &str) -> Result<String, String> {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let log2 = |bytes: u64| (bytes.max(1) as f64).log2();
    let (min_x, max_x) = points()
        .map(|p| log2(p.bytes))
        .fold(None, |range: Option<(f64, f64)>, x| {
            Some(range.map_or((x, x), |(low, high)| (low.min(x), high.max(x))))
        })
        .unwrap_or((0.0, 1.0));
    let max_x = if max_x > min_x { max_x } else { min_x + 1.0 };
    let max_value = points()
        .map(|p| p.value)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let top_value = if max_value > 0.0 {
        max_value * 1.05
    } else {
        1.0
    };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(min_x..max_x, 0.0..top_value)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("transfer size (bytes, log scale)")
            .y_desc(unit)
            .x_labels(((max_x - min_x).ceil() as usize + 1).min(10))
            .x_label_formatter(&|x| x_label(*x))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| e.to_string())?;
        for (index, s) in series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            let line: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|p| p.value.is_finite())
                .map(|p| (log2(p.bytes), p.value))
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(legend_name(&s.name))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(|e| e.to_string())?;
        }
        if !series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.3))
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Writes [`svg`] of `series` to `path`.
///
/// # Errors
/// The drawing error or the I/O error.
pub fn write(path: &Path, series: &[Series], title: &str, unit: &str) -> CliResult<()> {
    let text = svg(series, title, unit)
        .map_err(|error| crate::error::failure(format!("can't draw the plot: {error}")))?;
    std::fs::write(path, text)
        .map_err(|error| anyhow::Error::from(error).context(path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::SeriesPoint;

    #[test]
    fn axis_labels_are_binary_sizes() {
        assert_eq!(x_label(12.0), "4KiB");
        assert_eq!(x_label(30.0), "1GiB");
        assert_eq!(x_label(12.5), "");
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
        let text = svg(&series, "title & more", "GB/s").unwrap();
        assert!(text.contains("<svg") && text.trim_end().ends_with("</svg>"));
        // Each series' line and its legend sample, in the series' colour.
        assert_eq!(text.matches(r##"stroke="#1F77B4""##).count(), 2);
        assert_eq!(text.matches(r##"stroke="#D62728""##).count(), 2);
        assert_eq!(text.matches("<circle").count(), 3);
        for label in [
            "4KiB",
            "16KiB",
            "1GiB",
            "title &amp; more",
            "a&lt;b",
            "GB/s",
            "h2d_pinned",
        ] {
            assert!(text.contains(label), "missing {label}");
        }
        assert!(!text.contains("cubert_h2d"), "the legend shortens names");
        // An empty plot is still a document.
        assert!(svg(&[], "empty", "GB/s").unwrap().contains("</svg>"));
    }
}
