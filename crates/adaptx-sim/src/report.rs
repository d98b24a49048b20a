//! Tables, CSV series and the HTML report with SVG plots.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::band::{Bound, Check, num};
use crate::measure::{Run, Second};
use crate::scenario::Law;
use crate::suite::{Baselines, Outcome, Suite};

/// A plain-text table with aligned columns.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = w[i] - c.chars().count();
            s.push_str(c);
            s.push_str(&" ".repeat(pad));
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    let rule: Vec<String> = w.iter().map(|&n| "-".repeat(n)).collect();
    line(rule.iter().map(String::as_str).collect(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// One row of the summary: a policy's run of a scenario.
struct Row {
    label: String,
    run: Run,
}

fn rows(o: &Outcome, seed: u64) -> Vec<Row> {
    let mut rows: Vec<Row> = Law::DEFAULT
        .iter()
        .chain(Law::PEERS.iter())
        .filter_map(|&law| {
            o.run(law, seed).map(|r| Row {
                label: law.to_string(),
                run: r.clone(),
            })
        })
        .collect();
    if let Some(Ok(b)) = &o.baselines {
        if b.seed == seed {
            let c = b.c_star.unwrap_or(0);
            for r in &b.fixed {
                let crate::measure::Policy::Fixed(l) = r.policy else {
                    continue;
                };
                rows.push(Row {
                    label: format!("fixed {l} ({})", fixed_tag(l, c)),
                    run: r.clone(),
                });
            }
            if let crate::measure::Policy::Fixed(l) = b.oracle.policy {
                rows.push(Row {
                    label: format!("oracle (fixed {l})"),
                    run: b.oracle.clone(),
                });
            }
        }
    }
    rows
}

/// Which of the baselines C*/2, C*, 2·C*, 5·C* the fixed limit `l` is,
/// with `c` = C*.
fn fixed_tag(l: usize, c: usize) -> &'static str {
    if l == (c / 2).max(1) && l != c {
        FIXED_TAGS[0]
    } else if l == c {
        FIXED_TAGS[1]
    } else if l == 2 * c {
        FIXED_TAGS[2]
    } else {
        FIXED_TAGS[3]
    }
}

/// The fixed-limit baselines, in column order.
const FIXED_TAGS: [&str; 4] = ["C*/2", "C*", "2·C*", "5·C*"];

const SUMMARY_HEADER: [&str; 10] = [
    "scenario",
    "policy",
    "gp/capacity",
    "gp/oracle",
    "gp/oracle≤2%",
    "p99 ms",
    "overload",
    "overload %",
    "mean limit",
    "limit/C*",
];

fn summary_rows(suite: &Suite) -> Vec<Vec<String>> {
    let seed = suite.options.seeds.first().copied().unwrap_or(0);
    let mut out = Vec::new();
    for o in suite.outcomes.iter().filter(|o| o.shown) {
        let oracle = match &o.baselines {
            Some(Ok(b)) => Some(b.oracle.steady_goodput()),
            _ => None,
        };
        let capped = match &o.baselines {
            Some(Ok(b)) => b.capped_oracle.as_ref(),
            _ => None,
        };
        let mut rows = rows(o, seed);
        if let Some(r) = capped.filter(|r| r.seed == seed) {
            if let crate::measure::Policy::Fixed(l) = r.policy {
                rows.push(Row {
                    label: format!("oracle ≤2% (fixed {l})"),
                    run: r.clone(),
                });
            }
        }
        let ratio = |g: Option<f64>, r: &Run| {
            g.map_or("-".into(), |g| format!("{:.3}", r.steady_goodput() / g))
        };
        for (k, row) in rows.iter().enumerate() {
            let r = &row.run;
            let sent: u64 = r.steady().iter().map(|s| s.sent).sum();
            out.push(vec![
                if k == 0 {
                    o.scenario.id().to_string()
                } else {
                    String::new()
                },
                row.label.clone(),
                format!("{:.3}", r.goodput_fraction()),
                ratio(oracle, r),
                ratio(capped.map(Run::steady_goodput), r),
                r.steady_p99_ns
                    .map_or("-".into(), |v| format!("{:.1}", v as f64 / 1e6)),
                r.steady_overload().to_string(),
                if sent == 0 {
                    "-".into()
                } else {
                    format!("{:.2}", 100.0 * r.overload_fraction())
                },
                format!("{:.1}", r.mean_limit()),
                r.mean_c_star()
                    .filter(|c| *c > 0.0)
                    .map_or("-".into(), |c| format!("{:.2}", r.mean_limit() / c)),
            ]);
        }
        if let Some(Err(e)) = &o.baselines {
            out.push(vec![
                String::new(),
                "baselines".into(),
                format!("panicked: {e}"),
            ]);
        }
        for (law, seed, m) in &o.panics {
            out.push(vec![
                String::new(),
                law.to_string(),
                format!("seed {seed} panicked: {m}"),
            ]);
        }
    }
    for r in &mut out {
        r.resize(SUMMARY_HEADER.len(), String::new());
    }
    out
}

/// The summary table: for each scenario and policy (first seed), steady
/// goodput as a fraction of capacity and of the oracle, p99 latency,
/// overload failures, and the mean limit against C*.
pub fn summary_table(suite: &Suite) -> String {
    table(&SUMMARY_HEADER, &summary_rows(suite))
}

const CHECK_HEADER: [&str; 10] = [
    "scenario",
    "law",
    "band",
    "bound",
    "median",
    "(seed)",
    "worst",
    "(seed)",
    "worst bound",
    "result",
];

fn verdict(c: &Check) -> String {
    if !c.failed_seeds.is_empty() {
        return format!("FAIL: seed {} {}", c.failed_seeds[0].0, c.failed_seeds[0].1);
    }
    match (c.bound, c.median_ok(), c.worst_ok()) {
        (Bound::Report, ..) => "reported".into(),
        (_, true, true) => "pass".into(),
        (_, false, true) => "FAIL (median)".into(),
        (_, true, false) => "FAIL (worst)".into(),
        (_, false, false) => "FAIL (median, worst)".into(),
    }
}

fn check_rows<'a>(checks: impl Iterator<Item = &'a Check>) -> Vec<Vec<String>> {
    checks
        .map(|c| {
            vec![
                c.scenario.clone(),
                c.law.to_string(),
                c.what.clone(),
                c.bound.describe(),
                num(c.median.0),
                c.median.1.to_string(),
                num(c.worst.0),
                c.worst.1.to_string(),
                c.bound.looser().describe(),
                verdict(c),
            ]
        })
        .collect()
}

