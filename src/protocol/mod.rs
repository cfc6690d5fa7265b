//! placeholder: owned by the protocol subsystem (see ARCHITECTURE.md).
