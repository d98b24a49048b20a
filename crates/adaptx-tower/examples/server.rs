//! An axum server behind both adaptx layers.
//!
//! ```text
//! cargo run -p adaptx-tower --example server
//! curl -i http://127.0.0.1:3000/            # X-RateLimit-* headers
//! curl -i http://127.0.0.1:3000/stats       # the limiters' state
//! ```
//!
//! The handler sleeps 20–80 ms (a simulated backend) and fails about 1.6 %
//! of the time with a 500 (a bug, not overload: counted, but it moves no
//! limit). The rate layer (one bucket per client IP) answers 429 past the
//! client's rate; the concurrency layer answers 503 past the adaptive limit,
//! after waiting up to 50 ms for a slot, and 504 (a failure) for a request
//! that holds its slot for more than 2 s.

use std::net::SocketAddr;
use std::time::Duration;

use adaptx::{Algorithm, Limiter, RateLimiter};
use adaptx_tower::{AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer, ClientIp, CurrentRate};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Router};

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

async fn stats(State(limiter): State<Limiter>) -> String {
    let s = limiter.stats();
    format!(
        "limit {} in_flight {} ok {} failed {} rejected {} dropped {}\n",
        s.limit, s.in_flight, s.success, s.failures, s.rejected, s.dropped
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = Limiter::builder()
        .algorithm(Algorithm::Gradient)
        .initial_limit(20)
        .max_limit(200)
        .build()?;
    let rate = RateLimiter::builder()
        .initial_rate(50)
        .max_rate(500)
        .build_keyed()?;

    let app = Router::new()
        .route("/", get(work))
        .layer(
            AdaptiveConcurrencyLayer::server(limiter.clone())
                .queue_timeout(Duration::from_millis(50))
                .timeout(Duration::from_secs(2)),
        )
        .layer(AdaptiveRateLimitLayer::keyed(rate, ClientIp))
        .route("/stats", get(stats).with_state(limiter));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