/// The band table: each bound's median and worst seed against its bounds.
pub fn check_table(suite: &Suite) -> String {
    table(&CHECK_HEADER, &check_rows(suite.checks()))
}

/// Writes one CSV per run (laws on every seed; baselines and oracle on
/// theirs) into `dir`: one row per second and client, `client` = `all` for
/// the totals.
///
/// # Errors
///
/// If a file cannot be written.
pub fn write_csv(suite: &Suite, dir: &Path) -> io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut n = 0;
    let mut write = |r: &Run, tag: &str| -> io::Result<()> {
        let name = format!("{}--{tag}--seed{}.csv", r.scenario, r.seed);
        let mut s = String::from(
            "t_end_s,client,limit,limit_min,limit_max,limit_median,in_flight,in_flight_peak,goodput,client_errors,rejects,timeouts,shed,arrivals,sent,p50_ms,p99_ms,capacity,c_star,violations\n",
        );
        let ms = |v: Option<u64>| v.map_or(String::new(), |v| format!("{:.3}", v as f64 / 1e6));
        let mut row = |t: usize, client: &str, x: &Second| {
            let _ = writeln!(
                s,
                "{},{client},{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{:.3},{},{}",
                t + 1,
                x.limit,
                x.limit_min,
                x.limit_max,
                x.limit_median,
                x.in_flight,
                x.in_flight_peak,
                x.goodput,
                x.client_errors,
                x.rejects,
                x.timeouts,
                x.shed,
                x.arrivals,
                x.sent,
                ms(x.p50_ns),
                ms(x.p99_ns),
                x.capacity,
                x.c_star.map_or(String::new(), |c| format!("{c:.3}")),
                x.violations
            );
        };
        for (t, x) in r.seconds.iter().enumerate() {
            row(t, "all", x);
            if r.clients.len() > 1 {
                for (c, series) in r.clients.iter().enumerate() {
                    if let Some(x) = series.get(t) {
                        row(t, &c.to_string(), x);
                    }
                }
            }
        }
        std::fs::write(dir.join(name), s)?;
        n += 1;
        Ok(())
    };
    for o in &suite.outcomes {
        for ((law, _), r) in &o.runs {
            write(r, law.name())?;
        }
        if let Some(Ok(b)) = &o.baselines {
            for r in &b.fixed {
                write(r, &policy_tag(r))?;
            }
            write(&b.oracle, "oracle")?;
            if let Some(c) = &b.capped_oracle {
                write(c, "capped-oracle")?;
            }
        }
    }
    Ok(n)
}

