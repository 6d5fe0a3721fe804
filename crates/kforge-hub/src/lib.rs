//! kforge hub: a self-hosted kernel hub speaking the Hugging Face Hub HTTP API, and the `push`/`pull` client.

pub mod auth;
pub mod blobs;
pub mod client;
pub mod http;
pub mod idle;
pub mod model;
pub mod paths;
pub mod server;
pub mod store;
