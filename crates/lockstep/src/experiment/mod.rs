//! Experiments: a TOML spec ([`spec`]) is run case by case under a private agent ([`runner`]), every job's result
//! goes to the store, and [`report`] turns the latest session into tables, SVG plots, Markdown and HTML.

mod containers;
pub mod report;
pub mod runner;
pub mod spec;
