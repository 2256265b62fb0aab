//! `select`: one `select_destinations` call, whatever transport brought it.

use super::Scheduler;
use crate::backend::ScheduleError;
use crate::ledger::LedgerError;
use crate::nova::{
    encode_legacy, encode_selections, SelectDestinationsArgs, Selection, SelectionVersion,
};
use serde_json::Value;
use tracing::Instrument;

/// Why a call got no placement, by whose fault.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// Nova's NoValidHost: nothing in the cloud could take every instance of the call.
    #[error("No valid host was found. {reason}")]
    NoValidHost { reason: String },
    /// The call itself is wrong (the caller's fault).
    #[error("{0}")]
    Invalid(String),
    /// Parasol could not decide or record the decision (the ledger is unavailable).
    #[error("scheduler unavailable: {0}")]
    Unavailable(String),
}

impl From<ScheduleError> for SelectError {
    fn from(e: ScheduleError) -> Self {
        match e {
            ScheduleError::NoValidHost { reason } => SelectError::NoValidHost { reason },
            ScheduleError::Ledger(LedgerError::Invalid(message)) => SelectError::Invalid(message),
            ScheduleError::Ledger(e) => SelectError::Unavailable(e.to_string()),
        }
    }
}

/// The Selections of one call and how the caller asked to receive them.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// Per instance: the claimed host first, then the alternates.
    pub selections: Vec<Vec<Selection>>,
    pub return_objects: bool,
    pub return_alternates: bool,
    pub version: SelectionVersion,
}

impl Answer {
    /// The answer as Nova's RPC result (and the HTTP body): Selection primitives, or the
    /// legacy host dicts when the caller did not ask for objects.
    pub fn to_json(&self) -> Value {
        if self.return_objects {
            encode_selections(&self.selections, self.version, self.return_alternates)
        } else {
            encode_legacy(&self.selections)
        }
    }
}

impl Scheduler {
    /// Places every instance of one call on the active backend, all or none.
    pub async fn select(&self, args: SelectDestinationsArgs) -> Result<Answer, SelectError> {
        let requests = args.spec.contexts(&args.instance_uuids);
        let settings = self.settings();
        let span = tracing::info_span!(
            "select_destinations",
            instances = requests.len(),
            instance_uuids = %args.instance_uuids.join(","),
            backend = self.backend().kind().as_str()
        );
        let demands: Vec<_> = requests.iter().map(|r| r.demand).collect();
        let per_instance = self.schedule(requests).instrument(span).await?;
        let cell = &settings.scheduler.cell_uuid;
        let selections = per_instance
            .iter()
            .zip(demands)
            .map(|(hosts, demand)| {
                hosts
                    .iter()
                    .map(|h| Selection::from_host(h, demand, cell))
                    .collect()
            })
            .collect();
        let version = if settings.scheduler.selection_version == "1.0" {
            SelectionVersion::V1_0
        } else {
            SelectionVersion::V1_1
        };
        Ok(Answer {
            selections,
            return_objects: args.return_objects,
            return_alternates: args.return_alternates,
            version,
        })
    }
}
