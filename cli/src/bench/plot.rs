//! SVG figures in the style of the paper's: log-scale runtime against rows (Figures 9 and 10)
//! or sparsity (Figure 13) with one line per system and policy, and grouped bars per algorithm
//! or script on a log scale (Tables 4 and 5, Figure 15). Drawn with `plotters`' SVG backend.

use super::results::{Measurement, Status};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Series colours, in series order.
const COLORS: &[RGBColor] = &[
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// The fixed series names, so that a system keeps its colour in every figure.
const NAMED: &[&str] = &[
    "lafuse gen",
    "lafuse none",
    "lafuse fa",
    "lafuse fnr",
    "systemds codegen",
    "systemds base",
    "numpy",
    "numexpr",
    "jax",
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// The colour of series `name` (its fixed colour, else by position `i`).
fn color_of(name: &str, i: usize) -> RGBColor {
    NAMED
        .iter()
        .position(|n| *n == name)
        .map_or(color(i), color)
}

/// A log range around the positive values (a decade when they are all equal).
fn log_bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    (hi > 0.0).then(|| (lo / 2.0, hi * 2.0))
}

/// A log axis label: only at 1, 2 and 5 times a power of ten (plotters puts key points at
/// every integer multiple, which crowds the axis); `scientific` writes `2e3`, else `2000`.
fn log_label(v: f64, scientific: bool) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let exp = v.log10().floor();
    let mantissa = v / 10f64.powf(exp);
    let m = mantissa.round();
    if (mantissa - m).abs() > 1e-6 * m.max(1.0) || ![1.0, 2.0, 5.0].contains(&m) {
        return String::new();
    }
    if scientific || !(1e-3..1e6).contains(&v) {
        format!("{m}e{exp}")
    } else {
        // Shortest decimal of m·10^exp (`0.05`, `2000`).
        format!("{}", m * 10f64.powf(exp))
            .parse::<f64>()
            .map_or(String::new(), |x| format!("{x}"))
    }
}

