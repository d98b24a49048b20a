//! `adaptx-sim`: runs overload scenarios against the real adaptx limiter in
//! virtual time and reports how each control law does.

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use adaptx_sim::bounds::{self, MAX_THREADS};
use adaptx_sim::suite::{self, Entry, Options, Suite};
use adaptx_sim::work::{self, DEFAULT_MAX_MEMORY, Limits};
use adaptx_sim::{Law, Nanos, parse_duration, report};
use clap::{Args, Parser, Subcommand};

/// Deterministic overload simulator for adaptx.
///
/// Drives the real adaptx limiter through a manual clock against modelled
/// backends (service time and jitter, processor sharing, a concurrency
/// ceiling that rejects or drops, a rate limit, client errors, schedules)
/// under closed- or open-loop demand, in integer-nanosecond virtual time. A
/// run is a pure function of the scenario file, the policy and the seed.
///
/// With no command it runs the built-in demo suite: every shipped scenario
/// (compiled in), every law of adaptx and every peer re-implementation
/// (Netflix Gradient2 and AIMD, Vector ARC, Envoy gradient), the fixed-limit
/// baselines C*/2, C*, 2·C*, 5·C* and the oracle (the best fixed limit),
/// seed 0; it prints the summary and band tables and writes
/// adaptx-report/index.html.
const AFTER_HELP: &str = "\
Summary columns (steady state: from the later of half the run and 30 s after
the last schedule change):
  gp/capacity  goodput as a fraction of the backend's goodput ceiling
  gp/oracle    goodput as a fraction of the best fixed limit's (--baselines)
  gp/oracle≤2%  the same, of the best fixed limit with overload <= 2 %
  p99 ms       99th-percentile latency of successful requests
  overload     rejections + timeouts, and their share of requests sent
  mean limit   mean limit (summed over clients) and its ratio to C*

Band rule: every bound must hold for the median seed, and a 1.5x looser
bound (a lower bound / 1.5, an upper bound x 1.5) for the worst seed.
Scenario files, metrics and the bounds of every field: scenarios/README.md.

Work limit: before running, the command estimates the events of every run
(requests at the largest rate the demand and backend allow, times duration,
clients, laws, seeds, and the baselines' runs) and refuses a suite over
--max-events (default 3e10: at most 250 core-minutes at 2 million events/s
per core, usually far less, as the estimate is an upper bound) or whose
per-second series would pass --max-memory-mib (default 4096).

Exit status: 0 on success (also when standard output is closed early, as by
`| head`); 1 when --check finds a failing band; 2 when a scenario file or an
option is invalid, the work estimate is over a limit, or the report cannot be
written.";

#[derive(Debug, Parser)]
#[command(
    name = "adaptx-sim",
    version,
    about,
    long_about,
    verbatim_doc_comment,
    after_long_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Demo: write the HTML report into this directory.
    #[arg(long, value_name = "DIR", default_value = "adaptx-report")]
    out: PathBuf,
    /// Demo: worker threads (1 ..= 256). Default: all cores.
    #[arg(long, value_name = "N", value_parser = threads_arg)]
    threads: Option<usize>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenario files (or directories of them) and report.
    ///
    /// Prints the summary table (first seed). With --check, prints every
    /// band's median and worst seed against its bounds and exits with status
    /// 1 if any band fails. A scenario that another one's band refers to
    /// (reference = "...") is loaded and run too.
    ///
    /// Examples:
    ///   adaptx-sim run scenarios/03-hard-limit.toml --law aimd
    ///   adaptx-sim run --check --seeds 10 scenarios/
    ///   adaptx-sim run --check --seeds 10..20 scenarios/
    ///   adaptx-sim run --baselines --out report scenarios/
    ///   adaptx-sim run --peers --baselines --out report scenarios/
    ///   adaptx-sim run --law aimd --law netflix_gradient2 scenarios/05-queueing.toml
    #[command(verbatim_doc_comment, after_long_help = AFTER_HELP)]
    Run(RunArgs),
}

