//! DescribeUserScramCredentials (API key 50), v0: no SCRAM credentials exist until
//! authentication does, so describing all users answers an empty list and each named user
//! RESOURCE_NOT_FOUND, as Kafka answers for a user without credentials. Served because
//! Kafka's ConfigCommand asks it alongside DescribeClientQuotas for `--describe
//! --entity-type users`.
//!
//! Read-only, no state: runs on any shard.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult as UserResult;
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::sb;

/// Every version Kafka 4.1 defines (v0, flexible).
pub const VERSIONS: (i16, i16) = (0, 0);

#[must_use]
pub fn handle(
    request: &DescribeUserScramCredentialsRequest,
    _version: i16,
) -> DescribeUserScramCredentialsResponse {
    let results = request
        .users
        .iter()
        .flatten()
        .map(|u| {
            UserResult::default()
                .with_user(u.name.clone())
                .with_error_code(ResponseError::ResourceNotFound.code())
                .with_error_message(Some(sb(format!(
                    "Attempt to describe a user credential that does not exist: {}",
                    u.name.as_str()
                ))))
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_error_message(None).with_results(results)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    use super::*;

    #[test]
    fn no_user_has_credentials() {
        let all = handle(&DescribeUserScramCredentialsRequest::default().with_users(None), 0);
        assert_eq!((all.error_code, all.results.len()), (0, 0));
        let named = DescribeUserScramCredentialsRequest::default()
            .with_users(Some(vec![UserName::default().with_name(sb("alice"))]));
        let r = handle(&named, 0);
        assert_eq!(r.results[0].error_code, ResponseError::ResourceNotFound.code());
    }
}
