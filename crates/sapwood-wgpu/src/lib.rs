//! sapwood-wgpu (being written).
