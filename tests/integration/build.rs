include!("peers_cfg.rs");
