//! `cubert bench --compare FILE.json`: cubert's figures next to the peers' as ratios.
//!
//! A cubert figure `cubert_X` is compared with every peer figure named `X` or `*_X` (so
//! `cubert_h2d_pinned_1GiB` meets `native_h2d_pinned_1GiB` and `torch_h2d_pinned_1GiB`,
//! `cubert_empty_launch_us` meets `cupy_rawkernel_empty_launch_us`), and with the peers'
//! names for the same measurement (see [`peer_patterns`]): allocation pairs with
//! `native_mallocasync_free_*` (not with plain `cudaMalloc`, which no pool competes with),
//! the vector add with the anchors'
//! `*_vadd_f32_256M_float4`, the copy with `*_d2d_memcpy_*` and `cudamemcpy_d2d_*`, the
//! trace with the peers' fragmentation figures (`*_frag_reserved_over_live`,
//! `cupy_pool_frag_total_over_live`...), graphs with `torch_graph_replay_*`, in-place adds
//! and their round trip with `torch_add_1elem_*`. A `_wall` variant meets the same peers as
//! its figure, and the older `cubert_d2h_<size>` and `*_d2h_pinned_<size>` meet each other.
//!
//! The unit decides the direction: GB/s and ops/s are better higher, times (µs, s), ratios
//! and GiB (memory held) better lower. Figures whose units measure different things are not
//! compared. Each row gives cubert/peer and who is ahead by how much; the best peer of each
//! figure is marked, and a summary counts the figures where cubert is ahead of, even with
//! or behind its best peer (even: within 1 %).

use super::peers::{FigureFile, FileFigure};
use super::table::{Align, Table};
use super::units::format_value;

/// Which way a quantity is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// More is better (bandwidth, throughput).
    Higher,
    /// Less is better (time, memory held, overhead ratios).
    Lower,
}

/// What a unit measures, so that only like is compared with like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Quantity {
    Bandwidth,
    Rate,
    Micros,
    Seconds,
    Ratio,
    Gibibytes,
    Allocations,
}

/// The quantity and direction of `unit`; `None` for units that aren't compared (counts).
fn quantity(unit: &str) -> Option<(Quantity, Better)> {
    match unit {
        "GB/s" => Some((Quantity::Bandwidth, Better::Higher)),
        "ops/s" => Some((Quantity::Rate, Better::Higher)),
        "s" => Some((Quantity::Seconds, Better::Lower)),
        "ratio" => Some((Quantity::Ratio, Better::Lower)),
        "GiB" => Some((Quantity::Gibibytes, Better::Lower)),
        // Device allocations or frees made by an allocator (the trace replays).
        "allocations" => Some((Quantity::Allocations, Better::Lower)),
        _ if unit == "us" || unit.starts_with("us/") => Some((Quantity::Micros, Better::Lower)),
        _ => None,
    }
}

