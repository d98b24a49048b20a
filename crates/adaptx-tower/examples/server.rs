//! An axum server behind both adaptx layers, with its metrics.
//!
//! ```text
//! cargo run -p adaptx-tower --example server
//! curl -i http://127.0.0.1:3000/            # X-RateLimit-* headers
//! curl http://127.0.0.1:3000/metrics        # Prometheus text format
//! curl http://127.0.0.1:3000/stats          # the limiters' state, JSON
//! ```
//!
//! The handler sleeps 20–80 ms (a simulated backend) and fails about 1.6 %
//! of the time with a 500 (a bug, not overload: counted, but it moves no
//! limit). The rate layer (one bucket per client IP) answers 429 past the
//! client's rate; the concurrency layer answers 503 past the adaptive limit,
//! after waiting up to 50 ms for a slot, and 504 (a failure) for a request
//! that holds its slot for more than 2 s.
//!
//! `/metrics` renders what the limiters report through the `metrics` facade
//! (adaptx's `metrics` feature; names and labels: `adaptx::observe`) with
//! `metrics-exporter-prometheus`; `/stats` serializes both limiters' stats
//! (adaptx's `serde` feature), the control law's state included.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use adaptx::{Algorithm, ConfigError, KeyedRateLimiter, Limiter, RateLimiter};
use adaptx_tower::{AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer, ClientIp, CurrentRate};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Extension, Json, Router};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

async fn work(Extension(CurrentRate(rate)): Extension<CurrentRate>) -> (StatusCode, String) {
    let ms = 20 + fastrand_ms();
    tokio::time::sleep(Duration::from_millis(ms)).await;
    if fastrand_ms() == 0 {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "simulated failure\n".into(),
        );
    }
    (
        StatusCode::OK,
        format!("done in {ms} ms; your rate is {rate}/s\n"),
    )
}

/// A cheap pseudo-random 0..60 without another dependency.
fn fastrand_ms() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    u64::from(nanos / 1000 % 61)
}

/// What the observability routes read.
#[derive(Clone)]
struct Observed {
    limiter: Limiter,
    rate: KeyedRateLimiter<IpAddr>,
    prometheus: PrometheusHandle,
}

/// `GET /metrics`: the Prometheus text exposition format.
async fn metrics(State(o): State<Observed>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        o.prometheus.render(),
    )
}

/// `GET /stats`: both limiters' stats as JSON.
async fn stats(State(o): State<Observed>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "limiter": o.limiter.stats(),
        "rate": o.rate.stats(),
    }))
}

/// Latency buckets of the limiter's histogram, seconds: Prometheus' default
/// rendering is a summary, and `histogram_quantile` needs buckets.
const LATENCY_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The exporter, with buckets for the latency histogram.
fn prometheus() -> Result<PrometheusBuilder, BuildError> {
    PrometheusBuilder::new().set_buckets_for_metric(
        Matcher::Full(adaptx::observe::LIMITER_LATENCY.into()),
        &LATENCY_BUCKETS,
    )
}

/// The limiters of `main`. Built after the recorder is installed: a limiter
/// registers its metrics with the recorder in force when it is built.
fn limiters() -> Result<(Limiter, KeyedRateLimiter<IpAddr>), ConfigError> {
    let limiter = Limiter::builder()
        .name("http")
        .algorithm(Algorithm::Gradient)
        .initial_limit(20)
        .max_limit(200)
        .build()?;
    let rate = RateLimiter::builder()
        .name("per-client")
        .initial_rate(50)
        .max_rate(500)
        .build_keyed()?;
    Ok((limiter, rate))
}

