//! kforge hub: a self-hosted kernel hub speaking the Hugging Face Hub HTTP API.

pub mod auth;
pub mod blobs;
pub mod paths;
pub mod server;
