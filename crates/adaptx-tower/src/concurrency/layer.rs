use std::time::Duration;

use adaptx::Limiter;
use http::StatusCode;
use tower_layer::Layer;

use super::class::{AdaptiveConcurrencyClassedClientLayer, ClassBy};
use super::service::{
    AdaptiveConcurrency, AdaptiveConcurrencyAtBodyEnd, AdaptiveConcurrencyClient,
};
use super::{Deadlines, ServerConfig};
use crate::classify::{HttpClassifier, ResultClassifier};

/// Applies adaptive concurrency limiting to an HTTP server: requests beyond
/// the limiter's current limit are answered at once with `503 Service
/// Unavailable` and `Retry-After: 1`.
///
/// Each admitted request holds an [`OwnedPermit`](adaptx::OwnedPermit) from
/// the moment it is admitted until its response is ready (or its response
/// future is dropped, for example when the client disconnects: recorded as
/// dropped). The [classifier](crate::Classify) turns the response into a
/// success or a failure, and the latency from admission to response goes to
/// the limiter's control law, which moves the limit.
///
/// The service's error type is the inner service's: a rejection is a
/// response, so the layer fits axum, whose services are `Infallible`. A
/// closed limiter rejects every request the same way. The layer's own
/// answers carry an [`Answered`](crate::Answered) mark, so no adaptx layer
/// outside takes them for the backend's.
///
/// # Timeouts
///
/// A timeout *outside* this layer (tower-http's `TimeoutLayer` wrapping it,
/// hyper's header timeout) cancels the request: its permit is released as
/// dropped, and the limiter learns nothing from a hung backend. Give the
/// layer its own [`timeout`](Self::timeout), which runs inside the permit
/// and records a failure, or put the outer timeout *inside* the layer (its
/// 408/503/504 or error is then classified as overload). Past
/// [`drop_deadline`](Self::drop_deadline), a request cancelled from outside
/// counts as a failure too.
///
/// For a client (an outgoing call), use
/// [`AdaptiveConcurrencyClientLayer`], which waits for a permit instead.
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_tower::AdaptiveConcurrencyLayer;
/// use axum::{Router, routing::get};
/// use std::time::Duration;
///
/// let limiter = Limiter::builder().initial_limit(20).max_limit(500).build()?;
/// let layer = AdaptiveConcurrencyLayer::server(limiter)
///     .queue_timeout(Duration::from_millis(50))
///     .retry_after(2);
/// let stats = layer.limiter().clone();
/// let app: Router = Router::new().route("/", get(|| async { "hi" })).layer(layer);
/// assert_eq!(stats.limit(), 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveConcurrencyLayer<C = HttpClassifier> {
    limiter: Limiter,
    classifier: C,
    config: ServerConfig,
    class_by: Option<ClassBy>,
}

impl AdaptiveConcurrencyLayer {
    /// The server-side layer over `limiter`, with [`HttpClassifier`].
    pub fn server(limiter: Limiter) -> Self {
        Self {
            limiter,
            classifier: HttpClassifier::new(),
            config: ServerConfig::default(),
            class_by: None,
        }
    }

    /// The client-side layer over `limiter`: same as
    /// [`AdaptiveConcurrencyClientLayer::new`].
    pub fn client(limiter: Limiter) -> AdaptiveConcurrencyClientLayer {
        AdaptiveConcurrencyClientLayer::new(limiter)
    }
}

impl<C> AdaptiveConcurrencyLayer<C> {
    /// The limiter, for [`stats`](Limiter::stats),
    /// [`limit`](Limiter::limit) and [`close`](Limiter::close).
    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    /// Replaces the classifier.
    pub fn classifier<C2>(self, classifier: C2) -> AdaptiveConcurrencyLayer<C2> {
        AdaptiveConcurrencyLayer {
            limiter: self.limiter,
            classifier,
            config: self.config,
            class_by: self.class_by,
        }
    }