/// A law named on the command line, as a scenario file names it
/// ([`Law::from_name`]).
fn parse_law(name: &str) -> Result<Law, String> {
    Law::from_name(name).ok_or_else(|| {
        let all: Vec<&str> = Law::DEFAULT
            .iter()
            .chain(Law::PEERS.iter())
            .map(|l| l.name())
            .collect();
        format!("unknown law `{name}`: expected one of {}", all.join(", "))
    })
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Scenario files, or directories whose *.toml files are run in name order.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Laws to run (repeat the flag for several): adaptx's aimd, vegas,
    /// gradient, ceiling, rate (the adaptive rate limiter, on scenarios with a
    /// [rate_limiter]), rate_cubic (the same on the AWS SDKs' adaptive retry
    /// law), throttle (Google SRE client-side throttling, `adaptx::Throttle`,
    /// in place of the rate limiter on the same scenarios), or a peer
    /// re-implementation (netflix_gradient2, netflix_aimd, vector_arc,
    /// envoy_gradient). Default: adaptx's seven,
    /// each on the scenarios it applies to (with --peers, the peers too).
    #[arg(long, value_name = "LAW", value_parser = parse_law)]
    law: Vec<Law>,
    /// Also run the peer re-implementations (netflix_gradient2, netflix_aimd,
    /// vector_arc, envoy_gradient) beside the laws asked for.
    #[arg(long)]
    peers: bool,
    /// Run this one seed. Default: seed 0.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Run seeds 0..N, or A..B (A to B-1), or A..=B; at most 1000 seeds
    /// (bands are checked on the median and the worst seed).
    #[arg(long, value_name = "N|A..B", value_parser = seeds_arg)]
    seeds: Option<Seeds>,
    /// Override every scenario's duration (for example "60s"; whole seconds,
    /// 1s ..= 24h); bands whose times fall past the end then fail.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    duration: Option<Nanos>,
    /// Refuse to start when the estimated events of all runs exceed N
    /// (for example 1e11). Default 3e10, at most 250 core-minutes.
    #[arg(long, value_name = "N", value_parser = max_events_arg)]
    max_events: Option<f64>,
    /// Refuse to start when the per-second series the runs keep would
    /// exceed N MiB. Default 4096.
    #[arg(long, value_name = "N", value_parser = max_memory_arg)]
    max_memory_mib: Option<u64>,
    /// Write the HTML report (index.html) — and with --csv the CSV series —
    /// into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write each run's per-second series as CSV, one file per run, into
    /// DIR/csv (DIR from --out, default adaptx-report).
    #[arg(long)]
    csv: bool,
    /// Check the bands: print each band's measured values against its bounds
    /// and exit with status 1 if any fails.
    #[arg(long)]
    check: bool,
    /// Also run the fixed-limit baselines (C*/2, C*, 2·C*, 5·C*) and the
    /// oracle sweep, on the first seed.
    #[arg(long)]
    baselines: bool,
    /// Let the oracle sweep every grid point up to its cap instead of
    /// stopping once goodput stops improving.
    #[arg(long)]
    full_oracle: bool,
    /// Worker threads (1 ..= 256). Default: all cores.
    #[arg(long, value_name = "N", value_parser = threads_arg)]
    threads: Option<usize>,
    /// No progress on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// The seeds of `--seeds`.
#[derive(Debug, Clone)]
struct Seeds(Vec<u64>);

fn seeds_arg(s: &str) -> Result<Seeds, String> {
    suite::parse_seeds(s).map(Seeds)
}

fn threads_arg(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("`{s}`: expected a thread count 1 ..= {MAX_THREADS}"))?;
    if (1..=MAX_THREADS).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n}: expected a thread count 1 ..= {MAX_THREADS}"))
    }
}

fn duration_arg(s: &str) -> Result<Nanos, String> {
    let d = parse_duration(s)?;
    bounds::duration("duration", d)?;
    Ok(d)
}

fn max_events_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 1.0 => Ok(n),
        _ => Err(format!(
            "`{s}`: expected a number of events >= 1, like 1e11"
        )),
    }
}

fn max_memory_arg(s: &str) -> Result<u64, String> {
    const MAX_MIB: u64 = 1 << 30;
    match s.parse::<u64>() {
        Ok(n) if (1..=MAX_MIB).contains(&n) => Ok(n),
        _ => Err(format!("`{s}`: expected MiB, 1 ..= {MAX_MIB}")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => demo(cli.out, cli.threads),
        Some(Command::Run(args)) => run(args),
    }
}

/// Writes `error: …` on stderr; a closed stderr is ignored (there is nowhere
/// left to say it).
fn error(message: impl fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "error: {message}");
}

fn demo(out: PathBuf, threads: Option<usize>) -> ExitCode {
    let entries = match suite::builtin().and_then(|mut e| {
        suite::resolve_references(&mut e, |_, name| suite::builtin_named(name))?;
        Ok(e)
    }) {
        Ok(e) => e,
        Err(e) => {
            error(e);
            return ExitCode::from(2);
        }
    };
    let mut options = Options {
        laws: Law::DEFAULT.into_iter().chain(Law::PEERS).collect(),
        baselines: true,
        progress: true,
        ..Options::default()
    };
    if let Some(t) = threads {
        options.threads = t;
    }
    if let Err(e) = work::check(&entries, &options, Limits::default()) {
        error(e);
        return ExitCode::from(2);
    }
    let _ = writeln!(
        io::stderr().lock(),
        "adaptx-sim demo: {} scenarios x {} laws (adaptx's and {} peers) + baselines and oracle, seed 0, {} threads",
        entries.len(),
        options.laws.len(),
        Law::PEERS.len(),
        options.threads
    );
    let s = suite::run(entries, &options);
    finish(&s, Some(out), false, false, true)
}

