//! placeholder: owned by the bench subsystem (see ARCHITECTURE.md).
