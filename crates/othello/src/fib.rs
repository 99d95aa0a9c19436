//! The Concise flat-name FIB (being written).