fn policy_tag(r: &Run) -> String {
    match r.policy {
        crate::measure::Policy::Law(l) => l.to_string(),
        crate::measure::Policy::Fixed(n) => format!("fixed{n}"),
    }
}

// The Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008):
// eight colours that stay apart for the common forms of colour blindness.
const OI_BLUE: RGBColor = RGBColor(0, 114, 178);
const OI_VERMILLION: RGBColor = RGBColor(213, 94, 0);
const OI_GREEN: RGBColor = RGBColor(0, 158, 115);
const OI_ORANGE: RGBColor = RGBColor(230, 159, 0);
const OI_SKY: RGBColor = RGBColor(86, 180, 233);
const OI_PURPLE: RGBColor = RGBColor(204, 121, 167);
const OI_BLACK: RGBColor = RGBColor(0, 0, 0);

/// How a series is drawn: colour, dash pattern (`None` = solid; else dash
/// and gap in pixels) and width. Every law has its own colour *and* dash
/// pattern, so two laws whose lines coincide (AIMD and Vegas on a reject
/// ceiling) stay apart where the dashes break, and colour is never the only
/// carrier.
#[derive(Debug, Clone, Copy)]
struct Style {
    color: RGBColor,
    dash: Option<(u32, u32)>,
    width: u32,
}

fn law_style(law: Law) -> Style {
    let (color, dash, width) = match law {
        Law::Aimd => (OI_BLUE, None, 3),
        Law::Vegas => (OI_VERMILLION, Some((10, 5)), 2),
        Law::Gradient => (OI_GREEN, Some((3, 3)), 2),
        Law::Ceiling => (OI_BLACK, None, 2),
        Law::NetflixGradient2 => (OI_ORANGE, Some((14, 4)), 2),
        Law::NetflixAimd => (OI_SKY, Some((6, 3)), 2),
        Law::VectorArc => (OI_PURPLE, Some((2, 6)), 2),
        Law::EnvoyGradient => (OI_BLACK, Some((8, 3)), 1),
        Law::Rate => (OI_BLUE, None, 3),
        Law::RateCubic => (OI_VERMILLION, Some((10, 5)), 2),
        Law::Throttle => (OI_GREEN, Some((3, 3)), 2),
    };
    Style { color, dash, width }
}

/// C* and capacity: thin dark grey, long dashes.
const REFERENCE: Style = Style {
    color: RGBColor(90, 90, 90),
    dash: Some((4, 4)),
    width: 1,
};

/// The oracle: mid grey, short dashes.
const ORACLE: Style = Style {
    color: RGBColor(160, 160, 160),
    dash: Some((2, 2)),
    width: 2,
};

struct Line {
    name: String,
    style: Style,
    points: Vec<(f64, f64)>,
}

fn series(r: &Run, f: impl Fn(&Second) -> Option<f64>) -> Vec<(f64, f64)> {
    r.seconds
        .iter()
        .enumerate()
        .filter_map(|(t, s)| f(s).map(|v| ((t + 1) as f64, v)))
        .collect()
}

/// Width and height of a chart, and the width of its legend margin.
const CHART_SIZE: (u32, u32) = (760, 300);
const LEGEND_WIDTH: u32 = 220;

