//! placeholder: owned by the io subsystem (see ARCHITECTURE.md).
