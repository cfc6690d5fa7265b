//! placeholder: admin request handlers, owned by the controller work (see ARCHITECTURE.md).
