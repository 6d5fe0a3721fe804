//! Client side of the hub: `kforge push` and `kforge pull` over the HF Hub API.
