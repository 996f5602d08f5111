//! docpipe's vocabulary, the layer every other crate stands on: what a document, a run and a stage
//! are ([`model`], [`ids`]), how configuration is read and checked ([`env`], [`config`], [`clock`]),
//! what an upload notification may look like ([`events`]), what a parse writes ([`artifacts`]),
//! how text becomes keyword terms ([`analyzer`]: the pipeline writes them, search reads them), and
//! what is logged and counted ([`telemetry`], [`metrics`], [`error`]). It knows no service.

pub mod analyzer;
pub mod artifacts;
pub mod clock;
pub mod config;
pub mod env;
pub mod error;
pub mod events;
pub mod filters;
pub mod ids;
pub mod metrics;
pub mod model;
pub mod telemetry;
pub mod tenant;