    /// Picks each request's [`Class`](adaptx::Class) — its partition and
    /// priority — with `f` over the request's head (a header, the route, an
    /// extension). Resolve the classes once with
    /// [`Limiter::class`](adaptx::Limiter::class), which names an unknown
    /// partition as an error when the layer is built. A refused request is
    /// answered as before (the rejection status, `Retry-After`).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::{Limiter, Partitions};
    /// use adaptx_tower::AdaptiveConcurrencyLayer;
    ///
    /// let limiter = Limiter::builder()
    ///     .partitions(Partitions::new().share("live", 0.7).share("batch", 0.3))
    ///     .build()?;
    /// let live = limiter.class("live")?.with_priority(1);
    /// let batch = limiter.class("batch")?;
    /// let layer = AdaptiveConcurrencyLayer::server(limiter).class_by(move |req| {
    ///     if req.headers.contains_key("x-prefetch") { batch } else { live }
    /// });
    /// # drop(layer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class_by(
        mut self,
        f: impl Fn(&http::request::Parts) -> adaptx::Class + Send + Sync + 'static,
    ) -> Self {
        self.class_by = Some(ClassBy::new(f));
        self
    }

    /// The status of rejections (default
    /// [`DEFAULT_REJECTION_STATUS`](crate::DEFAULT_REJECTION_STATUS), 503).
    pub fn rejection_status(mut self, status: StatusCode) -> Self {
        self.config.answers.status = status;
        self
    }

    /// The `Retry-After` of rejections, in seconds (default
    /// [`DEFAULT_RETRY_AFTER_SECS`](crate::DEFAULT_RETRY_AFTER_SECS), 1).
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.config.answers.retry_after = Some(secs);
        self
    }

    /// Sends rejections without a `Retry-After` header.
    pub fn no_retry_after(mut self) -> Self {
        self.config.answers.retry_after = None;
        self
    }

    /// Waits up to `timeout` in the limiter's FIFO queue for a permit before
    /// rejecting (default: reject at once). A queued request counts as
    /// rejected in the limiter's stats if it gives up.
    pub fn queue_timeout(mut self, timeout: Duration) -> Self {
        self.config.queue_timeout = Some(timeout);
        self
    }

    /// Runs the inner service for at most `timeout` once the request holds
    /// its permit (the queue wait is not counted); past it, the inner call
    /// is dropped, the request is recorded as a **failure** (the backend is
    /// too slow: overload), and the layer answers with
    /// [`timeout_status`](Self::timeout_status) (`504`), `Retry-After`, and
    /// the mark [`Answered::TimedOut`](crate::Answered::TimedOut), which
    /// adaptx layers outside count as a failure as well. Default: no
    /// timeout.
    ///
    /// In axum the inner call reads the request body, so the timeout also
    /// bounds slow uploads. It covers the response head; with
    /// [`record_at_body_end`](Self::record_at_body_end) the body is
    /// bounded by [`drop_deadline`](Self::drop_deadline) only.
    ///
    /// # Panics
    ///
    /// Requests panic outside a tokio runtime with the time driver enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
    /// use adaptx::Limiter;
    /// use adaptx_tower::{AdaptiveConcurrencyLayer, Answered};
    /// use http::{Request, Response, StatusCode};
    /// use std::time::Duration;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// let limiter = Limiter::builder().initial_limit(4).build()?;
    /// let hung = service_fn(|_req: Request<()>| std::future::pending::<Result<Response<()>, std::convert::Infallible>>());
    /// let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
    ///     .timeout(Duration::from_secs(2))
    ///     .layer(hung);
    /// let res = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
    /// assert_eq!(res.extensions().get::<Answered>(), Some(&Answered::TimedOut));
    /// assert_eq!(limiter.stats().failures, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.deadlines.timeout = Some(timeout);
        self
    }

    /// The status of the answer when the [`timeout`](Self::timeout) runs
    /// out (default
    /// [`DEFAULT_TIMEOUT_STATUS`](crate::DEFAULT_TIMEOUT_STATUS), 504; 503
    /// if clients should retry elsewhere).
    pub fn timeout_status(mut self, status: StatusCode) -> Self {
        self.config.answers.timeout_status = status;
        self
    }

    /// Counts a request cancelled `deadline` or more after admission (its
    /// response future or, with
    /// [`record_at_body_end`](Self::record_at_body_end), its body dropped:
    /// the client or an outer timeout gave up) as a **failure** with that
    /// latency, instead of as dropped. Default: never; a cancelled request
    /// is dropped and tells the limiter nothing.
    ///
    /// Set it a little below the timeout of whatever sits outside (the
    /// clients', a proxy's, an outer `TimeoutLayer`): a request abandoned
    /// after that long was abandoned because the backend was slow.
    pub fn drop_deadline(mut self, deadline: Duration) -> Self {
        self.config.deadlines.drop_deadline = Some(deadline);
        self
    }

    /// Holds each permit until the response *body* has been sent, not only
    /// its head: for streaming responses, where the backend stays busy
    /// until the last frame.
    ///
    /// The service answers `Response<`[`PermitBody`](crate::PermitBody)`<B>>`:
    /// the classifier decides the verdict from the response head, and the
    /// body records it, with the latency from admission, when it reports
    /// its end. A body error records a failure; a body dropped before its
    /// end (the client went away) releases the permit as dropped.
    /// Configure the rejection and the queue before this call.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::Limiter;
    /// use adaptx_tower::AdaptiveConcurrencyLayer;
    /// use axum::{Router, routing::get};
    ///
    /// let limiter = Limiter::builder().initial_limit(20).build()?;
    /// let layer = AdaptiveConcurrencyLayer::server(limiter)
    ///     .retry_after(2)
    ///     .record_at_body_end();
    /// let stats = layer.limiter().clone();
    /// let app: Router = Router::new().route("/", get(|| async { "hi" })).layer(layer);
    /// assert_eq!(stats.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_at_body_end(self) -> AdaptiveConcurrencyAtBodyEndLayer<C> {
        AdaptiveConcurrencyAtBodyEndLayer { inner: self }
    }
}

