//! The daemon's counters and gauges, kept with the `prometheus-client` crate and written in
//! the Prometheus text format: by `GET /metrics` on `rexd --listen` (or its own
//! `--metrics-listen` bind), and by the `rexd.metrics` method on every transport, stdio
//! included, which answers the same text.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rexd_sessions_opened_total` | counter | |
//! | `rexd_sessions_resumed_total` | counter | |
//! | `rexd_sessions_open` | gauge | |
//! | `rexd_processes_running` | gauge | |
//! | `rexd_mcp_requests_waiting` | gauge | |
//! | `rexd_execs_total` | counter | `class` (the `[policy]` class, `unclassified` without one), `outcome` (`exit_0`, `exit_nonzero`, `signal`, `timeout`, `launch_error`, `refused`, `error`) |
//! | `rexd_errors_total` | counter | `code` (the JSON-RPC error code of an error answer) |
//! | `rexd_stream_bytes_total` | counter | `direction` (`in`: bytes of client messages, `out`: bytes of answers and events) |
//! | `rexd_auth_failures_total` | counter | `reason` (`token`: a missing or wrong bearer token, `tls`: a failed handshake, such as a missing or foreign client certificate, or a certificate with an empty subject; `origin`: a request from a web page whose origin is not allowed) |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// `rexd_execs_total`'s labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExecLabels {
    /// The policy class.
    pub class: String,
    /// How it ended.
    pub outcome: String,
}

/// `rexd_errors_total`'s labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    /// The JSON-RPC error code.
    pub code: String,
}

/// `rexd_stream_bytes_total`'s labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// `in` or `out`.
    pub direction: &'static str,
}

/// `rexd_auth_failures_total`'s labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// `token` or `tls`.
    pub reason: &'static str,
}

