//! Helpers shared by the real-peer integration tests.
