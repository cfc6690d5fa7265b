//! The advertised version table: one entry per implemented API, each range declared by
//! the handler that implements it (never edited here by hand), so ApiVersions can only
//! advertise what a handler serves.

use kafka_protocol::messages::ApiKey;

/// An API and the inclusive version range its handler implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange {
    pub api: ApiKey,
    pub min: i16,
    pub max: i16,
}

impl ApiRange {
    #[must_use]
    pub const fn new(api: ApiKey, versions: (i16, i16)) -> Self {
        Self { api, min: versions.0, max: versions.1 }
    }

    #[must_use]
    pub fn contains(&self, version: i16) -> bool {
        (self.min..=self.max).contains(&version)
    }
}

/// Looks an API up in a table.
#[must_use]
pub fn find(table: &[ApiRange], api: ApiKey) -> Option<ApiRange> {
    table.iter().copied().find(|r| r.api == api)
}

/// Checks a table against the codec: every advertised version must be one the
/// `kafka-protocol` crate can decode, or a client would pick a version we then cannot read.
pub fn check_against_codec(table: &[ApiRange]) -> Result<(), String> {
    for range in table {
        let codec = range.api.valid_versions();
        if range.min > range.max || range.max > codec.max {
            return Err(format!(
                "{:?} advertises {}..={} but the codec knows {}..={}",
                range.api, range.min, range.max, codec.min, codec.max
            ));
        }
    }
    Ok(())
}
