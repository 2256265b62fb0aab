//! Domain types shared by every layer: resource vectors, host state, and the typed
//! scheduling context computed once per request.

mod host;
mod request;
mod resources;

pub use host::{HostId, HostState};
pub use request::{Destination, GroupPolicy, RequestContext, ServerGroup};
pub use resources::{Inventory, ResourceClass, Resources, CLASSES};
