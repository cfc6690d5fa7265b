//! placeholder: owned by the controller subsystem (see ARCHITECTURE.md).
