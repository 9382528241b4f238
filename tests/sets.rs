//! Sets of limits (`AllOf`, static, and `Limits`, dynamic): their decisions over
//! several members, a set's step allocating nothing, sets nested in sets counted
//! and reported by their leaf limits (`nested_sets`), and sets through every front
//! end as their documentation alone describes them (`sets_from_docs*`).

mod support;

#[path = "sets/all_of_and_limits.rs"]
mod all_of_and_limits;
#[path = "sets/all_of_and_limits_properties.rs"]
mod all_of_and_limits_properties;
#[path = "sets/allocation.rs"]
mod allocation;
#[path = "sets/nested_sets.rs"]
mod nested_sets;
#[path = "sets/recording_members.rs"]
mod recording_members;
#[path = "sets/sets_from_docs.rs"]
mod sets_from_docs;
#[path = "sets/sets_from_docs_concurrent.rs"]
mod sets_from_docs_concurrent;