fn run(args: RunArgs) -> ExitCode {
    let mut entries: Vec<Entry> = match suite::load(&args.files) {
        Ok(e) => e,
        Err(e) => {
            error(e);
            return ExitCode::from(2);
        }
    };
    if let Some(d) = args.duration {
        for e in &mut entries {
            e.scenario.duration = d;
        }
    }
    let mut options = Options {
        baselines: args.baselines,
        full_oracle: args.full_oracle,
        progress: !args.quiet,
        ..Options::default()
    };
    if !args.law.is_empty() {
        options.laws = Law::DEFAULT
            .into_iter()
            .chain(Law::PEERS)
            .filter(|l| args.law.contains(l))
            .collect();
    }
    if args.peers {
        for p in Law::PEERS {
            if !options.laws.contains(&p) {
                options.laws.push(p);
            }
        }
    }
    if let Some(Seeds(seeds)) = args.seeds {
        options.seeds = seeds;
    } else if let Some(s) = args.seed {
        options.seeds = vec![s];
    }
    if let Some(t) = args.threads {
        options.threads = t;
    }
    let limits = Limits {
        max_events: args.max_events.unwrap_or(work::DEFAULT_MAX_EVENTS),
        max_memory: args
            .max_memory_mib
            .map_or(DEFAULT_MAX_MEMORY, |m| m.saturating_mul(1 << 20)),
    };
    if let Err(e) = work::check(&entries, &options, limits) {
        error(e);
        return ExitCode::from(2);
    }
    let s = suite::run(entries, &options);
    finish(&s, args.out, args.csv, args.check, false)
}

/// Standard output for the results. Once the reader has gone (`| head`) it
/// writes nothing more, quietly: the rest of the command still runs and its
/// exit status still counts. Any other write error is kept for the exit
/// status.
struct Out {
    lock: io::StdoutLock<'static>,
    gone: bool,
    error: Option<io::Error>,
}

impl Out {
    fn new() -> Self {
        Self {
            lock: io::stdout().lock(),
            gone: false,
            error: None,
        }
    }

    fn write(&mut self, args: fmt::Arguments<'_>) {
        if self.gone {
            return;
        }
        if let Err(e) = self.lock.write_fmt(args) {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: io::Error) {
        self.gone = true;
        if e.kind() != io::ErrorKind::BrokenPipe {
            self.error = Some(e);
        }
    }

    /// Flushes; `Err` for a write error other than a closed pipe.
    fn close(mut self) -> io::Result<()> {
        if !self.gone {
            if let Err(e) = self.lock.flush() {
                self.fail(e);
            }
        }
        self.error.map_or(Ok(()), Err)
    }
}

/// `writeln!` to an [`Out`].
macro_rules! say {
    ($out:expr) => { $out.write(format_args!("\n")) };
    ($out:expr, $($arg:tt)*) => { $out.write(format_args!("{}\n", format_args!($($arg)*))) };
}

fn finish(s: &Suite, out: Option<PathBuf>, csv: bool, check: bool, show_bands: bool) -> ExitCode {
    let mut o = Out::new();
    let seed = s.options.seeds.first().copied().unwrap_or(0);
    say!(o, "Summary (seed {seed}; steady state):");
    o.write(format_args!("{}", report::summary_table(s)));
    if check || show_bands {
        say!(o);
        say!(
            o,
            "Bands ({} seeds; the median seed must meet the bound, the worst seed the 1.5x looser one):",
            s.options.seeds.len()
        );
        o.write(format_args!("{}", report::check_table(s)));
    }
    say!(o);
    say!(
        o,
        "{} requests simulated in {:.2} s of simulation time on {} threads ({:.2} M requests/s per core); wall {:.2} s",
        s.requests,
        s.busy.as_secs_f64(),
        s.options.threads,
        s.requests_per_core_second() / 1e6,
        s.wall.as_secs_f64()
    );
    let mut code = ExitCode::SUCCESS;
    let dir = out.clone();
    if let Some(dir) = &dir {
        match report::write_html(s, dir) {
            Ok(p) => say!(o, "report: {}", p.display()),
            Err(e) => {
                error(format_args!(
                    "writing the report into {}: {e}",
                    dir.display()
                ));
                code = ExitCode::from(2);
            }
        }
    }
    if csv {
        let csv_dir = dir
            .unwrap_or_else(|| PathBuf::from("adaptx-report"))
            .join("csv");
        match report::write_csv(s, &csv_dir) {
            Ok(n) => say!(o, "csv: {n} file(s) in {}", csv_dir.display()),
            Err(e) => {
                error(format_args!("writing CSV into {}: {e}", csv_dir.display()));
                code = ExitCode::from(2);
            }
        }
    }
    if check {
        let failed: Vec<_> = s.checks().filter(|c| !c.passed()).collect();
        if failed.is_empty() {
            say!(o, "bands: all {} passed", s.checks().count());
        } else {
            say!(
                o,
                "bands: {} of {} failed",
                failed.len(),
                s.checks().count()
            );
            if code == ExitCode::SUCCESS {
                code = ExitCode::from(1);
            }
        }
    }
    if let Err(e) = o.close() {
        error(format_args!("writing to standard output: {e}"));
        code = ExitCode::from(2);
    }
    code
}
