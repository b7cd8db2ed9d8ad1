//! Prometheus metrics: requests, verdicts, iterations, and latency histograms for the upstream,
//! translation, solver and proofgate's own overhead.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::time::Duration;

/// Labels of the request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route template, e.g. `/v1/chat/completions`.
    pub route: String,
    /// The HTTP status code.
    pub status: u16,
}

/// Labels of the verdict counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    /// `VALID`, `NEEDS_INPUT`, `MAX_ITERATIONS`, ...
    pub verdict: String,
}

/// Labels of the retry counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    /// `upstream`, `rewriter` or `translator`.
    pub llm: String,
}

/// Labels of the open-connections gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoopLabels {
    /// The event loop (serving thread) that holds the connections, from 0.
    pub event_loop: String,
}

/// Labels of the refused-connections counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// The cap the connection was over: `max_connections` or `max_connections_per_address`.
    pub cap: String,
}

/// Which latency a sample measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for the chatbot's upstream LLM.
    Upstream,
    /// Waiting for the rewriting LLM.
    Rewriter,
    /// Waiting for the translators.
    Translation,
    /// Z3 checks.
    Solver,
    /// Waiting for Bedrock ApplyGuardrail.
    Guardrail,
    /// Time spent in proofgate itself (request minus all waits above).
    Overhead,
}

/// All metrics, registered once.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    verdicts: Family<VerdictLabels, Counter>,
    retries: Family<RetryLabels, Counter>,
    open_connections: Family<LoopLabels, Gauge>,
    refused_connections: Family<RefusalLabels, Counter>,
    iterations: Histogram,
    upstream: Histogram,
    rewriter: Histogram,
    translation: Histogram,
    solver: Histogram,
    guardrail: Histogram,
    overhead: Histogram,
}

fn seconds() -> Histogram {
    // 0.1 ms .. ~100 s: overhead is sub-millisecond, LLM calls take seconds.
    Histogram::new(exponential_buckets(0.0001, 2.5, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric under the `proofgate_` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("proofgate");
        let requests = Family::<RequestLabels, Counter>::default();
        let verdicts = Family::<VerdictLabels, Counter>::default();
        let iterations = Histogram::new([1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 20.0]);
        let (upstream, rewriter, translation) = (seconds(), seconds(), seconds());
        let (solver, guardrail, overhead) = (seconds(), seconds(), seconds());
        registry.register(
            "requests",
            "HTTP requests by route and status",
            requests.clone(),
        );
        registry.register(
            "verdicts",
            "Final verdicts of answered requests",
            verdicts.clone(),
        );
        let retries = Family::<RetryLabels, Counter>::default();
        registry.register(
            "llm_retries",
            "Retried LLM calls (connection errors, 408, 409, 429, 5xx) by LLM role",
            retries.clone(),
        );
        let open_connections = Family::<LoopLabels, Gauge>::default();
        registry.register(
            "open_connections",
            "Client connections open on each event loop (per-core runtime)",
            open_connections.clone(),
        );
        let refused_connections = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "refused_connections",
            "Client connections refused with a 503 by the cap they were over ([limits])",
            refused_connections.clone(),
        );
        registry.register("iterations", "Validations per answer", iterations.clone());
        registry.register(
            "upstream_seconds",
            "Time waiting for the upstream LLM",
            upstream.clone(),
        );
        registry.register(
            "rewriter_seconds",
            "Time waiting for the rewriting LLM",
            rewriter.clone(),
        );
        registry.register(
            "translation_seconds",
            "Time waiting for the translators",
            translation.clone(),
        );
        registry.register("solver_seconds", "Time in Z3 checks", solver.clone());
        registry.register(
            "guardrail_seconds",
            "Time waiting for Bedrock ApplyGuardrail",
            guardrail.clone(),
        );
        registry.register(
            "overhead_seconds",
            "Time spent in proofgate itself, excluding upstream, LLM and validator waits",
            overhead.clone(),
        );
        Metrics {
            registry,
            requests,
            verdicts,
            retries,
            open_connections,
            refused_connections,
            iterations,
            upstream,
            rewriter,
            translation,
            solver,
            guardrail,
            overhead,
        }
    }

    /// Counts a finished HTTP request.
    pub fn request(&self, route: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_string(),
                status,
            })
            .inc();
    }

    /// The counter of retried calls to the LLM in `role` (shared with its client).
    pub fn retry_counter(&self, role: &str) -> Counter {
        self.retries
            .get_or_create(&RetryLabels {
                llm: role.to_string(),
            })
            .clone()
    }

    /// The counter of connections refused for being over `cap` (the setting's name).
    pub fn refused_connections(&self, cap: &str) -> Counter {
        self.refused_connections
            .get_or_create(&RefusalLabels {
                cap: cap.to_string(),
            })
            .clone()
    }

    /// The gauge of connections open on event loop `index` (shared with the loop).
    pub fn open_connections(&self, index: usize) -> Gauge {
        self.open_connections
            .get_or_create(&LoopLabels {
                event_loop: index.to_string(),
            })
            .clone()
    }

    /// Counts a verdict and the iterations it took.
    pub fn verdict(&self, verdict: &str, iterations: u32) {
        self.verdicts
            .get_or_create(&VerdictLabels {
                verdict: verdict.to_string(),
            })
            .inc();
        self.iterations.observe(f64::from(iterations));
    }

    /// Records a latency sample.
    pub fn observe(&self, stage: Stage, elapsed: Duration) {
        let h = match stage {
            Stage::Upstream => &self.upstream,
            Stage::Rewriter => &self.rewriter,
            Stage::Translation => &self.translation,
            Stage::Solver => &self.solver,
            Stage::Guardrail => &self.guardrail,
            Stage::Overhead => &self.overhead,
        };
        h.observe(elapsed.as_secs_f64());
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_what_was_recorded() {
        let m = Metrics::new();
        m.request("/v1/chat/completions", 200);
        m.verdict("VALID", 2);
        m.observe(Stage::Overhead, Duration::from_micros(300));
        let text = m.render();
        assert!(text
            .contains("proofgate_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1"));
        assert!(text.contains("proofgate_verdicts_total{verdict=\"VALID\"} 1"));
        assert!(text.contains("proofgate_overhead_seconds_count 1"));
        assert!(text.contains("proofgate_solver_seconds_count 0"));
    }
}
