//! Settings of a simulator instance: the defaults every request gets unless a header or a fault script
//! says otherwise.

use std::time::Duration;

use imagegate_domain::ModelCatalog;

use crate::faults::FaultKind;

/// How a simulator behaves by default.
///
/// Per-request headers (`x-sim-latency-ms`, `x-sim-fault`, `x-sim-stall-ms`) and the fault script of the
/// admin API (`POST /sim/faults`) take precedence over these values.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Time a generation takes before its final image is sent. Streams spread it evenly over the partial
    /// images and the final image.
    pub latency: Duration,
    /// Probability in `0.0..=1.0` that an image request gets a random fault from `random_faults`.
    pub fault_rate: f64,
    /// Faults drawn (uniformly) when the random fault fires. Empty means `500`.
    pub random_faults: Vec<FaultKind>,
    /// How long a `stall` fault holds a request (or a stream, for `stall_mid_stream`).
    pub stall: Duration,
    /// `resets_in_seconds` of a `usage_limit` fault when the fault itself does not say.
    pub usage_reset_seconds: u64,
    /// `retry-after` of a `rate_limit` fault when the fault itself does not say.
    pub retry_after_seconds: u64,
    /// Upper bound, in bytes of base64 text, of the cache of encoded images.
    pub cache_bytes: usize,
    /// Seed of the random fault generator, so a run with `fault_rate` can be repeated.
    pub seed: u64,
    /// Image models the simulator accepts (validation follows the domain rules, like the real API).
    pub catalog: ModelCatalog,
    /// Refresh tokens the OAuth token endpoint accepts from the start (more can be registered with
    /// `POST /sim/oauth/refresh_tokens`; every one it issues is accepted once).
    pub refresh_tokens: Vec<String>,
    /// `expires_in` of the access tokens the OAuth token endpoint issues.
    pub access_token_ttl: Duration,
    /// Render every image (final and partial) as 1x1 pixels whatever size was asked for, so responses are
    /// a few hundred bytes: for measuring the gateway's own per-request cost. The `size` field and the
    /// usage still follow the request.
    pub tiny_images: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            latency: Duration::ZERO,
            fault_rate: 0.0,
            random_faults: Vec::new(),
            stall: Duration::from_secs(600),
            usage_reset_seconds: 3600,
            retry_after_seconds: 20,
            cache_bytes: 256 * 1024 * 1024,
            seed: 0x5EED_1A6E_6A7E,
            catalog: ModelCatalog::default(),
            refresh_tokens: Vec::new(),
            access_token_ttl: Duration::from_secs(3600),
            tiny_images: false,
        }
    }
}

impl SimConfig {
    /// The fault rate clamped into `0.0..=1.0` (NaN counts as 0).
    pub fn clamped_fault_rate(&self) -> f64 {
        if self.fault_rate.is_nan() {
            0.0
        } else {
            self.fault_rate.clamp(0.0, 1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_rate_is_clamped() {
        let mut config = SimConfig {
            fault_rate: 3.0,
            ..SimConfig::default()
        };
        assert_eq!(config.clamped_fault_rate(), 1.0);
        config.fault_rate = -1.0;
        assert_eq!(config.clamped_fault_rate(), 0.0);
        config.fault_rate = f64::NAN;
        assert_eq!(config.clamped_fault_rate(), 0.0);
        config.fault_rate = 0.25;
        assert_eq!(config.clamped_fault_rate(), 0.25);
    }
}
