// The ssh tests are ignored, counted and named, when OpenSSH is missing.
include!("../tests/integration/peers_cfg.rs");