/// The peer names (patterns matched as the whole name or a `_`-separated suffix) of the
/// cubert figure whose name without `cubert_` is `suffix`.
pub fn peer_patterns(suffix: &str) -> Vec<String> {
    let base = suffix.replacen("_wall", "", 1);
    let mut patterns = vec![base.clone()];
    let mut add = |pattern: String| {
        if !patterns.contains(&pattern) {
            patterns.push(pattern);
        }
    };
    if let Some(size) = base.strip_prefix("alloc_free_") {
        add(format!("mallocasync_free_{size}"));
    }
    if let Some(count) = base.strip_prefix("vadd_f32_") {
        add(format!("vadd_f32_{count}_float4"));
    }
    if let Some(size) = base.strip_prefix("d2d_copy_") {
        add(format!("d2d_memcpy_{size}"));
        add(format!("cudamemcpy_d2d_{size}"));
    }
    if let Some(size) = base.strip_prefix("h2d_pageable_slice_") {
        add(format!("h2d_pageable_{size}"));
    }
    // Before the pinned/pageable names, reads were `cubert_d2h_<size>` (into pinned memory).
    if let Some(size) = base.strip_prefix("d2h_")
        && !size.contains('_')
    {
        add(format!("d2h_pinned_{size}"));
    }
    if let Some(size) = base.strip_prefix("d2h_pinned_") {
        add(format!("d2h_{size}"));
    }
    let named: &[&str] = match base.as_str() {
        "add1_launch_us" => &["add_1elem_us"],
        "empty_launch_sync_us" => &["add_1elem_sync_us"],
        "graph_per_kernel_us" => &["graph_replay_per_kernel_us"],
        "graph_launch_call_us" => &["graph_replay_call_us"],
        "trace_peak_live" => &["trace_peak_live_requested"],
        "trace_peak_reserved" => &["frag_peak_reserved", "frag_peak_total"],
        "trace_reserved_over_live" => &["frag_reserved_over_live", "frag_total_over_live"],
        "trace_replay_s" => &["frag_replay_cold_s"],
        "trace_replay_warm_s" => &["frag_replay_warm_s"],
        "trace_device_allocs" => &["frag_num_device_alloc"],
        "trace_device_frees" => &["frag_num_device_free"],
        _ => &[],
    };
    for pattern in named {
        add((*pattern).to_string());
    }
    patterns
}

/// Whether `name` is `pattern` or ends with `_` + `pattern`.
fn matches(name: &str, pattern: &str) -> bool {
    name == pattern
        || name
            .strip_suffix(pattern)
            .is_some_and(|head| head.ends_with('_'))
}

/// One cubert figure next to one peer figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    /// The cubert figure.
    pub cubert: FileFigure,
    /// The peer figure.
    pub peer: FileFigure,
    /// The peer's file, when its figure is a cubert figure too (an earlier run).
    pub peer_file: Option<String>,
    /// cubert / peer.
    pub ratio: f64,
    /// How much better cubert is: the ratio, or its inverse where lower is better.
    pub advantage: f64,
    /// Which way is better.
    pub better: Better,
    /// Whether this is the best peer of the figure.
    pub best: bool,
}

/// The comparison of a run with the peers' files.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Pairs, grouped by cubert figure in the run's order, best peer first.
    pub pairs: Vec<Pair>,
    /// cubert figures no peer measures.
    pub unmatched: Vec<String>,
}

/// Compares the `cubert_*` figures of `cubert` with every matching figure of `peers`.
pub fn compare(cubert: &[FileFigure], peers: &[FigureFile]) -> Comparison {
    let mut comparison = Comparison::default();
    for figure in cubert {
        let Some(suffix) = figure.name.strip_prefix("cubert_") else {
            continue;
        };
        let Some((kind, better)) = quantity(&figure.unit) else {
            continue;
        };
        let patterns = peer_patterns(suffix);
        let mut pairs: Vec<Pair> = Vec::new();
        for file in peers {
            for peer in &file.figures {
                let same_kind = quantity(&peer.unit).is_some_and(|(k, _)| k == kind);
                if !same_kind
                    || peer.value == 0.0
                    || !patterns.iter().any(|pattern| matches(&peer.name, pattern))
                {
                    continue;
                }
                let ratio = figure.value / peer.value;
                pairs.push(Pair {
                    cubert: figure.clone(),
                    peer: peer.clone(),
                    peer_file: peer.name.starts_with("cubert_").then(|| file.label.clone()),
                    ratio,
                    advantage: match better {
                        Better::Higher => ratio,
                        Better::Lower => 1.0 / ratio,
                    },
                    better,
                    best: false,
                });
            }
        }
        if pairs.is_empty() {
            comparison.unmatched.push(figure.name.clone());
            continue;
        }
        // The best peer is the one cubert has the smallest advantage over.
        pairs.sort_by(|a, b| a.advantage.total_cmp(&b.advantage));
        pairs[0].best = true;
        comparison.pairs.extend(pairs);
    }
    comparison
}

