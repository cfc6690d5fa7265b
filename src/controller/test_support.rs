//! Test-only setup shared by the controller's unit tests (and the server's that drive a
//! `ControllerState`): an active controller with live, registered brokers.

use uuid::Uuid;

use super::{BrokerDefaults, BrokerRegistration, ControllerState};
use crate::types::NodeId;

/// An active controller (node 1, 2 shards) with `nodes` registered and unfenced.
pub(crate) fn registered(nodes: &[i32]) -> ControllerState {
    let mut st =
        ControllerState::new("cluster".into(), NodeId(1), 2, BrokerDefaults::default()).unwrap();
    st.become_active();
    for n in nodes {
        let req = BrokerRegistration {
            node: NodeId(*n),
            incarnation_id: Uuid::new_v4(),
            endpoints: Vec::new(),
            rack: None,
        };
        let epoch = st.register_broker(&req, 0).unwrap();
        st.unfence_broker(NodeId(*n), epoch).unwrap();
    }
    st
}