/// One SVG line chart, its legend in a margin to the right of the plot so it
/// never hides data. The solid lines are drawn first, dashed ones on top.
fn chart(title: &str, y_desc: &str, x_max: f64, lines: &[Line]) -> String {
    let mut svg = String::new();
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.05;
    let mut order: Vec<&Line> = lines.iter().collect();
    order.sort_by_key(|l| l.style.dash.is_some());
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + '_>> {
        let root = SVGBackend::with_string(&mut svg, CHART_SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let (plot, legend) = root.split_horizontally(CHART_SIZE.0 - LEGEND_WIDTH);
        let mut c = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
        let y_fmt = |v: &f64| {
            if y_max >= 10.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        };
        c.configure_mesh()
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&y_fmt)
            .x_desc("time (s)")
            .y_desc(y_desc)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for l in &order {
            let st = l.style.color.stroke_width(l.style.width);
            match l.style.dash {
                None => {
                    c.draw_series(LineSeries::new(l.points.iter().copied(), st))?;
                }
                Some((dash, gap)) => {
                    c.draw_series(DashedLineSeries::new(
                        l.points.iter().copied(),
                        dash,
                        gap,
                        st,
                    ))?;
                }
            }
        }
        legend.draw(&Text::new("legend", (8, 30), ("sans-serif", 12)))?;
        for (i, l) in lines.iter().enumerate() {
            let y = 52 + 18 * i as i32;
            let st = l.style.color.stroke_width(l.style.width);
            let seg = vec![(8, y), (40, y)];
            match l.style.dash {
                None => legend.draw(&PathElement::new(seg, st))?,
                Some((dash, gap)) => legend.draw(&DashedPathElement::new(seg, dash, gap, st))?,
            }
            legend.draw(&Text::new(l.name.as_str(), (46, y - 6), ("sans-serif", 12)))?;
        }
        root.present()?;
        Ok(())
    })();
    match drawn {
        Ok(()) => svg,
        Err(e) => format!("<p>chart failed: {}</p>", esc(&e.to_string())),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn html_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table><thead><tr>");
    for h in header {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows {
        let fail = r.iter().any(|c| c.starts_with("FAIL"));
        s.push_str(if fail { "<tr class=\"fail\">" } else { "<tr>" });
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// A note naming the series of `lines` that are identical (drawn on top of
/// each other), or nothing.
fn coincidence_note(lines: &[Line]) -> String {
    let mut seen = vec![false; lines.len()];
    let mut groups = Vec::new();
    for i in 0..lines.len() {
        if seen[i] || lines[i].points.is_empty() {
            continue;
        }
        let same: Vec<usize> = (i..lines.len())
            .filter(|&j| lines[j].points == lines[i].points)
            .collect();
        if same.len() > 1 {
            for &j in &same {
                seen[j] = true;
            }
            groups.push(
                same.iter()
                    .map(|&j| lines[j].name.as_str())
                    .collect::<Vec<_>>()
                    .join(" = "),
            );
        }
    }
    if groups.is_empty() {
        String::new()
    } else {
        format!(
            "<p class=\"note\">Identical lines (drawn on top of each other; the dashes let the lower one show): {}.</p>",
            esc(&groups.join("; "))
        )
    }
}

/// One chart as a figure: the SVG and, below it, the coincidence note.
fn figure(key: &str, title: &str, y_desc: &str, x_max: f64, lines: &[Line]) -> String {
    format!(
        "<figure class=\"chart\" data-chart=\"{key}\">{}{}</figure>",
        chart(title, y_desc, x_max, lines),
        coincidence_note(lines)
    )
}

/// The kinds of chart each scenario section has, in order: (key, title,
/// y-axis description with its unit).
pub const CHARTS: [(&str, &str, &str); 4] = [
    ("limit", "limit", "limit (permits)"),
    (
        "in-flight",
        "in-flight (time average)",
        "in-flight (permits)",
    ),
    ("goodput", "goodput", "goodput (successes/s)"),
    ("p99", "p99 latency of successes", "p99 latency (ms)"),
];

fn scenario_charts(o: &Outcome, seed: u64) -> String {
    let runs: Vec<(Law, &Run)> = Law::DEFAULT
        .iter()
        .chain(Law::PEERS.iter())
        .filter_map(|&l| o.run(l, seed).map(|r| (l, r)))
        .collect();
    let Some((_, first)) = runs.first() else {
        return String::new();
    };
    let x_max = first.seconds.len() as f64;
    let oracle = match &o.baselines {
        Some(Ok(b)) if b.seed == seed => Some(&b.oracle),
        _ => None,
    };
    let law_lines = |f: &dyn Fn(&Second) -> Option<f64>| -> Vec<Line> {
        runs.iter()
            .map(|(l, r)| Line {
                name: l.to_string(),
                style: law_style(*l),
                points: series(r, f),
            })
            .collect()
    };
    let mut limit = law_lines(&|s| Some(s.limit as f64));
    let c_star = series(first, |s| s.c_star);
    if !c_star.is_empty() {
        limit.push(Line {
            name: "C*".into(),
            style: REFERENCE,
            points: c_star.clone(),
        });
    }
    if let Some(orc) = oracle {
        limit.push(Line {
            name: format!("{}", orc.policy).replace("fixed", "oracle"),
            style: ORACLE,
            points: series(orc, |s| Some(s.limit as f64)),
        });
    }
    let mut in_flight = law_lines(&|s| Some(s.in_flight));
    if !c_star.is_empty() {
        in_flight.push(Line {
            name: "C*".into(),
            style: REFERENCE,
            points: c_star,
        });
    }
    let mut goodput = law_lines(&|s| Some(s.goodput as f64));
    goodput.push(Line {
        name: "capacity".into(),
        style: REFERENCE,
        points: series(first, |s| Some(s.capacity)),
    });
    if let Some(orc) = oracle {
        goodput.push(Line {
            name: "oracle".into(),
            style: ORACLE,
            points: series(orc, |s| Some(s.goodput as f64)),
        });
    }
    let p99 = law_lines(&|s| s.p99_ns.map(|v| v as f64 / 1e6));
    let mut s = String::from("<div class=\"charts\">");
    for ((key, title, y), lines) in CHARTS.iter().zip([limit, in_flight, goodput, p99]) {
        s.push_str(&figure(key, title, y, x_max, &lines));
    }
    s.push_str("</div>");
    s
}

/// A goodput reference of the first screen: a policy's steady goodput is
/// shown divided by it.
struct Reference {
    /// Column and heading name.
    name: &'static str,
    /// What it is, for the note under the heat map.
    what: &'static str,
    /// Its run among a scenario's baselines, if it has one.
    pick: fn(&Baselines) -> Option<&Run>,
}

fn oracle_run(b: &Baselines) -> Option<&Run> {
    Some(&b.oracle)
}

/// The goodput references, in column order: each has its column and its
/// goodput heat map on the first screen.
fn capped_oracle_run(b: &Baselines) -> Option<&Run> {
    b.capped_oracle.as_ref()
}

const REFERENCES: [Reference; 2] = [
    Reference {
        name: "oracle",
        what: "the best fixed limit (highest steady goodput)",
        pick: oracle_run,
    },
    Reference {
        name: "oracle ≤2%",
        what: "the best fixed limit whose steady overload is at most 2 % of the requests sent (on a soft ceiling the plain oracle wins by taking a third of them as errors)",
        pick: capped_oracle_run,
    },
];

/// One column of the first screen: a law, or a fixed baseline by tag, or a
/// reference.
#[derive(Clone, Copy)]
enum Column {
    Law(Law),
    Fixed(&'static str),
    Reference(usize),
}

impl Column {
    fn label(self) -> String {
        match self {
            Column::Law(l) => l.to_string(),
            Column::Fixed(tag) => format!("fixed {tag}"),
            Column::Reference(i) => REFERENCES[i].name.to_string(),
        }
    }

    fn run(self, o: &Outcome, seed: u64) -> Option<&Run> {
        match self {
            Column::Law(l) => o.run(l, seed),
            Column::Fixed(tag) => {
                let Some(Ok(b)) = &o.baselines else {
                    return None;
                };
                let c = b.c_star?;
                b.fixed.iter().find(|r| {
                    matches!(r.policy, crate::measure::Policy::Fixed(l) if fixed_tag(l, c) == tag)
                })
            }
            Column::Reference(i) => match &o.baselines {
                Some(Ok(b)) if b.seed == seed => (REFERENCES[i].pick)(b),
                _ => None,
            },
        }
    }
}

/// A colour of the viridis map (van der Walt & Smith, matplotlib 2015:
/// perceptually uniform, readable in grey and by colour-blind readers) at
/// `t` in [0, 1], by linear interpolation between nine stops; dark is worse,
/// light is better.
fn viridis(t: f64) -> (u8, u8, u8) {
    const STOPS: [(f64, f64, f64); 9] = [
        (68.0, 1.0, 84.0),
        (71.0, 45.0, 123.0),
        (59.0, 82.0, 139.0),
        (44.0, 114.0, 142.0),
        (33.0, 145.0, 140.0),
        (40.0, 174.0, 128.0),
        (94.0, 201.0, 98.0),
        (173.0, 220.0, 48.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
    (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// A heat-map cell: the number printed, on the colour of `t`.
fn heat_cell(text: &str, t: Option<f64>) -> String {
    match t {
        None => format!("<td class=\"na\">{}</td>", esc(text)),
        Some(t) => {
            let (r, g, b) = viridis(t);
            let fg = if t < 0.55 { "#fff" } else { "#000" };
            format!(
                "<td style=\"background:rgb({r},{g},{b});color:{fg}\">{}</td>",
                esc(text)
            )
        }
    }
}

/// Colour position of a goodput ratio: 0.5 or less is darkest, 1 lightest.
fn goodput_shade(ratio: f64) -> f64 {
    (ratio - 0.5) / 0.5
}

/// Colour position of an overload fraction, on a log scale: 0 % lightest,
/// 9 % half way, 99 % darkest.
fn overload_shade(fraction: f64) -> f64 {
    1.0 - (1.0 + 100.0 * fraction).log10() / 2.0
}

/// How the first screen ranks policies: steady goodput ÷ the reference,
/// discounted by the share of requests sent that failed as overload.
fn pick_score(gp_ratio: f64, overload: f64) -> f64 {
    gp_ratio * (1.0 - overload)
}

/// The first screen: which law to use per scenario, and by how much, as heat
/// maps of goodput ÷ reference and overload % per scenario × policy (adaptx's
/// laws, the peers, the fixed baselines, the references), with the number in
/// every cell.
fn first_screen(suite: &Suite, seed: u64) -> String {
    let shown: Vec<&Outcome> = suite.outcomes.iter().filter(|o| o.shown).collect();
    let mut cols: Vec<Column> = Law::DEFAULT
        .iter()
        .chain(Law::PEERS.iter())
        .filter(|l| suite.options.laws.contains(l))
        .map(|&l| Column::Law(l))
        .collect();
    let has_baselines = shown
        .iter()
        .any(|o| matches!(&o.baselines, Some(Ok(b)) if b.seed == seed));
    if has_baselines {
        cols.extend(FIXED_TAGS.iter().map(|&t| Column::Fixed(t)));
        cols.extend((0..REFERENCES.len()).map(Column::Reference));
    }
    // (heading, note, the reference run of a scenario if any)
    let mut maps: Vec<(String, String, Option<usize>)> = Vec::new();
    if has_baselines {
        for (i, r) in REFERENCES.iter().enumerate() {
            maps.push((
                format!("goodput ÷ {}", r.name),
                format!(
                    "Steady goodput divided by the {}'s: {}. 1.00 matches it.",
                    r.name, r.what
                ),
                Some(i),
            ));
        }
    } else {
        maps.push((
            "goodput ÷ capacity".into(),
            "Steady goodput divided by the backend's goodput ceiling (run with --baselines for the oracle).".into(),
            None,
        ));
    }
    let mut h =
        String::from("<section id=\"first-screen\"><h2>Which law here, and by how much</h2>");
    let _ = write!(
        h,
        "<p class=\"note\">Seed {seed}, steady state. Every cell prints its number; the colour (viridis: dark = worse, light = better) only repeats it. \
Policies marked (peer) are re-implementations of other projects' laws from their published descriptions, not their code. \
The pick ranks adaptx's laws and the peers by goodput ÷ reference × (1 − overload fraction).</p>"
    );
    let head = |h: &mut String, first: &str, extra: &[&str]| {
        let _ = write!(h, "<thead><tr><th>{}</th>", esc(first));
        for c in &cols {
            let _ = write!(h, "<th>{}</th>", esc(&c.label()));
        }
        for e in extra {
            let _ = write!(h, "<th>{}</th>", esc(e));
        }
        h.push_str("</tr></thead><tbody>");
    };
    for (title, note, reference) in &maps {
        let _ = write!(
            h,
            "<h3>{}</h3><p class=\"note\">{}</p><table class=\"heat\" data-metric=\"goodput\" data-reference=\"{}\">",
            esc(title),
            esc(note),
            esc(reference.map_or("capacity", |i| REFERENCES[i].name))
        );
        head(
            &mut h,
            "scenario",
            &["pick: adaptx", "best peer", "adaptx vs peer"],
        );
        for o in &shown {
            let denom = match reference {
                Some(i) => Column::Reference(*i)
                    .run(o, seed)
                    .map(Run::steady_goodput)
                    .filter(|g| *g > 0.0),
                None => None,
            };
            let ratio = |r: &Run| match (reference, denom) {
                (Some(_), Some(g)) => Some(r.steady_goodput() / g),
                (Some(_), None) => None,
                (None, _) => Some(r.goodput_fraction()),
            };
            let _ = write!(
                h,
                "<tr><th><a href=\"#{id}\">{id}</a></th>",
                id = esc(o.scenario.id())
            );
            for c in &cols {
                let v = c.run(o, seed).and_then(ratio);
                let text = v.map_or("–".to_string(), |v| format!("{v:.2}"));
                h.push_str(&heat_cell(&text, v.map(goodput_shade)));
            }
            let best = |peers: bool| {
                cols.iter()
                    .filter_map(|c| match c {
                        Column::Law(l) if l.is_peer() == peers => {
                            let r = o.run(*l, seed)?;
                            let g = ratio(r)?;
                            Some((*l, g, r.overload_fraction()))
                        }
                        _ => None,
                    })
                    // The first in table order wins a tie.
                    .reduce(|a, b| {
                        if pick_score(b.1, b.2) > pick_score(a.1, a.2) {
                            b
                        } else {
                            a
                        }
                    })
            };
            let show = |p: Option<(Law, f64, f64)>| {
                p.map_or("–".to_string(), |(l, g, ov)| {
                    format!("{} {g:.2} ({:.1} % overload)", l.name(), 100.0 * ov)
                })
            };
            let (ours, peer) = (best(false), best(true));
            let margin = match (ours, peer) {
                (Some(a), Some(b)) => {
                    let (sa, sb) = (pick_score(a.1, a.2), pick_score(b.1, b.2));
                    let pct = (100.0 * (sa / sb.max(1e-9) - 1.0)).round();
                    if pct == 0.0 {
                        "±0 %".to_string()
                    } else {
                        format!("{pct:+.0} %")
                    }
                }
                _ => "–".to_string(),
            };
            let _ = write!(
                h,
                "<td class=\"pick\">{}</td><td>{}</td><td>{}</td></tr>",
                esc(&show(ours)),
                esc(&show(peer)),
                esc(&margin)
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("<h3>overload % of requests sent</h3><p class=\"note\">Steady rejections and timeouts as a share of the requests sent; lower is better (colour on a log scale: 0 % lightest, 9 % half way, 99 % darkest).</p><table class=\"heat\" data-metric=\"overload\">");
    head(&mut h, "scenario", &[]);
    for o in &shown {
        let _ = write!(
            h,
            "<tr><th><a href=\"#{id}\">{id}</a></th>",
            id = esc(o.scenario.id())
        );
        for c in &cols {
            let v = c
                .run(o, seed)
                .filter(|r| r.steady().iter().any(|s| s.sent > 0))
                .map(Run::overload_fraction);
            let text = v.map_or("–".to_string(), |v| format!("{:.1}", 100.0 * v));
            h.push_str(&heat_cell(&text, v.map(overload_shade)));
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table></section>");
    h
}

/// Writes `index.html` into `dir`, one offline file: first the heat maps of
/// goodput ÷ oracle and overload % per scenario × policy with the pick per
/// scenario, then the summary table, the band table, and for each scenario
/// (a `<section class="scenario">`) its description, plots ([`CHARTS`]:
/// limit, in-flight, goodput against capacity, p99 latency over time, each
/// with its legend beside the plot), bands and oracle sweep, all inline.
///
/// # Errors
///
/// If the file cannot be written.
pub fn write_html(suite: &Suite, dir: &Path) -> io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)?;
    let seed = suite.options.seeds.first().copied().unwrap_or(0);
    let mut h = String::new();
    h.push_str(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>adaptx-sim report</title><style>\
body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:13px}\
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}\
tr.fail td{background:#fde8e8}.charts{display:flex;flex-wrap:wrap;gap:8px}\
.note{color:#555}figure.chart{margin:0}table.heat td{text-align:right;min-width:3.5em}\
table.heat td.pick{text-align:left;font-weight:bold}table.heat td.na{color:#999}</style></head><body>",
    );
    let _ = write!(
        h,
        "<h1>adaptx-sim report</h1><p>The real adaptx limiter on simulated backends, in virtual time. \
Laws: {}. Seeds: {}. Plots and the summary show seed {seed}. \
{} requests simulated in {:.1} s of wall time ({:.2} M requests/s per core).</p>",
        suite
            .options
            .laws
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        suite
            .options
            .seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        suite.requests,
        suite.wall.as_secs_f64(),
        suite.requests_per_core_second() / 1e6,
    );
    h.push_str(&first_screen(suite, seed));
    h.push_str("<h2>Summary</h2><p class=\"note\">Steady = from the later of half the run and 30 s after the last schedule change. gp = steady goodput; capacity = the goodput ceiling; oracle = the best fixed limit; overload = steady rejections + timeouts.</p>");
    h.push_str(&html_table(&SUMMARY_HEADER, &summary_rows(suite)));
    h.push_str("<h2>Bands</h2><p class=\"note\">The median seed must meet the bound, the worst seed a 1.5× looser one (a lower bound ÷ 1.5, an upper bound × 1.5).</p>");
    h.push_str(&html_table(&CHECK_HEADER, &check_rows(suite.checks())));
    for o in suite.outcomes.iter().filter(|o| o.shown) {
        let sc = &o.scenario;
        let _ = write!(
            h,
            "<section class=\"scenario\" data-scenario=\"{id}\"><h2 id=\"{id}\">{id}: {name}</h2><p>{desc}</p>",
            id = esc(sc.id()),
            name = esc(&sc.name),
            desc = esc(&sc.description)
        );
        h.push_str(&scenario_charts(o, seed));
        if !o.checks.is_empty() {
            h.push_str(&html_table(&CHECK_HEADER, &check_rows(o.checks.iter())));
        }
        if let Some(Ok(b)) = &o.baselines {
            let rows: Vec<Vec<String>> = b
                .sweep
                .iter()
                .map(|p| {
                    vec![
                        p.limit.to_string(),
                        format!("{:.1}", p.goodput),
                        format!("{:.3}", p.goodput_fraction),
                        num(p.p99_ms),
                        format!("{:.2}", 100.0 * p.overload_fraction),
                    ]
                })
                .collect();
            h.push_str("<details><summary>oracle sweep (fixed limits tried)</summary>");
            h.push_str(&html_table(
                &[
                    "fixed limit",
                    "goodput/s",
                    "gp/capacity",
                    "p99 ms",
                    "overload %",
                ],
                &rows,
            ));
            h.push_str("</details>");
        }
        h.push_str("</section>");
    }
    h.push_str("</body></html>\n");
    let path = dir.join("index.html");
    std::fs::write(&path, h)?;
    Ok(path)
}