/// Who is ahead, by how much (`even` within 1 %).
fn verdict(advantage: f64) -> String {
    if advantage >= 1.01 {
        format!("cubert {}x ahead", format_value(advantage))
    } else if advantage <= 1.0 / 1.01 {
        format!("peer {}x ahead", format_value(1.0 / advantage))
    } else {
        "even".to_string()
    }
}

impl Comparison {
    /// The comparison as a table.
    pub fn table(&self) -> Table {
        let mut table = Table::new(&[
            ("figure", Align::Left),
            ("cubert", Align::Right),
            ("unit", Align::Left),
            ("peer", Align::Left),
            ("peer value", Align::Right),
            ("cubert/peer", Align::Right),
            ("better", Align::Left),
            ("verdict", Align::Left),
            ("best", Align::Left),
        ]);
        for pair in &self.pairs {
            let peer = match &pair.peer_file {
                Some(file) => format!("{} [{file}]", pair.peer.name),
                None => pair.peer.name.clone(),
            };
            table.row(vec![
                pair.cubert.name.clone(),
                format_value(pair.cubert.value),
                pair.cubert.unit.clone(),
                peer,
                format_value(pair.peer.value),
                format_value(pair.ratio),
                match pair.better {
                    Better::Higher => "higher",
                    Better::Lower => "lower",
                }
                .to_string(),
                verdict(pair.advantage),
                if pair.best { "best peer" } else { "" }.to_string(),
            ]);
        }
        table
    }

    /// One line counting the figures where cubert is ahead of, even with or behind its best
    /// peer.
    pub fn summary(&self) -> String {
        let best: Vec<&Pair> = self.pairs.iter().filter(|pair| pair.best).collect();
        let ahead = best.iter().filter(|pair| pair.advantage >= 1.01).count();
        let behind = best
            .iter()
            .filter(|pair| pair.advantage <= 1.0 / 1.01)
            .count();
        format!(
            "against the best peer of each of {} figures: cubert ahead on {ahead}, even on {}, \
             behind on {behind}",
            best.len(),
            best.len() - ahead - behind
        )
    }
}

