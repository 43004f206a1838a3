//! sapwood-cuda (being written).
