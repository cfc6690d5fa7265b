//! placeholder: owned by the server subsystem (see ARCHITECTURE.md).
pub mod admin;