/// One daemon's metrics; shared (`Arc`) by the service and the transports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Sessions opened.
    pub sessions_opened: Counter,
    /// Sessions resumed after a dropped link.
    pub sessions_resumed: Counter,
    /// Sessions open now.
    pub sessions_open: Gauge,
    /// Processes running now (detached ones too).
    pub processes_running: Gauge,
    /// Requests of MCP-over-HTTP sessions (`/mcp`) waiting for their answers now.
    pub mcp_requests_waiting: Gauge,
    /// Execs by class and outcome.
    pub execs: Family<ExecLabels, Counter>,
    /// Error answers by code.
    pub errors: Family<CodeLabels, Counter>,
    /// Client bytes in and out.
    pub bytes: Family<DirectionLabels, Counter>,
    /// Refused authentications.
    pub auth_failures: Family<ReasonLabels, Counter>,
    /// Connections closed before they authenticated, to make room for a new client.
    pub connections_pushed_out: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero.
    pub fn new() -> Metrics {
        // The daemon's own metrics are `rexd_*`; the process's are `process_*`, the names every
        // Prometheus client library gives them.
        let mut root = Registry::default();
        root.register_collector(Box::new(ProcessCollector));
        let registry = root.sub_registry_with_prefix("rexd");
        let m = Metrics {
            registry: Registry::default(),
            sessions_opened: Counter::default(),
            sessions_resumed: Counter::default(),
            sessions_open: Gauge::default(),
            processes_running: Gauge::default(),
            mcp_requests_waiting: Gauge::default(),
            execs: Family::default(),
            errors: Family::default(),
            bytes: Family::default(),
            auth_failures: Family::default(),
            connections_pushed_out: Counter::default(),
        };
        registry.register(
            "build",
            "The daemon's version",
            prometheus_client::metrics::info::Info::new(vec![(
                "version",
                env!("CARGO_PKG_VERSION"),
            )]),
        );
        registry.register(
            "sessions_opened",
            "Sessions opened",
            m.sessions_opened.clone(),
        );
        registry.register(
            "sessions_resumed",
            "Sessions resumed after their link dropped",
            m.sessions_resumed.clone(),
        );
        registry.register(
            "sessions_open",
            "Sessions open now",
            m.sessions_open.clone(),
        );
        registry.register(
            "processes_running",
            "Processes running now, detached ones too",
            m.processes_running.clone(),
        );
        registry.register(
            "mcp_requests_waiting",
            "Requests of MCP sessions over HTTP (/mcp) waiting for their answers now",
            m.mcp_requests_waiting.clone(),
        );
        registry.register(
            "execs",
            "Execs and PTYs by policy class and outcome",
            m.execs.clone(),
        );
        registry.register("errors", "Error answers by JSON-RPC code", m.errors.clone());
        registry.register(
            "stream_bytes",
            "Bytes of client messages (in) and of answers and events (out)",
            m.bytes.clone(),
        );
        registry.register(
            "auth_failures",
            "Refused authentications by reason",
            m.auth_failures.clone(),
        );
        registry.register(
            "connections_pushed_out",
            "Connections closed before they authenticated, to make room for a new client \
             when every --max-connections slot was taken",
            m.connections_pushed_out.clone(),
        );
        // Directions and reasons exist from the start, so a scrape shows them at 0.
        for direction in ["in", "out"] {
            let _ = m.bytes.get_or_create(&DirectionLabels { direction });
        }
        for reason in ["token", "tls"] {
            let _ = m.auth_failures.get_or_create(&ReasonLabels { reason });
        }
        Metrics {
            registry: root,
            ..m
        }
    }

    /// Counts an exec (or PTY) by class and outcome.
    pub fn exec(&self, class: &str, outcome: &str) {
        self.execs
            .get_or_create(&ExecLabels {
                class: class.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts an error answer.
    pub fn error(&self, code: i64) {
        self.errors
            .get_or_create(&CodeLabels {
                code: code.to_string(),
            })
            .inc();
    }

    /// Counts client bytes: `in` (received) or `out` (sent).
    pub fn bytes(&self, direction: &'static str, n: usize) {
        self.bytes
            .get_or_create(&DirectionLabels { direction })
            .inc_by(n as u64);
    }

    /// Counts a refused authentication (`token` or `tls`).
    pub fn auth_failure(&self, reason: &'static str) {
        self.auth_failures
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// The Prometheus text format (with the `# EOF` of OpenMetrics).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// `process_*` at each scrape, from `/proc/self` (Linux), as the Go and Python clients' process
/// collectors give them; nothing where `/proc` cannot be read.
#[derive(Debug)]
struct ProcessCollector;

/// What `/proc/self` says of the daemon.
struct ProcessStats {
    cpu_seconds: f64,
    start_time_seconds: f64,
    resident_bytes: i64,
    virtual_bytes: i64,
    threads: i64,
    open_fds: i64,
    max_fds: i64,
}

impl ProcessStats {
    fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // After `PID (COMM) `, fields from the third (`state`) on; `COMM` may hold spaces.
        let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
        let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
        // SAFETY: sysconf and getrlimit only read system values.
        let (ticks, page, max_fds) = unsafe {
            let mut limit: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            (
                libc::sysconf(libc::_SC_CLK_TCK) as f64,
                libc::sysconf(libc::_SC_PAGESIZE) as i64,
                limit.rlim_cur as i64,
            )
        };
        let boot_time: f64 = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
        Some(ProcessStats {
            cpu_seconds: (field(14)? + field(15)?) / ticks,
            start_time_seconds: boot_time + field(22)? / ticks,
            virtual_bytes: field(23)? as i64,
            resident_bytes: field(24)? as i64 * page,
            threads: field(20)? as i64,
            open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as i64,
            max_fds,
        })
    }
}

impl prometheus_client::collector::Collector for ProcessCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        use prometheus_client::registry::Unit;
        let Some(p) = ProcessStats::read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(p.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu",
            "Total user and system CPU time spent in seconds",
            Some(&Unit::Seconds),
            cpu.metric_type(),
        )?)?;
        let start = ConstGauge::new(p.start_time_seconds);
        start.encode(encoder.encode_descriptor(
            "process_start_time",
            "Start time of the process since the Unix epoch in seconds",
            Some(&Unit::Seconds),
            start.metric_type(),
        )?)?;
        for (name, help, unit, value) in [
            (
                "process_resident_memory",
                "Resident memory size in bytes",
                Some(Unit::Bytes),
                p.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size in bytes",
                Some(Unit::Bytes),
                p.virtual_bytes,
            ),
            ("process_threads", "Number of OS threads", None, p.threads),
            (
                "process_open_fds",
                "Number of open file descriptors",
                None,
                p.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                None,
                p.max_fds,
            ),
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(
                name,
                help,
                unit.as_ref(),
                gauge.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_in_the_text() {
        let m = Metrics::new();
        m.sessions_opened.inc();
        m.exec("destructive", "refused");
        m.exec("destructive", "refused");
        m.error(-32001);
        m.bytes("in", 10);
        let text = m.encode();
        for want in [
            "rexd_sessions_opened_total 1",
            "rexd_execs_total{class=\"destructive\",outcome=\"refused\"} 2",
            "rexd_errors_total{code=\"-32001\"} 1",
            "rexd_stream_bytes_total{direction=\"in\"} 10",
            "rexd_stream_bytes_total{direction=\"out\"} 0",
            "rexd_auth_failures_total{reason=\"tls\"} 0",
            "# TYPE rexd_sessions_open gauge",
            "rexd_mcp_requests_waiting 0",
            "# TYPE process_cpu_seconds counter",
            "# TYPE process_resident_memory_bytes gauge",
            "process_max_fds ",
        ] {
            assert!(text.contains(want), "{want} not in:\n{text}");
        }
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        };
        // This test process: some memory, started within the last day, a few descriptors.
        assert!(value("process_resident_memory_bytes") > 1e6);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(
            started <= now + 2.0 && started > now - 86_400.0,
            "{started} {now}"
        );
        assert!(value("process_open_fds") >= 3.0);
    }
}
