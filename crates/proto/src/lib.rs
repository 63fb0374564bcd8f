//! The agent's control protocol: one JSON request per line on a Unix socket, one JSON response per line
//! ([`protocol`]), the client side of it ([`client`]), and the rules every job name follows ([`names`]).

pub mod client;
pub mod names;
pub mod protocol;
