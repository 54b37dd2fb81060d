//! Being written (JSON-RPC issue).
