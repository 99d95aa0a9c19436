//! `nexthop._nexthop`: the PyO3 glue between Python and nexthop's tables.
//!
//! Every algorithm lives in the workspace crates; this module only converts
//! Python values, holds the tables behind a lock so that batched lookups can
//! run with the GIL released while another thread updates, and maps the
//! crates' errors to Python exceptions with the CLI's messages.

use pyo3::prelude::*;

mod control;
mod errors;
mod flat;
mod lpm;
mod namefib;
mod ndn;
mod ovs;
mod sdf;
mod stats;

/// The compiled half of the `nexthop` package (import `nexthop`, not this).
#[pymodule]
fn _nexthop(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<errors::Error>())?;
    m.add("FormatError", py.get_type::<errors::FormatError>())?;
    m.add("UpdateError", py.get_type::<errors::UpdateError>())?;
    m.add("ControlError", py.get_type::<errors::ControlError>())?;
    m.add("NO_ROUTE", nexthop_lpm::NO_ROUTE)?;
    m.add("MISS", nexthop_othello::MISS)?;
    m.add_class::<lpm::Lpm>()?;
    m.add_class::<flat::FlatFib>()?;
    m.add_class::<namefib::NameFib>()?;
    m.add_class::<control::PyController>()?;
    m.add_class::<ndn::NdnInterest>()?;
    m.add_class::<ndn::NdnData>()?;
    m.add_class::<ndn::LpPacketPy>()?;
    m.add_function(wrap_pyfunction!(stats::forwarder_stats, m)?)?;
    m.add_function(wrap_pyfunction!(ndn::canonical_uri, m)?)?;
    m.add_function(wrap_pyfunction!(ndn::name_to_wire, m)?)?;
    m.add_function(wrap_pyfunction!(ndn::name_from_wire, m)?)?;
    sdf::register(m)?;
    m.add_function(wrap_pyfunction!(ovs::run_ovs, m)?)?;
    Ok(())
}
