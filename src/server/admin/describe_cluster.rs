//! DescribeCluster (API key 60), v0–2: cluster id, controller id and the brokers with their
//! advertised listeners.
//!
//! Read-only over a [`MetadataImage`]: runs on any shard. Only the broker endpoint type is
//! served (a broker answers controller-endpoint requests with UNSUPPORTED_ENDPOINT_TYPE, as
//! Kafka does); no broker is ever fenced on a single node.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{brokers, sb, Advertised};
use crate::controller::MetadataImage;

/// Every version Kafka 4.x defines.
pub const VERSIONS: (i16, i16) = (0, 2);

/// Kafka's `EndpointType.BROKER`.
const ENDPOINT_BROKERS: i8 = 1;

/// Describes the cluster from `image` and this broker's advertised listener.
#[must_use]
pub fn handle(
    image: &MetadataImage,
    request: &DescribeClusterRequest,
    version: i16,
    advertised: (&[Advertised], &str),
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default()
        .with_cluster_id(sb(image.cluster_id.clone()))
        .with_controller_id(BrokerId(image.controller_id.0));
    if version >= 1 && request.endpoint_type != ENDPOINT_BROKERS {
        return response
            .with_endpoint_type(request.endpoint_type)
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(sb("The request was sent to an endpoint of type BROKER, \
                 but we wanted an endpoint of type CONTROLLER")));
    }
    if request.include_cluster_authorized_operations {
        // No authorizer: every cluster operation is allowed (bit per AclOperation code).
        response = response.with_cluster_authorized_operations(CLUSTER_OPERATIONS);
    }
    let list = brokers(image, advertised)
        .iter()
        .map(|(id, host, port)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id.0))
                .with_host(sb(host.clone()))
                .with_port(*port)
                .with_rack(None)
        })
        .collect();
    response.with_brokers(list)
}

/// CREATE(5), ALTER(7), DESCRIBE(8), CLUSTER_ACTION(9), DESCRIBE_CONFIGS(10),
/// ALTER_CONFIGS(11), IDEMPOTENT_WRITE(12): Kafka's cluster operations (AclOperation codes).
pub const CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);