/// The application: `/` behind both layers, `/metrics` and `/stats` beside.
fn app(limiter: Limiter, rate: KeyedRateLimiter<IpAddr>, prometheus: PrometheusHandle) -> Router {
    let observed = Observed {
        limiter: limiter.clone(),
        rate: rate.clone(),
        prometheus,
    };
    Router::new()
        .route("/", get(work))
        .layer(
            AdaptiveConcurrencyLayer::server(limiter)
                .queue_timeout(Duration::from_millis(50))
                .timeout(Duration::from_secs(2)),
        )
        .layer(AdaptiveRateLimitLayer::keyed(rate, ClientIp))
        .merge(
            Router::new()
                .route("/metrics", get(metrics))
                .route("/stats", get(stats))
                .with_state(observed),
        )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = prometheus()?.install_recorder()?;
    // The recorder keeps histogram samples until a scrape or an upkeep
    // drains them: keep memory bounded when nobody scrapes.
    let upkeep = prometheus.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let (limiter, rate) = limiters()?;
    let app = app(limiter, rate, prometheus);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use adaptx::ManualClock;
    use adaptx::observe::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get_text(app: &Router, uri: &str) -> (StatusCode, String) {
        let mut request = Request::get(uri).body(Body::empty()).expect("request");
        // What `into_make_service_with_connect_info` inserts on a real
        // connection: `ClientIp` keys the rate limiter by it.
        let peer: SocketAddr = "10.0.0.7:40000".parse().expect("address");
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let response = app.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, String::from_utf8(body.to_vec()).expect("utf-8"))
    }

    /// The value of the sample `name{labels}` in Prometheus text.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// The app in-process (no port): requests through `oneshot`, the
    /// limiters on a manual clock so that windows close when the test says,
    /// the handler's sleeps on tokio's paused clock.
    #[tokio::test(start_paused = true)]
    async fn serves_metrics_with_the_documented_names_and_stats_as_json() {
        let recorder = prometheus().expect("buckets").build_recorder();
        let clock = ManualClock::new();
        let (limiter, rate) = metrics::with_local_recorder(&recorder, || {
            let limiter = Limiter::builder()
                .name("http")
                .initial_limit(20)
                .clock(clock.clone())
                .build()
                .expect("valid");
            let rate = RateLimiter::builder()
                .name("per-client")
                .initial_rate(50)
                .clock(clock.clone())
                .build_keyed::<IpAddr>()
                .expect("valid");
            (limiter, rate)
        });
        let app = app(limiter, rate, recorder.handle());

        const N: u64 = 12;
        for _ in 0..N {
            let (status, _) = get_text(&app, "/").await;
            assert!(status.is_success() || status.is_server_error(), "{status}");
        }
        // The window and the interval end; the next request closes the
        // interval, and the next one the handler serves with a 2xx closes
        // the window (a 500, a fault, is counted but feeds no law and closes
        // nothing; the handler fails one request in 61 at random).
        clock.advance(Duration::from_secs(1));
        let mut sent = N;
        for _ in 0..20 {
            sent += 1;
            if get_text(&app, "/").await.0.is_success() {
                break;
            }
        }

        let (status, text) = get_text(&app, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        // Every documented series, with the limiter's label (a histogram
        // as its `_count`; a keyed rate limiter has no tokens gauge).
        let series = |name: &str, limiter: &str| {
            let suffix = if name == LIMITER_LATENCY {
                "_count"
            } else {
                ""
            };
            format!("{name}{suffix}{{limiter=\"{limiter}\"}}")
        };
        let documented = LIMITER_METRICS.iter().map(|n| series(n, "http")).chain(
            RATE_METRICS
                .iter()
                .filter(|n| **n != RATE_TOKENS)
                .map(|n| series(n, "per-client")),
        );
        for s in documented {
            assert!(sample(&text, &s).is_some(), "{s} in\n{text}");
        }
        // Every request of the closed window is counted, the histogram has
        // buckets, and the rate limiter admitted them all.
        let outcomes = sample(&text, "adaptx_limiter_successes_total{limiter=\"http\"}")
            .zip(sample(
                &text,
                "adaptx_limiter_failures_total{limiter=\"http\"}",
            ))
            .map(|(s, f)| s + f);
        assert_eq!(outcomes, Some(sent as f64), "{text}");
        let count = series(LIMITER_LATENCY, "http");
        assert!(sample(&text, &count).is_some_and(|c| c >= 1.0), "{text}");
        let bucket = format!("{LIMITER_LATENCY}_bucket{{{LABEL}=\"http\",le=\"0.005\"}}");
        assert!(sample(&text, &bucket).is_some(), "{bucket} in\n{text}");
        assert_eq!(
            sample(&text, "adaptx_rate_admitted_total{limiter=\"per-client\"}"),
            Some(N as f64)
        );

        let (status, body) = get_text(&app, "/stats").await;
        assert_eq!(status, StatusCode::OK);
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let l = &json["limiter"];
        assert_eq!(l["algorithm"], "ceiling");
        assert_eq!(l["limit"], 20);
        assert_eq!(l["in_flight"], 0);
        assert_eq!(
            l["success"]
                .as_u64()
                .zip(l["failures"].as_u64())
                .map(|(s, f)| s + f),
            Some(sent)
        );
        assert_eq!(l["law_state"]["law"], "ceiling");
        assert!(l["law_state"]["phase"].is_string());
        assert!(l.get("rtt_min").is_some() && l.get("p99_latency").is_some());
        let r = &json["rate"];
        assert_eq!(r["rate"], 50);
        assert_eq!(r["admitted"], sent);
    }
}
