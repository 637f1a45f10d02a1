//! The one path an event takes, and what decides it: an execution's plan, the applier, the
//! effect providers, the approval gate and the definition an approval binds.

pub mod applier;
pub mod approval;
pub mod definition;
pub mod effects;
pub mod plan;
