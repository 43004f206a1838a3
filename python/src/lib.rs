//! The native module of the Python package (being written).
