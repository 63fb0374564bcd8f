//! The agent's control protocol: one JSON request per HTTP POST on its Unix socket, one JSON response back
//! ([`protocol`]), the client side of it ([`client`]) over the HTTP client of both the agent's doors ([`http`]),
//! and the rules every job name follows ([`names`]).

pub mod client;
pub mod http;
pub mod names;
pub mod protocol;