impl<S, C: Clone> Layer<S> for AdaptiveConcurrencyLayer<C> {
    type Service = AdaptiveConcurrency<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveConcurrency::new(
            inner,
            self.limiter.clone(),
            self.classifier.clone(),
            self.config,
            self.class_by.clone(),
        )
    }
}

/// [`AdaptiveConcurrencyLayer`] whose permits end with the response body,
/// made by [`record_at_body_end`](AdaptiveConcurrencyLayer::record_at_body_end).
///
/// Its service, [`AdaptiveConcurrencyAtBodyEnd`], answers
/// `Response<`[`PermitBody`](crate::PermitBody)`<B>>`.
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_tower::AdaptiveConcurrencyLayer;
/// use http::{Request, Response};
/// use http_body_util::BodyExt;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// let svc = ServiceBuilder::new()
///     .layer(AdaptiveConcurrencyLayer::server(limiter.clone()).record_at_body_end())
///     .service(service_fn(|_: Request<()>| async {
///         Ok::<_, std::io::Error>(Response::new(String::from("streamed")))
///     }));
/// let res = svc.oneshot(Request::new(())).await?;
/// assert!(res.body().holds_permit()); // still in flight: the body is being sent
/// assert_eq!(limiter.in_flight(), 1);
/// let body = res.into_body().collect().await?.to_bytes();
/// assert_eq!(body, "streamed");
/// assert_eq!((limiter.in_flight(), limiter.stats().success), (0, 1));
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveConcurrencyAtBodyEndLayer<C = HttpClassifier> {
    inner: AdaptiveConcurrencyLayer<C>,
}

impl<C> AdaptiveConcurrencyAtBodyEndLayer<C> {
    /// The limiter, for [`stats`](Limiter::stats),
    /// [`limit`](Limiter::limit) and [`close`](Limiter::close).
    pub fn limiter(&self) -> &Limiter {
        self.inner.limiter()
    }
}

impl<S, C: Clone> Layer<S> for AdaptiveConcurrencyAtBodyEndLayer<C> {
    type Service = AdaptiveConcurrencyAtBodyEnd<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveConcurrencyAtBodyEnd::new(self.inner.layer(inner))
    }
}

/// Applies adaptive concurrency limiting to a client: `poll_ready` waits
/// (FIFO) for a permit, `call` consumes it, and the response future holds it
/// until the response (or error) arrives.
///
/// Wraps any `Service<Req>`, not only HTTP. The default classifier,
/// [`ResultClassifier`], counts `Err` as failure; for an HTTP client use
/// `.classifier(HttpClassifier::new())` so that 503, 504, 408 and 429 count
/// as failures too. Latency is measured per attempt, from `call` to the
/// response (not from `poll_ready`, which may hold the permit long before
/// the call): put retries *outside* this layer.
///
/// # Timeouts
///
/// A timeout *outside* this layer (tower's `TimeoutLayer` wrapping it, a
/// `tokio::time::timeout` around the call) drops the response future: the
/// permit is released as dropped, and a hung backend never lowers the
/// limit. Use the layer's own [`timeout`](Self::timeout), which runs inside
/// the permit and records a failure, or put the timeout *inside* the layer
/// (its error is then a failure); or set
/// [`drop_deadline`](Self::drop_deadline) so that a call abandoned that
/// late counts as a failure.
///
/// # Examples
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use adaptx::Limiter;
/// use adaptx_tower::AdaptiveConcurrencyClientLayer;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// let limiter = Limiter::builder().initial_limit(4).build()?;
/// let svc = ServiceBuilder::new()
///     .layer(AdaptiveConcurrencyClientLayer::new(limiter.clone()))
///     .service(service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x * 2) }));
/// assert_eq!(svc.oneshot(21).await?, 42);
/// assert_eq!(limiter.in_flight(), 0);
/// assert_eq!(limiter.stats().success, 1);
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveConcurrencyClientLayer<C = ResultClassifier> {
    limiter: Limiter,
    classifier: C,
    deadlines: Deadlines,
}

