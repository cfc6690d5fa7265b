//! placeholder: owned by the storage subsystem (see ARCHITECTURE.md).
