//! Sets of limits (`AllOf`, static, and `Limits`, dynamic): their decisions over
//! several members, and a set's step allocating nothing.

mod support;

#[path = "sets/all_of_and_limits.rs"]
mod all_of_and_limits;
#[path = "sets/allocation.rs"]
mod allocation;
#[path = "sets/recording_members.rs"]
mod recording_members;