impl AdaptiveConcurrencyClientLayer {
    /// The client-side layer over `limiter`, with [`ResultClassifier`].
    pub fn new(limiter: Limiter) -> Self {
        Self {
            limiter,
            classifier: ResultClassifier,
            deadlines: Deadlines::default(),
        }
    }
}

impl<C> AdaptiveConcurrencyClientLayer<C> {
    /// The limiter, for [`stats`](Limiter::stats) and
    /// [`limit`](Limiter::limit).
    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    /// Replaces the classifier.
    pub fn classifier<C2>(self, classifier: C2) -> AdaptiveConcurrencyClientLayer<C2> {
        AdaptiveConcurrencyClientLayer {
            limiter: self.limiter,
            classifier,
            deadlines: self.deadlines,
        }
    }

    /// Picks each request's [`Class`](adaptx::Class) with `f` over the
    /// request's head. The permit can then no longer be taken in
    /// `poll_ready` (the request is not known yet): the service's
    /// `poll_ready` readies the inner service, and its response future waits
    /// for a permit of the request's class, then calls. For HTTP requests.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use adaptx::{Class, Limiter};
    /// use adaptx_tower::AdaptiveConcurrencyClientLayer;
    /// use tower::{ServiceBuilder, ServiceExt, service_fn};
    ///
    /// let limiter = Limiter::builder().initial_limit(4).build()?;
    /// let svc = ServiceBuilder::new()
    ///     .layer(AdaptiveConcurrencyClientLayer::new(limiter.clone()).class_by(|req| {
    ///         let user = req.headers.contains_key("x-user");
    ///         Class::default().with_priority(if user { 1 } else { 0 })
    ///     }))
    ///     .service(service_fn(|_req: http::Request<()>| async {
    ///         Ok::<_, std::io::Error>("ok")
    ///     }));
    /// let req = http::Request::builder().header("x-user", "1").body(())?;
    /// assert_eq!(svc.oneshot(req).await?, "ok");
    /// assert_eq!(limiter.stats().success, 1);
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// # }).unwrap();
    /// ```
    pub fn class_by(
        self,
        f: impl Fn(&http::request::Parts) -> adaptx::Class + Send + Sync + 'static,
    ) -> AdaptiveConcurrencyClassedClientLayer<C> {
        AdaptiveConcurrencyClassedClientLayer {
            limiter: self.limiter,
            classifier: self.classifier,
            deadlines: self.deadlines,
            class_by: ClassBy::new(f),
        }
    }

    /// Runs each call for at most `timeout` from `call`, inside the permit;
    /// past it, the call is dropped, recorded as a **failure**, and its
    /// future fails with [`Elapsed`](crate::Elapsed). Default: no timeout.
    ///
    /// # Panics
    ///
    /// Calls panic outside a tokio runtime with the time driver enabled.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.deadlines.timeout = Some(timeout);
        self
    }

    /// Counts a call whose response future is dropped `deadline` or more
    /// after `call` (an outer timeout or the caller gave up) as a
    /// **failure** with that latency, instead of as dropped. Default:
    /// never. Set it a little below the outer timeout.
    pub fn drop_deadline(mut self, deadline: Duration) -> Self {
        self.deadlines.drop_deadline = Some(deadline);
        self
    }
}

impl<S, C: Clone> Layer<S> for AdaptiveConcurrencyClientLayer<C> {
    type Service = AdaptiveConcurrencyClient<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveConcurrencyClient::new(
            inner,
            self.limiter.clone(),
            self.classifier.clone(),
            self.deadlines,
        )
    }
}
