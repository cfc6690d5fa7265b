//! placeholder: typed broker configuration (defaults < TOML < flags).
