//! placeholder: owned by the shard subsystem (see ARCHITECTURE.md).
