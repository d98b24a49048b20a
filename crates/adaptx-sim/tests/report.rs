//! The HTML report: one offline file whose first screen (the heat maps)
//! comes before the scenario sections, and every shown scenario has its
//! section with each chart as an SVG with axis labels and a legend.
//!
//! The report is parsed into an element tree by a small tag parser that
//! fails on any unbalanced tag, so a section or a chart that is cut short
//! fails the test too.

use std::path::PathBuf;

use adaptx_sim::report::{CHARTS, write_html};
use adaptx_sim::suite::{self, Entry, Options};
use adaptx_sim::{Law, Nanos, SECOND};

/// An element: its tag, attributes, children and the text directly inside.
#[derive(Debug, Default)]
struct Node {
    tag: String,
    attrs: Vec<(String, String)>,
    children: Vec<Node>,
    text: String,
}

impl Node {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every descendant (pre-order, document order) matching `f`.
    fn find_all<'a>(&'a self, f: &dyn Fn(&Node) -> bool, out: &mut Vec<&'a Node>) {
        for c in &self.children {
            if f(c) {
                out.push(c);
            }
            c.find_all(f, out);
        }
    }

    fn all(&self, f: &dyn Fn(&Node) -> bool) -> Vec<&Node> {
        let mut v = Vec::new();
        self.find_all(f, &mut v);
        v
    }

    /// All text inside, descendants included.
    fn all_text(&self) -> String {
        let mut s = self.text.clone();
        for c in &self.children {
            s.push(' ');
            s.push_str(&c.all_text());
        }
        s
    }
}

const VOID: [&str; 6] = ["meta", "br", "hr", "img", "input", "link"];

/// Parses the report's HTML (with inline SVG) into a tree; panics on an
/// unbalanced or unknown closing tag, or on any tag left open.
fn parse(html: &str) -> Node {
    let mut stack = vec![Node {
        tag: "#root".into(),
        ..Node::default()
    }];
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        let text = &rest[..lt];
        stack
            .last_mut()
            .expect("the root stays")
            .text
            .push_str(text);
        rest = &rest[lt..];
        if rest.starts_with("<!--") {
            let end = rest.find("-->").expect("unterminated comment");
            rest = &rest[end + 3..];
            continue;
        }
        let gt = rest.find('>').expect("unterminated tag");
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        if tag.starts_with('!') || tag.starts_with('?') {
            continue; // doctype, XML declaration
        }
        if let Some(name) = tag.strip_prefix('/') {
            let node = stack.pop().expect("close without open");
            assert_eq!(node.tag, name.trim(), "mismatched closing tag");
            stack
                .last_mut()
                .expect("the root stays")
                .children
                .push(node);
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let (name, attrs) = tag.split_once(char::is_whitespace).unwrap_or((tag, ""));
        let node = Node {
            tag: name.to_string(),
            attrs: parse_attrs(attrs),
            ..Node::default()
        };
        if self_closing || VOID.contains(&name) {
            stack
                .last_mut()
                .expect("the root stays")
                .children
                .push(node);
        } else {
            stack.push(node);
        }
    }
    assert_eq!(
        stack.len(),
        1,
        "unclosed tags: {:?}",
        stack.iter().map(|n| &n.tag).collect::<Vec<_>>()
    );
    stack.pop().expect("the root")
}

fn parse_attrs(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let eq = rest.find('=');
        let ws = rest.find(char::is_whitespace);
        match (eq, ws) {
            (Some(e), w) if w.is_none_or(|w| e < w) => {
                let key = rest[..e].trim().to_string();
                let after = &rest[e + 1..];
                let q = after.chars().next().expect("a value after =");
                assert!(q == '"' || q == '\'', "unquoted attribute {key}");
                let end = after[1..].find(q).expect("unterminated attribute") + 1;
                out.push((key, after[1..end].to_string()));
                rest = after[end + 1..].trim_start();
            }
            (_, Some(w)) => {
                out.push((rest[..w].to_string(), String::new()));
                rest = rest[w..].trim_start();
            }
            (_, None) => {
                out.push((rest.to_string(), String::new()));
                rest = "";
            }
        }
    }
    out
}

/// A small suite: three shipped scenarios at 30 s, adaptx's laws and the
/// peers, baselines on, written into a fresh temp directory.
fn small_report(peers: bool) -> (String, Vec<String>) {
    let mut entries: Vec<Entry> = suite::builtin()
        .expect("built-in scenarios parse")
        .into_iter()
        .filter(|e| ["03-hard-limit", "05-queueing", "08-latency-step"].contains(&e.scenario.id()))
        .collect();
    for e in &mut entries {
        e.scenario.duration = Nanos(30 * SECOND);
        e.scenario.schedule.retain(|c| c.at.0 < 30 * SECOND);
        e.scenario.bands.clear();
    }
    let ids = entries
        .iter()
        .map(|e| e.scenario.id().to_string())
        .collect();
    let mut laws = Law::ALL.to_vec();
    if peers {
        laws.extend(Law::PEERS);
    }
    let options = Options {
        laws,
        baselines: true,
        threads: 2,
        ..Options::default()
    };
    let s = suite::run(entries, &options);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "adaptx-sim-report-test-{}-{peers}",
        std::process::id()
    ));
    let path = write_html(&s, &dir).expect("report written");
    let html = std::fs::read_to_string(&path).expect("report readable");
    let _ = std::fs::remove_dir_all(&dir);
    (html, ids)
}

