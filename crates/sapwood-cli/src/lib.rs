//! sapwood-cli (being written).
