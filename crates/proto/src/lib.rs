//! The agent's control protocol: one JSON request per HTTP POST on its Unix socket, one JSON response back
//! ([`protocol`]), and the client side of it ([`client`]) over the HTTP client of both the agent's doors
//! ([`http`]). Job names and keys come from `lockstep_core::ident`.

pub mod client;
pub mod http;
pub mod protocol;