fn class_is(n: &Node, tag: &str, class: &str) -> bool {
    n.tag == tag
        && n.attr("class")
            .is_some_and(|c| c.split_whitespace().any(|x| x == class))
}

#[test]
fn report_has_first_screen_then_every_section_with_every_chart() {
    let (html, ids) = small_report(true);
    // One offline file: no script, stylesheet or image fetched from anywhere.
    for needle in ["<script", "<link", "src=\"http", "href=\"http", "url("] {
        assert!(!html.contains(needle), "external resource: {needle}");
    }
    let doc = parse(&html);

    // The first screen comes before the summary and every scenario section.
    let tops = doc.all(&|n| {
        n.tag == "section"
            && (n.attr("id") == Some("first-screen") || class_is(n, "section", "scenario"))
    });
    assert_eq!(
        tops.first().and_then(|n| n.attr("id")),
        Some("first-screen"),
        "the heat maps must open the report"
    );
    let first = tops[0];
    let heat = first.all(&|n| class_is(n, "table", "heat"));
    let metrics: Vec<_> = heat.iter().filter_map(|t| t.attr("data-metric")).collect();
    assert_eq!(metrics, ["goodput", "goodput", "overload"]);
    let references: Vec<_> = heat
        .iter()
        .filter_map(|t| t.attr("data-reference"))
        .collect();
    assert_eq!(references, ["oracle", "oracle ≤2%"]);
    for t in &heat {
        let header = t
            .all(&|n| n.tag == "th")
            .iter()
            .map(|n| n.all_text())
            .collect::<Vec<_>>();
        for law in Law::ALL.iter().chain(Law::PEERS.iter()) {
            assert!(
                header.iter().any(|h| h.trim() == law.to_string()),
                "heat map lacks {law}"
            );
        }
        assert!(header.iter().any(|h| h.trim() == "oracle"));
        assert!(header.iter().any(|h| h.trim() == "oracle ≤2%"));
        assert!(header.iter().any(|h| h.trim() == "fixed C*"));
        // One row per scenario, every cell printing a number or a dash.
        let rows = t.all(&|n| n.tag == "tr");
        assert_eq!(rows.len(), 1 + ids.len());
        for row in &rows[1..] {
            for td in row.all(&|n| n.tag == "td") {
                assert!(!td.all_text().trim().is_empty(), "an empty heat-map cell");
            }
        }
    }
    assert!(
        html.find("id=\"first-screen\"") < html.find("<h2>Summary</h2>"),
        "the first screen must come before the long tables"
    );

    // Every scenario has its section, with every chart.
    let sections: Vec<&Node> = tops[1..].to_vec();
    let shown: Vec<&str> = sections
        .iter()
        .filter_map(|n| n.attr("data-scenario"))
        .collect();
    assert_eq!(shown, ids);
    for sec in &sections {
        let id = sec.attr("data-scenario").unwrap();
        let figs = sec.all(&|n| class_is(n, "figure", "chart"));
        let keys: Vec<&str> = figs.iter().filter_map(|f| f.attr("data-chart")).collect();
        let want: Vec<&str> = CHARTS.iter().map(|c| c.0).collect();
        assert_eq!(keys, want, "{id}: charts");
        for (fig, (key, _, y_desc)) in figs.iter().zip(CHARTS) {
            let svgs = fig.all(&|n| n.tag == "svg");
            assert_eq!(svgs.len(), 1, "{id}/{key}: one SVG");
            let texts: Vec<String> = svgs[0]
                .all(&|n| n.tag == "text")
                .iter()
                .map(|n| n.all_text().trim().to_string())
                .collect();
            for label in ["time (s)", y_desc, "legend"] {
                assert!(
                    texts.iter().any(|t| t == label),
                    "{id}/{key}: no `{label}` in {texts:?}"
                );
            }
            // The legend names every law that ran, peers included.
            for law in Law::ALL.iter().chain(Law::PEERS.iter()) {
                let name = law.to_string();
                assert!(texts.contains(&name), "{id}/{key}: legend lacks {name}");
            }
        }
    }
}

#[test]
fn report_without_peers_shows_none_and_notes_coinciding_lines() {
    let (html, _) = small_report(false);
    let doc = parse(&html);
    assert!(
        !html.contains("(peer)</"),
        "a peer appears although none ran"
    );
    assert!(
        !doc.all(&|n| n.attr("id") == Some("first-screen"))
            .is_empty()
    );
    // AIMD and Vegas coincide on the hard limit: the report says so.
    assert!(html.contains("Identical lines"));
    assert!(html.contains("aimd = vegas"));
}
