//! Logs to stderr and, with the `otel` cargo feature, spans exported over OTLP.
//!
//! `IMAGEGATE_LOG` (or `RUST_LOG`) filters both. Every request runs in a `request` span carrying
//! its `request_id` (see `crate::http::request_id`), so log lines and exported spans of one request
//! share it. With the `otel` feature and `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, spans go to that OTLP/HTTP collector in batches;
//! without the variable nothing is exported and nothing is started.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Flushes exported spans when dropped (at the end of `main`).
#[derive(Debug, Default)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider.take()
            && let Err(err) = provider.shutdown()
        {
            eprintln!("imagegate: could not flush exported spans: {err}");
        }
    }
}

/// Installs the global subscriber.
pub fn init() -> Telemetry {
    let filter = std::env::var("IMAGEGATE_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".to_owned());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colours_wanted());
    let registry = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new(filter))
        .with(fmt);
    #[cfg(feature = "otel")]
    {
        let (layer, provider) = match otlp::layer() {
            Ok(Some((layer, provider))) => (Some(layer), Some(provider)),
            Ok(None) => (None, None),
            Err(err) => {
                eprintln!("imagegate: OTLP export disabled: {err}");
                (None, None)
            }
        };
        let _ = registry.with(layer).try_init();
        Telemetry { provider }
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = registry.try_init();
        Telemetry::default()
    }
}

/// Colours only on a terminal, and not with `NO_COLOR` set: the library's default colours every
/// line, which fills log files and journals with escape codes (and costs a little per span).
fn colours_wanted() -> bool {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

#[cfg(feature = "otel")]
mod otlp {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    /// The tracing layer that feeds spans to OpenTelemetry, and the provider that exports them.
    pub(super) type Export<S> = (
        tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
        SdkTracerProvider,
    );

    /// The OTLP layer, when an endpoint is configured in the environment.
    pub(super) fn layer<S>() -> Result<Option<Export<S>>, String>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        let configured = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
        if !configured {
            return Ok(None);
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|e| e.to_string())?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("imagegate")
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("imagegate");
        Ok(Some((
            tracing_opentelemetry::layer().with_tracer(tracer),
            provider,
        )))
    }
}
