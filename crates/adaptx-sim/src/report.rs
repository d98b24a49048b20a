//! Tables, CSV series and the HTML report with SVG plots.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use plotters::prelude::*;

use crate::band::{Bound, Check, num};
use crate::measure::{Run, Second};
use crate::scenario::Law;
use crate::suite::{Outcome, Suite};

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
                let tag = if l == (c / 2).max(1) && l != c {
                    "C*/2"
                } else if l == c {
                    "C*"
                } else if l == 2 * c {
                    "2·C*"
                } else {
                    "5·C*"
                };
                rows.push(Row {
                    label: format!("fixed {l} ({tag})"),
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
            "t_end_s,client,limit,limit_min,limit_max,in_flight,in_flight_peak,goodput,client_errors,rejects,timeouts,shed,arrivals,sent,p50_ms,p99_ms,capacity,c_star,violations\n",
        );
        let ms = |v: Option<u64>| v.map_or(String::new(), |v| format!("{:.3}", v as f64 / 1e6));
        let mut row = |t: usize, client: &str, x: &Second| {
            let _ = writeln!(
                s,
                "{},{client},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{:.3},{},{}",
                t + 1,
                x.limit,
                x.limit_min,
                x.limit_max,
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

fn law_color(law: Law) -> RGBColor {
    match law {
        Law::Aimd => RGBColor(31, 119, 180),
        Law::Vegas => RGBColor(255, 127, 14),
        Law::Gradient => RGBColor(44, 160, 44),
        Law::Rate => RGBColor(204, 121, 167),
    }
}

const REFERENCE: RGBColor = RGBColor(40, 40, 40);
const ORACLE: RGBColor = RGBColor(150, 150, 150);

struct Line {
    name: String,
    color: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

fn series(r: &Run, f: impl Fn(&Second) -> Option<f64>) -> Vec<(f64, f64)> {
    r.seconds
        .iter()
        .enumerate()
        .filter_map(|(t, s)| f(s).map(|v| ((t + 1) as f64, v)))
        .collect()
}

/// One SVG line chart.
fn chart(title: &str, y_desc: &str, x_max: f64, lines: &[Line]) -> String {
    let mut svg = String::new();
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.3;
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + '_>> {
        let root = SVGBackend::with_string(&mut svg, (560, 300)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(52)
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
        for l in lines {
            let color = l.color;
            let style = color.stroke_width(if l.dashed { 1 } else { 2 });
            if l.dashed {
                c.draw_series(DashedLineSeries::new(l.points.iter().copied(), 6, 4, style))?
                    .label(l.name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            } else {
                c.draw_series(LineSeries::new(l.points.iter().copied(), style))?
                    .label(l.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
            }
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .draw()?;
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

fn scenario_charts(o: &Outcome, seed: u64) -> String {
    let runs: Vec<(Law, &Run)> = Law::DEFAULT
        .iter()
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
                color: law_color(*l),
                dashed: false,
                points: series(r, f),
            })
            .collect()
    };
    let mut limit = law_lines(&|s| Some(s.limit as f64));
    let c_star = series(first, |s| s.c_star);
    if !c_star.is_empty() {
        limit.push(Line {
            name: "C*".into(),
            color: REFERENCE,
            dashed: true,
            points: c_star.clone(),
        });
    }
    if let Some(orc) = oracle {
        limit.push(Line {
            name: format!("{}", orc.policy).replace("fixed", "oracle"),
            color: ORACLE,
            dashed: true,
            points: series(orc, |s| Some(s.limit as f64)),
        });
    }
    let mut in_flight = law_lines(&|s| Some(s.in_flight));
    if !c_star.is_empty() {
        in_flight.push(Line {
            name: "C*".into(),
            color: REFERENCE,
            dashed: true,
            points: c_star,
        });
    }
    let mut goodput = law_lines(&|s| Some(s.goodput as f64));
    goodput.push(Line {
        name: "capacity".into(),
        color: REFERENCE,
        dashed: true,
        points: series(first, |s| Some(s.capacity)),
    });
    if let Some(orc) = oracle {
        goodput.push(Line {
            name: "oracle".into(),
            color: ORACLE,
            dashed: true,
            points: series(orc, |s| Some(s.goodput as f64)),
        });
    }
    let p99 = law_lines(&|s| s.p99_ns.map(|v| v as f64 / 1e6));
    let mut s = String::from("<div class=\"charts\">");
    s.push_str(&chart("limit", "limit", x_max, &limit));
    s.push_str(&chart(
        "in-flight (time average)",
        "permits held",
        x_max,
        &in_flight,
    ));
    s.push_str(&chart("goodput", "successes / s", x_max, &goodput));
    s.push_str(&chart("p99 latency of successes", "ms", x_max, &p99));
    s.push_str("</div>");
    s
}

/// Writes `index.html` into `dir`: the summary table, the band table, and
/// for each scenario its description, bands and plots (limit, in-flight,
/// goodput against capacity, p99 latency over time), all inline.
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
.note{color:#555}</style></head><body>",
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
            .map(|l| l.name())
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
    h.push_str("<h2>Summary</h2><p class=\"note\">Steady = from the later of half the run and 30 s after the last schedule change. gp = steady goodput; capacity = the goodput ceiling; oracle = the best fixed limit; overload = steady rejections + timeouts.</p>");
    h.push_str(&html_table(&SUMMARY_HEADER, &summary_rows(suite)));
    h.push_str("<h2>Bands</h2><p class=\"note\">The median seed must meet the bound, the worst seed a 1.5× looser one (a lower bound ÷ 1.5, an upper bound × 1.5).</p>");
    h.push_str(&html_table(&CHECK_HEADER, &check_rows(suite.checks())));
    for o in suite.outcomes.iter().filter(|o| o.shown) {
        let sc = &o.scenario;
        let _ = write!(
            h,
            "<h2 id=\"{id}\">{id}: {name}</h2><p>{desc}</p>",
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
    }
    h.push_str("</body></html>\n");
    let path = dir.join("index.html");
    std::fs::write(&path, h)?;
    Ok(path)
}
