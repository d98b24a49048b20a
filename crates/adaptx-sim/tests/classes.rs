//! Request classes, the limiter's queue and partitions in scenarios: the
//! schema's errors, and per-class measures that add up to the totals.

mod common;

use adaptx_sim::{Policy, Scenario, run};

use common::{assert_mentions, error};

const OPEN: &str = r#"
name = "classes"
duration = "10s"
[backend]
service_time = "50ms"
max_concurrency = 10
over_limit = "reject"
[demand]
kind = "open"
rate = 400.0
[limiter]
initial_limit = 10
min_limit = 10
max_limit = 10
"#;

fn with(extra: &str) -> String {
    format!("{OPEN}{extra}")
}

#[test]
fn class_shares_must_sum_to_one() {
    let e = error(&with(
        "[[class]]\nname = \"a\"\nshare = 0.5\n[[class]]\nname = \"b\"\nshare = 0.4\n",
    ));
    assert_mentions(&e, &["bad.toml", "class", "sum to 0.9", "expected 1"]);
    // Also after a change of one share.
    let e = error(&with(
        "[[class]]\nname = \"a\"\nshare = 0.5\nschedule = [{ at = \"5s\", share = 0.1 }]\n[[class]]\nname = \"b\"\nshare = 0.5\n",
    ));
    assert_mentions(&e, &["sum to 0.6", "5s"]);
}

#[test]
fn classes_need_an_open_demand_and_known_partitions() {
    let closed = with("[[class]]\nname = \"a\"\nshare = 1.0\n").replace(
        "kind = \"open\"\nrate = 400.0",
        "kind = \"closed\"\nworkers = 10",
    );
    assert_mentions(&error(&closed), &["class", "open demand"]);
    let e = error(&with(
        "[[class]]\nname = \"a\"\nshare = 1.0\npartition = \"critical\"\n",
    ));
    assert_mentions(&e, &["class[0].partition", "\"critical\""]);
}

#[test]
fn limiter_queue_and_partitions_are_checked() {
    let e = error(&with("queue = { order = \"adaptive_lifo\" }\n"));
    assert_mentions(&e, &["limiter.queue.max_age", "required"]);
    let e = error(&with("queue = { max_waiters = 0, timeout = \"1s\" }\n"));
    assert_mentions(&e, &["limiter.queue.timeout", "max_waiters 0"]);
    let e = error(&with(
        "partitions = [{ name = \"a\", share = 0.8 }, { name = \"b\", share = 0.5 }]\n",
    ));
    assert_mentions(&e, &["limiter.partitions", "130.0 %", "at most 100 %"]);
    let e = error(&with("reserve = 0.5\n"));
    assert_mentions(&e, &["limiter.reserve", "only with partitions"]);
}

#[test]
fn class_measures_add_up_to_the_totals() {
    let sc = Scenario::from_toml(
        "ok.toml",
        &with(
            "partitions = [{ name = \"a\", share = 0.5 }]\n[[class]]\nname = \"a\"\nshare = 0.25\npartition = \"a\"\npriority = 1\n[[class]]\nname = \"b\"\nshare = 0.75\n",
        ),
    )
    .expect("valid");
    let r = run(&sc, Policy::Fixed(10), 7);
    assert_eq!(r.classes.len(), 2);
    for (k, total) in r.seconds.iter().enumerate() {
        let sum =
            |f: fn(&adaptx_sim::Second) -> u64| -> u64 { r.classes.iter().map(|c| f(&c[k])).sum() };
        assert_eq!(sum(|s| s.goodput), total.goodput, "second {k}");
        assert_eq!(sum(|s| s.arrivals), total.arrivals, "second {k}");
        assert_eq!(sum(|s| s.shed), total.shed, "second {k}");
        assert_eq!(sum(|s| s.sent), total.sent, "second {k}");
    }
    // About a quarter of the arrivals are class a's.
    let a: u64 = r.classes[0].iter().map(|s| s.arrivals).sum();
    let all: u64 = r.seconds.iter().map(|s| s.arrivals).sum();
    let f = a as f64 / all as f64;
    assert!((0.23..0.27).contains(&f), "{f}");
}