/// A line plot with log-scale axes: one line (with points) per named series.
pub fn line_plot(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let (x0, x1) = log_bounds(series.iter().flat_map(|(_, p)| p.iter().map(|p| p.0)))
        .ok_or_else(|| format!("{}: nothing to plot", path.display()))?;
    let (y0, y1) = log_bounds(series.iter().flat_map(|(_, p)| p.iter().map(|p| p.1)))
        .ok_or_else(|| format!("{}: nothing to plot", path.display()))?;
    let root = SVGBackend::new(path, (820, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| log_label(*v, true))
        .y_label_formatter(&|v| log_label(*v, false))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let c = color_of(name, i);
        let mut points: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0 && y.is_finite())
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Grouped bars on a log scale: one group per `groups` entry, one bar per series (a missing
/// value leaves a gap).
pub fn bar_plot(
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let (y0, y1) = log_bounds(series.iter().flat_map(|(_, v)| v.iter().flatten().copied()))
        .ok_or_else(|| format!("{}: nothing to plot", path.display()))?;
    let n = groups.len().max(1);
    let width = (160 * n as u32).clamp(820, 2400);
    let root = SVGBackend::new(path, (width, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (y0..y1).log_scale())
        .map_err(|e| err(&e))?;
    let names = groups.to_vec();
    let formatter = move |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&formatter)
        .y_desc(y_desc)
        .y_label_formatter(&|v| log_label(*v, false))
        .draw()
        .map_err(|e| err(&e))?;
    let k = series.len().max(1) as f64;
    let bar = 0.8 / k;
    for (s, (name, values)) in series.iter().enumerate() {
        let c = color_of(name, s);
        let rects: Vec<Rectangle<(f64, f64)>> = values
            .iter()
            .enumerate()
            .filter_map(|(g, v)| {
                let v = (*v)?;
                (v > 0.0 && v.is_finite()).then(|| {
                    let x = g as f64 - 0.4 + bar * s as f64;
                    Rectangle::new([(x, y0), (x + bar * 0.9, v)], c.filled())
                })
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(|e| err(&e))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Named series of (x, y) points.
type SeriesMap = BTreeMap<String, Vec<(f64, f64)>>;

fn param(m: &Measurement, k: &str) -> Option<f64> {
    m.params.get(k).and_then(|v| v.parse().ok())
}

/// Writes every figure of the measurements into `dir`; returns the file names written and
/// the errors of figures that could not be drawn.
pub fn write_figures(dir: &Path, ms: &[Measurement]) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    let mut emit = |name: String, r: Result<(), String>| match r {
        Ok(()) => files.push(name),
        Err(e) => errors.push(e),
    };
    let ok: Vec<&Measurement> = ms
        .iter()
        .filter(|m| m.status == Status::Ok && m.median_ms.is_some())
        .collect();

    // Micro: runtime vs rows per pattern and density; Outer: runtime vs sparsity.
    let mut micro: BTreeMap<(String, String), SeriesMap> = BTreeMap::new();
    for m in ok.iter().filter(|m| m.suite == "micro") {
        let sp = param(m, "sp").unwrap_or(1.0);
        let (key, x) = if m.case == "outer" {
            (("outer".to_string(), String::new()), sp)
        } else {
            let density = if sp >= 1.0 {
                "dense".to_string()
            } else {
                format!("sp{sp}")
            };
            ((m.case.clone(), density), param(m, "m").unwrap_or(0.0))
        };
        micro
            .entry(key)
            .or_default()
            .entry(m.who())
            .or_default()
            .push((x, m.median_ms.unwrap_or(0.0)));
    }
    for ((case, density), series) in micro {
        let series: Vec<(String, Vec<(f64, f64)>)> = series.into_iter().collect();
        let expr = super::micro::PATTERNS
            .iter()
            .find(|p| p.id == case)
            .map_or(case.clone(), |p| format!("{} {}", p.figure, p.expression));
        let (name, x_desc, title) = if case == "outer" {
            ("micro_outer.svg".to_string(), "sparsity of X", expr)
        } else {
            (
                format!("micro_{case}_{density}.svg"),
                "rows of X",
                format!("{expr}, {density}"),
            )
        };
        emit(
            name.clone(),
            line_plot(
                &dir.join(&name),
                &title,
                x_desc,
                "ms per evaluation",
                &series,
            ),
        );
    }

    // Algorithms: bars per algorithm, one per system and policy, dense and sparse apart.
    for dense in [true, false] {
        let sel: Vec<&&Measurement> = ok
            .iter()
            .filter(|m| m.suite == "algorithms" && m.variant.starts_with("dense") == dense)
            .collect();
        if sel.is_empty() {
            continue;
        }
        let mut groups: Vec<String> = Vec::new();
        let mut whos: Vec<String> = Vec::new();
        for m in &sel {
            if !groups.contains(&m.case) {
                groups.push(m.case.clone());
            }
            if !whos.contains(&m.who()) {
                whos.push(m.who());
            }
        }
        let series: Vec<(String, Vec<Option<f64>>)> = whos
            .iter()
            .map(|w| {
                let v = groups
                    .iter()
                    .map(|g| {
                        sel.iter()
                            .find(|m| &m.case == g && &m.who() == w)
                            .and_then(|m| m.median_ms)
                    })
                    .collect();
                (w.clone(), v)
            })
            .collect();
        let kind = if dense { "dense" } else { "sparse" };
        let name = format!("algorithms_{kind}.svg");
        emit(
            name.clone(),
            bar_plot(
                &dir.join(&name),
                &format!("Algorithms, {kind} data (Tables 4/5)"),
                "ms (time_ms)",
                &groups,
                &series,
            ),
        );
    }

    // Compile: plans per script with and without partitioning and pruning (Figure 15), and
    // compile time components (Table 3).
    let comp: Vec<&&Measurement> = ok.iter().filter(|m| m.suite == "compile").collect();
    if !comp.is_empty() {
        let groups: Vec<String> = comp.iter().map(|m| m.case.clone()).collect();
        let fig = |keys: &[(&str, &str)]| -> Vec<(String, Vec<Option<f64>>)> {
            keys.iter()
                .map(|(k, label)| {
                    (
                        label.to_string(),
                        comp.iter().map(|m| m.figures.get(*k).copied()).collect(),
                    )
                })
                .collect()
        };
        let name = "compile_plans.svg".to_string();
        emit(
            name.clone(),
            bar_plot(
                &dir.join(&name),
                "Plans evaluated (Figure 15)",
                "plans",
                &groups,
                &fig(&[
                    (
                        "plans_unpartitioned_exhaustive",
                        "no partitioning, no pruning",
                    ),
                    ("plans_partitioned_exhaustive", "partitioning, no pruning"),
                    (
                        "plans_evaluated_unpruned",
                        "partitioning, no pruning (budgeted run)",
                    ),
                    ("plans_evaluated", "partitioning and pruning (gen)"),
                ]),
            ),
        );
        let name = "compile_times.svg".to_string();
        emit(
            name.clone(),
            bar_plot(
                &dir.join(&name),
                "Compilation time per script (Table 3)",
                "ms",
                &groups,
                &fig(&[
                    ("codegen_ms", "JIT (codegen)"),
                    ("fusion_planning_ms", "fusion planning"),
                    ("compile_ms", "compile total"),
                    ("total_ms", "run total"),
                ]),
            ),
        );
    }
    (files, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_svg() {
        let dir = std::env::temp_dir().join(format!("lafuse-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = dir.join("l.svg");
        line_plot(
            &line,
            "t",
            "x",
            "y",
            &[("a".into(), vec![(1e3, 1.0), (1e4, 10.0)])],
        )
        .unwrap();
        let bars = dir.join("b.svg");
        bar_plot(
            &bars,
            "t",
            "y",
            &["g1".into(), "g2".into()],
            &[
                ("s".into(), vec![Some(1.0), None]),
                ("u".into(), vec![Some(3.0), Some(2.0)]),
            ],
        )
        .unwrap();
        for p in [line, bars] {
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(text.trim_start().starts_with("<svg"), "{text:.80}");
        }
        assert!(line_plot(&dir.join("e.svg"), "t", "x", "y", &[]).is_err());
        assert_eq!(log_label(2000.0, true), "2e3");
        assert_eq!(log_label(0.05, false), "0.05");
        assert_eq!(log_label(3000.0, false), "");
        assert_eq!(log_label(1e9, false), "1e9");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