/// Prints the comparison of `cubert`'s figures with the `peers`' files.
pub fn print(cubert: &[FileFigure], peers: &[FigureFile]) {
    outln!();
    for file in peers {
        outln!(
            "# peer file {}: {} figures{}{}",
            file.label,
            file.figures.len(),
            if file.skipped > 0 {
                format!(", {} without a value left out", file.skipped)
            } else {
                String::new()
            },
            if file.failures > 0 {
                format!(", reports {} FAILED check(s)", file.failures)
            } else {
                String::new()
            }
        );
    }
    let comparison = compare(cubert, peers);
    if comparison.pairs.is_empty() {
        outln!("# no cubert figure has a peer figure in these files");
    } else {
        out!("{}", comparison.table().render());
        outln!("# {}", comparison.summary());
    }
    if !comparison.unmatched.is_empty() {
        outln!("# no peer figure for: {}", comparison.unmatched.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(name: &str, value: f64, unit: &str) -> FileFigure {
        FileFigure {
            name: name.into(),
            value,
            unit: unit.into(),
        }
    }

    fn file(figures: Vec<FileFigure>) -> FigureFile {
        FigureFile {
            label: "peers".into(),
            figures,
            failures: 0,
            skipped: 0,
        }
    }

    fn peers_of(name: &str, peers: &[&str]) -> Vec<String> {
        let cubert = [figure(name, 1.0, "us")];
        let peers = file(peers.iter().map(|p| figure(p, 1.0, "us")).collect());
        compare(&cubert, &[peers])
            .pairs
            .into_iter()
            .map(|pair| pair.peer.name)
            .collect()
    }

    #[test]
    fn names_match_by_suffix_and_by_alias() {
        let all = [
            "native_empty_launch_us",
            "cupy_rawkernel_empty_launch_us",
            "cupy_rawkernel_empty_launch_sync_us",
            "native_mallocasync_free_4KiB",
            "native_cudamalloc_free_4KiB",
            "cupy_pool_alloc_free_4KiB",
            "torch_alloc_free_4KiB",
            "torch_alloc_free_1GiB",
            "native_vadd_f32_256M_float4",
            "native_vadd_f32_256M_scalar",
            "torch_frag_reserved_over_live",
            "torch_expandable_frag_reserved_over_live",
            "cupy_pool_frag_total_over_live",
            "torch_d2h_pinned_1GiB",
            "torch_h2d_pageable_1GiB",
        ];
        let mut got = peers_of("cubert_empty_launch_us", &all);
        got.sort();
        assert_eq!(
            got,
            ["cupy_rawkernel_empty_launch_us", "native_empty_launch_us"]
        );
        let mut got = peers_of("cubert_alloc_free_4KiB", &all);
        got.sort();
        assert_eq!(
            got,
            [
                "cupy_pool_alloc_free_4KiB",
                "native_mallocasync_free_4KiB",
                "torch_alloc_free_4KiB"
            ]
        );
        assert_eq!(
            peers_of("cubert_vadd_f32_256M_wall", &all),
            ["native_vadd_f32_256M_float4"]
        );
        assert_eq!(peers_of("cubert_trace_reserved_over_live", &all).len(), 3);
        assert_eq!(peers_of("cubert_d2h_1GiB", &all), ["torch_d2h_pinned_1GiB"]);
        assert_eq!(
            peers_of("cubert_d2h_pinned_1GiB", &["cubert_d2h_1GiB"]),
            ["cubert_d2h_1GiB"]
        );
        assert_eq!(
            peers_of("cubert_h2d_pageable_slice_1GiB", &all),
            ["torch_h2d_pageable_1GiB"]
        );
        assert!(peers_of("cubert_h2d_file_1GiB", &all).is_empty());
        // A suffix must start at a `_`.
        assert!(!matches("native_xempty_launch_us", "empty_launch_us"));
    }

    #[test]
    fn ratios_follow_the_unit_and_the_best_peer_is_marked() {
        let cubert = [
            figure("cubert_h2d_pinned_1GiB", 50.0, "GB/s"),
            figure("cubert_empty_launch_us", 3.0, "us/launch"),
            figure("cubert_h2d_file_1GiB", 10.0, "GB/s"),
        ];
        let peers = file(vec![
            figure("native_h2d_pinned_1GiB", 55.0, "GB/s"),
            figure("torch_h2d_pinned_1GiB", 25.0, "GB/s"),
            figure("native_empty_launch_us", 2.0, "us/launch"),
            figure("cupy_rawkernel_empty_launch_us", 6.0, "us/launch"),
            // Another quantity under a matching name is not compared.
            figure("odd_empty_launch_us", 6.0, "GB/s"),
        ]);
        let comparison = compare(&cubert, &[peers]);
        assert_eq!(comparison.unmatched, ["cubert_h2d_file_1GiB"]);
        let pairs = &comparison.pairs;
        assert_eq!(pairs.len(), 4);
        // Best first: native is ahead on bandwidth (higher is better).
        assert_eq!(pairs[0].peer.name, "native_h2d_pinned_1GiB");
        assert!(pairs[0].best && !pairs[1].best);
        assert!((pairs[1].advantage - 2.0).abs() < 1e-12);
        // Launch time: lower is better; native's 2 µs beats cubert's 3.
        assert_eq!(pairs[2].peer.name, "native_empty_launch_us");
        assert!(pairs[2].best);
        assert!((pairs[2].ratio - 1.5).abs() < 1e-12);
        assert!((pairs[3].advantage - 2.0).abs() < 1e-12);
        assert_eq!(verdict(pairs[2].advantage), "peer 1.500x ahead");
        assert_eq!(verdict(2.0), "cubert 2.000x ahead");
        assert_eq!(verdict(1.005), "even");
        assert_eq!(
            comparison.summary(),
            "against the best peer of each of 2 figures: cubert ahead on 0, even on 0, behind on 2"
        );
        let text = comparison.table().render();
        assert!(
            text.contains("best peer") && text.contains("higher"),
            "{text}"
        );
    }
}
