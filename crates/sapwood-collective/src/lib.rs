//! sapwood-collective (being written).
